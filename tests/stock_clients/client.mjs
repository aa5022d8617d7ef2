// A stock MCP client: the official TypeScript SDK (`@modelcontextprotocol/sdk` 1.x, or with
// `--sdk v2` the v2 line's `@modelcontextprotocol/client`; both pinned in package.json /
// package-lock.json) over its own StreamableHTTPClientTransport, exactly as a user would write
// it. It does not opt in to framing, unless `--wrap` gives the transport this repository's
// `framingFetch` (typescript/, built by scripts/stock-clients): the SDK itself is untouched.
//
// For every URL given it runs `initialize`, `tools/list` and `tools/call generate_text`, checks the
// result byte for byte against the text it derives itself from the arguments (the server's rule,
// written down in examples/rmcp_server.rs), and prints one JSON line:
//
//   {"client": "typescript" | "typescript-v2", "wrapped": bool, "url": ..., "outcome": "ok" | "error",
//    "phase": ..., "tools": [...], "bytes": N, "sha256": hex, "match": bool, "error": ...,
//    "code": JSON-RPC error code, "framing": the outcome report of a wrapped call (SPEC.md §11.7),
//    "seconds": ..., "warnings": [...]}
//
// `warnings` holds everything written through console.warn / console.error, every process
// warning, and every error the SDK reported through `onerror`. Exit status 0 when every URL gave
// the exact text and no warning, 1 otherwise.
//
// Usage: node client.mjs [--sdk v1|v2] [--wrap] [--seed S] [--lines N] [--timeout SECONDS] URL...
// (--timeout sets the SDK's per-request timeout; without it the SDK's default applies.)

import { createHash } from 'node:crypto';
import { parseArgs } from 'node:util';

/** The server's `generate_text` rule (examples/rmcp_server.rs). */
function expectedText(seed, lines) {
  const out = [];
  for (let i = 0; i < lines; i++) {
    const run = String.fromCharCode(97 + (i % 26)).repeat(i % 64);
    out.push(`${String(i).padStart(6, '0')} ${seed} "quoted" back\\slash\ttab café ✓ ${run}\n`);
  }
  return out.join('');
}

const captured = [];
const print = console.log.bind(console);
for (const level of ['warn', 'error']) {
  console[level] = (...args) => captured.push(`console.${level}: ${args.map(String).join(' ')}`);
}
process.on('warning', (warning) => captured.push(`process warning: ${warning.name}: ${warning.message}`));

function describe(error) {
  return error instanceof Error ? `${error.name}: ${error.message}` : String(error);
}

async function run(sdk, wrap, url, seed, lines, timeout) {
  const report = { client: sdk.name, wrapped: wrap !== null, url, phase: 'initialize' };
  const { Client, StreamableHTTPClientTransport } = sdk;
  const client = new Client({ name: 'stock-typescript', version: '1.0.0' });
  let closing = false;
  client.onerror = (error) => {
    // Our own close() aborts the streams still open (the SDK then reports
    // "SSE stream disconnected: AbortError" when the abort races a read): not the server's doing.
    if (closing && /AbortError/.test(describe(error))) {
      return;
    }
    captured.push(`onerror: ${describe(error)}`);
  };
  const framing = wrap === null ? null : wrap();
  const transport = new StreamableHTTPClientTransport(new URL(url), framing === null ? undefined : { fetch: framing });
  // The request timeout applies to the call that may be cut (tools/call); the handshake and
  // tools/list, which are never cut, get at least 30 s, so a loaded machine's slow start is not
  // taken for a cut.
  const options = timeout === undefined ? undefined : { timeout: timeout * 1000 };
  const setup = timeout === undefined ? undefined : { timeout: Math.max(timeout * 1000, 30_000) };
  let start = performance.now();
  try {
    await client.connect(transport, setup);
    report.protocol = transport.protocolVersion;
    report.phase = 'tools/list';
    const tools = await client.listTools(undefined, setup);
    report.tools = tools.tools.map((tool) => tool.name).sort();
    report.phase = 'tools/call';
    start = performance.now();
    const params = { name: 'generate_text', arguments: { seed, lines } };
    // v1: callTool(params, resultSchema, options); v2: callTool(params, options)
    const result = await (sdk.name === 'typescript-v2' ? client.callTool(params, options) : client.callTool(params, undefined, options));
    report.seconds = Math.round(performance.now() - start) / 1000;
    if (result.isError) {
      throw new Error(`tool error: ${JSON.stringify(result.content)}`);
    }
    const text = result.content[0].text;
    const data = Buffer.from(text, 'utf8');
    report.bytes = data.length;
    report.sha256 = createHash('sha256').update(data).digest('hex');
    report.match = text === expectedText(seed, lines);
    report.outcome = 'ok';
  } catch (error) {
    report.seconds ??= Math.round(performance.now() - start) / 1000;
    report.outcome = 'error';
    report.error = describe(error);
    if (Number.isInteger(error?.code)) {
      report.code = error.code;
    }
    const outcome = error?.data?.['io.github.mcp-framing/outcome'];
    if (outcome !== undefined) {
      report.framing = outcome;
    }
  }
  closing = true;
  try {
    await client.close();
  } catch (error) {
    captured.push(`close: ${describe(error)}`);
  }
  if (framing !== null) {
    report.framingStats = { ...framing.stats };
  }
  report.warnings = captured.splice(0);
  return report;
}

const { values, positionals } = parseArgs({
  options: {
    seed: { type: 'string', default: 'stock-clients' },
    lines: { type: 'string', default: '1200' },
    timeout: { type: 'string' },
    sdk: { type: 'string', default: 'v1' },
    wrap: { type: 'boolean', default: false },
  },
  allowPositionals: true,
});
if (positionals.length === 0) {
  print('usage: node client.mjs [--sdk v1|v2] [--wrap] [--seed S] [--lines N] [--timeout SECONDS] URL...');
  process.exit(2);
}
const timeout = values.timeout === undefined ? undefined : Number(values.timeout);
const sdk =
  values.sdk === 'v2'
    ? { name: 'typescript-v2', ...(await import('@modelcontextprotocol/client')) }
    : {
        name: 'typescript',
        Client: (await import('@modelcontextprotocol/sdk/client/index.js')).Client,
        StreamableHTTPClientTransport: (await import('@modelcontextprotocol/sdk/client/streamableHttp.js')).StreamableHTTPClientTransport,
      };
// One framingFetch per connection, with its default logger (its warnings are captured above).
const wrap = values.wrap ? (await import('../../typescript/dist/index.js')).framingFetch : null;
let clean = true;
for (const url of positionals) {
  const report = await run(sdk, wrap, url, values.seed, Number(values.lines), timeout);
  clean &&= report.outcome === 'ok' && report.match === true && report.warnings.length === 0;
  print(JSON.stringify(report));
}
process.exit(clean ? 0 : 1);

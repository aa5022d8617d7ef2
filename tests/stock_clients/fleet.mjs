// The stock TypeScript client (`--sdk v1`: @modelcontextprotocol/sdk, `--sdk v2`:
// @modelcontextprotocol/client) wrapped with this repository's framingFetch (typescript/), with
// keyed retries on, against the fleet example (examples/fleet.rs: two backend processes sharing
// one Redis, backend-a cutting each tool call's first response): every call's first attempt goes
// to the first endpoint, its retries to the second, each resolution re-discovered
// (`server/discover`) and its contract re-checked. For tests/stock_clients.rs.
//
// Prints one JSON line: {"sdk", "calls": [{"ok", "text", "seconds"}], "attempts": [...],
// "stats": framingFetch's counters, "warnings": [...]}.
//
// Usage: node fleet.mjs --sdk v1|v2 --endpoints URL_A,URL_B --calls N [--tool charge|count --key-prefix P]
// (`--tool count`: `count {key: P-i}` calls, the tool of the fixture servers of tests/servers/)

import { parseArgs } from 'node:util';

import { discoveringResolver, framingFetch } from '../../typescript/dist/index.js';

const { values } = parseArgs({
  options: {
    sdk: { type: 'string', default: 'v1' },
    endpoints: { type: 'string' },
    calls: { type: 'string', default: '24' },
    tool: { type: 'string', default: 'charge' },
    'key-prefix': { type: 'string', default: 'typescript' },
  },
});
const [first, second] = String(values.endpoints).split(',');
const { Client, StreamableHTTPClientTransport } =
  values.sdk === 'v2'
    ? await import('@modelcontextprotocol/client')
    : {
        Client: (await import('@modelcontextprotocol/sdk/client/index.js')).Client,
        StreamableHTTPClientTransport: (await import('@modelcontextprotocol/sdk/client/streamableHttp.js')).StreamableHTTPClientTransport,
      };

const warnings = [];
const attempts = [];
const fetch = framingFetch({
  retry: { initialBackoffMs: 20 },
  resolve: discoveringResolver([first, second], { choose: ({ attempt }) => (attempt === 1 ? 0 : 1) }),
  logger: { debug() {}, info() {}, warn: (line) => warnings.push(line) },
  onAttempt: (report) =>
    attempts.push({
      method: report.method,
      attempt: report.attempt,
      endpoint: report.endpoint,
      outcome: report.outcome.classification,
      decision: report.decision?.decision ?? null,
    }),
});
const client = new Client({ name: 'fleet-client', version: '1.0.0' });
client.onerror = (error) => warnings.push(`onerror: ${error}`);
const calls = [];
await client.connect(new StreamableHTTPClientTransport(new URL(first), { fetch }), { timeout: 30_000 });
for (let i = 0; i < Number(values.calls); i++) {
  const start = performance.now();
  try {
    const params =
      values.tool === 'count'
        ? { name: 'count', arguments: { key: `${values['key-prefix']}-${i}` } }
        : { name: 'charge', arguments: { account: `acct-${values.sdk}-${i}`, amount: 100 + i } };
    // v1: callTool(params, resultSchema, options); v2: callTool(params, options)
    const options = { timeout: 30_000 };
    const result = await (values.sdk === 'v2' ? client.callTool(params, options) : client.callTool(params, undefined, options));
    calls.push({ ok: true, text: result.content[0].text, seconds: (performance.now() - start) / 1000 });
  } catch (error) {
    calls.push({ ok: false, error: String(error), data: error?.data, seconds: (performance.now() - start) / 1000 });
  }
}
await client.close();
console.log(JSON.stringify({ sdk: values.sdk, calls, attempts, stats: fetch.stats, warnings }));

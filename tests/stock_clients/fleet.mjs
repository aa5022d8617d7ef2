// The stock TypeScript client (`--sdk v1`: @modelcontextprotocol/sdk, `--sdk v2`:
// @modelcontextprotocol/client) wrapped with this repository's framingFetch (typescript/), with
// keyed retries on, against the fleet example (examples/fleet.rs: two backend processes sharing
// one Redis, backend-a cutting each tool call's first response): every call's first attempt goes
// to the first endpoint, its retries to the second, each resolution re-discovered
// (`server/discover`) and its contract re-checked. For tests/stock/stock_clients.rs.
//
// Prints one JSON line: {"sdk", "calls": [{"ok", "text", "seconds", "ended", "attempts", "attempt_seconds"}], "attempts": [...],
// "stats": framingFetch's counters, "warnings": [...]}.
//
// Usage: node fleet.mjs --sdk v1|v2 --endpoints URL_A[,URL_B] --calls N [--tool TOOL[,TOOL...]
//          --key-prefix P --ms MS] [--handshake discover|initialize] [--retry-after FILE] [--attempts N]
// (`--tool count` / `slow`: `count {key: P-i}` / `slow {key: P-i, ms: MS}` calls, the tools of the
// fixture servers of tests/servers/, several taken in turn; each call's line has the wall-clock
// time it ended, `ended`, in seconds since the epoch, and the classification of each of its
// attempts, `attempts`, and how long each took, `attempt_seconds` (from its resolution until it
// ended). One endpoint: every attempt goes to it.
// `--handshake initialize`: no server/discover, every attempt with the contract of the SDK's own
// initialize (a server without server/discover: the TypeScript SDK's v1 line).
// `--retry-after FILE`: a retry of a `slow` call is sent once FILE, the fixture servers' counter
// file, records the call's completion, `slow P-i`. `--attempts`: a call's attempts in all
// (default 4; 1: no retries).)

import { readFile } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';

import { discoveringResolver, framingFetch } from '../../typescript/dist/index.js';

const { values } = parseArgs({
  options: {
    sdk: { type: 'string', default: 'v1' },
    endpoints: { type: 'string' },
    calls: { type: 'string', default: '24' },
    tool: { type: 'string', default: 'charge' },
    'key-prefix': { type: 'string', default: 'typescript' },
    ms: { type: 'string', default: '1000' },
    handshake: { type: 'string', default: 'discover' },
    'retry-after': { type: 'string' },
    attempts: { type: 'string', default: '4' },
  },
});
const endpoints = String(values.endpoints).split(',');
const [first] = endpoints;
const { Client, StreamableHTTPClientTransport } =
  values.sdk === 'v2'
    ? await import('@modelcontextprotocol/client')
    : {
        Client: (await import('@modelcontextprotocol/sdk/client/index.js')).Client,
        StreamableHTTPClientTransport: (await import('@modelcontextprotocol/sdk/client/streamableHttp.js')).StreamableHTTPClientTransport,
      };

const warnings = [];
const attempts = [];
// The first attempt of a call to the first endpoint, its retries to the second (if any).
const choose = ({ attempt }) => (attempt === 1 ? 0 : 1) % endpoints.length;
const resolver =
  values.handshake === 'initialize'
    ? (context) => ({ endpoint: endpoints[choose(context)] })
    : discoveringResolver(endpoints, { choose });
let current = '';
// When each method's current attempt began (its resolution, `method attempt`): an attempt lasts
// from then until it ended.
const started = new Map();
const retryAfter = values['retry-after'];
/** Before a retry of the current call, waits (a minute at most) until its completion is recorded. */
async function completed() {
  const deadline = performance.now() + 60_000;
  while (!(await readFile(retryAfter, 'utf8')).split('\n').includes(`slow ${current}`)) {
    if (performance.now() > deadline) {
      throw new Error(`no \`slow ${current}\` recorded within a minute`);
    }
    await sleep(10);
  }
}
const fetch = framingFetch({
  retry: { maxAttempts: Number(values.attempts), initialBackoffMs: 20 },
  resolve: async (context) => {
    if (retryAfter !== undefined && context.attempt > 1) {
      await completed();
    }
    started.set(`${context.method} ${context.attempt}`, performance.now());
    return resolver(context);
  },
  logger: { debug() {}, info() {}, warn: (line) => warnings.push(line) },
  onAttempt: (report) =>
    attempts.push({
      method: report.method,
      attempt: report.attempt,
      endpoint: report.endpoint,
      outcome: report.outcome.classification,
      decision: report.decision?.decision ?? null,
      seconds: (performance.now() - started.get(`${report.method} ${report.attempt}`)) / 1000,
    }),
});
const client = new Client({ name: 'fleet-client', version: '1.0.0' });
client.onerror = (error) => warnings.push(`onerror: ${error}`);
const calls = [];
await client.connect(new StreamableHTTPClientTransport(new URL(first), { fetch }), { timeout: 30_000 });
const tools = String(values.tool).split(',');
for (let i = 0; i < Number(values.calls); i++) {
  const start = performance.now();
  const tool = tools[i % tools.length];
  current = `${values['key-prefix']}-${i}`;
  const before = attempts.length;
  const ended = () => ({
    seconds: (performance.now() - start) / 1000,
    ended: Date.now() / 1000,
    attempts: attempts.slice(before).map((a) => a.outcome),
    attempt_seconds: attempts.slice(before).map((a) => a.seconds),
  });
  try {
    const params =
      tool === 'count'
        ? { name: 'count', arguments: { key: current } }
        : tool === 'slow'
          ? { name: 'slow', arguments: { key: current, ms: Number(values.ms) } }
          : { name: 'charge', arguments: { account: `acct-${values.sdk}-${i}`, amount: 100 + i } };
    // Asking for progress puts a progressToken on the request: the fixture servers' `slow` tool
    // then sends a notification first, and an SSE response begins while it runs.
    // The request timeout: 30 s past the tool's own time (a loaded machine is slow).
    const timeout = 30_000 + (tool === 'slow' ? Number(values.ms) : 0);
    const options = { timeout, onprogress: tool === 'slow' ? () => {} : undefined };
    // v1: callTool(params, resultSchema, options); v2: callTool(params, options)
    const result = await (values.sdk === 'v2' ? client.callTool(params, options) : client.callTool(params, undefined, options));
    calls.push({ ok: true, text: result.content[0].text, ...ended() });
  } catch (error) {
    calls.push({ ok: false, error: String(error), data: error?.data, ...ended() });
  }
}
await client.close();
console.log(JSON.stringify({ sdk: values.sdk, calls, attempts, stats: fetch.stats, warnings }));

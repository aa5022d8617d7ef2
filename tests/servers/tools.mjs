// The fixture servers' tools, shared by the two Node.js servers (sdk_v1.mjs, sdk_v2.mjs; the
// Python servers' twin is tools.py): the same four tools in every fixture server, whatever its
// SDK, so that one test drives them all.
//
// - generate_text {seed, lines}: the text of examples/rmcp_server.rs's rule (mixed UTF-8 with
//   multi-byte characters, deterministic), so that the stock clients of tests/stock_clients/
//   check it byte for byte as they check the rmcp server's;
// - count {key}: records one execution of `count KEY` and returns "count KEY N", N the
//   executions of that key recorded so far;
// - slow {key, ms}: sends one progress notification (to the request's progressToken, when it has
//   one: an SSE response has begun), records `slow-start KEY`, sleeps `ms` milliseconds, then
//   records `slow KEY` (an execution that the client's going away cancelled records no
//   `slow KEY`);
// - notify {seed, lines, steps}: sends `steps` progress notifications (to the request's
//   progressToken, when it has one) before the result of generate_text {seed, lines}, so that
//   the response is an SSE stream.
//
// Every execution that completes appends one line "TOOL KEY\n" to the counter file
// (`--counter-file PATH`) in one write of an O_APPEND descriptor: atomic, so that server processes
// can share one file, and the test counts executions by reading it.

import { appendFileSync, readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { z } from 'zod';

/** The rule of examples/rmcp_server.rs's `generate_text`. */
export function generateText(seed, lines) {
  const out = [];
  for (let i = 0; i < lines; i++) {
    const run = String.fromCharCode(97 + (i % 26)).repeat(i % 64);
    out.push(`${String(i).padStart(6, '0')} ${seed} "quoted" back\\slash\ttab café ✓ ${run}\n`);
  }
  return out.join('');
}

/** The command line every fixture server takes: `--port P` (0: any free port), `--json`,
 * `--counter-file PATH`, `--exit-with-stdin` (exit when standard input closes: a test that
 * started the server with a pipe cannot leak it, even when it exits without stopping it), and
 * `--framing` (serve through `framingHandler`, the typescript/ package's README recipe) with its
 * options `--frame-all compat` and `--redis URL` (deduplication on a `RedisStore`). */
export function options() {
  const { values } = parseArgs({
    options: {
      port: { type: 'string', default: '0' },
      json: { type: 'boolean', default: false },
      'counter-file': { type: 'string' },
      'exit-with-stdin': { type: 'boolean', default: false },
      framing: { type: 'boolean', default: false },
      'frame-all': { type: 'string' },
      redis: { type: 'string' },
    },
  });
  if (values['exit-with-stdin']) {
    process.stdin.on('end', () => process.exit(0));
    process.stdin.on('error', () => process.exit(0));
    process.stdin.resume();
  }
  if (values['counter-file'] === undefined) {
    throw new Error('--counter-file PATH is required');
  }
  const frameAll = values['frame-all'];
  if (frameAll !== undefined && frameAll !== 'compat') {
    throw new Error('--frame-all takes only compat');
  }
  if ((frameAll !== undefined || values.redis !== undefined) && !values.framing) {
    throw new Error('--frame-all and --redis go with --framing');
  }
  return {
    port: Number(values.port),
    json: values.json,
    counterFile: values['counter-file'],
    framing: values.framing,
    frameAll,
    redis: values.redis,
  };
}

/**
 * The `framingHandler` options of the command line (`--frame-all`, `--redis`), as the
 * typescript/ package's README writes them: `dedupe: { store: new RedisStore(client) }` over a
 * connected node-redis client.
 */
export async function framingOptions({ frameAll, redis }) {
  const options = {};
  if (frameAll !== undefined) {
    options.frameAllResponses = frameAll;
  }
  if (redis !== undefined) {
    const { createClient } = await import('redis');
    const { RedisStore } = await import('mcp-framing/server');
    const client = await createClient({ url: redis }).connect();
    options.dedupe = { store: new RedisStore(client) };
  }
  return options;
}

/** Appends "TOOL KEY\n" to the counter file; the executions of that line recorded so far. */
function record(counterFile, tool, key) {
  const line = `${tool} ${key}\n`;
  appendFileSync(counterFile, line);
  return readFileSync(counterFile, 'utf8')
    .split('\n')
    .filter((l) => `${l}\n` === line).length;
}

const text = (t) => ({ content: [{ type: 'text', text: t }] });

/**
 * Registers the four tools on `server` (an McpServer of either SDK line). `progress(extra,
 * progress, total)` sends one progress notification the SDK's way (or nothing without a
 * progressToken).
 */
export function registerTools(server, counterFile, progress) {
  server.registerTool(
    'generate_text',
    { description: 'The text of the rule, `lines` lines', inputSchema: z.object({ seed: z.string(), lines: z.number().int().min(0) }) },
    async ({ seed, lines }) => {
      const result = text(generateText(seed, lines));
      record(counterFile, 'generate_text', seed);
      return result;
    },
  );
  server.registerTool(
    'count',
    { description: 'Records an execution of `key`; how many so far', inputSchema: z.object({ key: z.string() }) },
    async ({ key }) => text(`count ${key} ${record(counterFile, 'count', key)}`),
  );
  server.registerTool(
    'slow',
    { description: 'Sleeps `ms` ms, then records an execution of `key`', inputSchema: z.object({ key: z.string(), ms: z.number().int().min(0) }) },
    async ({ key, ms }, extra) => {
      await progress(extra, 0, 1);
      record(counterFile, 'slow-start', key);
      await new Promise((resolve) => setTimeout(resolve, ms));
      record(counterFile, 'slow', key);
      return text(`slow ${key} done after ${ms} ms`);
    },
  );
  server.registerTool(
    'notify',
    {
      description: '`steps` progress notifications, then the text of the rule',
      inputSchema: z.object({ seed: z.string(), lines: z.number().int().min(0), steps: z.number().int().min(0) }),
    },
    async ({ seed, lines, steps }, extra) => {
      for (let i = 1; i <= steps; i++) {
        await progress(extra, i, steps);
      }
      const result = text(generateText(seed, lines));
      record(counterFile, 'notify', seed);
      return result;
    },
  );
}

/** Serves `handler` (a Node.js request handler) at http://127.0.0.1:PORT/mcp and prints the
 * ready line, "listening on URL", once the socket listens. */
export async function serve(port, handler) {
  const { createServer } = await import('node:http');
  const server = createServer((req, res) => {
    if (new URL(req.url, 'http://localhost').pathname !== '/mcp') {
      res.writeHead(404).end();
      return;
    }
    handler(req, res).catch((error) => {
      console.error(`fixture server: ${error?.stack ?? error}`);
      if (!res.headersSent) {
        res.writeHead(500);
      }
      res.end();
    });
  });
  server.listen(port, '127.0.0.1', () => {
    console.log(`listening on http://127.0.0.1:${server.address().port}/mcp`);
  });
}

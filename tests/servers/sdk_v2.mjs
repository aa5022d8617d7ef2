// A fixture MCP server on the official TypeScript SDK's v2 line (`@modelcontextprotocol/server`,
// pinned in tests/stock_clients/package.json): `createMcpHandler` (stateless by construction: a
// fresh `McpServer` from the factory for every request, 2025-era requests through its stateless
// fallback) on Node.js through `toNodeHandler` of `@modelcontextprotocol/node`. The tools:
// tools.mjs. With `--framing`, framed in-process as typescript/README.md says:
// `toNodeHandler({ fetch: framingHandler((request) => handler.fetch(request), options) })`
// (`--frame-all compat`: `frameAllResponses: 'compat'`; `--redis URL`: `dedupe` on a `RedisStore`).
//
// Usage: node sdk_v2.mjs --counter-file PATH [--port P] [--json] [--exit-with-stdin]
//        [--framing [--frame-all compat] [--redis URL]]
// (`responseMode`: `sse` by default, every 2026-07-28 answer an SSE stream; `json` with --json).
// Prints "listening on http://127.0.0.1:PORT/mcp" once it accepts connections.

import { McpServer, createMcpHandler } from '@modelcontextprotocol/server';
import { toNodeHandler } from '@modelcontextprotocol/node';
import { framingHandler } from 'mcp-framing/server';
import { framingOptions, options, registerTools, serve } from './tools.mjs';

const args = options();
const { port, json, counterFile } = args;

async function progress(ctx, value, total) {
  const progressToken = ctx.mcpReq._meta?.progressToken;
  if (progressToken !== undefined) {
    await ctx.mcpReq.notify({ method: 'notifications/progress', params: { progressToken, progress: value, total } });
  }
}

const handler = createMcpHandler(
  () => {
    const server = new McpServer({ name: 'fixture-sdk-v2', version: '1.0.0' });
    registerTools(server, counterFile, progress);
    return server;
  },
  { responseMode: json ? 'json' : 'sse', onerror: (error) => console.error(`fixture server: ${error?.stack ?? error}`) },
);
if (args.framing) {
  const framed = framingHandler((request) => handler.fetch(request), await framingOptions(args));
  await serve(port, toNodeHandler({ fetch: framed }));
} else {
  await serve(port, toNodeHandler(handler));
}

// A fixture MCP server on the official TypeScript SDK's v1 line (`@modelcontextprotocol/sdk`,
// pinned in tests/stock_clients/package.json): `McpServer` over the Node.js
// `StreamableHTTPServerTransport`, stateless (a fresh server and transport for every request, the
// SDK's own stateless pattern), with an event store shared by every request so that SSE responses
// carry the SDK's priming event and event ids (and a GET with `Last-Event-ID` resumes a stream).
// The tools: tools.mjs.
//
// Usage: node sdk_v1.mjs --counter-file PATH [--port P] [--json] [--exit-with-stdin]
// (`--json`: `enableJsonResponse`, every response application/json). Prints
// "listening on http://127.0.0.1:PORT/mcp" once it accepts connections.

import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { InMemoryEventStore } from '@modelcontextprotocol/sdk/examples/shared/inMemoryEventStore.js';
import { options, registerTools, serve } from './tools.mjs';

const { port, json, counterFile } = options();
const eventStore = new InMemoryEventStore();

async function progress(extra, value, total) {
  const progressToken = extra._meta?.progressToken;
  if (progressToken !== undefined) {
    await extra.sendNotification({ method: 'notifications/progress', params: { progressToken, progress: value, total } });
  }
}

await serve(port, async (req, res) => {
  const resume = req.method === 'GET' && req.headers['last-event-id'] !== undefined;
  if (req.method !== 'POST' && !resume) {
    res.writeHead(405, { Allow: 'POST' }).end();
    return;
  }
  const server = new McpServer({ name: 'fixture-sdk-v1', version: '1.0.0' });
  registerTools(server, counterFile, progress);
  const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: json, eventStore });
  res.on('close', () => {
    transport.close();
    server.close();
  });
  await server.connect(transport);
  await transport.handleRequest(req, res);
});

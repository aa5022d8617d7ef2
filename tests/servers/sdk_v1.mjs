// A fixture MCP server on the official TypeScript SDK's v1 line (`@modelcontextprotocol/sdk`,
// pinned in tests/stock_clients/package.json): `McpServer` over the Node.js
// `StreamableHTTPServerTransport`, stateless (a fresh server and transport for every request, the
// SDK's own stateless pattern), with an event store shared by every request so that SSE responses
// carry the SDK's priming event and event ids (and a GET with `Last-Event-ID` resumes a stream:
// the store replays the events of that stream stored after that id, in the order stored).
// The tools: tools.mjs. With `--framing`, framed in-process as typescript/README.md says: the
// web-standard transport (`WebStandardStreamableHTTPServerTransport.handleRequest(Request)`, one
// per request, the same event store) inside `framingHandler`, served through `toNodeHandler` of
// `@modelcontextprotocol/node` (`--frame-all compat`: `frameAllResponses: 'compat'`;
// `--redis URL`: `dedupe` on a `RedisStore`).
//
// Usage: node sdk_v1.mjs --counter-file PATH [--port P] [--json] [--exit-with-stdin]
//        [--framing [--frame-all compat] [--redis URL]]
// (`--json`: `enableJsonResponse`, every response application/json). Prints
// "listening on http://127.0.0.1:PORT/mcp" once it accepts connections.

import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { WebStandardStreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js';
import { toNodeHandler } from '@modelcontextprotocol/node';
import { framingHandler } from 'mcp-framing/server';
import { framingOptions, options, registerTools, serve } from './tools.mjs';

const args = options();
const { port, json, counterFile } = args;

/**
 * The SDK's `EventStore` interface, in memory. Not the SDK's example `InMemoryEventStore`: its
 * ids are `STREAM_MILLISECONDS_RANDOM` and it replays a stream's events sorted by id as strings,
 * so events stored in the same millisecond replay in the order of their random suffixes, and
 * those that sort before the resumed id are never sent: a resume after the priming event misses
 * a result stored in the same millisecond one time in two. Here an id is the stream's id and a
 * sequence number, and a resume replays the events in the order they were stored.
 */
class EventStore {
  /** Event id -> { streamId, message }, in the order stored (a Map keeps insertion order). */
  #events = new Map();
  #next = 0;

  async storeEvent(streamId, message) {
    const eventId = `${streamId}_${this.#next++}`;
    this.#events.set(eventId, { streamId, message });
    return eventId;
  }

  async replayEventsAfter(lastEventId, { send }) {
    const last = this.#events.get(lastEventId);
    if (last === undefined) {
      return '';
    }
    let after = false;
    for (const [eventId, { streamId, message }] of this.#events) {
      if (after && streamId === last.streamId) {
        await send(eventId, message);
      }
      after ||= eventId === lastEventId;
    }
    return last.streamId;
  }
}

const eventStore = new EventStore();

async function progress(extra, value, total) {
  const progressToken = extra._meta?.progressToken;
  if (progressToken !== undefined) {
    await extra.sendNotification({ method: 'notifications/progress', params: { progressToken, progress: value, total } });
  }
}

/** A POST, or a GET that resumes a stream (`Last-Event-ID`); anything else is answered 405. */
const served = (method, lastEventId) => method === 'POST' || (method === 'GET' && lastEventId !== undefined);

if (args.framing) {
  const framed = framingHandler(async (request) => {
    if (!served(request.method, request.headers.get('last-event-id') ?? undefined)) {
      return new Response(null, { status: 405, headers: { Allow: 'POST' } });
    }
    const server = new McpServer({ name: 'fixture-sdk-v1', version: '1.0.0' });
    registerTools(server, counterFile, progress);
    const transport = new WebStandardStreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: json, eventStore });
    await server.connect(transport);
    return transport.handleRequest(request);
  }, await framingOptions(args));
  await serve(port, toNodeHandler({ fetch: framed }));
} else {
  await serve(port, async (req, res) => {
    if (!served(req.method, req.headers['last-event-id'])) {
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
}

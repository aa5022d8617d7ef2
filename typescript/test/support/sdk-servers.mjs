// @ts-check
// The official SDKs' own servers, each behind framingHandler on loopback: @modelcontextprotocol/server
// 2.4.0 (createMcpHandler, on node:http through @modelcontextprotocol/node's toNodeHandler, and
// in Express through it) and @modelcontextprotocol/sdk 1.32.2
// (WebStandardStreamableHTTPServerTransport, stateless, one transport per request).

import { createServer } from 'node:http';

import { toNodeHandler } from '@modelcontextprotocol/node';
import { McpServer as McpServerV1 } from '@modelcontextprotocol/sdk/server/mcp.js';
import { WebStandardStreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js';
import { McpServer, createMcpHandler } from '@modelcontextprotocol/server';
import express from 'express';
import * as z from 'zod';

/** What the tools saw: executions per tool, and the signals of their calls. */
export function toolLog() {
  return {
    /** @type {Record<string, number>} */
    runs: {},
    /** @type {Record<string, number>} */
    finished: {},
    /** @type {Record<string, number>} */
    aborted: {},
    /** @type {Map<string, () => void>} */
    gates: new Map(),
    /** Called with the id of every run of `effect` as it starts. @type {(id: string) => void} */
    onRun: (/** @type {string} */ _id) => {},
  };
}

/** `n` bytes of text, different per seed. @param {number} n @param {string} seed */
export function text(n, seed = 'x') {
  const line = `${seed}:${'abcdefghijklmnopqrstuvwxyzé'.repeat(4)}\n`;
  return line.repeat(Math.ceil(n / line.length)).slice(0, n);
}

/**
 * Registers the test tools on an McpServer of either line.
 * @param {any} server @param {ReturnType<typeof toolLog>} log
 */
function tools(server, log) {
  const count = (/** @type {Record<string, number>} */ map, /** @type {string} */ key) => {
    map[key] = (map[key] ?? 0) + 1;
  };
  server.registerTool('echo', { inputSchema: { text: z.string() } }, async (/** @type {any} */ { text: t }) => ({
    content: [{ type: 'text', text: t }],
  }));
  server.registerTool('big', { inputSchema: { bytes: z.number(), seed: z.string() } }, async (/** @type {any} */ { bytes, seed }) => ({
    content: [{ type: 'text', text: text(bytes, seed) }],
  }));
  server.registerTool(
    'progress',
    { inputSchema: { steps: z.number() } },
    async (/** @type {any} */ { steps }, /** @type {any} */ extra) => {
      // v1 hands `extra.sendNotification`, v2 `ctx.mcpReq.notify`.
      const notify = extra.sendNotification ?? extra.mcpReq.notify;
      for (let i = 0; i < steps; i++) {
        await notify({ method: 'notifications/message', params: { level: 'info', data: `step ${i}` } });
      }
      return { content: [{ type: 'text', text: `${steps} steps` }] };
    },
  );
  // Counts its runs; waits for the test to open its gate (or a few seconds), then finishes.
  server.registerTool('effect', { inputSchema: { id: z.string() } }, async (/** @type {any} */ { id }, /** @type {any} */ extra) => {
    count(log.runs, id);
    log.onRun(id);
    const signal = /** @type {AbortSignal} */ (extra.signal ?? extra.mcpReq.signal);
    let settled = false;
    await new Promise((resolve) => {
      log.gates.set(id, () => resolve(undefined));
      // An abort while it runs (an SDK may abort a finished call's signal when it cleans up).
      signal?.addEventListener('abort', () => {
        if (!settled) {
          count(log.aborted, id);
          resolve(undefined);
        }
      });
    });
    settled = true;
    if (signal?.aborted) {
      throw new Error('cancelled');
    }
    count(log.finished, id);
    return { content: [{ type: 'text', text: `effect ${id} done` }] };
  });
}

/** A v2 `createMcpHandler` with the test tools. */
export function v2Handler(log = toolLog(), options = {}) {
  return createMcpHandler(() => {
    const server = new McpServer({ name: 'v2-server', version: '2.4.0' }, { capabilities: { logging: {} } });
    tools(server, log);
    return server;
  }, options);
}

/** A v1 `WebStandardStreamableHTTPServerTransport` with sessions (one server), as a fetch handler. */
export async function v1SessionFetch(log = toolLog()) {
  const server = new McpServerV1({ name: 'v1-server', version: '1.32.2' }, { capabilities: { logging: {} } });
  tools(server, log);
  const transport = new WebStandardStreamableHTTPServerTransport({ sessionIdGenerator: () => crypto.randomUUID() });
  await server.connect(transport);
  return (/** @type {Request} */ request) => transport.handleRequest(request);
}

/** A v1 `WebStandardStreamableHTTPServerTransport`, stateless, as a fetch handler. */
export function v1Fetch(log = toolLog(), { json = false } = {}) {
  return async (/** @type {Request} */ request) => {
    const server = new McpServerV1({ name: 'v1-server', version: '1.32.2' }, { capabilities: { logging: {} } });
    tools(server, log);
    const transport = new WebStandardStreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: json });
    await server.connect(transport);
    return transport.handleRequest(request);
  };
}

/**
 * Serves a web-standard handler on 127.0.0.1 through the SDK's Node adapter, on node:http or
 * in an Express app.
 * @param {(request: Request) => Promise<Response>} fetch @param {{ express?: boolean }} [options]
 */
export async function serve(fetch, options = {}) {
  const node = toNodeHandler({ fetch });
  /** @type {import('node:http').RequestListener} */
  let listener = (req, res) => void node(req, res);
  if (options.express) {
    const app = express();
    app.all('/mcp', (req, res) => void node(req, res));
    listener = app;
  }
  const http = createServer(listener);
  await new Promise((resolve) => http.listen(0, '127.0.0.1', () => resolve(undefined)));
  const address = /** @type {import('node:net').AddressInfo} */ (http.address());
  return {
    url: new URL(`http://127.0.0.1:${address.port}/mcp`),
    close: () =>
      new Promise((resolve) => {
        http.closeAllConnections();
        http.close(() => resolve(undefined));
      }),
  };
}

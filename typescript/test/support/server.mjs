// @ts-check
// A scriptable MCP server for the tests of framingFetch: node:http, answering initialize,
// server/discover, tools/list and tools/call, framing every opted-in response with a small
// test encoder (SPEC.md §2-§5, §15, §16, §18.4). The encoder is a fixture generator for these
// tests only; the decoder it feeds is checked against the Rust crate's vectors on its own.

import { createHash, randomBytes } from 'node:crypto';
import { createServer } from 'node:http';
import { crc32 } from 'node:zlib';

const HEAD = 1;
const DATA = 2;
const MESSAGE_END = 3;
const STREAM_END = 4;

/** @param {number} kind @param {number} seq @param {Uint8Array} payload */
function frame(kind, seq, payload) {
  const h = Buffer.alloc(20);
  h[0] = 0x9f;
  h[1] = 0x4d;
  h[2] = 1;
  h[3] = kind;
  h.writeUInt32BE(seq >>> 0, 4);
  h.writeUInt32BE(payload.length, 8);
  h.writeUInt32BE(payload.length === 0 ? 0 : crc32(payload) >>> 0, 12);
  h.writeUInt32BE(crc32(h.subarray(0, 16)) >>> 0, 16);
  return { header: h, payload: Buffer.from(payload) };
}

/**
 * The frames of one stream: HEAD, each message in DATA frames of `frameSize` and its
 * MESSAGE_END, then STREAM_END; grouped by message for the compatible mapping.
 * @param {Buffer[]} messages @param {string | null} requestKey @param {number} frameSize
 */
function frames(messages, requestKey, frameSize) {
  const attempt = randomBytes(16);
  let seq = attempt.readUInt32BE(0);
  const key = requestKey === null ? Buffer.alloc(16) : Buffer.from(requestKey, 'hex');
  const head = frame(HEAD, seq++, Buffer.concat([key, attempt]));
  const groups = messages.map((message) => {
    const data = [];
    for (let at = 0; at < message.length; at += frameSize) {
      data.push(frame(DATA, seq++, message.subarray(at, at + frameSize)));
    }
    const end = Buffer.alloc(40);
    end.writeBigUInt64BE(BigInt(message.length), 0);
    createHash('sha256').update(message).digest().copy(end, 8);
    return { message, data, end: frame(MESSAGE_END, seq++, end) };
  });
  const count = Buffer.alloc(8);
  count.writeBigUInt64BE(BigInt(messages.length), 0);
  return { head, groups, streamEnd: frame(STREAM_END, seq++, count) };
}

/** @param {{header: Buffer, payload: Buffer}} f */
const whole = (f) => Buffer.concat([f.header, f.payload]);

/**
 * A framed body of `messages` in `mapping` (binary, sse or compat).
 * @param {string[]} messages @param {'binary' | 'sse' | 'compat'} mapping
 * @param {string | null} requestKey @param {number} [frameSize]
 */
export function framedBody(messages, mapping, requestKey, frameSize = 16384) {
  const { head, groups, streamEnd } = frames(messages.map((m) => Buffer.from(m)), requestKey, frameSize);
  if (mapping === 'binary') {
    return Buffer.concat([whole(head), ...groups.flatMap((g) => [...g.data.map(whole), whole(g.end)]), whole(streamEnd)]);
  }
  if (mapping === 'sse') {
    const all = [head, ...groups.flatMap((g) => [...g.data, g.end]), streamEnd];
    return Buffer.from(all.map((f) => `event: mcp-frame\ndata: ${whole(f).toString('base64')}\n\n`).join(''));
  }
  const parts = [];
  if (groups.length === 0) {
    parts.push(`:mcp-framing ${Buffer.concat([whole(head), whole(streamEnd)]).toString('base64')}\n`);
  }
  groups.forEach((g, i) => {
    const record = [];
    if (i === 0) {
      record.push(whole(head));
    }
    record.push(...g.data.map((d) => d.header), whole(g.end));
    if (i === groups.length - 1) {
      record.push(whole(streamEnd));
    }
    parts.push(`:mcp-framing ${Buffer.concat(record).toString('base64')}\n`);
    parts.push(`data: ${g.message.toString('utf8')}\n\n`);
  });
  return Buffer.from(parts.join(''));
}

export const CONTRACT = {
  versions: [1],
  sentinelRequired: true,
  frameChecksum: 'crc32',
  messageDigest: 'sha256',
  maxFramePayload: 65536,
  maxMessageSize: 16777216,
  transports: ['binary', 'sse', 'compat'],
};

/** The `generate_text` rule of examples/rmcp_server.rs. @param {string} seed @param {number} lines */
export function expectedText(seed, lines) {
  const out = [];
  for (let i = 0; i < lines; i++) {
    out.push(`${String(i).padStart(6, '0')} ${seed} "quoted" back\\slash\ttab café ✓ ${String.fromCharCode(97 + (i % 26)).repeat(i % 64)}\n`);
  }
  return out.join('');
}

/**
 * @typedef {object} Script
 * @property {object | null} [contract] the contract declared in discovery (null: none)
 * @property {(key: string, attempt: number, length: number) => number | null} [cut] bytes of a tools/call body forwarded before it ends
 * @property {boolean} [stall] hold tools/call bodies open after their first bytes
 * @property {string[]} [notifications] sent before the tools/call result
 * @property {boolean} [frame] frame opted-in responses (default true)
 * @property {string} [getResponse] a JSON-RPC response sent on the GET stream
 */

/**
 * Starts the server on a free loopback port.
 * @param {Script} script
 */
export async function startServer(script = {}) {
  const log = { calls: /** @type {any[]} */ ([]), executions: new Map(), requests: /** @type {any[]} */ ([]) };
  const server = createServer((req, res) => {
    if (req.method === 'GET') {
      if (script.getResponse === undefined) {
        res.writeHead(405).end();
        return;
      }
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(`data: {"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"hi"}}\n\n`);
      res.end(`id: 7\ndata: ${script.getResponse}\n\n`);
      return;
    }
    if (req.method === 'DELETE') {
      res.writeHead(405).end();
      return;
    }
    const chunks = /** @type {Buffer[]} */ ([]);
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const message = JSON.parse(Buffer.concat(chunks).toString('utf8'));
      const key = req.headers['mcp-framing-request-key'];
      log.requests.push({ message, headers: req.headers });
      if (message.id === undefined) {
        res.writeHead(202).end();
        return;
      }
      const contract = script.contract === undefined ? CONTRACT : script.contract;
      let result;
      const capabilities = contract === null ? { tools: {} } : { tools: {}, experimental: { 'io.github.mcp-framing/framing': contract } };
      if (message.method === 'initialize') {
        result = { protocolVersion: message.params.protocolVersion, capabilities, serverInfo: { name: 'test', version: '1.0.0' } };
      } else if (message.method === 'server/discover') {
        result = {
          resultType: 'complete',
          supportedVersions: ['2026-07-28', '2025-11-25'],
          capabilities: contract === null ? { tools: {} } : { tools: {}, extensions: { 'io.github.mcp-framing/framing': contract } },
          serverInfo: { name: 'test', version: '1.0.0' },
          ttlMs: 0,
          cacheScope: 'private',
        };
      } else if (message.method === 'tools/list') {
        result = { tools: [{ name: 'generate_text', inputSchema: { type: 'object' } }] };
      } else if (message.method === 'tools/call') {
        const args = message.params.arguments;
        const k = String(key);
        log.executions.set(k, (log.executions.get(k) ?? 0) + 1);
        log.calls.push({ id: message.id, key: k });
        result = { content: [{ type: 'text', text: expectedText(args.seed, args.lines) }] };
      } else {
        result = {};
      }
      const response = JSON.stringify({ jsonrpc: '2.0', id: message.id, result });
      const optedIn = req.headers['mcp-framing'] === '1' && script.frame !== false;
      const messages = [...(message.method === 'tools/call' ? (script.notifications ?? []) : []), response];
      if (!optedIn) {
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.end(messages.map((m) => `data: ${m}\n\n`).join(''));
        return;
      }
      const accept = String(req.headers['accept'] ?? '');
      const mapping = accept.includes('application/vnd.mcp-framing') ? 'binary' : req.headers['mcp-framing-mapping'] === 'compat' ? 'compat' : 'sse';
      const body = framedBody(messages, mapping, typeof key === 'string' ? key : null);
      res.writeHead(200, {
        'content-type': mapping === 'binary' ? 'application/vnd.mcp-framing' : 'text/event-stream',
        'mcp-framing': mapping === 'compat' ? '1; mapping=compat' : '1',
      });
      if (message.method !== 'tools/call') {
        res.end(body);
        return;
      }
      const attempt = log.executions.get(String(key));
      const cut = script.cut?.(String(key), attempt, body.length) ?? null;
      if (script.stall) {
        res.write(body.subarray(0, 10));
        return; // never ends: the idle timeout must
      }
      res.end(cut === null ? body : body.subarray(0, cut));
    });
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(undefined)));
  const address = /** @type {import('node:net').AddressInfo} */ (server.address());
  return {
    url: `http://127.0.0.1:${address.port}/mcp`,
    log,
    /** the length of a framed tools/call body for these arguments in `mapping` */
    close: () => new Promise((resolve) => server.close(() => resolve(undefined))),
    server,
  };
}

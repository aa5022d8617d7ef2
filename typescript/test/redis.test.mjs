// @ts-check
// The Redis store across languages (SPEC.md §17.12.1): a Rust server (the crate's `fleet`
// example: rmcp behind FramingLayer::dedupe over its RedisStore) and a TypeScript server
// (framingHandler over RedisStore with node-redis) share one redis-server on loopback; a keyed
// call executed by one is replayed by the other, byte for byte but for the id, in both
// directions, and the same key with other arguments is a conflict on either.
//
// Needs redis-server on PATH and cargo (it builds the example): fails, never skips, without them.

import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { createServer } from 'node:net';
import { createInterface } from 'node:readline';
import { after, test } from 'node:test';

import { McpServer, createMcpHandler } from '@modelcontextprotocol/server';
import { createClient } from 'redis';
import * as z from 'zod';

import { randomRequestKey } from '../dist/index.js';
import { RedisStore, framingHandler } from '../dist/server.js';
import { serve } from './support/sdk-servers.mjs';

const repo = new URL('../../', import.meta.url).pathname;
/** @type {import('node:child_process').ChildProcess[]} */
const children = [];
after(() => children.forEach((child) => child.kill()));

async function freePort() {
  const server = createServer();
  await new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(undefined)));
  const { port } = /** @type {import('node:net').AddressInfo} */ (server.address());
  await new Promise((resolve) => server.close(() => resolve(undefined)));
  return port;
}

/** Spawns `command` and resolves with the first stdout line that matches `ready`. */
async function start(/** @type {string} */ command, /** @type {string[]} */ args, /** @type {RegExp} */ ready) {
  const child = spawn(command, args, { cwd: repo, stdio: ['ignore', 'pipe', 'inherit'] });
  children.push(child);
  const lines = createInterface({ input: /** @type {import('node:stream').Readable} */ (child.stdout) });
  for await (const line of lines) {
    const match = ready.exec(line);
    if (match !== null) {
      return match;
    }
  }
  throw new Error(`${command} ended before it was ready`);
}

/**
 * A keyed tools/call of `charge` (the fleet example's tool), 2025 protocol, not opted in.
 * @param {URL | string} url @param {string} key @param {number} id @param {number} amount
 */
async function charge(url, key, id, amount) {
  const response = await fetch(url, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': '2025-06-18',
      'mcp-framing-request-key': key,
    },
    body: JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'charge', arguments: { account: 'acme', amount } } }),
  });
  const body = await response.text();
  const data = body.startsWith('{') ? body : (body.split('\n').filter((line) => line.startsWith('data: ')).at(-1) ?? '').slice(6);
  return { decision: response.headers.get('mcp-framing-dedupe'), text: data, json: JSON.parse(data) };
}

test('a Rust server and a TypeScript server sharing one Redis replay each other\'s records', { timeout: 900_000 }, async () => {
  const built = spawnSync('cargo', ['build', '--example', 'fleet', '--features', 'rmcp,redis,demo'], { cwd: repo, stdio: 'inherit' });
  assert.equal(built.status, 0, 'cargo build --example fleet');
  const port = await freePort();
  await start('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], /Ready to accept connections/);
  const redisUrl = `redis://127.0.0.1:${port}/`;
  const listening = await start(`${repo}target/debug/examples/fleet`, ['backend', '--redis', redisUrl, '--name', 'rust'], /listening (\S+)/);
  const rustUrl = new URL(listening[1] ?? '');
  const rustStats = async () => /** @type {any} */ (await (await fetch(new URL('/stats', rustUrl))).json()).executions;

  const redis = createClient({ url: redisUrl });
  await redis.connect();
  let executions = 0;
  // The same tool as the Rust example's, answering the same text.
  const handler = createMcpHandler(() => {
    const server = new McpServer({ name: 'ts-ledger', version: '1.0.0' });
    server.registerTool('charge', { inputSchema: { account: z.string(), amount: z.number() } }, async ({ account, amount }) => {
      executions += 1;
      const receipt = Array.from({ length: 60 }, (_, i) => `receipt line ${String(i).padStart(2, '0')}: ${amount} cents to ${account}\n`).join('');
      return { content: [{ type: 'text', text: `charged ${amount} to ${account}\n${receipt}` }] };
    });
    return server;
  });
  const quiet = { debug() {}, info() {}, warn() {} };
  const ts = await serve(framingHandler(handler.fetch, { logger: quiet, dedupe: { store: new RedisStore(redis, { prefix: 'fleet-demo:' }) } }));
  try {
    // Rust executes, TypeScript replays.
    const first = randomRequestKey();
    const byRust = await charge(rustUrl, first, 1, 5);
    assert.equal(byRust.decision, 'execute');
    const replayedByTs = await charge(ts.url, first, 2, 5);
    assert.equal(replayedByTs.decision, 'replay');
    assert.equal(replayedByTs.text, byRust.text.replace('"id":1', '"id":2'));
    assert.equal(executions, 0);

    // TypeScript executes, Rust replays.
    const second = randomRequestKey();
    const byTs = await charge(ts.url, second, 3, 7);
    assert.equal(byTs.decision, 'execute');
    assert.equal(executions, 1);
    const before = await rustStats();
    const replayedByRust = await charge(rustUrl, second, 4, 7);
    assert.equal(replayedByRust.decision, 'replay');
    assert.deepEqual(replayedByRust.json, { ...byTs.json, id: 4 });
    assert.equal(await rustStats(), before);

    // The same key with other arguments: a conflict in either language, nothing executed.
    assert.equal((await charge(ts.url, first, 5, 6)).json.error.code, -32080);
    assert.equal((await charge(rustUrl, second, 6, 8)).json.error.code, -32080);
    assert.equal(executions, 1);
    assert.equal(await rustStats(), before);

    // The record the TypeScript server wrote has the fields of SPEC.md §17.12.1.
    const keys = await redis.keys('fleet-demo:*');
    assert.equal(keys.length, 2);
    for (const key of keys) {
      const record = await redis.hGetAll(key);
      assert.deepEqual(Object.keys(record).sort(), ['fp', 'g', 'r', 's', 't']);
      assert.equal(record['s'], 'r');
      assert.match(record['t'] ?? '', /^[0-9a-f]{32}$/);
    }
  } finally {
    await ts.close();
    await handler.close();
    await redis.quit();
  }
});

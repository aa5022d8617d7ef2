// @ts-check
// Deduplication (SPEC.md §17) behind framingHandler, on the in-memory store: a keyed call runs
// to its end when its client goes away (the handler's request.signal is not the client's), is
// recorded once, and the retry gets the record; an explicit notifications/cancelled still
// reaches the handler; conflicts, a failing store and hostile bodies are refused as §17.9 and
// §17.10 say. The store-format vectors of tests/vectors/store/ hold for the package.

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, test } from 'node:test';

import { Client as ClientV1 } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as TransportV1 } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

import { framingFetch, randomRequestKey } from '../dist/index.js';
import { MemoryStore, StoreError, framingHandler } from '../dist/server.js';
import { authorizationValues, canonical, fingerprint, principalDigest, readStrict, storeKey } from '../dist/server/dedupe/request.js';
import { serve, toolLog, v1SessionFetch, v2Handler } from './support/sdk-servers.mjs';

const quiet = { debug() {}, info() {}, warn() {} };

/**
 * A keyed tools/call of `effect` (2025 protocol, stateless), opted in or not.
 * @param {URL} url @param {string} key @param {number} id @param {string} effect @param {AbortSignal} [signal]
 */
function call(url, key, id, effect, signal) {
  return fetch(url, {
    method: 'POST',
    signal,
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': '2025-06-18',
      'mcp-framing-request-key': key,
    },
    body: JSON.stringify({
      jsonrpc: '2.0',
      id,
      method: 'tools/call',
      params: { name: 'effect', arguments: { id: effect }, _meta: { 'io.github.mcp-framing/requestKey': key, progressToken: id } },
    }),
  });
}

/** The JSON-RPC response of a body (JSON, or the last `data:` line of an event stream). */
async function rpc(/** @type {Response} */ response) {
  const body = await response.text();
  const data = body.startsWith('{') ? body : (body.split('\n').filter((l) => l.startsWith('data: ')).at(-1) ?? '').slice(6);
  return JSON.parse(data);
}

describe('deduplication', () => {
  test('a keyed call runs to its end when its client goes away, once, and the retry gets its result', async () => {
    const log = toolLog();
    const handler = v2Handler(log);
    const served = await serve(framingHandler(handler.fetch, { logger: quiet, dedupe: { store: new MemoryStore() } }));
    try {
      const key = randomRequestKey();
      const started = new Promise((resolve) => (log.onRun = resolve));
      const client = new AbortController();
      const first = call(served.url, key, 1, 'charge-1', client.signal).catch((error) => error);
      await started;
      client.abort(); // the client goes away while the tool runs
      assert.ok((await first) instanceof Error);
      log.gates.get('charge-1')?.();
      // The retry may find the call still in flight: it waits for the record (§17.8).
      const retry = await call(served.url, key, 2, 'charge-1');
      assert.equal(retry.headers.get('mcp-framing-dedupe'), 'replay');
      const answer = await rpc(retry);
      assert.equal(answer.id, 2);
      assert.equal(answer.result.content[0].text, 'effect charge-1 done');
      assert.deepEqual([log.runs['charge-1'], log.finished['charge-1'], log.aborted['charge-1']], [1, 1, undefined]);
    } finally {
      await served.close();
      await handler.close();
    }
  });

  test("an unkeyed call's client going away aborts the handler's request.signal, framed or not, deduplicating or not", async () => {
    // SPEC.md §17.10: only a keyed call runs on without its client. The v2 server cancels the
    // tool on that abort (the v1 transport does not, wrapped or not).
    for (const dedupe of [undefined, { store: new MemoryStore() }]) {
      for (const optIn of /** @type {Record<string, string>[]} */ ([{}, { 'mcp-framing': '1', 'mcp-framing-mapping': 'compat' }, { 'mcp-framing': '1', accept: 'application/vnd.mcp-framing, application/json, text/event-stream' }])) {
        const log = toolLog();
        const handler = v2Handler(log);
        const served = await serve(framingHandler(handler.fetch, { logger: quiet, ...(dedupe === undefined ? {} : { dedupe }) }));
        try {
          const started = new Promise((resolve) => (log.onRun = resolve));
          const client = new AbortController();
          const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'effect', arguments: { id: 'gone' } } });
          const headers = { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-06-18', ...optIn };
          const first = fetch(served.url, { method: 'POST', signal: client.signal, headers, body }).then((r) => r.arrayBuffer()).catch((error) => error);
          await started;
          client.abort();
          assert.ok((await first) instanceof Error);
          while (log.aborted['gone'] === undefined) {
            await new Promise((resolve) => setImmediate(resolve));
          }
          assert.deepEqual([log.runs['gone'], log.aborted['gone'], log.finished['gone']], [1, 1, undefined], JSON.stringify(optIn));
        } finally {
          await served.close();
          await handler.close();
        }
      }
    }
  });

  test('an explicit notifications/cancelled still reaches the handler of a keyed call', async () => {
    const log = toolLog();
    const served = await serve(framingHandler(await v1SessionFetch(log), { logger: quiet, dedupe: { store: new MemoryStore() } }));
    try {
      const framing = framingFetch({ logger: quiet });
      const client = new ClientV1({ name: 'test', version: '1.0.0' });
      await client.connect(new TransportV1(served.url, { fetch: framing }));
      const started = new Promise((resolve) => (log.onRun = resolve));
      const cancel = new AbortController();
      const result = client.callTool({ name: 'effect', arguments: { id: 'cancelled' } }, undefined, { signal: cancel.signal }).catch((e) => e);
      await started;
      cancel.abort('the user cancelled'); // the SDK sends notifications/cancelled
      assert.ok((await result) instanceof Error);
      while (log.aborted['cancelled'] === undefined) {
        await new Promise((resolve) => setImmediate(resolve));
      }
      assert.equal(log.aborted['cancelled'], 1);
      assert.equal(log.finished['cancelled'], undefined);
      await client.close();
    } finally {
      await served.close();
    }
  });

  test('the same key with other arguments is a conflict, a failing store is refused as retryable, hostile bodies are 400', async () => {
    const log = toolLog();
    const handler = v2Handler(log);
    /** @type {import('../dist/server.js').DedupeStore} */
    const broken = {
      claim: () => Promise.reject(new Error('connection refused')),
      renew: () => Promise.reject(new Error('x')),
      complete: () => Promise.reject(new Error('x')),
      release: () => Promise.reject(new Error('x')),
    };
    const served = await serve(framingHandler(handler.fetch, { logger: quiet, dedupe: { store: new MemoryStore() } }));
    const failing = await serve(framingHandler(handler.fetch, { logger: quiet, dedupe: { store: broken } }));
    try {
      const key = randomRequestKey();
      log.onRun = (id) => log.gates.get(id)?.();
      const run = call(served.url, key, 1, 'a');
      await new Promise((resolve) => (log.onRun = resolve));
      log.gates.get('a')?.();
      assert.equal((await rpc(await run)).result.content[0].text, 'effect a done');
      const conflict = await rpc(await call(served.url, key, 2, 'b'));
      assert.equal(conflict.error.code, -32080);
      assert.equal(conflict.error.data['io.github.mcp-framing/dedupe'].reason, 'key_conflict');
      const unavailable = await rpc(await call(failing.url, randomRequestKey(), 3, 'c'));
      assert.equal(unavailable.error.code, -32084);
      assert.equal(unavailable.error.data['io.github.mcp-framing/dedupe'].retryable, true);
      const post = (/** @type {string} */ body, /** @type {Record<string, string>} */ headers = {}) =>
        fetch(served.url, { method: 'POST', headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers }, body });
      assert.equal((await post('{"jsonrpc":"2.0","id":1,"id":2,"method":"tools/call"}')).status, 400);
      assert.equal((await post(`${'['.repeat(128)}${']'.repeat(128)}`)).status, 400);
      const mismatch = { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'effect', arguments: { id: 'd' }, _meta: { 'io.github.mcp-framing/requestKey': randomRequestKey() } } };
      assert.equal((await post(JSON.stringify(mismatch), { 'mcp-framing-request-key': randomRequestKey() })).status, 400);
      assert.equal(log.runs['c'], undefined);
      assert.equal(log.runs['d'], undefined);
    } finally {
      await served.close();
      await failing.close();
      await handler.close();
    }
  });
});

describe('the store format vectors (tests/vectors/store/)', () => {
  const vectors = (/** @type {string} */ name) => JSON.parse(readFileSync(new URL(`../../tests/vectors/store/${name}.json`, import.meta.url), 'utf8'));

  test('canonical JSON, fingerprints and malformed bodies are the crate\'s', () => {
    const { canonical_json, fingerprints, malformed, accepted } = vectors('fingerprints');
    for (const c of canonical_json) {
      assert.equal(canonical(readStrict(Buffer.from(c.json))), c.canonical, c.name);
    }
    for (const c of fingerprints) {
      assert.equal(fingerprint(readStrict(Buffer.from(c.request)), c.include_meta), c.fingerprint, c.name);
    }
    for (const c of malformed) {
      assert.throws(() => readStrict(c.body_hex === undefined ? Buffer.from(c.body) : Buffer.from(c.body_hex, 'hex')), { kind: c.error }, c.name);
    }
    for (const c of accepted) {
      readStrict(Buffer.from(c.body));
    }
  });

  test('store keys are the crate\'s', () => {
    for (const c of vectors('keys').cases) {
      const principal = c.principal.anonymous ? null : c.principal.authorization ? { authorization: c.principal.authorization } : { id: c.principal.id };
      const digest = principalDigest(principal);
      assert.equal(digest === null ? null : Buffer.from(digest).toString('hex'), c.principal_digest, c.name);
      assert.equal(storeKey(digest, c.method, c.tool, Buffer.from(c.request_key, 'hex')), c.store_key, c.name);
    }
  });
});

describe('the principal behind framingHandler (SPEC.md §17.2, §17.12.1)', () => {
  /** A store that remembers the keys it was asked to claim. */
  class Claims extends MemoryStore {
    /** @type {string[]} */
    keys = [];
    /** @override @type {MemoryStore['claim']} */
    claim(key, ...rest) {
      this.keys.push(key);
      return super.claim(key, ...rest);
    }
  }

  /**
   * The store key framingHandler claims for a keyed call from a caller whose request carries
   * `authorization` as several field lines (a Fetch `Headers` joins them with `, `).
   * @param {{ method: string, tool: string | null, request_key: string }} c @param {string[]} authorization
   * @param {((request: Request) => string | null) | undefined} principal
   */
  async function claimedKey(c, authorization, principal) {
    const store = new Claims();
    const inner = async (/** @type {Request} */ request) => {
      const { id } = /** @type {{ id: number }} */ (await request.json());
      return Response.json({ jsonrpc: '2.0', id, result: { content: [] } });
    };
    const handler = framingHandler(inner, { logger: quiet, dedupe: { store, methods: [c.method], ...(principal ? { principal } : {}) } });
    const headers = new Headers({ 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-framing-request-key': c.request_key });
    for (const value of authorization) {
      headers.append('authorization', value);
    }
    const params = c.tool === null ? { arguments: {} } : { name: c.tool, arguments: {} };
    const response = await handler(new Request('http://127.0.0.1/mcp', { method: 'POST', headers, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: c.method, params }) }));
    assert.equal(response.status, 200);
    await response.arrayBuffer();
    assert.equal(store.keys.length, 1);
    return store.keys[0];
  }

  test('several Authorization lines are joined by a comma without space, as in every implementation', async () => {
    const cases = JSON.parse(readFileSync(new URL('../../tests/vectors/store/keys.json', import.meta.url), 'utf8')).cases;
    for (const c of cases) {
      const principal = c.principal.id === undefined ? undefined : () => c.principal.id;
      const lines = c.principal.authorization ?? [];
      if (lines.length === 1 && lines[0].includes(', ')) {
        continue; // below: one line holding two credentials
      }
      assert.equal(await claimedKey(c, lines, principal), c.store_key, c.name);
    }
  });

  test('one line holding two credentials is read as two lines: a Fetch Headers cannot tell them apart', async () => {
    const cases = JSON.parse(readFileSync(new URL('../../tests/vectors/store/keys.json', import.meta.url), 'utf8')).cases;
    const oneLine = cases.find((/** @type {any} */ c) => c.principal.authorization?.length === 1 && c.principal.authorization[0] === 'Bearer a, Bearer b');
    const twoLines = cases.find((/** @type {any} */ c) => c.principal.authorization?.join('|') === 'Bearer a|Bearer b');
    assert.ok(oneLine && twoLines);
    assert.equal(await claimedKey(oneLine, oneLine.principal.authorization, undefined), twoLines.store_key);
  });

  test('the values of several lines are found again in the joined value, quoted commas and auth-params kept', () => {
    const values = (/** @type {string[]} */ lines) => {
      const headers = new Headers();
      lines.forEach((line) => headers.append('authorization', line));
      return authorizationValues(headers);
    };
    assert.equal(values([]), null);
    for (const lines of [
      ['Bearer t0k3n'],
      ['Bearer a', 'Bearer b'],
      ['Digest username="a, Bearer b", realm="x, y", nonce=1', 'Bearer c'],
      ['Basic dXNlcjpwYXNz', 'Digest a=1, b="2\\", c'],
      ['Custom', 'Bearer ab==', 'Other k = v, l=w'],
      ['Bearer a,Bearer b'],
    ]) {
      assert.deepEqual(values(lines), lines, lines.join(' | '));
    }
  });
});

test('the Redis scripts are the crate\'s, byte for byte', async () => {
  const { SCRIPTS } = await import('../dist/server/dedupe/redis.js');
  for (const [name, text] of Object.entries(SCRIPTS)) {
    assert.equal(text, readFileSync(new URL(`../../src/dedupe/redis/${name}.lua`, import.meta.url), 'utf8'), name);
  }
});

describe('the deduplication metrics (SPEC.md §17.15), under the Rust crate\'s names and labels', () => {
  /** A meter that keeps every point. */
  function recordingMeter() {
    /** @type {Array<[string, number, Record<string, string>]>} */
    const points = [];
    const meter = {
      createCounter: (/** @type {string} */ name) => ({ add: (/** @type {number} */ v, /** @type {any} */ a) => points.push([name, v, a]) }),
      createHistogram: (/** @type {string} */ name) => ({ record: (/** @type {number} */ v, /** @type {any} */ a) => points.push([name, v, a]) }),
    };
    /** The labels of every point of `name`, in order. @param {string} name */
    const labels = (name) => points.filter(([n]) => n === name).map(([, , a]) => a);
    return { meter, points, labels };
  }

  /**
   * A keyed tools/call through `handler`; the JSON-RPC response.
   * @param {(request: Request) => Promise<Response>} handler @param {string} key @param {any} args @param {number} [id]
   */
  async function keyed(handler, key, args, id = 1) {
    const response = await handler(
      new Request('http://127.0.0.1/mcp', {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-framing-request-key': key },
        body: JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'tool', arguments: args } }),
      }),
    );
    return JSON.parse(await response.text());
  }

  /** A tool answering at once: a tool error when asked. @param {Request} request */
  const inner = async (request) => {
    const { id, params } = /** @type {{ id: number, params: { arguments: { fail?: boolean } } }} */ (await request.json());
    return Response.json({ jsonrpc: '2.0', id, result: { content: [], isError: params.arguments.fail === true } });
  };

  test('an executed call, its replay, a conflict and a tool error are counted and timed', async () => {
    const { meter, labels } = recordingMeter();
    const handler = framingHandler(inner, { logger: quiet, meter, dedupe: { store: new MemoryStore() } });
    const key = randomRequestKey();
    await keyed(handler, key, { n: 1 });
    const replay = await keyed(handler, key, { n: 1 }, 2);
    assert.equal(replay.id, 2);
    const conflict = await keyed(handler, key, { n: 2 }, 3);
    assert.equal(conflict.error.code, -32080);
    await keyed(handler, randomRequestKey(), { fail: true });
    assert.deepEqual(labels('mcp_framing.dedupe.decisions'), [
      { decision: 'execute', reason: '', 'mcp.method.name': 'tools/call' },
      { decision: 'replay', reason: '', 'mcp.method.name': 'tools/call' },
      { decision: 'refused', reason: 'key_conflict', 'mcp.method.name': 'tools/call' },
      { decision: 'execute', reason: '', 'mcp.method.name': 'tools/call' },
    ]);
    assert.deepEqual(labels('mcp.server.operation.duration'), [
      { 'mcp.method.name': 'tools/call', 'mcp_framing.dedupe.decision': 'execute' },
      { 'mcp.method.name': 'tools/call', 'mcp_framing.dedupe.decision': 'replay' },
      { 'mcp.method.name': 'tools/call', 'mcp_framing.dedupe.decision': 'refused', 'error.type': '-32080', 'rpc.response.status_code': '-32080' },
      { 'mcp.method.name': 'tools/call', 'mcp_framing.dedupe.decision': 'execute', 'error.type': 'tool_error' },
    ]);
    assert.deepEqual(labels('mcp_framing.dedupe.completions'), [{ recorded: 'stored' }, { recorded: 'stored' }]);
    assert.deepEqual(
      labels('mcp_framing.dedupe.store.duration').map((a) => `${a.operation}:${a.outcome}`),
      ['claim:ok', 'complete:ok', 'claim:ok', 'claim:ok', 'claim:ok', 'complete:ok'],
    );
    assert.deepEqual(labels('mcp_framing.dedupe.waits'), []);
  });

  test('a duplicate that waited, a failing store, a lost lease and an eviction are counted', async () => {
    const { meter, labels, points } = recordingMeter();
    /** @type {() => void} */
    let open = () => {};
    const gate = new Promise((resolve) => {
      open = () => resolve(undefined);
    });
    /** @type {() => void} */
    let claimed = () => {};
    const running = new Promise((resolve) => {
      claimed = () => resolve(undefined);
    });
    const slow = async (/** @type {Request} */ request) => {
      claimed();
      await gate;
      return inner(request);
    };
    const waiting = framingHandler(slow, { logger: quiet, meter, dedupe: { store: new MemoryStore(), waitMs: 30 } });
    const key = randomRequestKey();
    const first = keyed(waiting, key, {});
    await running; // the first call holds the claim
    const second = await keyed(waiting, key, {}, 2);
    assert.equal(second.error.data['io.github.mcp-framing/dedupe'].reason, 'in_progress');
    open();
    await first;
    assert.deepEqual(labels('mcp_framing.dedupe.waits'), [{ decision: 'in_progress' }]);
    const waited = points.find(([name]) => name === 'mcp_framing.dedupe.wait.duration');
    assert.ok(waited !== undefined && waited[1] > 0.02, `waited ${waited?.[1]} s`);
    assert.deepEqual(waited[2], { decision: 'in_progress' });

    class Down extends MemoryStore {
      /** @override */
      claim() {
        return Promise.reject(new StoreError('redis', 'redis: connection refused'));
      }
    }
    const down = framingHandler(inner, { logger: quiet, meter, dedupe: { store: new Down() } });
    assert.equal((await keyed(down, randomRequestKey(), {})).error.code, -32084);
    assert.deepEqual(labels('mcp_framing.dedupe.store.duration').at(-1), { operation: 'claim', outcome: 'redis' });
    assert.deepEqual(labels('mcp_framing.dedupe.decisions').at(-1), { decision: 'refused', reason: 'store_unavailable', 'mcp.method.name': 'tools/call' });

    class TakenOver extends MemoryStore {
      /** @override */
      complete() {
        return Promise.resolve(false);
      }
    }
    const taken = framingHandler(inner, { logger: quiet, meter, dedupe: { store: new TakenOver() } });
    await keyed(taken, randomRequestKey(), {});
    assert.deepEqual(labels('mcp_framing.dedupe.completions').at(-1), { recorded: 'lease_lost' });
    assert.deepEqual(labels('mcp_framing.dedupe.leases_lost'), [{ detected: 'completion' }]);

    const small = framingHandler(inner, { logger: quiet, meter, dedupe: { store: new MemoryStore({ maxEntries: 1, meter }) } });
    await keyed(small, randomRequestKey(), {});
    await keyed(small, randomRequestKey(), {});
    assert.deepEqual(labels('mcp_framing.dedupe.evictions'), [{ record: 'completed' }]);
  });

  test('with @opentelemetry/api installed, decisions go to its global meter provider', async () => {
    const { metrics } = await import('@opentelemetry/api');
    const { meter, labels } = recordingMeter();
    metrics.setGlobalMeterProvider(/** @type {any} */ ({ getMeter: () => meter }));
    try {
      const handler = framingHandler(inner, { logger: quiet, dedupe: { store: new MemoryStore() } });
      await keyed(handler, randomRequestKey(), {});
      assert.deepEqual(labels('mcp_framing.dedupe.decisions'), [{ decision: 'execute', reason: '', 'mcp.method.name': 'tools/call' }]);
    } finally {
      metrics.disable();
    }
  });
});

test('what an adapter passes after the request reaches the handler, with and without deduplication', async () => {
  /** @type {unknown[]} */
  const seen = [];
  const inner = async (/** @type {Request} */ request, /** @type {{ authInfo: { token: string } }} */ context) => {
    seen.push(context);
    const { id } = /** @type {{ id: number }} */ (await request.json());
    return Response.json({ jsonrpc: '2.0', id, result: { content: [] } });
  };
  const context = { authInfo: { token: 't' } };
  for (const options of [{ logger: quiet }, { logger: quiet, dedupe: { store: new MemoryStore() } }]) {
    const handler = framingHandler(inner, options);
    const request = new Request('http://127.0.0.1/mcp', {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-framing-request-key': randomRequestKey() },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'tool', arguments: {} } }),
    });
    await (await handler(request, context)).text();
  }
  assert.deepEqual(seen, [context, context]);
});

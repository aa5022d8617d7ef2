// @ts-check
// framingFetch under the official SDKs' stock Client (both lines), against a scriptable server
// (test/support/server.mjs): clean calls byte for byte, cut calls as immediate JSON-RPC errors
// carrying the outcome, the contract check, keyed retries, downgrades, the idle timeout, the
// GET stream, and the telemetry.

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import { Client as ClientV1 } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as TransportV1 } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { Client as ClientV2, StreamableHTTPClientTransport as TransportV2 } from '@modelcontextprotocol/client';

import { OUTCOME_DATA_KEY, framingFetch } from '../dist/index.js';
import { expectedText, framedBody, startServer } from './support/server.mjs';

const SDKS = [
  { name: '@modelcontextprotocol/sdk 1.32.2', Client: ClientV1, Transport: TransportV1 },
  { name: '@modelcontextprotocol/client 2.4.0', Client: ClientV2, Transport: TransportV2 },
];

/** A generous request timeout: an error that is not the SDK's timeout came from the wrapper. */
const TIMEOUT = { timeout: 30_000 };
const ARGS = { seed: 'ts', lines: 300 };

/** Log lines, instead of the console. */
function quietLogger() {
  const lines = { warn: /** @type {string[]} */ ([]), info: /** @type {string[]} */ ([]) };
  return {
    lines,
    logger: { debug: () => {}, info: (/** @type {string} */ m) => lines.info.push(m), warn: (/** @type {string} */ m) => lines.warn.push(m) },
  };
}

/**
 * @param {typeof SDKS[number]} sdk @param {string} url @param {import('../dist/index.js').FramingFetchOptions} options
 */
async function connect(sdk, url, options = {}) {
  const { lines, logger } = quietLogger();
  const fetch = framingFetch({ logger, ...options });
  const client = new sdk.Client({ name: 'test', version: '1.0.0' });
  const errors = /** @type {unknown[]} */ ([]);
  client.onerror = (error) => errors.push(error);
  const transport = new sdk.Transport(new URL(url), { fetch });
  await client.connect(/** @type {any} */ (transport), TIMEOUT);
  return { client, fetch, lines, errors };
}

/**
 * Calls a tool with the request timeout, as each SDK line takes it (v1: `callTool(params,
 * schema, options)`, v2: `callTool(params, options)`).
 * @param {any} client @param {any} params
 */
function callTool(client, params) {
  return client instanceof ClientV2 ? client.callTool(params, TIMEOUT) : client.callTool(params, undefined, TIMEOUT);
}

/** @param {any} error */
function outcomeOf(error) {
  return error?.data?.[OUTCOME_DATA_KEY];
}

for (const sdk of SDKS) {
  describe(sdk.name, () => {
    test('a clean tool call through framingFetch gets the result byte for byte, every message verified', async () => {
      const server = await startServer({ notifications: ['{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"working"}}'] });
      try {
        const { client, fetch, lines } = await connect(sdk, server.url);
        const result = /** @type {any} */ (await callTool(client, { name: 'generate_text', arguments: ARGS }));
        assert.equal(result.content[0].text, expectedText(ARGS.seed, ARGS.lines));
        assert.equal(fetch.stats.unverified, 0);
        assert.ok(fetch.stats.verified >= 3, `verified ${fetch.stats.verified}`);
        assert.deepEqual(lines.warn, []);
        assert.equal(fetch.negotiated?.transports[0], 'compat');
        const call = server.log.requests.find((r) => r.message.method === 'tools/call');
        assert.equal(call.headers['mcp-framing'], '1');
        assert.equal(call.headers['mcp-framing-mapping'], 'compat');
        assert.match(call.headers['mcp-framing-request-key'], /^[0-9a-f]{32}$/);
        assert.equal(call.message.params._meta['io.github.mcp-framing/requestKey'], call.headers['mcp-framing-request-key']);
        assert.equal(call.headers['mcp-framing-limits'], 'frame=65536, message=16777216');
        await client.close();
      } finally {
        await server.close();
      }
    });

    test('a tool call cut anywhere fails at once with the outcome, never with a partial result', async () => {
      /** @type {(length: number) => number | null} */
      let cutAt = () => 0;
      const server = await startServer({ cut: (_key, _attempt, length) => cutAt(length) });
      try {
        const { client, fetch, lines } = await connect(sdk, server.url);
        // every record and event boundary region of the ~33 KB compatible body, and its last bytes
        const cuts = [0, 1, 13, 100, 229, 230, 231, 1000, 0.5, -2, -1];
        for (const cut of cuts) {
          cutAt = (length) => (cut < 0 ? length + cut : cut < 1 ? Math.floor(length * cut) : cut);
          const warned = lines.warn.length;
          await assert.rejects(
            callTool(client, { name: 'generate_text', arguments: ARGS }),
            (/** @type {any} */ error) => {
              assert.equal(error.code, -32603, `cut ${cut}: ${error.message}`);
              assert.match(error.message, /mcp-framing: response abandoned: truncated/, `cut ${cut}`);
              const outcome = outcomeOf(error);
              assert.equal(outcome.classification, 'abandoned');
              assert.equal(outcome.kind, 'Truncated');
              assert.equal(outcome.regime, 'B');
              assert.equal(outcome.attempts, 1);
              // keyed, but this server declares no deduplication (SPEC.md §17.11): surfaced
              assert.equal(outcome.retryDecision, 'surface_to_caller');
              assert.equal(outcome.retryReason, 'not_deduplicated');
              assert.match(outcome.attemptId ?? '', cut >= 1000 || cut < 0 || (cut > 0 && cut < 1) ? /^[0-9a-f]{32}$/ : /^$/); // once HEAD's record arrived
              assert.equal(typeof outcome.bytesReceived, 'number');
              assert.match(outcome.requestKeyFingerprint, /^sha256:[0-9a-f]{16}$/);
              return true;
            },
          );
          assert.equal(lines.warn.length, warned + 1, `one warning per cut: ${lines.warn.slice(warned)}`);
          assert.match(lines.warn.at(-1) ?? '', /outcome=abandoned/);
        }
        cutAt = () => null;
        const result = /** @type {any} */ (await callTool(client, { name: 'generate_text', arguments: ARGS }));
        assert.equal(result.content[0].text, expectedText(ARGS.seed, ARGS.lines));
        assert.equal(fetch.stats.unverified, 0);
        assert.equal(fetch.stats.outcomes['abandoned'], cuts.length);
        await client.close();
      } finally {
        await server.close();
      }
    });

    test('a server that declares no contract is refused as Regime C before any tool call', async () => {
      const server = await startServer({ contract: null });
      try {
        const fetch = framingFetch({ logger: quietLogger().logger });
        const client = new sdk.Client({ name: 'test', version: '1.0.0' });
        client.onerror = () => {};
        await assert.rejects(client.connect(/** @type {any} */ (new sdk.Transport(new URL(server.url), { fetch })), TIMEOUT), /Regime C/);
        assert.equal(server.log.calls.length, 0);
      } finally {
        await server.close();
      }
    });

    test('accepting ambiguity runs unframed and counts every message as unverified', async () => {
      const server = await startServer({ contract: null, frame: false });
      try {
        const { client, fetch } = await connect(sdk, server.url, { acceptAmbiguity: true });
        const result = /** @type {any} */ (await callTool(client, { name: 'generate_text', arguments: ARGS }));
        assert.equal(result.content[0].text, expectedText(ARGS.seed, ARGS.lines));
        assert.ok(fetch.stats.unverified >= 2);
        assert.equal(fetch.negotiated, null);
        const call = server.log.requests.find((r) => r.message.method === 'tools/call');
        assert.equal(call.headers['mcp-framing'], undefined, 'no opt-in in Regime C');
        await client.close();
      } finally {
        await server.close();
      }
    });

    test('keyed retries against a deduplicating server: the same key, a new id, one result', async () => {
      const contract = { versions: [1], sentinelRequired: true, frameChecksum: 'crc32', messageDigest: 'sha256', transports: ['compat'], deduplication: { methods: ['tools/call'], windowMs: 60000, scope: 'principal' } };
      // The first attempt of every key is cut.
      const server = await startServer({ contract, cut: (_key, attempt) => (attempt === 1 ? 500 : null) });
      try {
        const { client, fetch } = await connect(sdk, server.url, { retry: { initialBackoffMs: 1 } });
        for (let i = 0; i < 3; i++) {
          const result = /** @type {any} */ (await callTool(client, { name: 'generate_text', arguments: { ...ARGS, seed: `s${i}` } }));
          assert.equal(result.content[0].text, expectedText(`s${i}`, ARGS.lines));
        }
        assert.equal(fetch.stats.retries, 3);
        assert.equal(server.log.calls.length, 6);
        for (let i = 0; i < 3; i++) {
          const [first, second] = server.log.calls.slice(2 * i, 2 * i + 2);
          assert.equal(first.key, second.key, 'the same request key');
          assert.equal(second.id, `${first.id}~attempt-2`, 'a new JSON-RPC id');
        }
        await client.close();
      } finally {
        await server.close();
      }
    });

    test('a resolution that drops the contract fails the retry closed (a downgrade)', async () => {
      const contract = { ...(await import('./support/server.mjs')).CONTRACT, deduplication: { methods: ['tools/call'], windowMs: 60000, scope: 'principal' } };
      const server = await startServer({ contract, cut: () => 300 });
      try {
        const resolve = (/** @type {any} */ { attempt }) =>
          attempt === 1 ? { endpoint: server.url } : { endpoint: server.url, discovery: { capabilities: {} }, source: /** @type {const} */ ('discover') };
        const { client } = await connect(sdk, server.url, { resolve, retry: { initialBackoffMs: 1 } });
        await assert.rejects(callTool(client, { name: 'generate_text', arguments: ARGS }), (/** @type {any} */ error) => {
          const outcome = outcomeOf(error);
          assert.equal(outcome.classification, 'configuration_error', error.message);
          assert.equal(outcome.kind, 'Downgrade');
          assert.equal(outcome.attempts, 1, 'the downgraded attempt was never sent');
          return true;
        });
        assert.equal(server.log.calls.length, 1, 'nothing sent to the downgraded endpoint');
        await client.close();
      } finally {
        await server.close();
      }
    });

    test('a response that goes quiet is abandoned after the idle timeout', async () => {
      const server = await startServer({ stall: true });
      try {
        const { client } = await connect(sdk, server.url, { idleTimeoutMs: 100 });
        await assert.rejects(callTool(client, { name: 'generate_text', arguments: ARGS }), (/** @type {any} */ error) => {
          const outcome = outcomeOf(error);
          assert.equal(outcome.classification, 'abandoned', error.message);
          assert.equal(outcome.kind, 'IdleTimeout');
          return true;
        });
        await client.close();
        server.server.closeAllConnections();
      } finally {
        await server.close();
      }
    });
  });
}

test('the event stream handed to the SDK carries no SSE id, only verified messages', async () => {
  const server = await startServer();
  try {
    const fetch = framingFetch({ logger: quietLogger().logger });
    const post = (/** @type {any} */ message) =>
      fetch(server.url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(message) });
    const init = await post({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 't', version: '1' } } });
    assert.equal(init.headers.get('content-type'), 'text/event-stream');
    const text = await init.text();
    assert.doesNotMatch(text, /^id:/m);
    assert.doesNotMatch(text, /^:/m, 'no framing records reach the SDK');
    assert.match(text, /^event: message\ndata: \{"jsonrpc":"2.0","id":1,"result"/);
  } finally {
    await server.close();
  }
});

test('a JSON-RPC response on the standalone GET stream ends that stream', async () => {
  const server = await startServer({ getResponse: '{"jsonrpc":"2.0","id":9,"result":{}}' });
  try {
    const { logger, lines } = quietLogger();
    const fetch = framingFetch({ logger });
    const response = await fetch(server.url, { method: 'GET', headers: { accept: 'text/event-stream' } });
    const text = await response.text();
    assert.match(text, /notifications\/message/);
    assert.doesNotMatch(text, /"id":9/);
    assert.doesNotMatch(text, /^id:/m);
    assert.match(lines.warn.join('\n'), /GET stream cannot be verified/);
  } finally {
    await server.close();
  }
});

test('every attempt is counted under the Rust crate metric names', async () => {
  /** @type {Array<[string, number, Record<string, string>]>} */
  const points = [];
  const meter = {
    createCounter: (/** @type {string} */ name) => ({ add: (/** @type {number} */ v, /** @type {any} */ a) => points.push([name, v, a]) }),
    createHistogram: (/** @type {string} */ name) => ({ record: (/** @type {number} */ v, /** @type {any} */ a) => points.push([name, v, a]) }),
  };
  const server = await startServer({ cut: () => 400 });
  try {
    const { client } = await connect(/** @type {typeof SDKS[number]} */ (SDKS[0]), server.url, { meter });
    await assert.rejects(callTool(client, { name: 'generate_text', arguments: ARGS }));
    const names = new Set(points.map(([name]) => name));
    for (const name of [
      'mcp_framing.client.responses',
      'mcp_framing.client.truncations',
      'mcp_framing.client.incomplete_bytes',
      'mcp_framing.client.open_message_bytes',
      'mcp_framing.client.retry_decisions',
      'mcp.client.operation.duration',
    ]) {
      assert.ok(names.has(name), `${name} in ${[...names]}`);
    }
    const abandoned = points.find(([name, , a]) => name === 'mcp_framing.client.responses' && a.outcome === 'abandoned');
    assert.deepEqual(abandoned?.[2], { outcome: 'abandoned', regime: 'B', 'mcp.method.name': 'tools/call' });
    const decision = points.find(([name, , a]) => name === 'mcp_framing.client.retry_decisions' && a.decision === 'surface_to_caller');
    assert.deepEqual(decision?.[2], { decision: 'surface_to_caller', reason: 'not_deduplicated' });
    await client.close();
  } finally {
    await server.close();
  }
});

test('with @opentelemetry/api installed, attempts are counted through its global meter provider', async () => {
  const { metrics } = await import('@opentelemetry/api');
  /** @type {Array<[string, number, Record<string, string>]>} */
  const points = [];
  const meter = {
    createCounter: (/** @type {string} */ name) => ({ add: (/** @type {number} */ v, /** @type {any} */ a) => points.push([name, v, a]) }),
    createHistogram: (/** @type {string} */ name) => ({ record: (/** @type {number} */ v, /** @type {any} */ a) => points.push([name, v, a]) }),
  };
  metrics.setGlobalMeterProvider(/** @type {any} */ ({ getMeter: () => meter }));
  const server = await startServer({ cut: () => 350 });
  try {
    const { client } = await connect(/** @type {typeof SDKS[number]} */ (SDKS[1]), server.url);
    await assert.rejects(callTool(client, { name: 'generate_text', arguments: ARGS }));
    const truncation = points.find(([name]) => name === 'mcp_framing.client.truncations');
    assert.deepEqual(truncation?.slice(1), [1, { at: 'in_payload', 'mcp.method.name': 'tools/call' }]);
    const duration = points.find(([name, , a]) => name === 'mcp.client.operation.duration' && a['mcp.method.name'] === 'tools/call');
    assert.equal(duration?.[2]['error.type'], 'abandoned');
    assert.equal(duration?.[2]['gen_ai.tool.name'], 'generate_text');
    await client.close();
  } finally {
    metrics.disable();
    await server.close();
  }
});

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
import { CONTRACT, expectedText, framedBody, startServer } from './support/server.mjs';

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
        await assert.rejects(
          client.connect(/** @type {any} */ (new sdk.Transport(new URL(server.url), { fetch })), TIMEOUT),
          /Regime C\); put a framing layer in front of the server \(mcp-frame proxy/,
        );
        assert.equal(server.log.calls.length, 0);
      } finally {
        await server.close();
      }
    });

    test('accepting ambiguity still verifies a server that frames without declaring a contract', async () => {
      const server = await startServer({ contract: null });
      try {
        const { client, fetch } = await connect(sdk, server.url, { acceptAmbiguity: true });
        const result = /** @type {any} */ (await callTool(client, { name: 'generate_text', arguments: ARGS }));
        assert.equal(result.content[0].text, expectedText(ARGS.seed, ARGS.lines));
        assert.equal(fetch.stats.unverified, 0);
        assert.equal(fetch.negotiated, null);
        const call = server.log.requests.find((r) => r.message.method === 'tools/call');
        assert.equal(call.headers['mcp-framing'], '1', 'opted in, so that a framed response proves itself (SPEC.md §11.3)');
        await client.close();
      } finally {
        await server.close();
      }
    });

    test('accepting ambiguity never delivers an unframed response: it is an ambiguous outcome', async () => {
      const server = await startServer({ contract: null, frame: false });
      try {
        const fetch = framingFetch({ logger: quietLogger().logger, acceptAmbiguity: true });
        const client = new sdk.Client({ name: 'test', version: '1.0.0' });
        client.onerror = () => {};
        // the initialize itself: nothing unframed reaches the SDK
        await assert.rejects(client.connect(/** @type {any} */ (new sdk.Transport(new URL(server.url), { fetch })), TIMEOUT), (/** @type {any} */ error) => {
          const outcome = outcomeOf(error);
          assert.equal(outcome?.classification, 'ambiguous', error.message);
          assert.equal(outcome.kind, 'NotFramed');
          assert.equal(outcome.regime, 'C');
          assert.equal(outcome.retryDecision, 'surface_to_caller');
          assert.equal(outcome.retryReason, 'ambiguous');
          assert.match(error.message, /mcp-framing: response completion ambiguous/);
          return true;
        });
        assert.equal(fetch.stats.unverified, 0);
        assert.equal(fetch.stats.verified, 0);
      } finally {
        await server.close();
      }
    });

    test('an unframed handshake response fails at once as NotFramed and never reaches the SDK', async () => {
      const server = await startServer({ contract: CONTRACT, frame: false }); // ignores the opt-in
      try {
        const fetch = framingFetch({ logger: quietLogger().logger });
        const client = new sdk.Client({ name: 'test', version: '1.0.0' });
        client.onerror = () => {};
        // as the Rust engine: the initialize response itself is the contract violation (SPEC.md §11.3, §16)
        await assert.rejects(client.connect(/** @type {any} */ (new sdk.Transport(new URL(server.url), { fetch })), TIMEOUT), (/** @type {any} */ error) => {
          const outcome = outcomeOf(error);
          assert.deepEqual([outcome?.classification, outcome?.kind, outcome?.retryDecision], ['contract_violation', 'NotFramed', 'do_not_retry'], error.message);
          // the message says what to do, in the Rust client's words
          assert.match(error.message, /mcp-framing: response framing contract violated: response is not framed \(content-type "/);
          assert.ok(
            error.message.includes(
              'although framing was requested: the server does not frame its responses, or a proxy or gateway on the way removed the framing: ' +
                "put a framing layer in front of the server (mcp-frame proxy, or FramingLayer in a Rust server), or connect without mcp-framing (the SDK's stock transport)",
            ),
            error.message,
          );
          return true;
        });
        assert.equal(fetch.stats.unverified, 0);
        assert.equal(fetch.stats.verified, 0);
        assert.equal(server.log.calls.length, 0);
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

    test("a proxy's final 502 or 504 is reported through onAttempt as an abandoned attempt and to the SDK as an HTTP error", async () => {
      const dedupe = { ...CONTRACT, deduplication: { methods: ['tools/call'], windowMs: 60000, scope: 'principal' } };
      for (const [contract, status, attempts] of /** @type {const} */ ([
        [CONTRACT, 502, 1], // not deduplicated: a tools/call is not repeated
        [dedupe, 504, 2], // keyed and deduplicated: retried up to the budget
      ])) {
        const server = await startServer({ contract });
        try {
          /** @type {any[]} */
          const reports = [];
          // A sidecar in front of the server whose upstream failed: its error status, with a body.
          const proxy = /** @type {typeof fetch} */ (
            async (url, init) => {
              if (String(init?.body ?? '').includes('"tools/call"')) {
                const body = '{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"upstream_protocol_error\u001b"}}';
                return new Response(body, { status, headers: { 'content-type': 'application/json' } });
              }
              return fetch(url, init);
            }
          );
          const onAttempt = (/** @type {any} */ r) => r.method === 'tools/call' && reports.push(r);
          const { client } = await connect(sdk, server.url, { fetch: proxy, onAttempt, retry: { maxAttempts: 2, initialBackoffMs: 1 } });
          await assert.rejects(callTool(client, { name: 'generate_text', arguments: ARGS }), (/** @type {any} */ error) => {
            const outcome = outcomeOf(error);
            assert.equal(outcome?.classification, 'http_error', error.message);
            assert.equal(outcome.kind, 'HttpStatus');
            assert.equal(outcome.httpStatus, status);
            assert.equal(outcome.attempts, attempts);
            assert.equal(outcome.retryDecision, 'surface_to_caller');
            assert.match(outcome.detail, new RegExp(`HTTP ${status}: .*upstream_protocol_error\\\\u\\{1b\\}`), 'the body, escaped');
            return true;
          });
          assert.equal(reports.length, attempts, `every attempt reported: ${JSON.stringify(reports)}`);
          reports.forEach((report, i) => {
            assert.equal(report.attempt, i + 1);
            assert.equal(report.outcome.classification, 'abandoned');
            assert.equal(report.outcome.kind, 'HttpStatus');
            assert.equal(report.outcome.httpStatus, status);
            assert.equal(report.decision.decision, i + 1 < attempts ? 'retry' : 'surface_to_caller');
          });
          assert.equal(server.log.calls.length, 0, 'nothing reached the server');
          await client.close();
        } finally {
          await server.close();
        }
      }
    });

    test('a client error status is handed to the SDK as is, its attempt reported through onAttempt', async () => {
      const server = await startServer();
      try {
        /** @type {any[]} */
        const reports = [];
        const gone = /** @type {typeof fetch} */ (
          async (url, init) => (String(init?.body ?? '').includes('"tools/call"') ? new Response('no such session', { status: 404 }) : fetch(url, init))
        );
        const onAttempt = (/** @type {any} */ r) => r.method === 'tools/call' && reports.push(r);
        const { client } = await connect(sdk, server.url, { fetch: gone, onAttempt });
        await assert.rejects(callTool(client, { name: 'generate_text', arguments: ARGS }), (/** @type {any} */ error) => {
          assert.equal(outcomeOf(error), undefined, 'the SDK saw the status itself');
          assert.match(String(error.message), /no such session/, "the SDK read the server's own body");
          return true;
        });
        assert.equal(reports.length, 1);
        assert.equal(reports[0].outcome.kind, 'HttpStatus');
        assert.equal(reports[0].outcome.httpStatus, 404);
        assert.equal(reports[0].decision.decision, 'do_not_retry');
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

    test('a message after the final response fails the call as MessageAfterFinalResponse', async () => {
      const server = await startServer({ afterFinal: ['{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"late"}}'] });
      try {
        const { client, fetch } = await connect(sdk, server.url);
        await assert.rejects(callTool(client, { name: 'generate_text', arguments: ARGS }), (/** @type {any} */ error) => {
          const outcome = outcomeOf(error);
          assert.deepEqual([outcome?.classification, outcome.kind, outcome.regime], ['abandoned', 'MessageAfterFinalResponse', 'B'], error.message);
          assert.deepEqual([outcome.retryDecision, outcome.retryReason], ['surface_to_caller', 'not_deduplicated']);
          return true;
        });
        assert.equal(fetch.stats.unverified, 0);
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

/**
 * Initializes through `fetch`, then posts a tools/call with id 7: the data of every event of its
 * response, as the SDK's SSE parser reads them (data lines joined with LF).
 * @param {any} fetch @param {string} url
 */
async function callEvents(fetch, url) {
  const post = (/** @type {any} */ message) =>
    fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' }, body: JSON.stringify(message) });
  await (await post({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 't', version: '1' } } })).text();
  /** @type {string} */
  const text = await (await post({ jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name: 'generate_text', arguments: ARGS } })).text();
  return text
    .split('\n\n')
    .filter((event) => event !== '')
    .map((event) =>
      event
        .split('\n')
        .filter((line) => line.startsWith('data: '))
        .map((line) => line.slice(6))
        .join('\n'),
    );
}

const DEDUPLICATING = { versions: [1], sentinelRequired: true, frameChecksum: 'crc32', messageDigest: 'sha256', transports: ['compat'], deduplication: { methods: ['tools/call'], windowMs: 60000, scope: 'principal' } };

test('a retried final response comes back byte for byte but for its id', async () => {
  // What a parse and a stringify would change: member order, number spellings, unicode escapes, whitespace.
  const raw = '{"result": {"z":1.0,"a":1e2,"n":-0,"s":"caf\\u00e9 \\ud83d\\ude00 \\/"}, "jsonrpc":"2.0",  "id" : {id} }';
  const server = await startServer({ contract: DEDUPLICATING, callResponse: (id) => raw.replace('{id}', JSON.stringify(id)), cut: (_key, attempt) => (attempt === 1 ? 120 : null) });
  try {
    const fetch = framingFetch({ logger: quietLogger().logger, retry: { initialBackoffMs: 1 } });
    const events = await callEvents(fetch, server.url);
    assert.deepEqual(server.log.calls.map((/** @type {any} */ c) => c.id), [7, '7~attempt-2']);
    assert.equal(events.at(-1), raw.replace('{id}', '7'));
  } finally {
    await server.close();
  }
});

test('a final response to another request id is the stream\'s final response, delivered as the Rust and Python clients deliver it', async () => {
  // SPEC.md §7.1: the first JSON-RPC response is the final one whatever its id (HEAD echoed the request key)
  const raw = '{"jsonrpc":"2.0","id":"someone-else","result":{}}';
  const server = await startServer({ contract: CONTRACT, callResponse: () => raw });
  try {
    const fetch = framingFetch({ logger: quietLogger().logger });
    const events = await callEvents(fetch, server.url);
    assert.equal(events.at(-1), raw);
    assert.equal(fetch.stats.errors, 0);
  } finally {
    await server.close();
  }
});

test('a retried final response with two id members fails as DuplicateId', async () => {
  const server = await startServer({
    contract: DEDUPLICATING,
    callResponse: (id) => `{"jsonrpc":"2.0","id":"elsewhere","result":{},"id":${JSON.stringify(id)}}`,
    cut: (_key, attempt) => (attempt === 1 ? 120 : null),
  });
  try {
    const fetch = framingFetch({ logger: quietLogger().logger, retry: { initialBackoffMs: 1 } });
    const events = await callEvents(fetch, server.url);
    const error = JSON.parse(events.at(-1) ?? '');
    assert.equal(error.id, 7);
    const outcome = error.error.data[OUTCOME_DATA_KEY];
    assert.deepEqual([outcome.classification, outcome.kind, outcome.attempts, outcome.retryDecision], ['invalid_message', 'DuplicateId', 2, 'do_not_retry']);
    assert.equal(outcome.regime, undefined, 'not a stream outcome (SPEC.md §11.7)');
  } finally {
    await server.close();
  }
});

test('keyed retries are on by default where the server deduplicates, and off with retry: false', async () => {
  const server = await startServer({ contract: DEDUPLICATING, cut: (_key, attempt) => (attempt === 1 ? 120 : null) });
  try {
    const fetch = framingFetch({ logger: quietLogger().logger }); // no retry option
    const events = await callEvents(fetch, server.url);
    assert.equal(JSON.parse(events.at(-1) ?? '').id, 7);
    assert.equal(JSON.parse(events.at(-1) ?? '').error, undefined);
    assert.equal(fetch.stats.retries, 1);
    const off = framingFetch({ logger: quietLogger().logger, retry: false });
    const error = JSON.parse((await callEvents(off, server.url)).at(-1) ?? '');
    const outcome = error.error.data[OUTCOME_DATA_KEY];
    assert.deepEqual([outcome.attempts, outcome.retryDecision, outcome.retryReason], [1, 'surface_to_caller', 'keyed']);
  } finally {
    await server.close();
  }
});

test('a response whose field lines disagree is not framed (SPEC.md §18.8)', async () => {
  const cases = [
    [['content-type', 'text/event-stream'], ['content-type', 'application/vnd.mcp-framing'], ['mcp-framing', '1']],
    [['content-type', 'text/event-stream'], ['mcp-framing', '1; mapping=compat'], ['mcp-framing', '1']],
    [['content-type', 'text/event-stream'], ['mcp-framing', '1'], ['mcp-framing', '1; mapping=compat']],
  ];
  for (const lines of cases) {
    /** A server that frames in the compatible mapping, with `lines` as the tools/list response's headers. */
    const base = /** @type {typeof fetch} */ (
      async (_url, init) => {
        const message = JSON.parse(String(init?.body));
        const key = new Headers(init?.headers).get('mcp-framing-request-key');
        if (message.method === 'initialize') {
          const result = { protocolVersion: '2025-06-18', capabilities: { experimental: { 'io.github.mcp-framing/framing': CONTRACT } }, serverInfo: { name: 't', version: '1' } };
          const body = framedBody([JSON.stringify({ jsonrpc: '2.0', id: message.id, result })], 'compat', key);
          return new Response(body, { headers: { 'content-type': 'text/event-stream', 'mcp-framing': '1; mapping=compat' } });
        }
        const headers = new Headers();
        for (const [name, value] of lines) {
          headers.append(/** @type {string} */ (name), /** @type {string} */ (value)); // fetch joins them with ", "
        }
        return new Response(framedBody([JSON.stringify({ jsonrpc: '2.0', id: message.id, result: {} })], 'compat', key), { headers });
      }
    );
    const fetch = framingFetch({ fetch: base, logger: quietLogger().logger });
    const post = (/** @type {any} */ message) => fetch('http://mcp.test/mcp', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(message) });
    await (await post({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 't', version: '1' } } })).text();
    assert.equal(fetch.negotiated?.version, 1);
    const text = await (await post({ jsonrpc: '2.0', id: 2, method: 'tools/list' })).text();
    const data = JSON.parse(text.slice(text.lastIndexOf('data: ') + 6)).error?.data?.[OUTCOME_DATA_KEY];
    assert.deepEqual([data?.classification, data?.kind], ['contract_violation', 'NotFramed'], JSON.stringify(lines));
  }
});

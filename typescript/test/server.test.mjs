// @ts-check
// framingHandler around the official SDKs' servers (both lines, on node:http and in Express
// through the SDK's Node adapter): the stock clients of both lines get every result as the
// unwrapped server gives it, the framing clients verify every response in each mapping, the
// contract is in every discovery result, and a body that fails or ends early ends with ABORT.

import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';

import { Client as ClientV1 } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as TransportV1 } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { Client as ClientV2, StreamableHTTPClientTransport as TransportV2 } from '@modelcontextprotocol/client';

import { EXTENSION_KEY, decodeBody, framingFetch, outcomeOf, randomRequestKey } from '../dist/index.js';
import { framingHandler } from '../dist/server.js';
import { serve, text, toolLog, v1Fetch, v2Handler } from './support/sdk-servers.mjs';

const quiet = { debug() {}, info() {}, warn() {} };

const SERVERS = [
  { name: 'server 2.4.0 createMcpHandler on node:http', make: () => ({ fetch: v2Handler(toolLog()).fetch, express: false }) },
  { name: 'server 2.4.0 createMcpHandler in Express', make: () => ({ fetch: v2Handler(toolLog()).fetch, express: true }) },
  { name: 'sdk 1.32.2 WebStandardStreamableHTTPServerTransport (SSE)', make: () => ({ fetch: v1Fetch(toolLog()), express: false }) },
  { name: 'sdk 1.32.2 WebStandardStreamableHTTPServerTransport (JSON)', make: () => ({ fetch: v1Fetch(toolLog(), { json: true }), express: false }) },
];

const CLIENTS = [
  { name: 'stock sdk 1.32.2', Client: ClientV1, Transport: TransportV1, mapping: null },
  { name: 'stock client 2.4.0', Client: ClientV2, Transport: TransportV2, mapping: null },
  ...['compat', 'sse', 'binary'].flatMap((mapping) => [
    { name: `framing sdk 1.32.2 (${mapping})`, Client: ClientV1, Transport: TransportV1, mapping },
    { name: `framing client 2.4.0 (${mapping})`, Client: ClientV2, Transport: TransportV2, mapping },
  ]),
];

/** The calls every pairing makes, and what their results hold. */
const CALLS = [
  { name: 'echo', arguments: { text: 'héllo\nworld' }, expect: 'héllo\nworld' },
  { name: 'big', arguments: { bytes: 64 * 1024, seed: 'a' }, expect: text(64 * 1024, 'a') },
  { name: 'big', arguments: { bytes: 300_000, seed: 'b' }, expect: text(300_000, 'b') },
  { name: 'progress', arguments: { steps: 3 }, expect: '3 steps' },
];

/** @param {any} client @param {typeof CALLS[number]} call */
async function callText(client, call) {
  const result = await client.callTool({ name: call.name, arguments: call.arguments }, undefined, { timeout: 20_000 });
  return result.content[0].text;
}

for (const frameAll of [false, true]) {
  describe(`framingHandler${frameAll ? ' with frameAllResponses: "compat"' : ''}`, () => {
    for (const server of SERVERS) {
      test(`${server.name}: every client gets every result, and the framing clients verify every response`, async () => {
        const { fetch, express } = server.make();
        const wrapped = framingHandler(fetch, { frameAllResponses: frameAll ? 'compat' : false, logger: quiet });
        const served = await serve(wrapped, { express });
        try {
          for (const client of CLIENTS) {
            const framing = client.mapping === null ? null : framingFetch({ mapping: /** @type {any} */ (client.mapping), logger: quiet });
            const sdk = new client.Client({ name: 'test', version: '1.0.0' });
            await sdk.connect(new client.Transport(served.url, framing === null ? {} : { fetch: framing }));
            for (const call of CALLS) {
              assert.equal(await callText(sdk, call), call.expect, `${client.name}: ${call.name}`);
            }
            await sdk.close();
            if (framing !== null) {
              const { stats } = framing;
              assert.deepEqual(Object.keys(stats.outcomes), ['clean'], `${client.name}: ${JSON.stringify(stats)}`);
              assert.equal(stats.errors, 0, client.name);
              assert.ok(stats.verified >= CALLS.length + 1, `${client.name}: ${JSON.stringify(stats)}`);
              assert.equal(framing.negotiated?.version, 1, client.name);
            }
          }
        } finally {
          await served.close();
        }
      });
    }
  });
}

/**
 * A POST to `url` with `body`, opted in for `mapping` when given.
 * @param {URL} url @param {unknown} body @param {string | null} mapping @param {Record<string, string>} extra
 */
function post(url, body, mapping = null, extra = {}) {
  return fetch(url, { method: 'POST', headers: postHeaders(mapping, extra), body: JSON.stringify(body) });
}

/**
 * The headers of a POST, opted in for `mapping` when given.
 * @param {string | null} mapping @param {Record<string, string>} extra
 */
function postHeaders(mapping = null, extra = {}) {
  /** @type {Record<string, string>} */
  const headers = {
    'content-type': 'application/json',
    accept: mapping === 'binary' ? 'application/vnd.mcp-framing, application/json, text/event-stream' : 'application/json, text/event-stream',
    'mcp-protocol-version': '2025-06-18',
    ...extra,
  };
  if (mapping !== null) {
    headers['mcp-framing'] = '1';
    if (mapping === 'compat') {
      headers['mcp-framing-mapping'] = 'compat';
    }
  }
  return headers;
}

const INITIALIZE = {
  jsonrpc: '2.0',
  id: 1,
  method: 'initialize',
  params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 't', version: '1' } },
};

/**
 * The JSON-RPC response in a body: JSON, or the data of its `message` event.
 * @param {Response} response @returns {Promise<any>}
 */
async function jsonRpc(response) {
  const body = await response.text();
  if ((response.headers.get('content-type') ?? '').startsWith('application/json')) {
    return JSON.parse(body);
  }
  const data = body
    .split(/\r\n|\r|\n/)
    .filter((/** @type {string} */ line) => line.startsWith('data:'))
    .map((/** @type {string} */ line) => line.slice(line.startsWith('data: ') ? 6 : 5));
  return JSON.parse(data.at(-1) ?? 'null');
}

describe('the contract', () => {
  test('every initialize result carries the contract under experimental, the rest as the server wrote it', async () => {
    /** @type {[string, (request: Request) => Promise<Response>][]} */
    const handlers = [
      ['sdk 1.32.2 (SSE)', v1Fetch()],
      ['sdk 1.32.2 (JSON)', v1Fetch(toolLog(), { json: true })],
      ['server 2.4.0', v2Handler().fetch],
    ];
    for (const [name, handler] of handlers) {
      const plain = await serve(handler);
      const framed = await serve(framingHandler(handler, { logger: quiet }));
      try {
        const bare = await jsonRpc(await post(plain.url, INITIALIZE));
        for (const mapping of [null, 'compat']) {
          const response = await post(framed.url, INITIALIZE, mapping, mapping === null ? {} : { 'mcp-framing-request-key': randomRequestKey() });
          const declared =
            mapping === null
              ? await jsonRpc(response)
              : JSON.parse(new TextDecoder().decode(decodeBody(new Uint8Array(await response.arrayBuffer()), 'compat').messages.at(-1)));
          const contract = declared.result.capabilities.experimental[EXTENSION_KEY];
          assert.deepEqual(
            contract,
            {
              versions: [1],
              sentinelRequired: true,
              frameChecksum: 'crc32',
              messageDigest: 'sha256',
              maxFramePayload: 16384,
              maxMessageSize: 16777216,
              transports: ['binary', 'sse', 'compat'],
            },
            name,
          );
          delete declared.result.capabilities.experimental[EXTENSION_KEY];
          if (Object.keys(declared.result.capabilities.experimental).length === 0 && bare.result.capabilities.experimental === undefined) {
            delete declared.result.capabilities.experimental;
          }
          assert.deepEqual(declared, bare, name);
        }
      } finally {
        await plain.close();
        await framed.close();
      }
    }
  });

  test('an initialize whose Mcp-Method header names another method, and that carries an Mcp-Session-Id, still gets the contract: the wrapper reads the method from the body', async () => {
    // Both SDK lines serve such a request (neither checks the header against a legacy
    // initialize, nor the session header of an initialize), so a wrapper that trusted either
    // header would pass the result undeclared.
    for (const [name, handler] of /** @type {const} */ ([
      ['sdk 1.32.2', v1Fetch()],
      ['server 2.4.0', v2Handler().fetch],
    ])) {
      const framed = await serve(framingHandler(handler, { logger: quiet }));
      try {
        const response = await post(framed.url, INITIALIZE, null, { 'mcp-method': 'tools/call', 'mcp-name': 'big', 'mcp-session-id': crypto.randomUUID() });
        const declared = await jsonRpc(response);
        assert.equal(declared.result.protocolVersion, '2025-06-18', `${name}: the handler answered the initialize`);
        assert.deepEqual(declared.result.capabilities.experimental[EXTENSION_KEY]?.versions, [1], name);
      } finally {
        await framed.close();
      }
    }
  });

  test('an initialize whose method name is spelled with JSON escapes still gets the contract, and a call that only mentions the name does not', async () => {
    // The wrapper skips parsing a request body that holds neither method name and no backslash:
    // an escape must still lead to the parse, and the name inside an argument to no declaration.
    const handler = v2Handler();
    const framed = await serve(framingHandler(handler.fetch, { logger: quiet }));
    try {
      const escaped = JSON.stringify(INITIALIZE).replace('"method":"initialize"', '"method":"\\u0069nit\\u0069alize"');
      assert.notEqual(escaped, JSON.stringify(INITIALIZE));
      const response = await fetch(framed.url, { method: 'POST', headers: postHeaders(), body: escaped });
      const declared = await jsonRpc(response);
      assert.equal(declared.result.protocolVersion, '2025-06-18', 'the handler answered the initialize');
      assert.deepEqual(declared.result.capabilities.experimental[EXTENSION_KEY]?.versions, [1]);
      const call = { jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'echo', arguments: { text: 'initialize server/discover' } } };
      const echoed = await jsonRpc(await post(framed.url, call));
      assert.deepEqual(echoed.result.content, [{ type: 'text', text: 'initialize server/discover' }]);
      assert.equal(JSON.stringify(echoed).includes(EXTENSION_KEY), false);
    } finally {
      await framed.close();
    }
  });

  test('a server/discover result carries it under extensions, with deduplication and alwaysFramed as configured', async () => {
    const handler = v2Handler();
    const framed = await serve(framingHandler(handler.fetch, { logger: quiet, frameAllResponses: 'compat', frameSize: 4096 }));
    try {
      const response = await post(
        framed.url,
        {
          jsonrpc: '2.0',
          id: 7,
          method: 'server/discover',
          params: {
            _meta: { 'io.modelcontextprotocol/protocolVersion': '2026-07-28', 'io.modelcontextprotocol/clientCapabilities': {} },
          },
        },
        null,
        { 'mcp-protocol-version': '2026-07-28', 'mcp-method': 'server/discover' },
      );
      const result = (await jsonRpc(response)).result;
      assert.equal(result.capabilities.extensions[EXTENSION_KEY].alwaysFramed, 'compat');
      assert.equal(result.capabilities.extensions[EXTENSION_KEY].maxFramePayload, 4096);
    } finally {
      await framed.close();
    }
  });

  test('a contract the handler declared with the same values stays byte for byte, another one is replaced with a warning', async () => {
    const contract = { transports: ['binary', 'sse', 'compat'], versions: [1], sentinelRequired: true, frameChecksum: 'crc32', messageDigest: 'sha256' };
    const own = (/** @type {unknown} */ declared) => async () =>
      Response.json({ jsonrpc: '2.0', id: 1, result: { capabilities: { experimental: { [EXTENSION_KEY]: declared } }, a: 'é' } });
    /** @type {string[]} */
    const warnings = [];
    const logger = { ...quiet, warn: (/** @type {string} */ m) => warnings.push(m) };
    const same = await framingHandler(own({ ...contract, maxFramePayload: 16384, extra: true }), { logger, maxMessageSize: 16777216 })(
      new Request('http://x/mcp', { method: 'POST', body: JSON.stringify(INITIALIZE) }),
    );
    const sameText = await same.text();
    assert.equal(sameText, JSON.stringify({ jsonrpc: '2.0', id: 1, result: { capabilities: { experimental: { [EXTENSION_KEY]: { ...contract, maxFramePayload: 16384, extra: true } } }, a: 'é' } }));
    assert.deepEqual(warnings, []);
    const other = await framingHandler(own({ ...contract, maxFramePayload: 2048 }), { logger })(
      new Request('http://x/mcp', { method: 'POST', body: JSON.stringify(INITIALIZE) }),
    );
    assert.equal(/** @type {any} */ (await other.json()).result.capabilities.experimental[EXTENSION_KEY].maxFramePayload, 16384);
    assert.equal(warnings.length, 1);
    assert.match(warnings[0] ?? '', /another framing contract/);
  });
});

const encoder = new TextEncoder();
const NOTE = '{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"working"}}';
const RESULT = '{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"done"}]}}';
const CALL = { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'x', arguments: {} } };

/**
 * A handler whose SSE body sends `events`, then fails with `failure` or ends.
 * @param {string[]} events @param {Error | null} failure
 */
function scripted(events, failure) {
  return async () => {
    let sent = false;
    const body = new ReadableStream({
      pull(controller) {
        if (!sent) {
          sent = true;
          controller.enqueue(encoder.encode(events.join('')));
          return;
        }
        if (failure === null) {
          controller.close();
        } else {
          controller.error(failure);
        }
      },
    });
    return new Response(body, { headers: { 'content-type': 'text/event-stream' } });
  };
}

/**
 * The verdict on a wrapped response to an opted-in tools/call in `mapping`.
 * @param {(request: Request) => Promise<Response>} handler @param {'binary' | 'sse' | 'compat'} mapping
 * @param {Record<string, string>} headers
 */
async function verdictOf(handler, mapping, headers = {}) {
  const key = randomRequestKey();
  const request = new Request('http://127.0.0.1/mcp', {
    method: 'POST',
    headers: {
      accept: mapping === 'binary' ? 'application/vnd.mcp-framing' : 'text/event-stream, application/json',
      'mcp-framing': '1',
      'mcp-framing-request-key': key,
      ...(mapping === 'compat' ? { 'mcp-framing-mapping': 'compat' } : {}),
      ...headers,
    },
    body: JSON.stringify(CALL),
  });
  const response = await framingHandler(handler, { logger: quiet })(request);
  const body = new Uint8Array(await response.arrayBuffer());
  return decodeBody(body, mapping, { requestKey: key });
}

describe('a body that does not end with its final response', () => {
  for (const mapping of /** @type {const} */ (['binary', 'sse', 'compat'])) {
    test(`a handler that throws mid-stream gives ABORT, never a clean end (${mapping})`, async () => {
      const verdict = await verdictOf(scripted([`data: ${NOTE}\n\n`], new Error('the tool crashed')), mapping);
      assert.equal(verdict.verdict, 'aborted');
      assert.equal(verdict.abort?.code, 4); // upstream failed, as the Rust layer says
      assert.match(verdict.abort?.reason ?? '', /upstream body failed: the tool crashed/);
      assert.deepEqual(verdict.messages.map((m) => new TextDecoder().decode(m)), [NOTE]);
    });

    test(`an ABORT reason shows its control and bidirectional characters escaped, as SPEC.md §3.1 says (${mapping})`, async () => {
      // The handler's failure text goes into the ABORT reason as it is; a client shows it escaped.
      const verdict = await verdictOf(scripted([`data: ${NOTE}\n\n`], new Error('tool \u202eexe.txt\u001b[2J\tdone\n\u0000\u061c\u2062')), mapping);
      assert.equal(verdict.abort?.reason, 'upstream body failed: tool \u202eexe.txt\u001b[2J\tdone\n\u0000\u061c\u2062', 'the reason itself is carried unchanged');
      // As the Rust crate and the Python package show it: NUL as \0, the Arabic letter mark and
      // the invisible operators escaped too.
      const escaped = 'upstream body failed: tool \\u{202e}exe.txt\\u{1b}[2J\\tdone\\n\\0\\u{61c}\\u{2062}';
      assert.equal(verdict.detail, `stream aborted by the peer: code 4: ${escaped}`);
      assert.equal(outcomeOf(verdict, mapping).detail, `aborted by the server: code 4 (upstream failed): ${escaped}`);
    });

    test(`a body that ends before its final response gives ABORT (${mapping})`, async () => {
      const verdict = await verdictOf(scripted([`: keep-alive\n\ndata: ${NOTE}\r\n\r\n`], null), mapping);
      assert.equal(verdict.verdict, 'aborted');
      assert.equal(verdict.abort?.code, 4); // upstream failed, as the Rust layer says
      assert.match(verdict.abort?.reason ?? '', /ended before its final response/);
      assert.equal(verdict.messages.length, 1);
    });

    test(`a message over the request's limit gives ABORT code 5 (${mapping})`, async () => {
      const big = JSON.stringify({ jsonrpc: '2.0', id: 1, result: { text: 'x'.repeat(5000) } });
      const verdict = await verdictOf(scripted([`data: ${NOTE}\n\n`, `data: ${big}\n\n`], null), mapping, {
        'mcp-framing-limits': 'frame=2048, message=4096',
      });
      assert.equal(verdict.verdict, 'aborted');
      assert.equal(verdict.abort?.code, 5);
      assert.equal(verdict.messages.length, 1);
    });

    test(`a JSON body that fails gives ABORT (${mapping})`, async () => {
      const handler = async () =>
        new Response(
          new ReadableStream({
            start(controller) {
              controller.enqueue(encoder.encode('{"jsonrpc":"2.0","id":1,"res'));
            },
            pull(controller) {
              controller.error(new Error('reset'));
            },
          }),
          { headers: { 'content-type': 'application/json' } },
        );
      const verdict = await verdictOf(handler, mapping);
      assert.equal(verdict.verdict, 'aborted');
      assert.equal(verdict.abort?.code, 4); // upstream failed, as the Rust layer says
      assert.equal(verdict.messages.length, 0);
    });

    test(`the final response ends the stream with STREAM_END, keep-alives become KEEPALIVE frames (${mapping})`, async () => {
      const verdict = await verdictOf(scripted([`:\n\nid: 1\ndata:\n\ndata: ${NOTE}\r\r: ping\r\n\r\nevent: message\ndata: ${RESULT}\n\n`], null), mapping);
      assert.equal(verdict.verdict, 'clean');
      assert.equal(verdict.sentinelSeen, true);
      assert.deepEqual(verdict.messages.map((m) => new TextDecoder().decode(m)), [NOTE, RESULT]);
    });

    test(`an event whose data is not UTF-8 is framed as an SSE client reads it, U+FFFD for the bad bytes (${mapping})`, async () => {
      const [head, tail] = ['data: {"jsonrpc":"2.0","id":1,"result":{"text":"a', 'b"}}\n\n'];
      const raw = Buffer.concat([encoder.encode(`data: ${NOTE}\n\n${head}`), Buffer.from([0xff, 0xc3]), encoder.encode(tail)]);
      const handler = async () => new Response(raw, { headers: { 'content-type': 'text/event-stream' } });
      const verdict = await verdictOf(handler, mapping);
      assert.equal(verdict.verdict, 'clean', verdict.detail);
      const dispatched = `${head.slice('data: '.length)}\ufffd\ufffd${tail.trimEnd()}`;
      assert.deepEqual(verdict.messages.map((m) => new TextDecoder('utf-8', { fatal: true }).decode(m)), [NOTE, dispatched]);
    });

    test(`a response whose headers cannot change (a fetch response, which a proxying handler returns) is framed (${mapping})`, async () => {
      const upstream = await serve(scripted([`data: ${NOTE}\n\ndata: ${RESULT}\n\n`], null));
      try {
        const proxy = async () => {
          const response = await fetch(upstream.url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(CALL) });
          assert.throws(() => response.headers.set('x-probe', '1'), TypeError, 'the headers of a fetch response are immutable');
          return response;
        };
        const verdict = await verdictOf(proxy, mapping);
        assert.equal(verdict.verdict, 'clean');
        assert.deepEqual(verdict.messages.map((m) => new TextDecoder().decode(m)), [NOTE, RESULT]);
      } finally {
        await upstream.close();
      }
    });
  }

  test('the compatible mapping passes the inner bytes through: line endings, comments inside events, priming events', async () => {
    const inner = `\uFEFFid: prime\r\ndata:\r\n\r\n: outside\nevent: message\r: inside\rdata: ${NOTE}\r\rdata: ${RESULT}\r\n\r\n`;
    const response = await framingHandler(scripted([inner], null), { logger: quiet })(
      new Request('http://x/mcp', {
        method: 'POST',
        headers: { accept: 'text/event-stream', 'mcp-framing': '1', 'mcp-framing-mapping': 'compat' },
        body: JSON.stringify(CALL),
      }),
    );
    assert.equal(response.headers.get('mcp-framing'), '1; mapping=compat');
    const body = new TextDecoder('utf-8', { ignoreBOM: true }).decode(await response.arrayBuffer());
    // Without its records (and with the keep-alive between events, which became one), the body
    // is the inner body.
    const stripped = body.replace(/:mcp-framing [A-Za-z0-9+/=]+\n/g, '');
    assert.equal(stripped, inner.replace(': outside\n', ''));
    assert.equal(decodeBody(encoder.encode(body), 'compat').verdict, 'clean');
  });
});

after(() => {
  // Connections of the SDK clients' keep-alive agents end with the servers.
});

test('a re-framing that fails errors the framed body and cancels the handler\'s body; the pieces of one chunk stay apart, uncopied', async () => {
  const { reframe } = await import('../dist/server/streams.js');
  /** @type {unknown[]} */
  const cancelled = [];
  const inner = () =>
    new ReadableStream({
      pull(controller) {
        controller.enqueue(new Uint8Array([1, 2, 3]));
      },
      cancel(reason) {
        cancelled.push(reason);
      },
    });
  const broken = reframe(inner(), {
    done: false,
    pass() {
      throw new Error('a defect');
    },
    end: () => [],
  });
  await assert.rejects(broken.getReader().read(), /a defect/);
  assert.equal(cancelled.length, 1);
  const record = new Uint8Array([9]);
  const split = reframe(inner(), { done: false, pass: (/** @type {Uint8Array} */ chunk) => [record, chunk], end: () => [] });
  const reader = split.getReader();
  assert.equal((await reader.read()).value, record);
  assert.deepEqual([...((await reader.read()).value ?? [])], [1, 2, 3]);
  await reader.cancel('enough');
  assert.deepEqual(cancelled.at(-1), 'enough');
});

test('a large message is written as views of its bytes, the same body as one buffer, and every decoder verifies it', async () => {
  const { BodyEncoder } = await import('../dist/server.js');
  const key = randomRequestKey();
  const attemptId = Uint8Array.from({ length: 16 }, (_, i) => i + 1);
  const big = (/** @type {number} */ n, /** @type {string} */ sep) => encoder.encode(`{"jsonrpc":"2.0","id":1,"result":{"text":${JSON.stringify('é'.repeat(n / 2))}${sep}}}`);
  for (const mapping of /** @type {const} */ (['binary', 'compat', 'sse'])) {
    for (const [first, last] of /** @type {[Uint8Array, Uint8Array][]} */ ([
      [encoder.encode(NOTE), big(300_000, '')], // after a message: no HEAD in the parts
      [big(BodyEncoder.VIEW_MIN, ''), encoder.encode(RESULT)], // first: HEAD in the first part
      [encoder.encode(NOTE), big(200_000, '\n')], // two lines: the event written anew
    ])) {
      const options = { requestKey: key, attemptId, frameSize: 16384 };
      const whole = new BodyEncoder(mapping, options);
      const parts = new BodyEncoder(mapping, options);
      const expected = Buffer.concat([whole.message(first), whole.message(last, true)]);
      const written = [...parts.messageParts(first), ...parts.messageParts(last, true)];
      assert.deepEqual(Buffer.concat(written), expected, mapping);
      if (mapping === 'binary' && first.length >= BodyEncoder.VIEW_MIN) {
        // Views of the message's own buffer, between the frame headers.
        assert.ok(written.some((part) => part.buffer === first.buffer), 'not copied');
      }
      const verdict = decodeBody(new Uint8Array(Buffer.concat(written)), mapping, { requestKey: key });
      assert.equal(verdict.verdict, 'clean', `${mapping}: ${verdict.detail}`);
      assert.deepEqual(verdict.messages.map((m) => Buffer.from(m)), [Buffer.from(first), Buffer.from(last)]);
    }
  }
});

test('a result of 300 KB, JSON or SSE, comes through the wrapper whole and verified in every mapping', async () => {
  const big = `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":${JSON.stringify(text(300_000, 'big'))}}]}}`;
  const json = async () => new Response(big, { headers: { 'content-type': 'application/json' } });
  for (const [name, handler] of /** @type {const} */ ([
    ['json', json],
    ['sse', scripted([`data: ${NOTE}\n\n`, `data: ${big}\n\n`], null)],
  ])) {
    for (const mapping of /** @type {const} */ (['binary', 'sse', 'compat'])) {
      const verdict = await verdictOf(handler, mapping);
      assert.equal(verdict.verdict, 'clean', `${name} in ${mapping}: ${verdict.detail}`);
      assert.equal(new TextDecoder().decode(verdict.messages.at(-1)), big, `${name} in ${mapping}`);
    }
  }
});

test('a framed body is whole, its end included, within the event-loop turn in which the handler\'s body gave its final response', async () => {
  const result = JSON.stringify({ jsonrpc: '2.0', id: 1, result: { content: [{ type: 'text', text: text(64 * 1024, 'w') }] } });
  const bodies = {
    // An event stream left open after its final response (the framed body ends on its own),
    // and one closed with it; a JSON body.
    'SSE left open': () => new ReadableStream({ start: (c) => c.enqueue(new TextEncoder().encode(`event: message\ndata: ${result}\n\n`)) }),
    'SSE closed': () =>
      new ReadableStream({
        start(c) {
          c.enqueue(new TextEncoder().encode(`event: message\ndata: ${result}\n\n`));
          c.close();
        },
      }),
    JSON: () => new ReadableStream({ start: (c) => (c.enqueue(new TextEncoder().encode(result)), c.close()) }),
  };
  for (const [kind, body] of Object.entries(bodies)) {
    const type = kind === 'JSON' ? 'application/json' : 'text/event-stream';
    const wrapped = framingHandler(async () => new Response(body(), { headers: { 'content-type': type } }), { logger: quiet });
    for (const mapping of ['binary', 'compat', 'sse']) {
      const key = randomRequestKey();
      const headers = postHeaders(mapping, { 'mcp-framing-request-key': key });
      const request = new Request('http://127.0.0.1/mcp', { method: 'POST', headers, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'big' } }) });
      const response = await wrapped(request);
      // Everything from here to the body's end runs on promise jobs alone: a write held back
      // for a later turn (a timer, setImmediate, a read that waits for the next pull) would let
      // this run first.
      let turned = false;
      setImmediate(() => {
        turned = true;
      });
      const reader = /** @type {ReadableStream<Uint8Array>} */ (response.body).getReader();
      /** @type {Uint8Array[]} */
      const chunks = [];
      for (let next = await reader.read(); !next.done; next = await reader.read()) {
        chunks.push(next.value);
      }
      assert.equal(turned, false, `${kind}, ${mapping}: the body ended a turn late`);
      const verdict = decodeBody(new Uint8Array(Buffer.concat(chunks)), /** @type {any} */ (mapping), { requestKey: key });
      assert.equal(verdict.verdict, 'clean', `${kind}, ${mapping}: ${verdict.detail}`);
      assert.equal(verdict.sentinelSeen, true, `${kind}, ${mapping}`);
      assert.equal(new TextDecoder().decode(verdict.messages.at(-1)), result, `${kind}, ${mapping}`);
    }
  }
});

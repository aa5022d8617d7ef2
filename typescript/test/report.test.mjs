// @ts-check
// What a caller catches when framingFetch fails a request: the SDK's error (both lines), and
// framingError unwrapping it to a FramingError with the outcome report (SPEC.md §11.7).

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import { Client as ClientV1 } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as TransportV1 } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { Client as ClientV2, StreamableHTTPClientTransport as TransportV2 } from '@modelcontextprotocol/client';

import { FramingError, OUTCOME_DATA_KEY, framingError, framingFetch } from '../dist/index.js';
import { CONTRACT, startServer } from './support/server.mjs';

const SDKS = [
  { name: '@modelcontextprotocol/sdk 1.32.2', Client: ClientV1, Transport: TransportV1 },
  { name: '@modelcontextprotocol/client 2.4.0', Client: ClientV2, Transport: TransportV2 },
];

const QUIET = { debug: () => {}, info: () => {}, warn: () => {} };

/**
 * What `client.connect` rejects with, as the README's example calls it.
 * @param {typeof SDKS[number]} sdk @param {string} url @param {import('../dist/index.js').FramingFetch} fetch
 */
async function connectError(sdk, url, fetch) {
  const client = new sdk.Client({ name: 'test', version: '1.0.0' });
  client.onerror = () => {};
  try {
    await client.connect(/** @type {any} */ (new sdk.Transport(new URL(url), { fetch })), { timeout: 30_000 });
  } catch (error) {
    return error;
  }
  assert.fail('connect succeeded');
}

for (const sdk of SDKS) {
  describe(sdk.name, () => {
    test('a refused connection is a FramingError with the outcome report', async () => {
      const refused = async () => {
        throw new TypeError('fetch failed', { cause: Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:9'), { code: 'ECONNREFUSED' }) });
      };
      const error = await connectError(sdk, 'http://127.0.0.1:9/mcp', framingFetch(refused, { logger: QUIET, retry: false }));
      assert.ok(!(error instanceof FramingError), 'the SDK throws its own error');
      const failure = framingError(error);
      assert.ok(failure instanceof FramingError);
      assert.deepEqual([failure.classification, failure.kind, failure.retryDecision], ['abandoned', 'Send', 'surface_to_caller']);
      assert.match(failure.message, /^mcp-framing: response abandoned: the request could not be sent: fetch failed/);
      assert.equal(failure.code, -32603);
      assert.equal(failure.report.attempts, 1);
      assert.equal(failure.cause, error);
      assert.equal(failure.name, 'FramingError');
    });

    test('a server that does not frame is a FramingError whose message says what to do', async () => {
      const server = await startServer({ contract: CONTRACT, frame: false });
      try {
        const failure = framingError(await connectError(sdk, server.url, framingFetch({ logger: QUIET })));
        assert.ok(failure !== null);
        assert.deepEqual([failure.classification, failure.kind], ['contract_violation', 'NotFramed']);
        assert.match(failure.message, /^mcp-framing: response framing contract violated: response is not framed/);
        assert.match(failure.message, /put a framing layer in front of the server \(mcp-frame proxy, or FramingLayer in a Rust server\)/);
      } finally {
        await server.close();
      }
    });
  });
}

test('an error mcp-framing did not make is not a FramingError', () => {
  assert.equal(framingError(new Error('boom')), null);
  assert.equal(framingError(undefined), null);
  assert.equal(framingError('a string'), null);
  assert.equal(framingError({ code: -32602, message: 'MCP error -32602: unknown tool', data: {} }), null);
  // the report must have the §11.7 shape, not any value under the key
  assert.equal(framingError({ code: -32603, message: 'x', data: { [OUTCOME_DATA_KEY]: 'abandoned' } }), null);
});

test('a FramingError is found in causes and aggregate errors, and passes through unchanged', () => {
  const sdkError = {
    code: -32603,
    message: 'MCP error -32603: mcp-framing: response abandoned',
    data: { [OUTCOME_DATA_KEY]: { classification: 'abandoned', kind: 'Truncated', detail: 'abandoned: truncated', attempts: 1, retryDecision: 'surface_to_caller' } },
  };
  const wrapped = new AggregateError([new Error('other'), new Error('outer', { cause: sdkError })]);
  const failure = framingError(wrapped);
  assert.ok(failure !== null);
  assert.equal(failure.message, 'mcp-framing: response abandoned');
  assert.equal(failure.kind, 'Truncated');
  assert.equal(failure.cause, sdkError);
  assert.equal(framingError(failure), failure);
});

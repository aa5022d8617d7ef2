// @ts-check
// The conformance suite (tests/vectors/manifest.json, SPEC.md §14): every vector decoded whole,
// byte by byte, and cut in two at every offset (a sample of offsets above 4 KiB), each time with
// the manifest's verdict, messages and error kind.

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';

import { decodeBody, optionsFromManifest, toManifest } from '../dist/index.js';

const VECTORS = new URL('../../tests/vectors/', import.meta.url);
const manifest = JSON.parse(readFileSync(new URL('manifest.json', VECTORS), 'utf8'));

/** Vectors up to this size are cut at every offset; larger ones at a sample of offsets. */
const ALL_CUTS_MAX = 4096;
const SAMPLE_CUTS = 256;

/** The manifest's expectation, with the fields it states (older manifests lack `sentinel_seen` and `regime`). @param {any} expect */
function expected(expect) {
  /** @type {Record<string, unknown>} */
  const out = {
    verdict: expect.verdict,
    messages: expect.messages.map((/** @type {any} */ m) => ({ len: m.len, sha256: m.sha256, utf8: m.utf8 })),
    abort: expect.abort,
    error: expect.error,
    truncation: expect.truncation,
  };
  for (const key of ['sentinel_seen', 'regime']) {
    if (key in expect) {
      out[key] = expect[key];
    }
  }
  return out;
}

/** The decoder's verdict, limited to the fields `want` states. @param {any} verdict @param {Record<string, unknown>} want */
function view(verdict, want) {
  const got = /** @type {Record<string, unknown>} */ (/** @type {unknown} */ (toManifest(verdict)));
  return Object.fromEntries(Object.keys(want).map((key) => [key, got[key]]));
}

/** A prefix verdict's class, as the manifest's `prefixes` name it (SPEC.md §14). @param {any} verdict */
function prefixClass(verdict) {
  if (verdict.verdict === 'clean') {
    return verdict.sentinelSeen ? 'clean' : 'delivered';
  }
  if (verdict.verdict === 'aborted') {
    return 'aborted';
  }
  return verdict.error === 'Truncated' ? 'truncated' : `error ${verdict.error}`;
}

/** @param {number} n */
function cutPoints(n) {
  if (n <= ALL_CUTS_MAX) {
    return Array.from({ length: n + 1 }, (_, i) => i);
  }
  const step = Math.max(1, Math.floor(n / SAMPLE_CUTS));
  const points = new Set([0, 1, 20, 21, n - 1, n]);
  for (let at = 0; at <= n; at += step) {
    points.add(at);
  }
  return [...points].sort((a, b) => a - b);
}

test('the manifest lists every vector file of the three mappings', () => {
  const mappings = new Set(manifest.vectors.map((/** @type {any} */ v) => v.mapping));
  assert.deepEqual([...mappings].sort(), ['binary', 'compat', 'sse']);
  assert.ok(manifest.vectors.length >= 100, `${manifest.vectors.length} vectors`);
});

for (const vector of manifest.vectors) {
  test(`vector ${vector.file} decodes to the manifest verdict whole, byte by byte and cut anywhere`, () => {
    const body = new Uint8Array(readFileSync(new URL(vector.file, VECTORS)));
    assert.equal(body.length, vector.size);
    const options = optionsFromManifest(vector.decoder);
    const want = expected(vector.expect);
    assert.deepEqual(view(decodeBody(body, vector.mapping, options), want), want, 'whole');
    const bytes = Array.from({ length: Math.max(0, body.length - 1) }, (_, i) => i + 1);
    assert.deepEqual(view(decodeBody(body, vector.mapping, options, bytes), want), want, 'byte by byte');
    for (const cut of cutPoints(body.length)) {
      assert.deepEqual(view(decodeBody(body, vector.mapping, options, [cut]), want), want, `cut at ${cut}`);
    }
  });
  if (vector.prefixes !== undefined) {
    test(`every prefix of ${vector.file} has the manifest's verdict (truncated, delivered, clean or aborted)`, () => {
      const body = new Uint8Array(readFileSync(new URL(vector.file, VECTORS)));
      const options = optionsFromManifest(vector.decoder);
      /** @type {{from: number, verdict: string}[]} */
      const steps = vector.prefixes;
      let delivered = null;
      for (const length of cutPoints(body.length)) {
        const step = steps.filter((s) => s.from <= length).at(-1);
        const got = prefixClass(decodeBody(body.subarray(0, length), vector.mapping, options));
        assert.equal(got, step?.verdict, `prefix of ${length} bytes`);
        if (got === 'delivered' && delivered === null) {
          delivered = length;
        }
      }
      if (body.length <= ALL_CUTS_MAX) {
        assert.equal(delivered, vector.delivered_from, 'the first prefix delivered');
      }
    });
  }
}

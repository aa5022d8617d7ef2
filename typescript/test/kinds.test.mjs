// @ts-check
// The outcome report's kind names (SPEC.md §11.7) are the package's: parsed from SPEC.md, so that
// the two cannot drift apart.

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';

import { CLIENT_KINDS, CONTRACT_ERROR_KINDS } from '../dist/index.js';

const spec = readFileSync(new URL('../../SPEC.md', import.meta.url), 'utf8');
const manifest = JSON.parse(readFileSync(new URL('../../tests/vectors/manifest.json', import.meta.url), 'utf8'));

/** The names SPEC.md §11.7's outcome report lists for `kind` (its table row). */
function specReportKinds() {
  let section = spec.slice(spec.indexOf('### §11.7 '));
  section = section.slice(0, section.indexOf('\n## '));
  const rows = section.split('\n').filter((line) => line.startsWith('| `kind` |'));
  assert.equal(rows.length, 1);
  const meaning = /** @type {string} */ (rows[0]).split('|')[4] ?? '';
  // kind names are CamelCase (`id` and the like are member names)
  return [...meaning.matchAll(/`([A-Z][A-Za-z0-9]*)`/g)].map((m) => /** @type {string} */ (m[1]));
}

test('the outcome kinds are the ones SPEC.md §11.7 lists', () => {
  const listed = specReportKinds();
  // §11.7 names a few decoder kinds as examples ("`Truncated`, `PeerAbort`, ..., §2–§7"): each is a
  // decoder error kind of the manifest; every other name is one of the client's.
  const decoderKinds = new Set(manifest.vectors.map((/** @type {any} */ v) => v.expect.error).filter(Boolean));
  assert.deepEqual(
    listed.filter((k) => decoderKinds.has(k)),
    ['Truncated', 'PeerAbort', 'HeaderChecksumMismatch'],
  );
  assert.deepEqual(listed.filter((k) => !decoderKinds.has(k)).sort(), [...CLIENT_KINDS].sort());
  assert.equal(new Set(CLIENT_KINDS).size, CLIENT_KINDS.length);
  for (const kind of CONTRACT_ERROR_KINDS) {
    assert.ok(CLIENT_KINDS.includes(kind), kind);
  }
});

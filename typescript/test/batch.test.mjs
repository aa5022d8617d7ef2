// @ts-check
// The package's command, mcp-framing-decode (dist/batch.js), as a user runs it: --help, a body's
// verdict, and one line with the usage for a bad command line.

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { test } from 'node:test';

const BIN = fileURLToPath(new URL('../dist/batch.js', import.meta.url));
const VECTOR = fileURLToPath(new URL('../../tests/vectors/valid_single_message.bin', import.meta.url));

/** @param {string[]} args */
function run(args) {
  return spawnSync(process.execPath, [BIN, ...args], { encoding: 'utf8', input: '' });
}

test('--help prints the usage and the options on stdout and exits 0', () => {
  for (const flag of ['--help', '-h']) {
    const out = run([flag]);
    assert.equal(out.status, 0, out.stderr);
    assert.match(out.stdout, /^usage: mcp-framing-decode FILE \[--mapping binary\|sse\|compat\]/);
    assert.match(out.stdout, /--batch/);
    assert.equal(out.stderr, '');
  }
});

test('a body gets its verdict in the manifest shape', () => {
  const out = run([VECTOR, '--mapping', 'binary']);
  assert.equal(out.status, 0, out.stderr);
  assert.equal(JSON.parse(out.stdout).verdict, 'clean');
});

test('a bad command line exits 2 with what is wrong and the usage, never a stack trace', () => {
  for (const [args, what] of /** @type {[string[], RegExp][]} */ ([
    [[], /no FILE/],
    [['--no-such-option'], /unknown option "--no-such-option"/],
    [[VECTOR, '--mapping', 'nope'], /--mapping "nope": binary, sse or compat/],
    [['no-such-file.bin'], /cannot read no-such-file\.bin: ENOENT/],
  ])) {
    const out = run(args);
    assert.equal(out.status, 2, `${args}: ${out.stderr}`);
    assert.match(out.stderr, what);
    assert.match(out.stderr, /usage: mcp-framing-decode/);
    assert.doesNotMatch(out.stderr, /\n\s+at /, 'no stack trace');
    assert.equal(out.stdout, '');
  }
});

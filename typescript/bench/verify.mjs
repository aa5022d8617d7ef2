// @ts-check
// The speed goal of issue 19: verifying a 1 MiB response in the compatible mapping takes at most
// 2x the same run's node:crypto SHA-256 + zlib.crc32 of those bytes (the floor any verifying
// decoder pays). Prints, for each mapping, the median time of a full verification (the body
// fed in 64 KiB reads, as a socket delivers it) and its ratio to the floor measured in the same
// run, interleaved round by round so that a loaded machine slows both alike.
//
//   node bench/verify.mjs [--rounds N] [--size BYTES]

import { createHash } from 'node:crypto';
import { parseArgs } from 'node:util';
import { crc32 } from 'node:zlib';

import { bodyDecoder } from '../dist/index.js';
import { framedBody } from '../test/support/server.mjs';

const { values } = parseArgs({ options: { rounds: { type: 'string', default: '200' }, size: { type: 'string', default: String(1 << 20) } } });
const rounds = Number(values.rounds);
const size = Number(values.size);
const READ = 64 * 1024;

// A JSON-RPC response carrying `size` bytes of text (JSON escapes and multi-byte UTF-8 included).
const line = 'bench "quoted" back\\\\slash café ✓ lorem ipsum dolor sit amet\\n';
let text = '';
while (Buffer.byteLength(text) < size) {
  text += line;
}
const response = JSON.stringify({ jsonrpc: '2.0', id: 7, result: { content: [{ type: 'text', text }] } });
const key = '00112233445566778899aabbccddeeff';

/** The body as a socket delivers it: reads of `READ` bytes, each its own buffer. @param {Uint8Array} body */
function reads(body) {
  const out = [];
  for (let at = 0; at < body.length; at += READ) {
    out.push(body.slice(at, at + READ));
  }
  return out;
}

/** @param {Uint8Array[]} chunks @param {'binary' | 'sse' | 'compat'} mapping */
function verify(chunks, mapping) {
  const decoder = bodyDecoder(mapping, { requestKey: key });
  let messages = 0;
  for (const chunk of chunks) {
    messages += decoder.feed(chunk).length;
  }
  const verdict = decoder.finish();
  if (verdict.verdict !== 'clean' || messages !== 1) {
    throw new Error(`the bench body did not verify: ${verdict.detail}`);
  }
}

/** @param {Uint8Array} body */
function floor(body) {
  createHash('sha256').update(body).digest();
  crc32(body);
}

/** @param {number[]} xs */
function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)] ?? NaN;
}

/** @param {() => void} f */
function time(f) {
  const start = process.hrtime.bigint();
  f();
  return Number(process.hrtime.bigint() - start) / 1e6;
}

console.log(`verifying a ${Buffer.byteLength(response)}-byte response, ${rounds} rounds, ${READ}-byte reads (medians, ms)`);
console.log('mapping  body bytes  verify   floor (sha256 + crc32 of the body)  ratio');
for (const mapping of /** @type {const} */ (['compat', 'binary', 'sse'])) {
  const body = new Uint8Array(framedBody([response], mapping, key));
  const chunks = reads(body);
  for (let i = 0; i < 20; i++) {
    verify(chunks, mapping);
    floor(body);
  }
  const v = [];
  const f = [];
  for (let i = 0; i < rounds; i++) {
    v.push(time(() => verify(chunks, mapping)));
    f.push(time(() => floor(body)));
  }
  const [mv, mf] = [median(v), median(f)];
  console.log(
    `${mapping.padEnd(8)} ${String(body.length).padStart(10)}  ${mv.toFixed(3).padStart(6)}   ${mf.toFixed(3).padStart(6)}                              ${(mv / mf).toFixed(2)}x`,
  );
}

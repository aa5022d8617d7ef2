// The encoding side of `tests/encoders/typescript_encoder.rs` (the Rust crate): a JSON job list on stdin,
//
//   [{"mapping": "binary" | "sse" | "compat", "frameSize": n, "maxMessageSize": n,
//     "requestKey": HEX | null, "attemptId": HEX,
//     "ops": [{"message": HEX} | {"push": HEX} | {"finish": true} | {"keepAlive": true}
//             | {"end": true} | {"final": HEX} | {"abort": [code, reason]}]}, ...]
//
// and the bodies the package's encoder writes, one JSON line per job: {"body": HEX, "error": KIND | null}.
// An op that fails ends the stream with the ABORT its error calls for, as a server does.
// @ts-check
import { readFileSync } from 'node:fs';

import { BodyEncoder, EncodeError } from '../../dist/server.js';

const bytes = (/** @type {string} */ hex) => Uint8Array.from(Buffer.from(hex, 'hex'));

/** @param {any} job */
function run(job) {
  const encoder = new BodyEncoder(job.mapping, {
    frameSize: job.frameSize,
    maxMessageSize: job.maxMessageSize,
    requestKey: job.requestKey,
    attemptId: bytes(job.attemptId),
  });
  const out = [encoder.open()];
  let error = null;
  for (const op of job.ops) {
    try {
      // As framingHandler writes them: a message of 128 KiB or more as views between its frame headers.
      if (op.message !== undefined) out.push(...encoder.messageParts(bytes(op.message)));
      else if (op.final !== undefined) out.push(...encoder.messageParts(bytes(op.final), true));
      else if (op.push !== undefined) out.push(encoder.push(bytes(op.push)));
      else if (op.finish) out.push(encoder.finishMessage());
      else if (op.keepAlive) out.push(encoder.keepAlive());
      else if (op.end) out.push(encoder.end());
      else if (op.abort) out.push(encoder.abort(op.abort[0], op.abort[1]));
    } catch (err) {
      if (!(err instanceof EncodeError)) throw err;
      error = err.kind;
      out.push(encoder.fail(err));
      break;
    }
  }
  return { body: Buffer.concat(out).toString('hex'), error };
}

const jobs = JSON.parse(readFileSync(0, 'utf8'));
for (const job of jobs) {
  process.stdout.write(`${JSON.stringify(run(job))}\n`);
}

/**
 * A body in any of the three mappings (SPEC.md §15, §16, §18) to verified messages and one
 * verdict: the one path every caller (the fetch wrapper, the batch entry point, the tests)
 * decodes through.
 *
 * @module
 */

import { CompatDecoder } from './compat.js';
import { StreamDecoder, type DecoderOptions } from './decoder.js';
import { SseDecoder, type BodyDecoder } from './sse.js';
import type { Verdict } from './verdict.js';

export type { BodyDecoder } from './sse.js';

/** The transport mappings (SPEC.md §8): their tokens. */
export type Mapping = 'binary' | 'sse' | 'compat';

class BinaryBodyDecoder implements BodyDecoder {
  readonly frames: StreamDecoder;

  constructor(options: DecoderOptions) {
    this.frames = new StreamDecoder(options);
  }

  feed(chunk: Uint8Array): readonly Uint8Array[] {
    return this.frames.feed(chunk);
  }

  finish(): Verdict {
    return this.frames.finish();
  }
}

/**
 * A decoder for a body in `mapping`, with the receiver's limits and the request key HEAD must
 * echo.
 *
 * @throws RangeError for an invalid limit (a frame limit below 1 026 bytes, SPEC.md §6) or key.
 */
export function bodyDecoder(mapping: Mapping, options: DecoderOptions = {}): BodyDecoder {
  switch (mapping) {
    case 'binary':
      return new BinaryBodyDecoder(options);
    case 'sse':
      return new SseDecoder(options);
    case 'compat':
      return new CompatDecoder(options);
  }
}

/**
 * Decodes a whole body fed in pieces cut at the ascending offsets `cuts` (none: in one piece),
 * and returns its verdict. The verdict never depends on the cuts (SPEC.md §14).
 */
export function decodeBody(body: Uint8Array, mapping: Mapping, options: DecoderOptions = {}, cuts: readonly number[] = []): Verdict {
  const decoder = bodyDecoder(mapping, options);
  let start = 0;
  for (const cut of cuts) {
    decoder.feed(body.subarray(start, cut));
    start = cut;
  }
  decoder.feed(body.subarray(start));
  return decoder.finish();
}

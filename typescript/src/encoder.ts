/**
 * The sans-I/O stream encoder, the server side of {@link StreamDecoder} (SPEC.md §1–§5): messages
 * in, frames out, with the decoder's constants (`frame.ts`, `limits.ts`). Every call returns the
 * bytes it wrote, one buffer; nothing is written when a call fails.
 *
 * ```ts
 * const encoder = new StreamEncoder({ requestKey });
 * const body = [encoder.message(bytes), encoder.end()]; // HEAD, DATA..., MESSAGE_END, STREAM_END
 * ```
 *
 * @module
 */

import { createHash, type Hash } from 'node:crypto';

import { ABORT, DATA, HEAD, KEEPALIVE, MAGIC0, MAGIC1, MESSAGE_END, STREAM_END, VERSION, crc as crc32 } from './frame.js';
import { keyBytes, random16, type RequestKey } from './ids.js';
import { DEFAULT_FRAME_SIZE, DEFAULT_MAX_MESSAGE_SIZE, HEADER_LEN, MAX_ABORT_TEXT } from './limits.js';

/** HEAD's payload: the request key and the attempt id (SPEC.md §3). */
export const HEAD_PAYLOAD = 32;
const MESSAGE_END_PAYLOAD = 40;
const STREAM_END_PAYLOAD = 8;
const SEQUENCE_SPACE = 2 ** 32;
const NO_BYTES = new Uint8Array(0);
const utf8 = new TextEncoder();

/** The ABORT reason codes of SPEC.md §3.1. */
export const AbortCode = {
  /** No reason given. */
  Unspecified: 0,
  /** The sender failed while producing the response: a retry fails the same way. */
  InternalError: 1,
  /** The request was cancelled. */
  Cancelled: 2,
  /** Overloaded or shutting down: a retry may succeed elsewhere. */
  Overloaded: 3,
  /** Something the sender depends on failed. */
  UpstreamFailed: 4,
  /** A message exceeds the sender's or the receiver's message limit. */
  MessageTooLarge: 5,
} as const;

/** Why an encoder call failed (the Rust crate's `EncodeError` and `CompatEncodeError` kinds). */
export type EncodeErrorKind =
  | 'MessageTooLarge'
  | 'MessageOpen'
  | 'StreamFinished'
  | 'SequenceExhausted'
  | 'AbortReasonTooLong'
  | 'NotUtf8'
  | 'CarriageReturn'
  | 'EmptyMessage';

/** An encoder call that could not be made; nothing was written. */
export class EncodeError extends Error {
  constructor(
    readonly kind: EncodeErrorKind,
    message: string,
  ) {
    super(message);
    this.name = 'EncodeError';
  }

  /** The ABORT code a sender ends the stream with for this error (SPEC.md §3.1, §11.3). */
  get abortCode(): number {
    return this.kind === 'MessageTooLarge' ? AbortCode.MessageTooLarge : AbortCode.InternalError;
  }
}

/** What opens a stream: the request key echoed and the attempt id drawn for it (SPEC.md §3). */
export interface StreamHeadInit {
  /** The request's key (SPEC.md §10); absent or `null`: 16 zero bytes, no key. */
  requestKey?: RequestKey | null;
  /** 16 bytes; drawn at random (a CSPRNG) when absent, as a sender must. */
  attemptId?: Uint8Array;
}

/** Options of a {@link StreamEncoder}. */
export interface EncoderOptions extends StreamHeadInit {
  /** The largest DATA payload written; default 16 KiB (SPEC.md §6: a quarter of a receiver's default). */
  frameSize?: number;
  /** The largest message written (`MessageTooLarge` above); default 16 MiB (SPEC.md §6). */
  maxMessageSize?: number;
}

/** Writes a frame header at `at` (SPEC.md §2): the header CRC over its first 16 bytes. */
function header(out: Uint8Array, at: number, kind: number, sequence: number, length: number, payloadCrc: number): void {
  out[at] = MAGIC0;
  out[at + 1] = MAGIC1;
  out[at + 2] = VERSION;
  out[at + 3] = kind;
  be32(out, at + 4, sequence);
  be32(out, at + 8, length);
  be32(out, at + 12, payloadCrc);
  be32(out, at + 16, crc32(out.subarray(at, at + 16)));
}

function be32(out: Uint8Array, at: number, value: number): void {
  out[at] = value >>> 24;
  out[at + 1] = (value >>> 16) & 0xff;
  out[at + 2] = (value >>> 8) & 0xff;
  out[at + 3] = value & 0xff;
}

function be64(out: Uint8Array, at: number, value: number): void {
  be32(out, at, Math.floor(value / SEQUENCE_SPACE));
  be32(out, at + 4, value % SEQUENCE_SPACE);
}

/** `reason` cut to the 1,024 bytes an ABORT carries, at a character boundary (SPEC.md §3). */
export function fitReason(reason: string): Uint8Array {
  const bytes = utf8.encode(reason);
  if (bytes.length <= MAX_ABORT_TEXT) {
    return bytes;
  }
  let end = MAX_ABORT_TEXT;
  while ((bytes[end]! & 0xc0) === 0x80) {
    end -= 1; // a continuation byte: the character started before
  }
  return bytes.subarray(0, end);
}

type State = 'fresh' | 'between' | 'in' | 'finished';

/**
 * Encodes one framed stream (SPEC.md §2–§5): HEAD (written with the first frame), the messages'
 * DATA frames (at most `frameSize` bytes each) and MESSAGE_END, then STREAM_END or ABORT.
 */
export class StreamEncoder {
  /** The largest DATA payload it writes. */
  readonly frameSize: number;
  /** The largest message it writes. */
  readonly maxMessageSize: number;
  private readonly headPayload: Uint8Array;
  private sequence: number;
  private frames = 0;
  private state: State = 'fresh';
  private messageLen = 0;
  private hash: Hash | null = null;
  private count = 0;

  /** @throws RangeError if the frame size is not in 1..=2^32-1 or the head is malformed. */
  constructor(options: EncoderOptions = {}) {
    this.frameSize = options.frameSize ?? DEFAULT_FRAME_SIZE;
    this.maxMessageSize = options.maxMessageSize ?? DEFAULT_MAX_MESSAGE_SIZE;
    if (!Number.isSafeInteger(this.frameSize) || this.frameSize < 1 || this.frameSize >= SEQUENCE_SPACE) {
      throw new RangeError(`frame size must be in 1..=4294967295, got ${this.frameSize}`);
    }
    const attempt = options.attemptId ?? random16();
    if (attempt.length !== 16) {
      throw new RangeError(`an attempt id is 16 bytes, got ${attempt.length}`);
    }
    this.headPayload = new Uint8Array(HEAD_PAYLOAD);
    if (options.requestKey != null) {
      this.headPayload.set(keyBytes(options.requestKey), 0);
    }
    this.headPayload.set(attempt, 16);
    // HEAD's sequence number is the attempt id's first four bytes (SPEC.md §4).
    this.sequence = ((attempt[0]! << 24) | (attempt[1]! << 16) | (attempt[2]! << 8) | attempt[3]!) >>> 0;
  }

  /** The messages finished so far. */
  get messages(): number {
    return this.count;
  }

  /** Whether HEAD was written (every call that writes a frame writes HEAD first). */
  get started(): boolean {
    return this.state !== 'fresh';
  }

  /** Whether STREAM_END or ABORT was written. */
  get finished(): boolean {
    return this.state === 'finished';
  }

  /** Whether a message is open (DATA written, MESSAGE_END not yet). */
  get inMessage(): boolean {
    return this.state === 'in';
  }

  /** HEAD, if nothing was written yet (else nothing). */
  open(): Uint8Array {
    const [out] = this.prepare(0, 0);
    return out;
  }

  /**
   * The next bytes of the open message (or of a new one) as DATA frames; `payloads: false`
   * writes their headers alone (the compatible mapping, SPEC.md §18.2).
   */
  push(chunk: Uint8Array, payloads = true): Uint8Array {
    if (chunk.length === 0) {
      this.checkNotFinished();
      return NO_BYTES;
    }
    this.checkLength(this.messageLen + chunk.length);
    const frames = Math.ceil(chunk.length / this.frameSize);
    const [out, start] = this.prepare(frames, frames * HEADER_LEN + (payloads ? chunk.length : 0));
    this.writeData(chunk, out, start, payloads);
    return out;
  }

  /** MESSAGE_END of the open message (an empty message if none is open). */
  finishMessage(): Uint8Array {
    const [out, start] = this.prepare(1, HEADER_LEN + MESSAGE_END_PAYLOAD);
    this.writeMessageEnd(out, start);
    return out;
  }

  /** A whole message: DATA frames and MESSAGE_END; `end` adds STREAM_END after it. */
  message(message: Uint8Array, options: { end?: boolean; payloads?: boolean } = {}): Uint8Array {
    const payloads = options.payloads ?? true;
    const end = options.end === true;
    if (this.state === 'in') {
      throw new EncodeError('MessageOpen', 'a message is still open: finish it before ending the stream');
    }
    this.checkLength(message.length);
    const data = Math.ceil(message.length / this.frameSize);
    const frames = data + 1 + (end ? 1 : 0);
    const bytes =
      (payloads ? message.length : 0) + frames * HEADER_LEN + MESSAGE_END_PAYLOAD + (end ? STREAM_END_PAYLOAD : 0);
    const [out, start] = this.prepare(frames, bytes);
    let at = message.length > 0 ? this.writeData(message, out, start, payloads) : start;
    at = this.writeMessageEnd(out, at);
    if (end) {
      this.writeStreamEnd(out, at);
    }
    return out;
  }

  /** A KEEPALIVE frame. */
  keepAlive(): Uint8Array {
    const [out, start] = this.prepare(1, HEADER_LEN);
    header(out, start, KEEPALIVE, this.take(), 0, 0);
    return out;
  }

  /** STREAM_END, the sentinel: the stream is complete. */
  end(): Uint8Array {
    if (this.state === 'in') {
      throw new EncodeError('MessageOpen', 'a message is still open: finish it before ending the stream');
    }
    const [out, start] = this.prepare(1, HEADER_LEN + STREAM_END_PAYLOAD);
    this.writeStreamEnd(out, start);
    return out;
  }

  /** ABORT with `code` (SPEC.md §3.1) and `reason` (cut to 1,024 bytes): the stream ends. */
  abort(code: number, reason: string): Uint8Array {
    if (!Number.isInteger(code) || code < 0 || code > 0xffff) {
      throw new RangeError(`an ABORT code is a u16, got ${code}`);
    }
    const text = fitReason(reason);
    const [out, start] = this.prepare(1, HEADER_LEN + 2 + text.length);
    const payload = start + HEADER_LEN;
    out[payload] = code >>> 8;
    out[payload + 1] = code & 0xff;
    out.set(text, payload + 2);
    header(out, start, ABORT, this.take(), 2 + text.length, crc32(out.subarray(payload, payload + 2 + text.length)));
    this.state = 'finished';
    return out;
  }

  /** Throws unless a message of `len` bytes can be written now (open, in bounds, not finished). */
  checkMessage(len: number): void {
    if (this.state === 'in') {
      throw new EncodeError('MessageOpen', 'a message is still open: finish it before ending the stream');
    }
    this.checkLength(len);
    const head = this.state === 'fresh' ? 1 : 0;
    if (this.frames + head + Math.ceil(len / this.frameSize) + 1 > SEQUENCE_SPACE) {
      throw new EncodeError('SequenceExhausted', 'the stream used all 2^32 sequence numbers');
    }
  }

  private checkLength(len: number): void {
    this.checkNotFinished();
    if (len > this.maxMessageSize) {
      throw new EncodeError('MessageTooLarge', `message of at least ${len} bytes exceeds the limit of ${this.maxMessageSize}`);
    }
  }

  private checkNotFinished(): void {
    if (this.state === 'finished') {
      throw new EncodeError('StreamFinished', 'the stream already ended');
    }
  }

  /** The output buffer with HEAD written if the stream is fresh, and where the rest goes. */
  private prepare(frames: number, bytes: number): [Uint8Array, number] {
    this.checkNotFinished();
    const head = this.state === 'fresh';
    if (this.frames + (head ? 1 : 0) + frames > SEQUENCE_SPACE) {
      throw new EncodeError('SequenceExhausted', 'the stream used all 2^32 sequence numbers');
    }
    if (!head) {
      return [bytes === 0 ? NO_BYTES : Buffer.allocUnsafe(bytes), 0];
    }
    const out = Buffer.allocUnsafe(HEADER_LEN + HEAD_PAYLOAD + bytes);
    out.set(this.headPayload, HEADER_LEN);
    header(out, 0, HEAD, this.take(), HEAD_PAYLOAD, crc32(this.headPayload));
    this.state = 'between';
    return [out, HEADER_LEN + HEAD_PAYLOAD];
  }

  private writeData(chunk: Uint8Array, out: Uint8Array, start: number, payloads: boolean): number {
    const hash = (this.hash ??= createHash('sha256'));
    let at = start;
    for (let from = 0; from < chunk.length; from += this.frameSize) {
      const piece = chunk.subarray(from, Math.min(from + this.frameSize, chunk.length));
      header(out, at, DATA, this.take(), piece.length, crc32(piece));
      at += HEADER_LEN;
      if (payloads) {
        out.set(piece, at);
        at += piece.length;
      }
      // Frame by frame, while the piece is in cache from its CRC and copy.
      hash.update(piece);
    }
    this.messageLen += chunk.length;
    this.state = 'in';
    return at;
  }

  private writeMessageEnd(out: Uint8Array, at: number): number {
    const payload = at + HEADER_LEN;
    be64(out, payload, this.messageLen);
    out.set((this.hash ?? createHash('sha256')).digest(), payload + 8);
    header(out, at, MESSAGE_END, this.take(), MESSAGE_END_PAYLOAD, crc32(out.subarray(payload, payload + MESSAGE_END_PAYLOAD)));
    this.hash = null;
    this.messageLen = 0;
    this.count += 1;
    this.state = 'between';
    return payload + MESSAGE_END_PAYLOAD;
  }

  private writeStreamEnd(out: Uint8Array, at: number): void {
    const payload = at + HEADER_LEN;
    be64(out, payload, this.count);
    header(out, at, STREAM_END, this.take(), STREAM_END_PAYLOAD, crc32(out.subarray(payload, payload + STREAM_END_PAYLOAD)));
    this.state = 'finished';
  }

  private take(): number {
    const sequence = this.sequence;
    this.sequence = (sequence + 1) >>> 0;
    this.frames += 1;
    return sequence;
  }
}

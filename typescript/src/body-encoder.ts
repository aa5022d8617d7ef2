/**
 * The encoder of a response body in one of the three mappings, sans-I/O like
 * {@link StreamEncoder}: the frames as they are (binary, SPEC.md §16), one `mcp-frame` event per
 * frame (§15), or records beside the unchanged message events (compatible, §18).
 *
 * @module
 */

import { isUtf8 } from 'node:buffer';

import type { Mapping } from './body.js';
import { EncodeError, HEAD_PAYLOAD, StreamEncoder, type EncoderOptions } from './encoder.js';
import { HEADER_LEN } from './limits.js';
import { u32 } from './frame.js';

const NO_BYTES = new Uint8Array(0);
const LF = 0x0a;
const CR = 0x0d;
const latin1 = new TextEncoder();
const EVENT_START = latin1.encode('event: mcp-frame\ndata: ');
const EVENT_END = latin1.encode('\n\n');
const RECORD_START = latin1.encode(':mcp-framing ');
const DATA_FIELD = latin1.encode('data: ');

/** The length of the longest valid UTF-8 prefix of `bytes` (Rust's `Utf8Error::valid_up_to`). */
function validUpTo(bytes: Uint8Array): number {
  let i = 0;
  while (i < bytes.length) {
    const b = bytes[i]!;
    const [len, lo, hi] =
      b < 0x80 ? [1, 0, 0] : b >= 0xc2 && b <= 0xdf ? [2, 0x80, 0xbf] : b === 0xe0 ? [3, 0xa0, 0xbf]
      : b === 0xed ? [3, 0x80, 0x9f] : b >= 0xe1 && b <= 0xef ? [3, 0x80, 0xbf] : b === 0xf0 ? [4, 0x90, 0xbf]
      : b >= 0xf1 && b <= 0xf3 ? [4, 0x80, 0xbf] : b === 0xf4 ? [4, 0x80, 0x8f] : [0, 0, 0];
    if (len === 0 || i + len > bytes.length) {
      return i;
    }
    for (let k = 1; k < len; k++) {
      const c = bytes[i + k]!;
      if (k === 1 ? c < lo || c > hi : (c & 0xc0) !== 0x80) {
        return i;
      }
    }
    i += len;
  }
  return i;
}

function base64(bytes: Uint8Array): string {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('base64');
}

/** The length of the padded base64 of `n` bytes. */
function base64Length(n: number): number {
  return 4 * Math.ceil(n / 3);
}

/**
 * The base64 SSE mapping of whole frames: one `mcp-frame` event per frame (SPEC.md §15), written
 * into one buffer of the exact size (each frame's base64 text copied once).
 */
function sseEvents(frames: Uint8Array): Uint8Array {
  if (frames.length === 0) {
    return frames;
  }
  const ends: number[] = [];
  let size = 0;
  for (let at = 0; at < frames.length; ) {
    const end = Math.min(at + HEADER_LEN + u32(frames, at + 8), frames.length);
    ends.push(end);
    size += EVENT_START.length + base64Length(end - at) + EVENT_END.length;
    at = end;
  }
  const out = Buffer.allocUnsafe(size); // every byte is written below
  let written = 0;
  let at = 0;
  for (const end of ends) {
    out.set(EVENT_START, written);
    written += EVENT_START.length;
    written += out.write(base64(frames.subarray(at, end)), written, 'latin1');
    out.set(EVENT_END, written);
    written += EVENT_END.length;
    at = end;
  }
  return out;
}

/** A compatible-mapping record of `frames` (SPEC.md §18.2): `:mcp-framing <base64>` and LF. */
function record(frames: Uint8Array): Uint8Array {
  const out = Buffer.allocUnsafe(RECORD_START.length + base64Length(frames.length) + 1);
  out.set(RECORD_START, 0);
  const end = RECORD_START.length + out.write(base64(frames), RECORD_START.length, 'latin1');
  out[end] = LF;
  return out;
}

/**
 * Throws unless an SSE event carries `message` unchanged (SPEC.md §18.3): UTF-8, no CR, not
 * empty.
 */
export function checkEventData(message: Uint8Array): void {
  if (message.length === 0) {
    throw new EncodeError('EmptyMessage', 'an empty message cannot be carried by an SSE event');
  }
  if (!isUtf8(message)) {
    const at = validUpTo(message);
    throw new EncodeError('NotUtf8', `message is not UTF-8 (valid up to byte ${at}): an SSE event cannot carry it`);
  }
  const at = Buffer.from(message.buffer, message.byteOffset, message.byteLength).indexOf(CR);
  if (at !== -1) {
    throw new EncodeError('CarriageReturn', `message contains a carriage return at byte ${at}: an SSE event cannot carry it`);
  }
}

/** The message event carrying `message` (SPEC.md §18.3): a `data: ` line per LF-separated piece. */
export function messageEvent(message: Uint8Array): Uint8Array {
  return recordAndEvent(NO_BYTES, message);
}

/**
 * `record` (its bytes, possibly none) then the message event carrying `message`, in one buffer
 * (the message copied once).
 */
function recordAndEvent(record: Uint8Array, message: Uint8Array): Uint8Array {
  const bytes = Buffer.from(message.buffer, message.byteOffset, message.byteLength);
  let lines = 1;
  for (let lf = bytes.indexOf(LF); lf !== -1; lf = bytes.indexOf(LF, lf + 1)) {
    lines += 1;
  }
  // Every line but the last loses its LF to the `data: ` line's own: `lines - 1` bytes fewer.
  const out = Buffer.allocUnsafe(record.length + message.length - (lines - 1) + lines * (DATA_FIELD.length + 1) + 1);
  out.set(record, 0);
  let at = record.length;
  let start = 0;
  for (;;) {
    const lf = bytes.indexOf(LF, start);
    const end = lf === -1 ? bytes.length : lf;
    out.set(DATA_FIELD, at);
    at += DATA_FIELD.length;
    out.set(message.subarray(start, end), at);
    at += end - start;
    out[at++] = LF;
    if (lf === -1) {
      break;
    }
    start = lf + 1;
  }
  out[at++] = LF;
  if (at !== out.length) {
    throw new Error(`recordAndEvent: wrote ${at} of ${out.length} bytes`);
  }
  return out;
}

/**
 * Writes one response body in `mapping`. Each call returns the body bytes it produced; a call
 * that throws {@link EncodeError} wrote nothing, and {@link BodyEncoder.fail} then ends the
 * stream with the ABORT the error calls for.
 */
export class BodyEncoder {
  readonly frames: StreamEncoder;

  constructor(
    readonly mapping: Mapping,
    options: EncoderOptions = {},
  ) {
    this.frames = new StreamEncoder(options);
  }

  /** Whether the stream ended (STREAM_END or ABORT written). */
  get finished(): boolean {
    return this.frames.finished;
  }

  private mapped(frames: Uint8Array): Uint8Array {
    switch (this.mapping) {
      case 'binary':
        return frames;
      case 'sse':
        return sseEvents(frames);
      case 'compat':
        return frames.length === 0 ? NO_BYTES : record(frames);
    }
  }

  /** HEAD, sent at once (binary and SSE); the compatible mapping writes it in its first record. */
  open(): Uint8Array {
    return this.mapping === 'compat' ? NO_BYTES : this.mapped(this.frames.open());
  }

  /**
   * A whole message; `end` ends the stream right after it (the final response: in the
   * compatible mapping STREAM_END travels in its record, SPEC.md §18.4).
   */
  message(message: Uint8Array, end = false): Uint8Array {
    if (this.mapping !== 'compat') {
      return this.mapped(this.frames.message(message, { end }));
    }
    // The limit first, then what an event can carry (the Rust crate's order).
    this.frames.checkMessage(message.length);
    checkEventData(message);
    const frames = this.frames.message(message, { end, payloads: false });
    return recordAndEvent(record(frames), message);
  }

  /**
   * {@link message}'s bytes as parts to send in order: for a message of at least
   * {@link BodyEncoder.VIEW_MIN} bytes in the binary or compatible mapping, the frame headers
   * (and the record) in one small buffer and the message's own bytes as views of `message`, never
   * copied (a fresh buffer of a megabyte costs its page faults more than framing it); else one
   * part, {@link message}'s. The parts view `message`: it must not change until they are sent.
   */
  messageParts(message: Uint8Array, end = false): Uint8Array[] {
    if (message.length < BodyEncoder.VIEW_MIN || this.mapping === 'sse') {
      return [this.message(message, end)];
    }
    if (this.mapping === 'compat') {
      this.frames.checkMessage(message.length);
      checkEventData(message);
      const frames = this.frames.message(message, { end, payloads: false });
      const bytes = Buffer.from(message.buffer, message.byteOffset, message.byteLength);
      if (bytes.indexOf(LF) !== -1) {
        return [recordAndEvent(record(frames), message)]; // a `data: ` line per piece: written anew
      }
      // One line: the record and the event's field name, the message, the event's end.
      return [Buffer.concat([record(frames), DATA_FIELD]), message, EVENT_END];
    }
    const fresh = !this.frames.started;
    const headers = this.frames.message(message, { end, payloads: false });
    // HEAD (a fresh stream), a header per DATA frame, MESSAGE_END (and STREAM_END) after them.
    let at = fresh ? HEADER_LEN + HEAD_PAYLOAD : 0;
    let from = 0;
    const parts: Uint8Array[] = [];
    for (let part = 0; from < message.length; part++) {
      const to = Math.min(from + this.frames.frameSize, message.length);
      parts.push(headers.subarray(part === 0 ? 0 : at, at + HEADER_LEN), message.subarray(from, to));
      at += HEADER_LEN;
      from = to;
    }
    parts.push(headers.subarray(at));
    return parts;
  }

  /** The smallest message {@link messageParts} writes without copying it: 128 KiB. */
  static readonly VIEW_MIN = 128 * 1024;

  /**
   * The compatible mapping's record for a message event that is sent as it came (a
   * pass-through, SPEC.md §18.8): `data` is the event's data as an SSE client reads it.
   */
  messageRecord(data: Uint8Array, end = false): Uint8Array {
    if (this.mapping !== 'compat') {
      throw new TypeError('a message record belongs to the compatible mapping');
    }
    if (data.length === 0) {
      throw new EncodeError('EmptyMessage', 'an empty message cannot be carried by an SSE event');
    }
    return record(this.frames.message(data, { end, payloads: false }));
  }

  /**
   * The next bytes of a message, written as they come (binary and SSE mappings only: a
   * compatible event carries a whole message).
   */
  push(chunk: Uint8Array): Uint8Array {
    if (this.mapping === 'compat') {
      throw new TypeError('the compatible mapping writes whole messages');
    }
    return this.mapped(this.frames.push(chunk));
  }

  /** MESSAGE_END of the message written with {@link push}. */
  finishMessage(): Uint8Array {
    return this.mapped(this.frames.finishMessage());
  }

  /** A KEEPALIVE frame (in the compatible mapping, a record of its own, SPEC.md §18.4). */
  keepAlive(): Uint8Array {
    return this.mapped(this.frames.keepAlive());
  }

  /** STREAM_END. */
  end(): Uint8Array {
    return this.mapped(this.frames.end());
  }

  /** ABORT (SPEC.md §3.1); nothing if the stream already ended. */
  abort(code: number, reason: string): Uint8Array {
    return this.finished ? NO_BYTES : this.mapped(this.frames.abort(code, reason));
  }

  /** The ABORT an encoder error calls for: code 5 for a message too large, else 1 (§3.1). */
  fail(error: EncodeError): Uint8Array {
    return this.abort(error.abortCode, error.message);
  }
}

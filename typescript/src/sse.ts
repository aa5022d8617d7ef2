/**
 * The event-stream parsing both SSE mappings share (SPEC.md §15, §18.5), and the base64 SSE
 * mapping itself (§15: `mcp-frame` events carrying base64 of whole frames).
 *
 * Parsing follows the WHATWG event-stream format: lines end with CRLF, LF or CR (also split
 * across reads), a leading U+FEFF is skipped, `:` lines are comments, `id` and `retry` are
 * ignored, an event is dispatched at a blank line, and an event left open at the end of the body
 * is discarded. Every line and every event's data is bounded (`EventTooLarge`), and so are the
 * lines in a row that carry no data (`TooManyComments`).
 *
 * @module
 */

import { isUtf8 } from 'node:buffer';

import { concat } from './bytes.js';
import { StreamDecoder, type DecoderOptions } from './decoder.js';
import type { ErrorDetail, MappingErrorKind } from './errors.js';
import { LINE_FIELD_ALLOWANCE, resolveLimits, type ResolvedLimits } from './limits.js';
import type { Progress, StreamHead, Verdict } from './verdict.js';

const LF = 0x0a;
const CR = 0x0d;
const COLON = 0x3a;
const SPACE = 0x20;
const EMPTY: readonly Uint8Array[] = Object.freeze([]);
const lossy = new TextDecoder('utf-8');
const encoder = new TextEncoder();

/** The bytes of `bytes` as UTF-8 text would re-encode them: invalid sequences become U+FFFD. */
export function asDispatched(bytes: Uint8Array): Uint8Array {
  return isUtf8(bytes) ? bytes : encoder.encode(lossy.decode(bytes));
}

function startsWith(bytes: Uint8Array, prefix: Uint8Array, at = 0): boolean {
  if (bytes.length - at < prefix.length) {
    return false;
  }
  for (let i = 0; i < prefix.length; i++) {
    if (bytes[at + i] !== prefix[i]) {
      return false;
    }
  }
  return true;
}

const DATA_FIELD = encoder.encode('data');
const EVENT_FIELD = encoder.encode('event');

function isField(line: Uint8Array, end: number, field: Uint8Array): boolean {
  return end === field.length && startsWith(line, field);
}

function joinLf(pieces: Uint8Array[], length: number): Uint8Array {
  if (pieces.length === 1) {
    return pieces[0]!;
  }
  const out = Buffer.allocUnsafe(length); // every byte is written below
  let at = 0;
  pieces.forEach((piece, i) => {
    if (i > 0) {
      out[at++] = LF;
    }
    out.set(piece, at);
    at += piece.length;
  });
  return out;
}

/**
 * Whether an event of this name is a `message` event (SPEC.md §15, §18.3): no `event` field, an
 * empty one, or `event: message`, as WHATWG and the SDKs read it. The one rule of this package.
 */
export function isMessageEvent(name: string | null): boolean {
  return name === null || name === '' || name === 'message';
}

/**
 * A decoder of a body in one of the framed mappings: bytes in, in any split; verified messages
 * out; one verdict at the end of the body.
 */
export interface BodyDecoder {
  /** Consumes the next bytes of the body and returns the messages they verified, in order. */
  feed(chunk: Uint8Array): readonly Uint8Array[];
  /** The verdict at the end of the body (SPEC.md §7, §15, §18.5). */
  finish(): Verdict;
  /** The frame decoder the body's frames go to. */
  readonly frames: StreamDecoder;
}

/**
 * Splits a body into event-stream lines and events, and hands comments and events to a mapping
 * (the subclasses). Errors go to the frame decoder's sticky error, so that an error of the frames
 * moved before stays the verdict (body order, SPEC.md §15).
 */
export abstract class EventStreamDecoder implements BodyDecoder {
  readonly frames: StreamDecoder;
  protected readonly limits: ResolvedLimits;
  private readonly lineBound: number;
  private pending: Uint8Array[] = [];
  private pendingLength = 0;
  private skipLf = false;
  private firstLine = true;
  private quietLines = 0;
  private eventName: Uint8Array | null = null;
  private dataPieces: Uint8Array[] = [];
  private dataLength = 0;
  private dataSize = 0;
  /** Whether every data line of the open event is valid UTF-8 (then it is dispatched as it is). */
  private dataUtf8 = true;
  private collected: Uint8Array[] | null = null;
  /** Events dispatched with data. */
  protected events = 0;
  /** Body bytes fed before the current chunk. */
  private fed = 0;
  /**
   * Where the line being parsed starts and where its line end ends, as offsets in the body (a
   * CRLF's LF, skipped before the next line, is outside both): what a pass-through needs to
   * send the body's bytes as they came (`lineParsed`).
   */
  protected lineStart = 0;
  protected lineEnd = 0;
  /** Whether the line ended with a CR that ended the chunk: an LF may come first in the next. */
  protected crAtChunkEnd = false;

  constructor(options: DecoderOptions, mapping: 'sse' | 'compat') {
    this.limits = resolveLimits(options, mapping);
    // The resolved limits as they are (spreading two option objects into a new one cost a
    // framing server's call tens of microseconds on Node.js 20).
    this.frames = new StreamDecoder(options.requestKey == null ? this.limits : { ...this.limits, requestKey: options.requestKey });
    this.lineBound = this.limits.maxEventData + LINE_FIELD_ALLOWANCE;
  }

  /** The stream head, once HEAD passed its checks. */
  get head(): StreamHead | null {
    return this.frames.head;
  }

  /** What the frame decoder received. */
  get progress(): Progress {
    return this.frames.progress;
  }

  protected fail(kind: MappingErrorKind, message: string, detail: ErrorDetail = {}): void {
    this.frames.fail(kind, message, detail);
  }

  /** Feeds frame bytes to the frame decoder, collecting the messages they verify. */
  protected move(bytes: Uint8Array): void {
    const verified = this.frames.feed(bytes);
    if (verified.length > 0) {
      (this.collected ??= []).push(...verified);
    }
  }

  feed(chunk: Uint8Array): readonly Uint8Array[] {
    this.collected = null;
    const n = chunk.length;
    let i = 0;
    let nextLf = -2;
    let nextCr = -2;
    const buf = Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
    while (i < n && this.frames.error === null) {
      if (this.skipLf) {
        this.skipLf = false;
        if (chunk[i] === LF) {
          i += 1;
          continue;
        }
      }
      if (this.pendingLength === 0) {
        this.lineStart = this.fed + i;
      }
      // The next line end: each search runs once per chunk and line end, never over the rest
      // of the chunk again (no quadratic rescans on many short lines).
      if (nextLf !== -1 && nextLf < i) {
        nextLf = buf.indexOf(LF, i);
      }
      if (nextCr !== -1 && nextCr < i) {
        nextCr = buf.indexOf(CR, i);
      }
      const end = nextLf === -1 ? nextCr : nextCr === -1 ? nextLf : Math.min(nextLf, nextCr);
      if (end === -1) {
        this.keep(chunk.subarray(i));
        break;
      }
      let line = chunk.subarray(i, end);
      if (this.pendingLength > 0) {
        this.pending.push(line);
        const length = this.pendingLength + line.length;
        line = concat(this.pending, length);
        this.pending = [];
        this.pendingLength = 0;
      }
      this.skipLf = chunk[end] === CR;
      i = end + 1;
      if (line.length > this.lineBound) {
        this.tooLarge();
        break;
      }
      // A CRLF's LF belongs to its line; a CR that ends the chunk may yet get one.
      const crlf = this.skipLf && i < n && chunk[i] === LF;
      this.lineEnd = this.fed + i + (crlf ? 1 : 0);
      this.crAtChunkEnd = this.skipLf && i === n;
      this.line(line);
    }
    this.fed += n;
    return this.collected ?? EMPTY;
  }

  private keep(piece: Uint8Array): void {
    this.pending.push(piece);
    this.pendingLength += piece.length;
    // §15: a line is buffered whole before it is parsed, so every line is bounded.
    if (this.pendingLength > this.lineBound) {
      this.tooLarge();
    }
  }

  private tooLarge(): void {
    this.fail('EventTooLarge', `SSE event data exceeds ${this.limits.maxEventData} bytes`, { max: this.limits.maxEventData });
  }

  private line(raw: Uint8Array): void {
    let line = raw;
    if (this.firstLine) {
      this.firstLine = false;
      if (line[0] === 0xef && line[1] === 0xbb && line[2] === 0xbf) {
        line = line.subarray(3);
      }
    }
    const colon = line.indexOf(COLON);
    const fieldEnd = colon === -1 ? line.length : colon;
    let valueStart = colon === -1 ? line.length : colon + 1;
    if (colon !== -1 && line[valueStart] === SPACE) {
      valueStart += 1;
    }
    const isData = isField(line, fieldEnd, DATA_FIELD);
    // §15: the lines in a row that carry no data are bounded; a data line with data resets it.
    if (isData && valueStart < line.length) {
      this.quietLines = 0;
    } else {
      this.quietLines += 1;
      if (this.quietLines > this.limits.maxSseCommentsInARow) {
        this.fail('TooManyComments', `more than ${this.limits.maxSseCommentsInARow} SSE lines in a row carry no data`, {
          max: this.limits.maxSseCommentsInARow,
        });
        return;
      }
    }
    if (line.length === 0) {
      this.dispatch();
      this.lineParsed('blank', false);
      return;
    }
    if (colon === 0) {
      this.comment(line.subarray(1));
      this.lineParsed('comment', false);
      return;
    }
    if (isData) {
      const value = line.subarray(valueStart);
      if (this.dataPieces.length > 0) {
        this.dataLength += 1;
        this.dataSize += 1;
      }
      this.dataPieces.push(value);
      this.dataLength += value.length;
      // §15: the data as SSE joins it, counted in UTF-8 bytes (invalid bytes as U+FFFD)
      if (isUtf8(value)) {
        this.dataSize += value.length;
      } else {
        this.dataUtf8 = false;
        this.dataSize += asDispatched(value).length;
      }
      if (this.dataSize > this.limits.maxEventData) {
        this.tooLarge();
      }
    } else if (isField(line, fieldEnd, EVENT_FIELD)) {
      this.eventName = line.subarray(valueStart);
    }
    // id, retry and unknown fields are ignored
    if (this.frames.error === null) {
      this.lineParsed('field', isData);
    }
  }

  /** Whether a line has begun and not ended yet (it starts at `lineStart`). */
  protected get partialLine(): boolean {
    return this.pendingLength > 0;
  }

  /**
   * Called after each line was parsed (after `event` for the blank line that dispatched one),
   * with `lineStart` and `lineEnd` set; nothing by default.
   */
  protected lineParsed(_kind: 'blank' | 'comment' | 'field', _data: boolean): void {
    // a decoder needs only the events and comments
  }

  private dispatch(): void {
    const name = this.eventName;
    const pieces = this.dataPieces;
    const length = this.dataLength;
    const utf8 = this.dataUtf8;
    this.eventName = null;
    this.dataPieces = [];
    this.dataLength = 0;
    this.dataSize = 0;
    this.dataUtf8 = true;
    if (length === 0) {
      // §15: empty data carries nothing (a priming event, a named event without data): skipped
      return;
    }
    this.events += 1;
    this.event(name === null ? null : Buffer.from(name).toString('utf8'), joinLf(pieces, length), utf8);
  }

  /** A comment line, without its colon. */
  protected abstract comment(text: Uint8Array): void;

  /**
   * An event with data: its name (`null` if it had no `event` field), its data, and whether the
   * data is valid UTF-8 (else it is dispatched with U+FFFD for the invalid bytes, §18.3).
   */
  protected abstract event(name: string | null, data: Uint8Array, utf8: boolean): void;

  finish(): Verdict {
    // An event still open when the body ends is discarded (§15): the stream lacks its end.
    return this.frames.finish();
  }
}

const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;
const ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';

/**
 * The canonical padded standard base64 of `text` (SPEC.md §15, §18.2), decoded; `null` if it is
 * not canonical (length not a multiple of 4, a stray character, missing padding, trailing bits).
 */
export function decodeCanonicalBase64(text: string): Uint8Array | null {
  if (text.length % 4 !== 0 || !BASE64.test(text)) {
    return null;
  }
  // The bits of the last character before `=` padding that no byte uses must be zero.
  const padding = text.endsWith('==') ? 2 : text.endsWith('=') ? 1 : 0;
  if (padding > 0) {
    const last = ALPHABET.indexOf(text[text.length - padding - 1]!);
    if ((last & (padding === 2 ? 0x0f : 0x03)) !== 0) {
      return null;
    }
  }
  const bytes = Buffer.from(text, 'base64');
  return new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

/** The base64 SSE mapping (SPEC.md §15): `mcp-frame` events whose data is base64 of whole frames. */
export class SseDecoder extends EventStreamDecoder {
  constructor(options: DecoderOptions = {}) {
    super(options, 'sse');
  }

  protected comment(): void {
    // a keep-alive
  }

  protected event(name: string | null, data: Uint8Array): void {
    if (name !== 'mcp-frame') {
      const label = name ?? 'message';
      this.fail('UnexpectedEvent', `unexpected SSE event ${JSON.stringify(label)} in a framed stream (expected "mcp-frame")`, {
        event: label,
      });
      return;
    }
    // the LF between data lines is not base64: dropped
    const latin1 = Buffer.from(data.buffer, data.byteOffset, data.byteLength).toString('latin1');
    const text = latin1.includes('\n') ? latin1.replaceAll('\n', '') : latin1;
    const frames = decodeCanonicalBase64(text);
    if (frames === null) {
      this.fail('InvalidBase64', `SSE event ${this.events} carries invalid base64`, { event: this.events });
      return;
    }
    this.move(frames);
  }
}

/** One event of a plain (unframed) event stream. */
export interface PlainEvent {
  /** Its `event` field (`null`: a `message` event without one). */
  name: string | null;
  /** Its data, as the SSE parser joined it. */
  data: Uint8Array;
}

/**
 * An unframed event stream parsed with the same rules and bounds (the standalone GET stream,
 * or a response under an accept-ambiguity policy): nothing in it is verified. Its errors
 * (`EventTooLarge`, `TooManyComments`) are in `frames.error`.
 */
export class PlainEventStream extends EventStreamDecoder {
  private readonly out: PlainEvent[] = [];

  constructor(options: DecoderOptions = {}) {
    super(options, 'compat');
  }

  protected comment(): void {
    // a keep-alive
  }

  protected event(name: string | null, data: Uint8Array): void {
    this.out.push({ name, data });
  }

  /** The events completed since the last call. */
  take(): PlainEvent[] {
    return this.out.splice(0);
  }
}

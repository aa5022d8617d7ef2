/**
 * The streaming, sans-I/O frame decoder (SPEC.md §2–§7): bytes in, in any split; verified
 * messages out; one verdict at the end of input.
 *
 * Each byte is examined once: a header is checked as soon as its bytes arrive (the magic at the
 * second byte, the version at the third, the rest at the twentieth) and before any byte of its
 * payload is awaited or kept; a DATA payload goes to CRC-32 and SHA-256 as it arrives, and the
 * message is handed out only once its MESSAGE_END passed the length and digest checks. Nothing
 * is reserved from a declared length.
 *
 * @module
 */

import { createHash, type Hash } from 'node:crypto';

import { concat } from './bytes.js';
import { DecodeError, escapePeerText, type ErrorDetail, type ErrorKind, type TruncationPoint } from './errors.js';
import {
  ABORT,
  DATA,
  HEAD,
  KEEPALIVE,
  MAGIC0,
  MAGIC1,
  MESSAGE_END,
  STREAM_END,
  VERSION,
  crc,
  isUnknownKind,
  kindName,
  u32,
  u64,
} from './frame.js';
import { fingerprint, hex, isRequestKey, keyBytes, type RequestKey } from './ids.js';
import { isJsonRpcResponse } from './jsonrpc.js';
import { HEADER_LEN, MAX_ABORT_TEXT, SEQUENCE_WINDOW, resolveLimits, type Limits, type ResolvedLimits } from './limits.js';
import type { Progress, StreamHead, Verdict } from './verdict.js';

/** Options of a {@link StreamDecoder}. */
export interface DecoderOptions extends Limits {
  /**
   * The request key the request carried: HEAD must echo it, or the stream answers another
   * request (`RequestKeyMismatch`, SPEC.md §3, §10). Without it, any key is accepted.
   */
  requestKey?: RequestKey | null;
}

const EMPTY: readonly Uint8Array[] = Object.freeze([]);
const NO_BYTES = new Uint8Array(0);
const utf8 = new TextDecoder('utf-8', { fatal: true });

/** Thrown inside the decoder, caught at `feed`: the error becomes sticky there. */
class Stop {
  constructor(readonly error: DecodeError) {}
}

function hex32(value: number): string {
  return `0x${value.toString(16).padStart(8, '0')}`;
}

/**
 * Decodes one framed stream (SPEC.md §2–§7).
 *
 * ```ts
 * const decoder = new StreamDecoder({ requestKey });
 * for (const chunk of chunks) {
 *   for (const message of decoder.feed(chunk)) use(message); // verified
 * }
 * const verdict = decoder.finish(); // the end of input: clean, aborted or an error
 * ```
 *
 * `feed` keeps views of the bytes it is given until the message they belong to is verified:
 * do not modify a buffer after feeding it.
 */
export class StreamDecoder {
  readonly limits: ResolvedLimits;
  private readonly expectedKey: Uint8Array | null;

  // The header being read, and the frame whose payload is awaited.
  private readonly header = new Uint8Array(HEADER_LEN);
  private headerFill = 0;
  private awaiting = false;
  private kind = 0;
  private seq = 0;
  private length = 0;
  private payloadCrc = 0;
  private frameOffset = 0;
  private received = 0;
  private runningCrc = 0;
  private pieces: Uint8Array[] = [];

  // The stream.
  private offset = 0;
  private frames = 0;
  private lastSeq: number | null = null;
  private seenHead = false;
  private inMessage = false;
  private messageEnds = 0;
  private keepalivesInARow = 0;
  private ignorableInARow = 0;
  private terminal: { code: number; reason: string } | 'clean' | null = null;
  private streamHead: StreamHead | null = null;

  // The open message: DATA payloads whose CRC passed, and their SHA-256 so far.
  private messagePieces: Uint8Array[] = [];
  private messageLength = 0;
  private sha: Hash | null = null;
  private abortedOpenBytes = 0;

  private readonly verified: Uint8Array[] = [];
  private fresh: Uint8Array[] | null = null;
  private failure: DecodeError | null = null;

  constructor(options: DecoderOptions = {}) {
    this.limits = resolveLimits(options);
    const key = options.requestKey;
    if (key !== undefined && key !== null && !isRequestKey(key)) {
      throw new RangeError(`requestKey must be 32 lowercase hex digits, not all zero`);
    }
    this.expectedKey = key ? keyBytes(key) : null;
  }

  /** The error that ended decoding, if any (errors are final, SPEC.md §2.2). */
  get error(): DecodeError | null {
    return this.failure;
  }

  /** Whether a terminal frame (STREAM_END or ABORT) arrived; the input must still end (§3). */
  get ended(): boolean {
    return this.terminal !== null;
  }

  /** Whether a DATA frame opened a message not yet ended (SPEC.md §1). */
  get insideMessage(): boolean {
    return this.inMessage;
  }

  /** The stream head, once HEAD passed its checks. */
  get head(): StreamHead | null {
    return this.streamHead;
  }

  /** What was received so far. */
  get progress(): Progress {
    return {
      frames: this.frames,
      bytes: this.offset,
      lastSequence: this.lastSeq,
      messages: this.verified.length,
      openMessageBytes: this.terminal === null ? this.messageLength : this.abortedOpenBytes,
    };
  }

  /**
   * Consumes the next bytes of the stream (any split) and returns the messages verified by
   * them, in order. After an error it consumes nothing and returns nothing.
   */
  feed(data: Uint8Array): readonly Uint8Array[] {
    if (this.failure !== null || data.length === 0) {
      return EMPTY;
    }
    this.fresh = null;
    try {
      this.consume(data);
    } catch (stop) {
      if (!(stop instanceof Stop)) {
        throw stop;
      }
      this.failure = stop.error;
    }
    return this.fresh ?? EMPTY;
  }

  /**
   * Records a failure found outside the frames (an SSE mapping's error), unless an error of the
   * frames came first: the first error in body order wins (SPEC.md §15, §18.5).
   */
  fail(kind: ErrorKind, message: string, detail: ErrorDetail = {}): void {
    this.failure ??= new DecodeError(kind, message, detail);
  }

  private stop(kind: ErrorKind, message: string, detail: ErrorDetail = {}): never {
    throw new Stop(new DecodeError(kind, message, detail));
  }

  private consume(data: Uint8Array): void {
    const n = data.length;
    let i = 0;
    while (i < n) {
      if (this.terminal !== null) {
        // §3: nothing may follow a terminal frame, also later in the transport.
        this.stop('TrailingData', `${n - i} bytes of trailing data after the end of the stream`, {
          offset: this.offset,
          len: n - i,
        });
      }
      if (!this.awaiting) {
        const take = Math.min(HEADER_LEN - this.headerFill, n - i);
        const h = this.header;
        h.set(data.subarray(i, i + take), this.headerFill);
        this.headerFill += take;
        i += take;
        // §2: the magic and the version are checked as soon as their bytes arrive, so a short
        // unframed body (a JSON error, a proxy's page) is BadMagic, not a truncation.
        if (this.headerFill >= 2 && (h[0] !== MAGIC0 || h[1] !== MAGIC1)) {
          this.badMagic();
        }
        if (this.headerFill >= 3 && h[2] !== VERSION) {
          this.stop('UnsupportedVersion', `unsupported format version ${h[2]} at offset ${this.offset}`, {
            offset: this.offset,
            version: h[2],
          });
        }
        if (this.headerFill === HEADER_LEN) {
          this.checkHeader();
          this.headerFill = 0;
          this.offset += HEADER_LEN;
          if (this.length === 0) {
            this.complete();
          }
        }
      } else {
        const take = Math.min(this.length - this.received, n - i);
        const piece = data.subarray(i, i + take);
        i += take;
        this.received += take;
        this.offset += take;
        this.runningCrc = crc(piece, this.runningCrc);
        if (this.kind === DATA) {
          // Hashed as it arrives; kept, never handed out before MESSAGE_END verified it (§5).
          (this.sha ??= createHash('sha256')).update(piece);
          this.messagePieces.push(piece);
        } else {
          this.pieces.push(piece);
        }
        if (this.received === this.length) {
          this.complete();
        }
      }
    }
  }

  private badMagic(): never {
    const found = `[${Array.from(this.header.subarray(0, 2), (b) => b.toString(16).padStart(2, '0')).join(', ')}]`;
    this.stop('BadMagic', `bad magic bytes ${found} at offset ${this.offset}, not an mcp-framing stream`, {
      offset: this.offset,
    });
  }

  /** §2 "Header first": every check a header allows, in order, before its payload. */
  private checkHeader(): void {
    const h = this.header;
    const off = this.offset;
    // 2. header CRC over bytes 0..16 (magic and version were checked as they arrived)
    const stored = u32(h, 16);
    const computed = crc(h.subarray(0, 16));
    if (stored !== computed) {
      this.stop(
        'HeaderChecksumMismatch',
        `header checksum mismatch at offset ${off}: header says ${hex32(stored)}, bytes give ${hex32(computed)}`,
        { offset: off },
      );
    }
    const kind = h[3]!;
    const seq = u32(h, 4);
    const length = u32(h, 8);
    // 3. kind (§3)
    if (isUnknownKind(kind)) {
      this.stop('UnknownFrameKind', `unknown frame kind 0x${kind.toString(16).padStart(2, '0')} at offset ${off}`, {
        offset: off,
        kind,
      });
    }
    // 4. place in the stream, then the sequence number (§3, §4)
    if (!this.seenHead) {
      if (kind !== HEAD) {
        this.stop('UnexpectedFrame', `unexpected ${kindName(kind)} frame awaiting the stream head`, { offset: off });
      }
    } else {
      const expected = (this.lastSeq! + 1) >>> 0;
      if (seq !== expected) {
        const distance = (seq - expected) >>> 0;
        if (distance <= SEQUENCE_WINDOW) {
          this.stop('SequenceGap', `sequence gap: expected frame ${expected}, found ${seq}`, { offset: off, expected, found: seq });
        }
        if (distance >= 0x1_0000_0000 - SEQUENCE_WINDOW) {
          this.stop('SequenceReplay', `sequence replay: expected frame ${expected}, found ${seq} again`, {
            offset: off,
            expected,
            found: seq,
          });
        }
        this.stop('ForeignFrame', `foreign frame (splice of another attempt?): expected sequence ${expected}, found ${seq}`, {
          offset: off,
          expected,
          found: seq,
        });
      }
      const place = this.inMessage ? 'inside a message' : 'between messages';
      if (kind === HEAD || (kind === STREAM_END && this.inMessage)) {
        this.stop('UnexpectedFrame', `unexpected ${kindName(kind)} frame ${place}`, { offset: off });
      }
    }
    // 5. the kind's length rule (§3), then the frame limit (§6), then the message limit
    let lengthOk: boolean;
    switch (kind) {
      case HEAD:
        lengthOk = length === 32;
        break;
      case DATA:
        lengthOk = length >= 1;
        break;
      case MESSAGE_END:
        lengthOk = length === 40;
        break;
      case STREAM_END:
        lengthOk = length === 8;
        break;
      case ABORT:
        lengthOk = length >= 2 && length <= 2 + MAX_ABORT_TEXT;
        break;
      case KEEPALIVE:
        lengthOk = length === 0;
        break;
      default:
        lengthOk = true; // ignorable: 0 ..= the frame limit
    }
    if (!lengthOk) {
      this.stop('InvalidFrameLength', `invalid payload length ${length} for a ${kindName(kind)} frame`, { offset: off, length });
    }
    const limits = this.limits;
    if (length > limits.maxFramePayload) {
      this.stop('FrameTooLarge', `frame payload of ${length} bytes exceeds the limit of ${limits.maxFramePayload}`, {
        offset: off,
        length,
        max: limits.maxFramePayload,
      });
    }
    if (kind === DATA && this.messageLength + length > limits.maxMessageSize) {
      this.stop(
        'MessageTooLarge',
        `message of at least ${this.messageLength + length} bytes exceeds the limit of ${limits.maxMessageSize}`,
        { offset: off, length: this.messageLength + length, max: limits.maxMessageSize },
      );
    }
    // 6. the per-stream bounds (§6.1)
    const end = off + HEADER_LEN + length;
    if (end > limits.maxStreamBytes) {
      this.stop('StreamTooLarge', `stream of at least ${end} bytes exceeds the limit of ${limits.maxStreamBytes}`, {
        offset: off,
        length: end,
        max: limits.maxStreamBytes,
      });
    }
    if (kind === KEEPALIVE && this.keepalivesInARow >= limits.maxKeepalivesInARow) {
      this.stop('TooManyKeepAlives', `more than ${limits.maxKeepalivesInARow} KEEPALIVE frames in a row`, { offset: off });
    }
    if (kind >= 0x80 && this.ignorableInARow >= limits.maxIgnorableInARow) {
      this.stop('TooManyIgnorableFrames', `more than ${limits.maxIgnorableInARow} ignorable frames in a row`, { offset: off });
    }
    if (kind === MESSAGE_END && this.messageEnds >= limits.maxMessages) {
      this.stop('TooManyMessages', `stream carries more than ${limits.maxMessages} messages`, { offset: off });
    }
    this.lastSeq = seq;
    this.awaiting = true;
    this.kind = kind;
    this.seq = seq;
    this.length = length;
    this.payloadCrc = u32(h, 12);
    this.frameOffset = off;
    this.received = 0;
    this.runningCrc = 0;
  }

  /** A whole payload arrived: its CRC, then the kind's payload rules (§2, §3, §4). */
  private complete(): void {
    this.awaiting = false;
    const kind = this.kind;
    if (this.runningCrc !== this.payloadCrc) {
      this.stop(
        'PayloadChecksumMismatch',
        `payload checksum mismatch in ${kindName(kind)} frame at offset ${this.frameOffset}: header says ${hex32(this.payloadCrc)}, payload gives ${hex32(this.runningCrc)}`,
        { offset: this.frameOffset },
      );
    }
    this.frames += 1;
    if (kind === DATA) {
      this.inMessage = true;
      this.messageLength += this.length;
      this.keepalivesInARow = 0;
      this.ignorableInARow = 0;
      return;
    }
    const payload = this.length === 0 ? NO_BYTES : concat(this.pieces, this.length);
    this.pieces = [];
    switch (kind) {
      case HEAD:
        return this.onHead(payload);
      case MESSAGE_END:
        return this.onMessageEnd(payload);
      case STREAM_END: {
        const count = u64(payload, 0);
        if (count !== this.messageEnds) {
          this.stop('MessageCountMismatch', `stream end declares ${count} messages, ${this.messageEnds} received`, {
            declared: count,
            received: this.messageEnds,
          });
        }
        this.terminal = 'clean';
        return;
      }
      case ABORT: {
        const code = (payload[0]! << 8) | payload[1]!;
        let reason: string;
        try {
          reason = utf8.decode(payload.subarray(2));
        } catch {
          this.stop('InvalidAbort', 'abort frame reason is not valid UTF-8', { code });
        }
        // §3: an open message is discarded, never delivered.
        this.abortedOpenBytes = this.messageLength;
        this.messagePieces = [];
        this.messageLength = 0;
        this.sha = null;
        this.inMessage = false;
        this.terminal = { code, reason };
        return;
      }
      case KEEPALIVE:
        this.keepalivesInARow += 1;
        return;
      default:
        this.ignorableInARow += 1; // checked like any frame, then skipped (§3)
    }
  }

  private onHead(payload: Uint8Array): void {
    const attempt = payload.subarray(16, 32);
    const first = u32(attempt, 0);
    // §4: HEAD's sequence number is its attempt id's first four bytes
    if (this.seq !== first) {
      this.stop('ForeignFrame', `foreign frame (splice of another attempt?): expected sequence ${first}, found ${this.seq}`, {
        expected: first,
        found: this.seq,
      });
    }
    const key = payload.subarray(0, 16);
    const zero = key.every((b) => b === 0);
    // §3, §10: a client that sent a key rejects a HEAD with another one, or with none
    if (this.expectedKey !== null && !key.every((b, i) => b === this.expectedKey![i])) {
      const found = zero ? 'no key' : fingerprint(key);
      this.stop('RequestKeyMismatch', `request key mismatch: expected ${fingerprint(this.expectedKey)}, stream is for ${found}`, {
        found: zero ? null : hex(key),
      });
    }
    this.seenHead = true;
    this.streamHead = { requestKey: zero ? null : hex(key), attemptId: hex(attempt) };
  }

  private onMessageEnd(payload: Uint8Array): void {
    const index = this.messageEnds;
    const declared = u64(payload, 0);
    if (declared !== this.messageLength) {
      this.stop('LengthMismatch', `message ${index}: end frame declares ${declared} bytes, ${this.messageLength} received`, {
        declared,
        received: this.messageLength,
      });
    }
    const digest = (this.sha ?? createHash('sha256')).digest();
    const claimed = payload.subarray(8, 40);
    if (!digest.equals(claimed)) {
      this.stop(
        'DigestMismatch',
        `message ${index}: SHA-256 mismatch (declared ${hex(claimed.subarray(0, 4))}, received ${hex(digest.subarray(0, 4))})`,
        { index },
      );
    }
    const message = this.messageLength === 0 ? NO_BYTES : concat(this.messagePieces, this.messageLength);
    this.messagePieces = [];
    this.messageLength = 0;
    this.sha = null;
    this.inMessage = false;
    this.messageEnds += 1;
    this.keepalivesInARow = 0;
    this.ignorableInARow = 0;
    this.verified.push(message);
    (this.fresh ??= []).push(message);
  }

  /**
   * §7 row 4 (§7.1): this decoder expects a request key and assembles messages; the first
   * verified message that is a JSON-RPC response is the stream's final response; it is the last
   * message, and after its MESSAGE_END no DATA, MESSAGE_END or ABORT header was accepted (only
   * KEEPALIVE, ignorable frames and part of at most one more frame: a header, or a STREAM_END or
   * ignorable payload). Decided at the end of input, the one moment it matters, so a stream
   * that ends with its sentinel is never parsed as JSON.
   */
  private finalResponseDelivered(): boolean {
    const n = this.verified.length;
    if (this.expectedKey === null || n === 0 || this.inMessage) {
      return false;
    }
    if (this.awaiting && (this.kind === DATA || this.kind === MESSAGE_END || this.kind === ABORT)) {
      return false;
    }
    const first = this.verified.findIndex((message) => isJsonRpcResponse(message));
    return first === n - 1;
  }

  /** The verdict at the end of input (SPEC.md §7): the first of its rows that holds. */
  finish(): Verdict {
    const progress = this.progress;
    const base = { messages: this.verified.slice(), progress, head: this.streamHead, abort: null, truncation: null };
    if (this.failure !== null) {
      return {
        ...base,
        verdict: 'error',
        sentinelSeen: false,
        regime: 'B',
        error: this.failure.kind,
        detail: this.failure.message,
        fields: this.failure.detail,
      };
    }
    if (this.terminal === 'clean') {
      return { ...base, verdict: 'clean', sentinelSeen: true, regime: 'A', error: null, detail: 'complete', fields: {} };
    }
    if (this.terminal !== null) {
      const { code, reason } = this.terminal;
      return {
        ...base,
        verdict: 'aborted',
        sentinelSeen: false,
        regime: 'A',
        error: 'PeerAbort',
        abort: { code, reason },
        detail: `stream aborted by the peer: code ${code}: ${escapePeerText(reason)}`,
        fields: { code, reason },
      };
    }
    if (this.finalResponseDelivered()) {
      return {
        ...base,
        verdict: 'clean',
        sentinelSeen: false,
        regime: 'B',
        error: null,
        detail: 'complete without the sentinel: the final response verified, the input ended before STREAM_END',
        fields: { sentinel: 'missing' },
      };
    }
    let at: TruncationPoint;
    let where: string;
    if (this.awaiting) {
      at = 'InPayload';
      where = `inside the payload of a ${kindName(this.kind)} frame (${this.received} of ${this.length} bytes)`;
    } else if (this.headerFill > 0) {
      at = 'InHeader';
      where = `inside a frame header (${this.headerFill} of 20 bytes)`;
    } else if (this.frames === 0) {
      at = 'NoFrame';
      where = 'before any frame';
    } else if (this.inMessage) {
      at = 'InMessage';
      where = `inside a message (${this.messageLength} bytes received)`;
    } else {
      at = 'BetweenMessages';
      where = `between messages (${this.verified.length} complete)`;
    }
    const detail = `stream truncated ${where}: ${progress.frames} frames, ${progress.bytes} bytes received`;
    return { ...base, verdict: 'error', sentinelSeen: false, regime: 'B', error: 'Truncated', truncation: at, detail, fields: { truncation: at, where } };
  }
}

/**
 * Reading an inner handler's SSE response with the package's event-stream parser (SPEC.md §15
 * parsing rules and bounds), in two ways:
 *
 * - {@link InnerMessages}: its messages and keep-alives, for the binary and SSE mappings, which
 *   write every message anew in frames;
 * - {@link SsePassthrough}: its bytes as they came, with a compatible-mapping record before each
 *   message event (SPEC.md §18.8) and/or the contract declared in the final response's data
 *   lines (§11.2): the Rust crate's `SsePassthrough`.
 *
 * @module
 */

import type { BodyEncoder } from '../body-encoder.js';
import { AbortCode, EncodeError } from '../encoder.js';
import { isResponseText } from '../jsonrpc.js';
import { EventStreamDecoder, asDispatched, isMessageEvent } from '../sse.js';
import type { Declaration } from './declare.js';

const textEncoder = new TextEncoder();
const BOM = [0xef, 0xbb, 0xbf];

/** What the message limit refuses (SPEC.md §16: one byte more is an ABORT of code 5). */
export function tooLarge(len: number, max: number): EncodeError {
  return new EncodeError('MessageTooLarge', `message of at least ${len} bytes exceeds the limit of ${max}`);
}

/** One write to a framed stream. */
export type Outgoing = { kind: 'message'; data: Uint8Array; last: boolean } | { kind: 'keepAlive' };

/** The messages of an inner SSE body, each event read within the message limit. */
export class InnerMessages extends EventStreamDecoder {
  private readonly items: Outgoing[] = [];
  private comments = false;
  /** Whether the final response was read: the POST stream has nothing more for this request. */
  finalSeen = false;

  constructor(readonly maxMessage: number) {
    super({ maxEventData: maxMessage }, 'compat');
  }

  protected comment(): void {
    this.comments = true;
  }

  protected event(name: string | null, data: Uint8Array, utf8: boolean): void {
    if (!isMessageEvent(name) || this.finalSeen) {
      return; // priming events and events of other types carry no message
    }
    const text = utf8 ? data : asDispatched(data);
    const last = isResponseText(text);
    this.finalSeen = last;
    this.items.push({ kind: 'message', data: text, last });
  }

  /**
   * The writes the next bytes of the inner body call for, and the ABORT that follows them when
   * the body cannot be read further.
   */
  next(chunk: Uint8Array): { items: Outgoing[]; failed: Failure | null } {
    this.feed(chunk);
    const items = this.items.splice(0);
    // The inner server's `:` keep-alives become KEEPALIVE frames: intermediaries keep seeing
    // traffic during a long tool call.
    if (this.comments) {
      this.comments = false;
      items.unshift({ kind: 'keepAlive' });
    }
    return { items, failed: failure(this, this.maxMessage) };
  }
}

/** Why an inner body cannot be framed further: the ABORT it calls for (SPEC.md §3.1). */
export interface Failure {
  code: number;
  reason: string;
}

/** What the parser's error calls for: an event over the message limit is code 5, else 1. */
function failure(decoder: EventStreamDecoder, max: number): Failure | null {
  const error = decoder.frames.error;
  if (error === null) {
    return null;
  }
  if (error.kind === 'EventTooLarge') {
    const err = tooLarge(max + 1, max);
    return { code: err.abortCode, reason: err.message };
  }
  return { code: 1, reason: `the response stream: ${error.message}` };
}

interface BlockLine {
  start: number;
  end: number;
  data: boolean;
}

/**
 * An inner SSE body passed through as it came, but for a record before every message event
 * (compatible framing, the inner keep-alive comments becoming KEEPALIVE records) and the contract
 * written into the final response's data lines (declaration). Priming events, events of other
 * types and comments inside events pass unchanged.
 */
export class SsePassthrough extends EventStreamDecoder {
  private raw: Uint8Array[] = [];
  /** The body offset of `raw[0]`'s first byte. */
  private rawStart = 0;
  /** Body bytes up to here were sent (or replaced). */
  private sent = 0;
  private received = 0;
  private out: Uint8Array[] = [];
  private blockStart: number | null = null;
  private blockLines: BlockLine[] = [];
  private dispatched: { name: string | null; data: Uint8Array; utf8: boolean } | null = null;
  /** After the final response (unframed) or a failure: the rest goes as it comes. */
  private transparent = false;
  /** The framed stream ended (the final response's record held STREAM_END, or an ABORT). */
  done = false;
  /** The final response was sent, its last line ending in a CR that ended a chunk. */
  private lfPending = false;

  constructor(
    private readonly encoder: BodyEncoder | null,
    private declaration: Declaration | null,
    private readonly maxMessage: number,
  ) {
    super({ maxEventData: maxMessage }, 'compat');
  }

  /** The bytes to send for the next bytes of the inner body. */
  pass(chunk: Uint8Array): Uint8Array[] {
    if (this.lfPending) {
      // The final response's event ended with a CR at the end of a chunk: its LF, if it is
      // one, goes with it (a lone CR leaves some SSE parsers waiting for the next byte).
      this.lfPending = false;
      this.done = true;
      return chunk[0] === 0x0a ? [chunk.subarray(0, 1)] : [];
    }
    if (this.done) {
      return [];
    }
    if (this.transparent) {
      return [chunk];
    }
    this.raw.push(chunk);
    this.received += chunk.length;
    this.feed(chunk);
    if (this.frames.error !== null) {
      this.giveUp();
    } else if (this.transparent) {
      this.sendUpTo(this.received);
    } else if (!this.done && this.blockStart === null) {
      // Between events, what is parsed goes out now; an unfinished line may be a keep-alive
      // comment (replaced by a record) or open an event (a record goes before it).
      this.sendUpTo(this.partialLine ? this.lineStart : this.received);
    }
    return this.out.splice(0);
  }

  /** The bytes to send when the inner body ended; `failed` if it failed. */
  end(failed: string | null): Uint8Array[] {
    if (this.lfPending) {
      this.lfPending = false;
      this.done = true;
    }
    if (this.done || this.transparent) {
      return this.out.splice(0);
    }
    if (this.encoder !== null) {
      const reason = failed === null ? 'the upstream response stream ended before its final response' : `upstream body failed: ${failed}`;
      this.out.push(this.encoder.abort(AbortCode.UpstreamFailed, reason));
      this.done = true;
    } else {
      // An event left open, a line without its end: the client's, as they came.
      this.sendUpTo(this.received);
    }
    return this.out.splice(0);
  }

  private giveUp(): void {
    const failed = failure(this, this.maxMessage)!;
    if (this.encoder !== null) {
      this.out.push(this.encoder.abort(failed.code, failed.reason));
      this.done = true;
      return;
    }
    this.declaration?.notDeclared(failed.reason);
    this.declaration = null;
    this.sendUpTo(this.received);
    this.transparent = true;
  }

  private slice(from: number, to: number): Uint8Array {
    const pieces: Uint8Array[] = [];
    let at = this.rawStart;
    for (const chunk of this.raw) {
      const [s, e] = [Math.max(from, at), Math.min(to, at + chunk.length)];
      if (s < e) {
        pieces.push(chunk.subarray(s - at, e - at));
      }
      at += chunk.length;
    }
    return pieces.length === 1 ? pieces[0]! : Buffer.concat(pieces);
  }

  /** Forgets the raw bytes before `to`, which were sent or replaced. */
  private forget(to: number): void {
    this.sent = Math.max(this.sent, to);
    while (this.raw.length > 0 && this.rawStart + this.raw[0]!.length <= this.sent) {
      this.rawStart += this.raw.shift()!.length;
    }
  }

  private sendUpTo(to: number): void {
    if (to > this.sent) {
      this.out.push(this.slice(this.sent, to));
      this.forget(to);
    }
  }

  protected comment(): void {
    // handled in `lineParsed`, where the line's bytes are known
  }

  protected event(name: string | null, data: Uint8Array, utf8: boolean): void {
    this.dispatched = { name, data, utf8 };
  }

  protected override lineParsed(kind: 'blank' | 'comment' | 'field', data: boolean): void {
    if (this.done || this.lfPending || this.transparent) {
      return;
    }
    if (this.blockStart === null) {
      if (kind === 'field') {
        // An event opens: what came before it goes out, the record will go before it. A BOM
        // stays first in the body, where SSE skips it.
        const head = this.lineStart === 0 ? this.slice(0, 3) : null;
        const bom = head !== null && BOM.every((b, i) => head[i] === b);
        this.blockStart = bom ? 3 : this.lineStart;
        this.sendUpTo(this.blockStart);
        this.blockLines = [{ start: this.blockStart, end: this.lineEnd, data }];
      } else if (kind === 'comment' && this.encoder !== null) {
        // A keep-alive between events, as a KEEPALIVE record (SPEC.md §18.4).
        this.sendUpTo(this.lineStart);
        this.out.push(this.encoder.keepAlive());
        this.forget(this.lineEnd);
      }
      return;
    }
    // The line before ends where this one starts (with a CRLF's LF).
    this.blockLines.at(-1)!.end = this.lineStart;
    this.blockLines.push({ start: this.lineStart, end: this.lineEnd, data });
    if (kind !== 'blank') {
      return;
    }
    const event = this.dispatched;
    this.dispatched = null;
    const lines = this.blockLines;
    const start = this.blockStart;
    this.blockStart = null;
    this.blockLines = [];
    if (event === null || !isMessageEvent(event.name)) {
      // A priming event (`id` only), an event of another type: unchanged, unframed.
      this.sendUpTo(this.lineEnd);
      return;
    }
    let text = event.utf8 ? event.data : asDispatched(event.data);
    const last = isResponseText(text);
    let block: Uint8Array = this.slice(start, this.lineEnd);
    if (last && this.declaration !== null) {
      const declared = this.declaration.apply(text);
      this.declaration = null;
      if (declared !== null) {
        block = this.withData(lines, declared);
        text = textEncoder.encode(declared);
      }
    }
    if (this.encoder !== null) {
      try {
        const record = this.encoder.messageRecord(text, last);
        this.sendUpTo(start);
        this.out.push(record, block);
        if (last) {
          this.lfPending = this.crAtChunkEnd;
          this.done = !this.lfPending;
        }
      } catch (error) {
        if (!(error instanceof EncodeError)) {
          throw error;
        }
        // The event is dropped: no message without its record.
        this.out.push(this.encoder.fail(error));
        this.done = true;
      }
    } else {
      this.sendUpTo(start);
      this.out.push(block);
      // After the final response the body has nothing more to declare.
      this.transparent = last;
    }
    this.forget(this.lineEnd);
  }

  /** The event's lines with its data lines written anew for `data`, its other lines unchanged. */
  private withData(lines: BlockLine[], data: string): Uint8Array {
    const pieces: Uint8Array[] = [];
    let written = false;
    for (const line of lines) {
      if (!line.data) {
        pieces.push(this.slice(line.start, line.end));
      } else if (!written) {
        written = true;
        pieces.push(textEncoder.encode(data.split('\n').map((piece) => `data: ${piece}\n`).join('')));
      }
    }
    return Buffer.concat(pieces);
  }
}

/**
 * The compatible SSE mapping (SPEC.md §18): every message stays a plain MCP `message` event, the
 * frames travel in `:mcp-framing <base64>` comment records (a DATA frame as its header alone),
 * and the receiver rebuilds exactly the binary stream of §2–§7 from both, which the frame
 * decoder checks (§18.5).
 *
 * @module
 */

import type { DecoderOptions } from './decoder.js';
import { DATA, headerPasses, u32, ABORT, MESSAGE_END } from './frame.js';
import { HEADER_LEN } from './limits.js';
import { EventStreamDecoder, asDispatched, decodeCanonicalBase64, isMessageEvent } from './sse.js';

const RECORD_MARK = Buffer.from('mcp-framing');

type Item =
  | { type: 'frame'; bytes: Uint8Array }
  | { type: 'data'; header: Uint8Array; length: number }
  | { type: 'broken'; bytes: Uint8Array };

/** Decodes a body in the compatible SSE mapping (SPEC.md §18.5, the receiver's five steps). */
export class CompatDecoder extends EventStreamDecoder {
  private queue: Item[] = [];
  /** Payload length of the DATA frame waiting for its event, if one waits. */
  private waiting: number | null = null;
  /** An event filled DATA frames of the current message (no MESSAGE_END or ABORT moved since). */
  private openMessage = false;
  private records = 0;
  private messageEvents = 0;

  constructor(options: DecoderOptions = {}) {
    super(options, 'compat');
  }

  protected comment(text: Uint8Array): void {
    if (!RECORD_MARK.equals(text.subarray(0, RECORD_MARK.length))) {
      return; // a keep-alive
    }
    const record = this.records;
    this.records += 1;
    // step 1: no record while a DATA frame waits for its event
    if (this.waiting !== null) {
      this.fail('EventMissing', `framing record ${record} arrived while a message event was awaited`, { record });
      return;
    }
    const rest = text.subarray(RECORD_MARK.length);
    const data = rest[0] === 0x20 ? decodeCanonicalBase64(Buffer.from(rest.subarray(1)).toString('latin1')) : null;
    if (data === null || data.length === 0) {
      // canonical padded base64 of at least one byte (§18.2)
      this.fail('InvalidRecord', `invalid framing record ${record}`, { record });
      return;
    }
    // Split into frames; kinds and lengths come only from headers that pass §2 checks 1 and 2.
    let at = 0;
    while (at < data.length) {
      if (!headerPasses(data, at)) {
        this.queue.push({ type: 'broken', bytes: data.subarray(at) });
        break;
      }
      const kind = data[at + 3]!;
      const length = u32(data, at + 8);
      if (kind === DATA) {
        this.queue.push({ type: 'data', header: data.subarray(at, at + HEADER_LEN), length });
        at += HEADER_LEN;
        continue;
      }
      const end = at + HEADER_LEN + length;
      if (end > data.length) {
        this.queue.push({ type: 'broken', bytes: data.subarray(at) });
        break;
      }
      this.queue.push({ type: 'frame', bytes: data.subarray(at, end) });
      at = end;
    }
    this.flush(record);
  }

  /** Step 2: moves queued items into the binary stream, up to a DATA header, which waits. */
  private flush(record: number): void {
    while (this.queue.length > 0 && this.frames.error === null) {
      const item = this.queue.shift()!;
      if (item.type === 'frame') {
        this.move(item.bytes);
        const kind = item.bytes[3];
        if (kind === MESSAGE_END || kind === ABORT) {
          this.openMessage = false;
        }
      } else if (item.type === 'broken') {
        // the frame decoder, which sees these bytes first, names the precise error if any
        this.move(item.bytes);
        this.fail('InvalidRecord', `invalid framing record ${record}`, { record });
        return;
      } else {
        this.move(item.header);
        if (this.openMessage) {
          // one message, one event: a stock client would read two messages
          this.fail('SplitMessage', `framing record ${record} continues a message whose event was already received`, {
            record,
          });
          return;
        }
        this.waiting = item.length;
        return;
      }
    }
  }

  protected event(name: string | null, raw: Uint8Array, utf8: boolean): void {
    if (!isMessageEvent(name)) {
      this.fail('UnexpectedEvent', `unexpected SSE event ${JSON.stringify(name)} in a framed stream (expected "mcp-frame")`, {
        event: name,
      });
      return;
    }
    const index = this.messageEvents;
    this.messageEvents += 1;
    // step 3
    if (this.waiting === null) {
      this.fail('UnframedEvent', `SSE message event ${index} is not announced by a framing record`, { event: index });
      return;
    }
    // The event's bytes as dispatched: the data as UTF-8 (invalid sequences as U+FFFD).
    const data = utf8 ? raw : asDispatched(raw);
    let declared = this.waiting;
    let run = 0; // DATA headers after the waiting one, in the queue with nothing between
    while (run < this.queue.length && this.queue[run]!.type === 'data') {
      declared += (this.queue[run] as { length: number }).length;
      run += 1;
    }
    if (declared !== data.length) {
      this.fail('EventLengthMismatch', `SSE message event carries ${data.length} bytes, its DATA frames declare ${declared}`, {
        declared,
        carried: data.length,
      });
      return;
    }
    const headers = this.queue.splice(0, run) as { header: Uint8Array; length: number }[];
    let at = this.waiting;
    this.waiting = null;
    this.openMessage = true;
    this.move(data.subarray(0, at));
    for (const { header, length } of headers) {
      if (this.frames.error !== null) {
        return;
      }
      this.move(header);
      this.move(data.subarray(at, at + length));
      at += length;
    }
    this.flush(this.records - 1);
  }
}

/**
 * What a verified message is: whether it is a JSON-RPC response (the one rule of SPEC.md §7.1,
 * used by the decoder for §7 row 4 and by the fetch wrapper for the final response), and, read
 * from its bytes without a JSON tree, the top-level members and where its `id` value lies, so
 * that a retry's id is put back by editing that member alone, the verified bytes otherwise
 * unchanged.
 *
 * @module
 */

import { isUtf8 } from 'node:buffer';

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_BRACE = 0x7b;
const CLOSE_BRACE = 0x7d;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACKET = 0x5d;
const COMMA = 0x2c;
const COLON = 0x3a;

/** The top-level members of a JSON-RPC message that decide what it is. */
export interface MessageShape {
  /** The (last) `id` member's value, as its byte range `[start, end)`, if present. */
  id: [number, number] | null;
  /** How many top-level `id` members it has (JSON allows duplicates; which one a reader takes is not defined). */
  ids: number;
  /** Whether it has a `method` member (a request or a notification). */
  method: boolean;
  /** Whether it has a `result` or an `error` member. */
  outcome: boolean;
  /** Whether it has an `error` member. */
  error: boolean;
}

function isSpace(b: number | undefined): boolean {
  return b === 0x20 || b === 0x0a || b === 0x0d || b === 0x09;
}

class Malformed {}

/** The byte after the string that opens at `at` (a quote). */
function skipString(bytes: Buffer, at: number): number {
  let i = at + 1;
  for (;;) {
    const quote = bytes.indexOf(QUOTE, i);
    if (quote === -1) {
      throw new Malformed();
    }
    let slashes = 0;
    while (bytes[quote - 1 - slashes] === BACKSLASH) {
      slashes += 1;
    }
    if (slashes % 2 === 0) {
      return quote + 1;
    }
    i = quote + 1;
  }
}

/** The byte after the JSON value that starts at `at`. */
function skipValue(bytes: Buffer, at: number): number {
  const first = bytes[at];
  if (first === QUOTE) {
    return skipString(bytes, at);
  }
  if (first === OPEN_BRACE || first === OPEN_BRACKET) {
    let depth = 0;
    let i = at;
    while (i < bytes.length) {
      const b = bytes[i]!;
      if (b === QUOTE) {
        i = skipString(bytes, i);
        continue;
      }
      if (b === OPEN_BRACE || b === OPEN_BRACKET) {
        depth += 1;
      } else if (b === CLOSE_BRACE || b === CLOSE_BRACKET) {
        depth -= 1;
        if (depth === 0) {
          return i + 1;
        }
      }
      i += 1;
    }
    throw new Malformed();
  }
  let i = at;
  while (i < bytes.length) {
    const b = bytes[i];
    if (b === COMMA || b === CLOSE_BRACE || b === CLOSE_BRACKET || isSpace(b)) {
      break;
    }
    i += 1;
  }
  if (i === at) {
    throw new Malformed();
  }
  return i;
}

function skipSpace(bytes: Buffer, at: number): number {
  let i = at;
  while (isSpace(bytes[i])) {
    i += 1;
  }
  return i;
}

function keyIs(bytes: Buffer, start: number, end: number, name: string): boolean {
  if (bytes.indexOf(BACKSLASH, start) !== -1 && bytes.indexOf(BACKSLASH, start) < end) {
    // an escaped key (`"\u0069d"`): compared as JSON reads it
    try {
      return JSON.parse(bytes.subarray(start - 1, end + 1).toString('utf8')) === name;
    } catch {
      return false;
    }
  }
  if (end - start !== name.length) {
    return false;
  }
  for (let i = 0; i < name.length; i++) {
    if (bytes[start + i] !== name.charCodeAt(i)) {
      return false;
    }
  }
  return true;
}

/** The shape of a JSON-RPC message, or `null` if it is not a JSON object. */
export function messageShape(message: Uint8Array): MessageShape | null {
  const bytes = Buffer.from(message.buffer, message.byteOffset, message.byteLength);
  const shape: MessageShape = { id: null, ids: 0, method: false, outcome: false, error: false };
  try {
    let i = skipSpace(bytes, 0);
    if (bytes[i] !== OPEN_BRACE) {
      return null;
    }
    i = skipSpace(bytes, i + 1);
    if (bytes[i] === CLOSE_BRACE) {
      return skipSpace(bytes, i + 1) === bytes.length ? shape : null;
    }
    for (;;) {
      if (bytes[i] !== QUOTE) {
        return null;
      }
      const keyEnd = skipString(bytes, i);
      const [keyStart, keyStop] = [i + 1, keyEnd - 1];
      i = skipSpace(bytes, keyEnd);
      if (bytes[i] !== COLON) {
        return null;
      }
      const valueStart = skipSpace(bytes, i + 1);
      const valueEnd = skipValue(bytes, valueStart);
      if (keyIs(bytes, keyStart, keyStop, 'id')) {
        shape.id = [valueStart, valueEnd];
        shape.ids += 1;
      } else if (keyIs(bytes, keyStart, keyStop, 'method')) {
        shape.method = true;
      } else if (keyIs(bytes, keyStart, keyStop, 'result')) {
        shape.outcome = true;
      } else if (keyIs(bytes, keyStart, keyStop, 'error')) {
        shape.outcome = true;
        shape.error = true;
      }
      i = skipSpace(bytes, valueEnd);
      if (bytes[i] === COMMA) {
        i = skipSpace(bytes, i + 1);
        continue;
      }
      if (bytes[i] === CLOSE_BRACE) {
        return skipSpace(bytes, i + 1) === bytes.length ? shape : null;
      }
      return null;
    }
  } catch (error) {
    if (error instanceof Malformed) {
      return null;
    }
    throw error;
  }
}

/** Whether `shape` is a response (an `id` with a `result` or an `error`, no `method`). */
export function isResponse(shape: MessageShape | null): shape is MessageShape & { id: [number, number] } {
  return shape !== null && shape.id !== null && shape.outcome && !shape.method;
}

/** The `id` value of a message of that shape, parsed (`undefined` if it has none or it is bad). */
export function idOf(message: Uint8Array, shape: MessageShape): unknown {
  if (shape.id === null) {
    return undefined;
  }
  try {
    return JSON.parse(Buffer.from(message.subarray(shape.id[0], shape.id[1])).toString('utf8'));
  } catch {
    return undefined;
  }
}

/** `message` with its `id` member's value replaced by `id`, every other byte unchanged. */
export function withId(message: Uint8Array, shape: MessageShape & { id: [number, number] }, id: unknown): Uint8Array {
  const replacement = Buffer.from(JSON.stringify(id), 'utf8');
  const [start, end] = shape.id;
  const out = new Uint8Array(message.length - (end - start) + replacement.length);
  out.set(message.subarray(0, start), 0);
  out.set(replacement, start);
  out.set(message.subarray(end), start + replacement.length);
  return out;
}

/**
 * Whether `message` is a JSON-RPC response (SPEC.md §7.1): UTF-8, one JSON text (RFC 8259,
 * whitespace around it allowed) whose value is an object with a top-level `id` and a top-level
 * `result` or `error`, whatever their values. Parsed as Latin-1 once it is known to be UTF-8:
 * every byte is one character then, so the JSON grammar is checked exactly, on V8's fast path.
 */
export function isJsonRpcResponse(message: Uint8Array): boolean {
  return isUtf8(message) && isResponseText(message);
}

/**
 * {@link isJsonRpcResponse} of text its caller already knows to be UTF-8 (an SSE parser's
 * dispatched data): the bytes are not validated again.
 */
export function isResponseText(text: Uint8Array): boolean {
  const bytes = Buffer.from(text.buffer, text.byteOffset, text.byteLength);
  const open = skipSpace(bytes, 0);
  if (bytes[open] !== OPEN_BRACE) {
    return false; // not an object (a batch, a scalar): not a response, nothing to parse
  }
  let value: unknown;
  try {
    value = JSON.parse(bytes.toString('latin1'));
  } catch {
    return false;
  }
  return typeof value === 'object' && value !== null && !Array.isArray(value) && 'id' in value && ('result' in value || 'error' in value);
}

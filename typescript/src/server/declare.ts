/**
 * The contract a framing server declares (SPEC.md §11.1, §17.11), written into every `initialize`
 * and `server/discover` result that passes (§11.2) as the Rust crate's `FramingLayer` writes it:
 * the member added after the last member of the object it belongs to, every other byte of the
 * response as the handler wrote it; a contract of the handler's with the same values kept byte
 * for byte, any other one replaced (with a warning).
 *
 * @module
 */

import { EXTENSION_KEY, readDiscovery, type DiscoverySource, type FramingContract } from '../contract.js';
import type { Logger } from '../telemetry.js';

/** A request body larger than this is no discovery request (SPEC.md §11.2). */
export const MAX_DISCOVERY_REQUEST = 64 * 1024;

const utf8 = new TextDecoder('utf-8', { fatal: true });
const BACKSLASH = 0x5c;
const INITIALIZE = Buffer.from('initialize');
const DISCOVER = Buffer.from('server/discover');

/** The discovery request `body` is (`initialize` or `server/discover`), or `null`. */
export function discoverySource(body: Uint8Array): DiscoverySource | null {
  if (body.length > MAX_DISCOVERY_REQUEST) {
    return null;
  }
  // A JSON string holds a method's name as its bytes unless an escape spells it: a body with
  // neither name and no backslash names another method, and is not parsed (most calls).
  const bytes = Buffer.from(body.buffer, body.byteOffset, body.byteLength);
  if (bytes.indexOf(BACKSLASH) === -1 && bytes.indexOf(INITIALIZE) === -1 && bytes.indexOf(DISCOVER) === -1) {
    return null;
  }
  let request: unknown;
  try {
    request = JSON.parse(utf8.decode(body));
  } catch {
    return null;
  }
  if (typeof request !== 'object' || request === null || Array.isArray(request) || !('id' in request)) {
    return null;
  }
  const method = (request as { method?: unknown }).method;
  return method === 'initialize' ? 'initialize' : method === 'server/discover' ? 'discover' : null;
}

/** The contract a wrapper with these settings declares: what it does (SPEC.md §11.2). */
export function wrapperContract(settings: {
  frameSize: number;
  maxMessageSize: number;
  alwaysFramed: boolean;
  deduplication: { windowMs: number } | null;
}): FramingContract {
  const contract: FramingContract = {
    versions: [1],
    sentinelRequired: true,
    frameChecksum: 'crc32',
    messageDigest: 'sha256',
    // At least 1026: its ABORT frames take up to that (SPEC.md §6).
    maxFramePayload: Math.max(settings.frameSize, 1026),
    maxMessageSize: settings.maxMessageSize,
    transports: ['binary', 'sse', 'compat'],
  };
  if (settings.alwaysFramed) {
    contract.alwaysFramed = 'compat';
  }
  if (settings.deduplication !== null) {
    contract.deduplication = { methods: ['tools/call'], windowMs: settings.deduplication.windowMs, scope: 'principal' };
  }
  return contract;
}

/** The members of a contract in the order the Rust crate writes them. */
const MEMBER_ORDER = [
  'versions',
  'sentinelRequired',
  'frameChecksum',
  'messageDigest',
  'maxFramePayload',
  'maxMessageSize',
  'transports',
  'alwaysFramed',
  'deduplication',
] as const;

/** The contract's JSON text, its members in the Rust crate's order. */
function contractText(contract: FramingContract): string {
  const ordered = Object.fromEntries(MEMBER_ORDER.filter((name) => contract[name] !== undefined).map((name) => [name, contract[name]]));
  if (contract.deduplication !== undefined) {
    const { methods, windowMs, scope } = contract.deduplication;
    ordered['deduplication'] = { methods, windowMs, scope };
  }
  return JSON.stringify(ordered);
}

function sameContract(a: FramingContract, b: FramingContract): boolean {
  const list = (x: readonly unknown[], y: readonly unknown[]): boolean => x.length === y.length && x.every((v, i) => v === y[i]);
  const da = a.deduplication;
  const db = b.deduplication;
  return (
    list(a.versions, b.versions) &&
    a.sentinelRequired === b.sentinelRequired &&
    a.frameChecksum === b.frameChecksum &&
    a.messageDigest === b.messageDigest &&
    a.maxFramePayload === b.maxFramePayload &&
    a.maxMessageSize === b.maxMessageSize &&
    list(a.transports, b.transports) &&
    a.alwaysFramed === b.alwaysFramed &&
    (da === undefined || db === undefined
      ? da === db
      : list(da.methods, db.methods) && da.windowMs === db.windowMs && da.scope === db.scope)
  );
}

const WS = new Set([' ', '\t', '\n', '\r']);

function skipSpace(text: string, at: number): number {
  while (WS.has(text[at] ?? '')) {
    at += 1;
  }
  return at;
}

/** The end of the string whose opening quote is at `at`. */
function skipString(text: string, at: number): number {
  for (let i = at + 1; ; i++) {
    const c = text[i];
    if (c === '\\') {
      i += 1;
    } else if (c === '"') {
      return i + 1;
    }
  }
}

/** The end of the (valid) JSON value at `at`. */
function skipValue(text: string, at: number): number {
  const c = text[at];
  if (c === '"') {
    return skipString(text, at);
  }
  if (c === '{' || c === '[') {
    let depth = 0;
    for (let i = at; ; i++) {
      const d = text[i];
      if (d === '"') {
        i = skipString(text, i) - 1;
      } else if (d === '{' || d === '[') {
        depth += 1;
      } else if (d === '}' || d === ']') {
        depth -= 1;
        if (depth === 0) {
          return i + 1;
        }
      }
    }
  }
  let i = at;
  while (i < text.length && !',}] \t\n\r'.includes(text[i]!)) {
    i += 1;
  }
  return i;
}

interface Member {
  key: string;
  start: number;
  end: number;
}

/** The members of the object value spanning `[start, end)` of valid JSON `text`, or `null`. */
function members(text: string, start: number, end: number): { open: number; members: Member[] } | null {
  const open = skipSpace(text, start);
  if (text[open] !== '{') {
    return null;
  }
  const out: Member[] = [];
  let i = skipSpace(text, open + 1);
  if (text[i] === '}') {
    return { open, members: out };
  }
  while (i < end) {
    const keyEnd = skipString(text, i);
    const key = JSON.parse(text.slice(i, keyEnd)) as string;
    const valueStart = skipSpace(text, skipSpace(text, keyEnd) + 1);
    const valueEnd = skipValue(text, valueStart);
    out.push({ key, start: valueStart, end: valueEnd });
    i = skipSpace(text, valueEnd);
    if (text[i] === '}') {
      break;
    }
    i = skipSpace(text, i + 1);
  }
  return { open, members: out };
}

type Found = { value: [number, number] } | { insert: number; text: string };

/**
 * Where the member at `path` is in `text` (its value's range, the last member of that name), or
 * where it goes with what to insert: after the last member of the deepest object on the path
 * that exists, with the objects of the rest of the path around `value` (the Rust crate's
 * `json_text::locate`). `null` if `text` is not JSON or a value on the path is not an object.
 */
export function locate(text: string, path: readonly string[], value: string): Found | null {
  let [start, end] = [0, text.length];
  for (let depth = 0; depth < path.length; depth++) {
    const object = members(text, start, end);
    if (object === null) {
      return null;
    }
    const member = object.members.findLast((m) => m.key === path[depth]);
    if (member === undefined) {
      const last = object.members.at(-1);
      const at = last === undefined ? object.open + 1 : last.end;
      let insert = last === undefined ? '' : ',';
      path.slice(depth).forEach((key, i) => {
        insert += `${i > 0 ? '{' : ''}${JSON.stringify(key)}:`;
      });
      insert += value + '}'.repeat(path.length - depth - 1);
      return { insert: at, text: insert };
    }
    if (depth + 1 === path.length) {
      return { value: [member.start, member.end] };
    }
    [start, end] = [member.start, member.end];
  }
  return null;
}

/** Declares the contract in the discovery results a wrapper passes on. */
export class Declaration {
  private readonly text: string;

  constructor(
    private readonly contract: FramingContract,
    private readonly source: DiscoverySource,
    private readonly logger: Logger,
  ) {
    this.text = contractText(contract);
  }

  /** Logs that the contract could not be declared in the response. */
  notDeclared(reason: string): void {
    this.logger.warn(`mcp-framing: the framing contract could not be declared in the ${this.source} response: ${reason}`);
  }

  /**
   * `response` (a JSON-RPC response's UTF-8 bytes) with the contract declared; `null` when it
   * stays as it is (declared already with the same values, an error response, a result the
   * member cannot go into: the two last logged).
   */
  apply(response: Uint8Array): string | null {
    let text: string;
    try {
      text = utf8.decode(response);
      JSON.parse(text);
    } catch {
      this.notDeclared('the response is not a JSON text in UTF-8');
      return null;
    }
    const result = locate(text, ['result'], '{}');
    if (result === null || !('value' in result)) {
      this.notDeclared('not a discovery result');
      return null;
    }
    const path = ['result', 'capabilities', this.source === 'initialize' ? 'experimental' : 'extensions', EXTENSION_KEY];
    const found = locate(text, path, this.text);
    if (found === null) {
      this.notDeclared('not a discovery result: capabilities or the object under it is not an object');
      return null;
    }
    if ('insert' in found) {
      return text.slice(0, found.insert) + found.text + text.slice(found.insert);
    }
    const [start, end] = found.value;
    const previous = text.slice(start, end);
    try {
      const declared = readDiscovery({ capabilities: { experimental: { [EXTENSION_KEY]: JSON.parse(previous) } } }, 'initialize');
      if (declared.contract !== null && sameContract(declared.contract, this.contract)) {
        return null;
      }
    } catch {
      // a contract that does not parse is replaced
    }
    this.logger.warn(
      `mcp-framing: the handler declared another framing contract (${previous}); the wrapper's, which says what it does, replaces it`,
    );
    return text.slice(0, start) + this.text + text.slice(end);
  }
}

/**
 * A deduplicated request, read as SPEC.md §17 says: the body read strictly (§17.10: UTF-8,
 * nesting at most 127 deep, no duplicate member names, no lone surrogate escape, no number past
 * the largest double), its fingerprint over the canonical JSON of `params` without `_meta`
 * (§17.3, §17.12.1), and the store key of its scope (§17.2). The Rust crate's
 * `dedupe::request_json`, `fingerprint` and `scope`, byte for byte (tests/vectors/store/).
 *
 * @module
 */

import { createHash } from 'node:crypto';

/** A JSON value read with its numbers as written (the canonical form depends on the token). */
export type Json = null | boolean | string | { num: string } | Json[] | { members: [string, Json][] };

/** Why a body is refused with `400` (§17.10). */
export class MalformedBody extends Error {
  constructor(
    readonly kind: 'syntax' | 'too_deep' | 'duplicate_member',
    message: string,
  ) {
    super(message);
    this.name = 'MalformedBody';
  }
}

/** Arrays and objects nested deeper than this are refused (what serde_json reads). */
const MAX_DEPTH = 127;
const strictUtf8 = new TextDecoder('utf-8', { fatal: true });
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;
const NUMBER = /-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?/y;

class Reader {
  at = 0;
  constructor(readonly text: string) {}

  fail(reason: string): never {
    throw new MalformedBody('syntax', `${reason} at character ${this.at}`);
  }

  space(): void {
    for (;;) {
      const c = this.text.charCodeAt(this.at);
      if (c !== 0x20 && c !== 0x0a && c !== 0x0d && c !== 0x09) {
        return;
      }
      this.at += 1;
    }
  }

  value(depth: number): Json {
    this.space();
    const c = this.text[this.at];
    if (c === '{' || c === '[') {
      if (depth >= MAX_DEPTH) {
        throw new MalformedBody('too_deep', `nesting deeper than ${MAX_DEPTH} levels`);
      }
      return c === '{' ? this.object(depth + 1) : this.array(depth + 1);
    }
    if (c === '"') {
      return this.string();
    }
    for (const [word, value] of [
      ['true', true],
      ['false', false],
      ['null', null],
    ] as const) {
      if (this.text.startsWith(word, this.at)) {
        this.at += word.length;
        return value;
      }
    }
    NUMBER.lastIndex = this.at;
    const match = NUMBER.exec(this.text);
    if (match === null) {
      this.fail('expected a value');
    }
    this.at += match[0].length;
    if (!Number.isFinite(Number(match[0]))) {
      this.fail('a number past the largest double');
    }
    return { num: match[0] };
  }

  object(depth: number): Json {
    this.at += 1;
    const members: [string, Json][] = [];
    const names = new Set<string>();
    this.space();
    if (this.text[this.at] === '}') {
      this.at += 1;
      return { members };
    }
    for (;;) {
      this.space();
      if (this.text[this.at] !== '"') {
        this.fail('expected a member name');
      }
      const name = this.string();
      if (names.has(name)) {
        throw new MalformedBody('duplicate_member', `duplicate member name ${JSON.stringify(name)}`);
      }
      names.add(name);
      this.space();
      if (this.text[this.at] !== ':') {
        this.fail('expected `:`');
      }
      this.at += 1;
      members.push([name, this.value(depth)]);
      this.space();
      const c = this.text[this.at++];
      if (c === '}') {
        return { members };
      }
      if (c !== ',') {
        this.fail('expected `,` or `}`');
      }
    }
  }

  array(depth: number): Json {
    this.at += 1;
    const items: Json[] = [];
    this.space();
    if (this.text[this.at] === ']') {
      this.at += 1;
      return items;
    }
    for (;;) {
      items.push(this.value(depth));
      this.space();
      const c = this.text[this.at++];
      if (c === ']') {
        return items;
      }
      if (c !== ',') {
        this.fail('expected `,` or `]`');
      }
    }
  }

  string(): string {
    const start = this.at;
    this.at += 1;
    for (;;) {
      const c = this.text.charCodeAt(this.at);
      if (Number.isNaN(c) || c < 0x20) {
        this.fail('an unterminated string or a control character in it');
      }
      this.at += 1;
      if (c === 0x22) {
        break;
      }
      if (c === 0x5c) {
        this.at += 1;
      }
    }
    let value: string;
    try {
      value = JSON.parse(this.text.slice(start, this.at)) as string;
    } catch {
      this.fail('an invalid escape');
    }
    if (LONE_SURROGATE.test(value)) {
      this.fail('an escape of a lone surrogate');
    }
    return value;
  }
}

/** Reads `body` strictly (§17.10). @throws MalformedBody */
export function readStrict(body: Uint8Array): Json {
  let text: string;
  try {
    text = strictUtf8.decode(body);
  } catch {
    throw new MalformedBody('syntax', 'the body is not UTF-8');
  }
  const reader = new Reader(text);
  const value = reader.value(0);
  reader.space();
  if (reader.at !== text.length) {
    reader.fail('bytes after the JSON text');
  }
  return value;
}

const utf8 = new TextEncoder();

function byUtf8(a: [string, Json], b: [string, Json]): number {
  return Buffer.compare(Buffer.from(a[0]), Buffer.from(b[0]));
}

function canonicalString(value: string): string {
  let out = '"';
  for (const c of value) {
    const code = c.codePointAt(0)!;
    if (c === '"' || c === '\\') {
      out += `\\${c}`;
    } else if (code < 0x20) {
      const short: Record<number, string> = { 8: '\\b', 12: '\\f', 10: '\\n', 13: '\\r', 9: '\\t' };
      out += short[code] ?? `\\u${code.toString(16).padStart(4, '0')}`;
    } else {
      out += c;
    }
  }
  return `${out}"`;
}

const I64_MIN = -(2n ** 63n);
const U64_MAX = 2n ** 64n - 1n;

/** A number token in canonical form (§17.3, §17.12.1). */
function canonicalNumber(token: string): string {
  if (!/[.eE]/.test(token) && token !== '-0') {
    const value = BigInt(token);
    if (value >= I64_MIN && value <= U64_MAX) {
      return value.toString();
    }
  }
  const double = Number(token);
  if (double === 0) {
    return Object.is(double, -0) ? '-0.0' : '0.0';
  }
  // The shortest digits that read back as the same double, and the decimal point's place.
  const [mantissa, exponent] = Math.abs(double).toExponential().split('e') as [string, string];
  const digits = mantissa.replace('.', '');
  const n = digits.length;
  const k = Number(exponent) + 1;
  const sign = double < 0 ? '-' : '';
  if (n <= k && k <= 16) {
    return `${sign}${digits}${'0'.repeat(k - n)}.0`;
  }
  if (0 < k && k < n) {
    return `${sign}${digits.slice(0, k)}.${digits.slice(k)}`;
  }
  if (-4 <= k && k <= 0) {
    return `${sign}0.${'0'.repeat(-k)}${digits}`;
  }
  const e = k - 1;
  return `${sign}${digits[0]}${n > 1 ? `.${digits.slice(1)}` : ''}e${e < 0 ? '-' : '+'}${Math.abs(e)}`;
}

/** The canonical JSON of a value (§17.3). */
export function canonical(value: Json): string {
  if (value === null) {
    return 'null';
  }
  if (typeof value === 'boolean') {
    return value ? 'true' : 'false';
  }
  if (typeof value === 'string') {
    return canonicalString(value);
  }
  if (Array.isArray(value)) {
    return `[${value.map(canonical).join(',')}]`;
  }
  if ('num' in value) {
    return canonicalNumber(value.num);
  }
  const members = [...value.members].sort(byUtf8);
  return `{${members.map(([name, v]) => `${canonicalString(name)}:${canonical(v)}`).join(',')}}`;
}

/** The member `name` of an object value, if it is one and has it. */
export function member(value: Json | undefined, name: string): Json | undefined {
  if (value === null || value === undefined || typeof value !== 'object' || Array.isArray(value) || !('members' in value)) {
    return undefined;
  }
  return value.members.find(([n]) => n === name)?.[1];
}

/**
 * The fingerprint of a request (§17.3): SHA-256 hex of the canonical JSON of `params` without
 * `_meta`, or with a `_meta` holding only the `covered` entries it has.
 */
export function fingerprint(request: Json, covered: readonly string[] = []): string {
  let params = member(request, 'params') ?? null;
  if (params !== null && typeof params === 'object' && 'members' in params) {
    const meta = member(params, '_meta');
    const members = params.members.filter(([name]) => name !== '_meta');
    if (meta !== undefined && meta !== null && typeof meta === 'object' && 'members' in meta) {
      const kept = meta.members.filter(([name]) => covered.includes(name));
      if (kept.length > 0) {
        members.push(['_meta', { members: kept }]);
      }
    }
    params = { members };
  }
  return createHash('sha256').update(canonical(params)).digest('hex');
}

/** A token (RFC 9110 §5.6.2) that opens the text: an auth-scheme or an auth-param's name. */
const TOKEN_AHEAD = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+( *)(.|$)/;

/**
 * The `Authorization` field values of a request as it sent them, from a Fetch `Headers`, which
 * joins the values of several field lines with `, ` into one: the joined value is cut at each
 * `, ` outside a quoted string that a new credential follows (an auth-scheme followed by a space,
 * a comma or the end, RFC 9110 §11.4), never where an auth-param (`name=...`) goes on.
 * `null` without the field.
 *
 * A credential is one field line; the one thing this cannot tell apart is one line that holds
 * two credentials (which no valid credential does) from two lines.
 */
export function authorizationValues(headers: Headers): string[] | null {
  const joined = headers.get('authorization');
  if (joined === null) {
    return null;
  }
  const values: string[] = [];
  let start = 0;
  let quoted = false;
  for (let i = 0; i < joined.length; i++) {
    const c = joined[i];
    if (quoted) {
      if (c === '\\') {
        i += 1;
      } else if (c === '"') {
        quoted = false;
      }
    } else if (c === '"') {
      quoted = true;
    } else if (c === ',' && joined[i + 1] === ' ') {
      const ahead = TOKEN_AHEAD.exec(joined.slice(i + 2, i + 2 + 256));
      const credential = ahead !== null && ahead[2] !== '=' && (ahead[1]!.length > 0 || ahead[2] === '' || ahead[2] === ',');
      if (credential) {
        values.push(joined.slice(start, i));
        start = i + 2;
      }
    }
  }
  values.push(joined.slice(start));
  return values;
}

/**
 * The principal's digest (§17.2, §17.12.1): `authorization` values (each value's bytes as
 * received, Latin-1 in a Fetch `Headers`) joined by `,`, or an `id` of the server's (its UTF-8
 * bytes, the crate's `Principal::from_id`); `null` (no `Authorization` field) is anonymous.
 */
export function principalDigest(principal: { authorization: readonly string[] } | { id: string } | null): Uint8Array | null {
  if (principal === null) {
    return null;
  }
  const hash = createHash('sha256');
  return 'id' in principal ? hash.update(principal.id, 'utf8').digest() : hash.update(principal.authorization.join(','), 'latin1').digest();
}

function u64(n: number): Uint8Array {
  const out = new Uint8Array(8);
  new DataView(out.buffer).setBigUint64(0, BigInt(n));
  return out;
}

/** The store key of a call (§17.2), 64 hex digits. */
export function storeKey(principal: Uint8Array | null, method: string, tool: string | null, requestKey: Uint8Array): string {
  const hash = createHash('sha256').update('mcp-framing/dedupe/v1\0');
  hash.update(principal === null ? Uint8Array.of(0) : Buffer.concat([Uint8Array.of(1), principal]));
  const m = utf8.encode(method);
  hash.update(u64(m.length)).update(m);
  if (tool === null) {
    hash.update(u64(0));
  } else {
    const t = utf8.encode(tool);
    hash.update(u64(1)).update(Uint8Array.of(1)).update(u64(t.length)).update(t);
  }
  return hash.update(requestKey).digest('hex');
}

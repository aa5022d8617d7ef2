/**
 * A request's opt-in (SPEC.md §10, §16, §18.8) as a server reads it from the headers alone, and
 * the headers of a framed response: the Rust crate's `http::OptIn` and `response_headers`.
 *
 * @module
 */

import type { Mapping } from '../body.js';
import { isRequestKey, type RequestKey } from '../ids.js';
import { MIN_MAX_FRAME_PAYLOAD } from '../limits.js';

/** The request header that opts in, with the versions the client accepts (SPEC.md §10). */
export const OPT_IN_HEADER = 'mcp-framing';
/** The request key header (SPEC.md §10). */
export const REQUEST_KEY_HEADER = 'mcp-framing-request-key';
/** The limits the client decodes with (SPEC.md §16). */
export const LIMITS_HEADER = 'mcp-framing-limits';
/** The mappings the client takes besides the SSE one, in order of preference (SPEC.md §18.8). */
export const MAPPING_HEADER = 'mcp-framing-mapping';
/** The media type of the binary mapping (SPEC.md §16). */
export const BINARY_MEDIA_TYPE = 'application/vnd.mcp-framing';
const VERSION_TOKEN = '1';

/** Why a request's opt-in headers were refused (answered `400`, SPEC.md §16). */
export class OptInError extends Error {
  constructor(
    readonly kind: 'InvalidRequestKey' | 'InvalidLimits',
    message: string,
  ) {
    super(message);
    this.name = 'OptInError';
  }
}

/** A request that opted in: what its response is framed with. */
export interface OptIn {
  /** The request key to echo in HEAD; `null` without one. */
  requestKey: RequestKey | null;
  /** Whether `Accept` lists the binary media type with a q-value above 0. */
  acceptsBinary: boolean;
  /** Whether `Mcp-Framing-Mapping` lists `compat`. */
  acceptsCompat: boolean;
  /** The client's frame limit, if it said. */
  maxFramePayload: number | null;
  /** The client's message limit, if it said. */
  maxMessageSize: number | null;
}

const list = (value: string | null): string[] => (value === null ? [] : value.split(','));

/** The essence of a media range (its type before any parameter), lower case. */
function essence(range: string): string {
  return (range.split(';')[0] ?? '').trim().toLowerCase();
}

/** Whether a media range of `Accept` accepts `type` (listed, and its q-value above 0). */
function accepts(range: string, type: string): boolean {
  const [first, ...params] = range.split(';');
  if (essence(first ?? '') !== type) {
    return false;
  }
  return params.every((param) => {
    const [name, q] = param.split('=');
    if (name?.trim().toLowerCase() !== 'q' || q === undefined) {
      return true;
    }
    const value = Number.parseFloat(q.trim());
    return Number.isFinite(value) && value > 0;
  });
}

/**
 * The request's opt-in, or `null` if its `Mcp-Framing` header lists no version this server
 * speaks (the request is then answered as before).
 *
 * @throws OptInError for a key header that is not 32 hex digits or is all zero, and for a limits
 * header that does not parse, is out of range or names a parameter twice (SPEC.md §10, §16).
 */
export function readOptIn(headers: Headers): OptIn | null {
  if (!list(headers.get(OPT_IN_HEADER)).some((token) => token.trim() === VERSION_TOKEN)) {
    return null;
  }
  let requestKey: RequestKey | null = null;
  const key = headers.get(REQUEST_KEY_HEADER);
  if (key !== null) {
    const trimmed = key.trim().toLowerCase();
    if (!isRequestKey(trimmed)) {
      throw new OptInError('InvalidRequestKey', 'the Mcp-Framing-Request-Key header is not 32 hex digits');
    }
    requestKey = trimmed;
  }
  const limits = headers.get(LIMITS_HEADER);
  const [maxFramePayload, maxMessageSize] = limits === null ? [null, null] : parseLimits(limits);
  return {
    requestKey,
    acceptsBinary: list(headers.get('accept')).some((range) => accepts(range, BINARY_MEDIA_TYPE)),
    acceptsCompat: list(headers.get(MAPPING_HEADER)).some((token) => token.trim().toLowerCase() === 'compat'),
    maxFramePayload,
    maxMessageSize,
  };
}

function parseLimits(value: string): [number | null, number | null] {
  const invalid = (): never => {
    throw new OptInError('InvalidLimits', 'the Mcp-Framing-Limits header is malformed');
  };
  let frame: number | null = null;
  let message: number | null = null;
  for (const param of value.split(',')) {
    const eq = param.indexOf('=');
    if (eq === -1) {
      invalid();
    }
    const name = param.slice(0, eq).trim().toLowerCase();
    const digits = param.slice(eq + 1).trim();
    const number = /^[0-9]+$/.test(digits) ? Number(digits) : Number.NaN;
    if (name === 'frame') {
      if (frame !== null || !(number >= MIN_MAX_FRAME_PAYLOAD && number <= 0xffff_ffff)) {
        invalid();
      }
      frame = number;
    } else if (name === 'message') {
      // Up to 2^64 - 1; beyond 2^53 the value is only approximate, and larger than any message.
      if (message !== null || Number.isNaN(number) || BigInt(digits) > 0xffff_ffff_ffff_ffffn) {
        invalid();
      }
      message = number;
    }
    // Another parameter: a later extension, ignored.
  }
  return [frame, message];
}

/** The mapping of an opted-in request's response (SPEC.md §16, §18.8). */
export function mappingOf(optIn: OptIn): Mapping {
  return optIn.acceptsBinary ? 'binary' : optIn.acceptsCompat ? 'compat' : 'sse';
}

/** Whether `Accept` takes an event stream (`text/event-stream`, `text/*`, `*\/*`). */
export function acceptsEventStream(headers: Headers): boolean {
  return list(headers.get('accept')).some((range) => ['text/event-stream', 'text/*', '*/*'].includes(essence(range)));
}

/** The headers of a framed response in `mapping` (SPEC.md §15, §16, §18.8). */
export function setResponseHeaders(headers: Headers, mapping: Mapping): void {
  headers.delete('content-length');
  headers.set('content-type', mapping === 'binary' ? BINARY_MEDIA_TYPE : 'text/event-stream');
  headers.set(OPT_IN_HEADER, mapping === 'compat' ? '1; mapping=compat' : VERSION_TOKEN);
  headers.set('cache-control', 'no-cache');
  headers.set('x-accel-buffering', 'no');
}

/** Which body a successful response has: `'sse'`, `'json'` (if `json` is taken), or `null`. */
export function bodyKind(response: Response, json: boolean): 'sse' | 'json' | null {
  if (response.status !== 200 || response.body === null) {
    return null;
  }
  const type = essence(response.headers.get('content-type') ?? '');
  if (type === 'text/event-stream') {
    return 'sse';
  }
  return json && type === 'application/json' ? 'json' : null;
}

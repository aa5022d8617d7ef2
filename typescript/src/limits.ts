/**
 * Every bound and default of a receiver, with its reason (SPEC.md §6, §6.1, §15, §18.7). The
 * values are the Rust crate's (`src/limits.rs`), so the three decoders agree on every vector.
 *
 * @module
 */

/** Bytes of a frame header (SPEC.md §2). */
export const HEADER_LEN = 20;

/** The longest ABORT reason text (SPEC.md §3). */
export const MAX_ABORT_TEXT = 1024;

/**
 * The smallest max frame payload a receiver may configure: the longest ABORT frame, so that
 * every control frame fits (SPEC.md §6).
 */
export const MIN_MAX_FRAME_PAYLOAD = 2 + MAX_ABORT_TEXT;

/** Default max frame payload, 64 KiB: larger frames do not hash faster (SPEC.md §6). */
export const DEFAULT_MAX_FRAME_PAYLOAD = 65_536;

/**
 * A sender's default DATA frame size, 16 KiB: a quarter of a receiver's default frame limit, so
 * that default senders interoperate with receivers configured down to 16 KiB (SPEC.md §6).
 */
export const DEFAULT_FRAME_SIZE = 16 * 1024;

/** Default max message size, 16 MiB: MCP tool results with embedded images (SPEC.md §6). */
export const DEFAULT_MAX_MESSAGE_SIZE = 16_777_216;

/** Default bound on the bytes of one stream, 16 GiB (SPEC.md §6.1). */
export const DEFAULT_MAX_STREAM_BYTES = 17_179_869_184;

/** Default bound on the messages of one stream (SPEC.md §6.1). */
export const DEFAULT_MAX_MESSAGES = 65_536;

/** Default bound on KEEPALIVE frames in a row: more than 17 hours at one every 15 s (§6.1). */
export const DEFAULT_MAX_KEEPALIVES_IN_A_ROW = 4_096;

/** Default bound on ignorable frames in a row: version 1 senders send none (SPEC.md §6.1). */
export const DEFAULT_MAX_IGNORABLE_IN_A_ROW = 1_024;

/** Default bound on SSE lines in a row that carry no data (SPEC.md §15, §18.7). */
export const DEFAULT_MAX_SSE_COMMENTS_IN_A_ROW = 4_096;

/** The least event bound of the SSE mapping, 256 KiB (SPEC.md §15). */
export const MIN_SSE_EVENT_DATA = 256 * 1024;

/** Room for a field name on top of the event bound, for one line (SPEC.md §15). */
export const LINE_FIELD_ALLOWANCE = 16;

/** What the compatible mapping's event bound adds to the message limit, 64 KiB (§18.7). */
export const COMPAT_EVENT_ALLOWANCE = 64 * 1024;

/** The sequence distance below which a mismatch is a gap or a replay (SPEC.md §4). */
export const SEQUENCE_WINDOW = 1 << 20;

/**
 * A receiver's configuration: the frame and message limits (SPEC.md §6) and the per-stream
 * bounds (§6.1), plus the SSE bounds (§15) for the SSE mappings. Every field is optional; an
 * absent one has its default.
 */
export interface Limits {
  /** Largest frame payload accepted (`FrameTooLarge` above); default 65 536, at least 1 026. */
  maxFramePayload?: number;
  /** Largest message accepted (`MessageTooLarge` above); default 16 777 216. */
  maxMessageSize?: number;
  /** Bytes of one stream (`StreamTooLarge`); default 16 GiB. */
  maxStreamBytes?: number;
  /** Messages of one stream (`TooManyMessages`); default 65 536. */
  maxMessages?: number;
  /** KEEPALIVE frames in a row (`TooManyKeepAlives`); default 4 096. */
  maxKeepalivesInARow?: number;
  /** Ignorable frames in a row (`TooManyIgnorableFrames`); default 1 024. */
  maxIgnorableInARow?: number;
  /** SSE lines in a row without data (`TooManyComments`); default 4 096. */
  maxSseCommentsInARow?: number;
  /** The bound on one SSE event's data (`EventTooLarge`); default from the limits (§15, §18.7). */
  maxEventData?: number;
}

/** {@link Limits} with every field set. */
export type ResolvedLimits = Required<Limits>;

/**
 * The event bound of the base64 SSE mapping for a frame limit: the base64 of one whole frame
 * of the max frame payload, at least 256 KiB (SPEC.md §15).
 */
export function sseEventDataLimit(maxFramePayload: number): number {
  return Math.max(4 * Math.ceil((HEADER_LEN + maxFramePayload) / 3), MIN_SSE_EVENT_DATA);
}

/** The event bound of the compatible mapping: one message of the max size, plus 64 KiB (§18.7). */
export function compatEventDataLimit(maxMessageSize: number): number {
  return maxMessageSize + COMPAT_EVENT_ALLOWANCE;
}

/**
 * Fills in the defaults.
 *
 * @throws RangeError if `maxFramePayload` is below 1 026 (SPEC.md §6) or a bound is not a
 * non-negative integer.
 */
export function resolveLimits(limits: Limits = {}, mapping: 'binary' | 'sse' | 'compat' = 'binary'): ResolvedLimits {
  const maxFramePayload = limits.maxFramePayload ?? DEFAULT_MAX_FRAME_PAYLOAD;
  const maxMessageSize = limits.maxMessageSize ?? DEFAULT_MAX_MESSAGE_SIZE;
  const resolved: ResolvedLimits = {
    maxFramePayload,
    maxMessageSize,
    maxStreamBytes: limits.maxStreamBytes ?? DEFAULT_MAX_STREAM_BYTES,
    maxMessages: limits.maxMessages ?? DEFAULT_MAX_MESSAGES,
    maxKeepalivesInARow: limits.maxKeepalivesInARow ?? DEFAULT_MAX_KEEPALIVES_IN_A_ROW,
    maxIgnorableInARow: limits.maxIgnorableInARow ?? DEFAULT_MAX_IGNORABLE_IN_A_ROW,
    maxSseCommentsInARow: limits.maxSseCommentsInARow ?? DEFAULT_MAX_SSE_COMMENTS_IN_A_ROW,
    maxEventData:
      limits.maxEventData ??
      (mapping === 'compat' ? compatEventDataLimit(maxMessageSize) : sseEventDataLimit(maxFramePayload)),
  };
  for (const [name, value] of Object.entries(resolved)) {
    if (!Number.isSafeInteger(value) || value < 0) {
      throw new RangeError(`${name} must be a non-negative integer, got ${String(value)}`);
    }
  }
  if (maxFramePayload < MIN_MAX_FRAME_PAYLOAD) {
    throw new RangeError(
      `maxFramePayload must be at least ${MIN_MAX_FRAME_PAYLOAD} (SPEC.md §6: every control frame fits), got ${maxFramePayload}`,
    );
  }
  if (maxFramePayload > 0xffff_ffff) {
    throw new RangeError(`maxFramePayload must fit the 32-bit length field, got ${maxFramePayload}`);
  }
  return resolved;
}

/**
 * The errors a receiver reports, with the kind names of SPEC.md and
 * `tests/vectors/manifest.json` (the Rust crate's `DecodeError::kind`, `SseError::kind`,
 * `CompatError::kind`).
 *
 * @module
 */

/** Error kinds of the frame layer (SPEC.md §2–§7). */
export type FrameErrorKind =
  | 'BadMagic'
  | 'UnsupportedVersion'
  | 'HeaderChecksumMismatch'
  | 'PayloadChecksumMismatch'
  | 'UnknownFrameKind'
  | 'InvalidFrameLength'
  | 'FrameTooLarge'
  | 'MessageTooLarge'
  | 'StreamTooLarge'
  | 'TooManyMessages'
  | 'TooManyKeepAlives'
  | 'TooManyIgnorableFrames'
  | 'SequenceGap'
  | 'SequenceReplay'
  | 'ForeignFrame'
  | 'UnexpectedFrame'
  | 'LengthMismatch'
  | 'DigestMismatch'
  | 'MessageCountMismatch'
  | 'RequestKeyMismatch'
  | 'InvalidAbort'
  | 'TrailingData'
  | 'Truncated'
  | 'PeerAbort';

/** Error kinds of the SSE mappings (SPEC.md §15, §18.5): contract violations (§11.4). */
export type MappingErrorKind =
  | 'UnexpectedEvent'
  | 'InvalidBase64'
  | 'EventTooLarge'
  | 'TooManyComments'
  | 'InvalidRecord'
  | 'UnframedEvent'
  | 'EventMissing'
  | 'SplitMessage'
  | 'EventLengthMismatch';

/** Every error kind a body decoder reports. */
export type ErrorKind = FrameErrorKind | MappingErrorKind;

/** Why a contract was refused (SPEC.md §11.3, §11.5; the Rust crate's `ContractError` kinds). */
export const CONTRACT_ERROR_KINDS = [
  'NoContract',
  'SentinelNotRequired',
  'VersionMismatch',
  'UnsupportedChecksum',
  'UnsupportedDigest',
  'NoCommonTransport',
  'InvalidLimit',
  'Malformed',
  'NotADiscoveryResult',
  'Downgrade',
  'NotDiscovered',
] as const;

/**
 * The `kind` names of the outcome report (SPEC.md §11.7) besides the frame decoder's error kinds
 * ({@link FrameErrorKind}): the mapping errors (the precise kind is in `detail`), what the client
 * decided itself, and the contract errors. Every kind a report carries is one of these or a frame
 * error kind (the report's types say so); `test/vectors.test.mjs` checks this list against
 * SPEC.md §11.7.
 */
export const CLIENT_KINDS = [
  'NotFramed',
  'Sse',
  'Compat',
  'Body',
  'IdleTimeout',
  'Send',
  'HttpStatus',
  'NoFinalResponse',
  'MessageAfterFinalResponse',
  'InvalidUtf8',
  'DuplicateId',
  ...CONTRACT_ERROR_KINDS,
  'Resolve',
  'NotARequest',
  'RequestKey',
] as const;

/** A kind of the outcome report that is not the frame decoder's (SPEC.md §11.7). */
export type ClientKind = (typeof CLIENT_KINDS)[number];

/** Where a truncated stream stopped (SPEC.md §7 rows 4 to 8). */
export type TruncationPoint = 'NoFrame' | 'InHeader' | 'InPayload' | 'InMessage' | 'BetweenMessages';

const MAPPING_KINDS: ReadonlySet<string> = new Set<MappingErrorKind>([
  'UnexpectedEvent',
  'InvalidBase64',
  'EventTooLarge',
  'TooManyComments',
  'InvalidRecord',
  'UnframedEvent',
  'EventMissing',
  'SplitMessage',
  'EventLengthMismatch',
]);

/** Whether `kind` is an error of an SSE mapping rather than of the frames. */
export function isMappingErrorKind(kind: ErrorKind): kind is MappingErrorKind {
  return MAPPING_KINDS.has(kind);
}

/** Structured fields of a {@link DecodeError}: offsets, lengths, limits, what was expected. */
export interface ErrorDetail {
  /** Stream offset of the frame (or body offset of the line) the error concerns. */
  offset?: number;
  /** Where a truncated stream stopped. */
  truncation?: TruncationPoint;
  [field: string]: unknown;
}

/**
 * A fatal stream error: the first rule that broke, in byte order (SPEC.md §2.2). `kind` is the
 * SPEC.md name; `message` is lowercase, like the Rust crate's.
 */
export class DecodeError extends Error {
  /** The SPEC.md kind name (the manifest's `error`). */
  readonly kind: ErrorKind;
  /** Structured fields. */
  readonly detail: ErrorDetail;

  constructor(kind: ErrorKind, message: string, detail: ErrorDetail = {}) {
    super(message);
    this.name = 'DecodeError';
    this.kind = kind;
    this.detail = detail;
  }
}

/**
 * Bidirectional marks, overrides and isolates, zero-width characters, invisible operators
 * (SPEC.md §3.1): the set the Rust crate escapes.
 */
const INVISIBLE = /[\u061c\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff]/;

/**
 * A peer's text as diagnostic text (SPEC.md §3.1): LF, CR and tab as `\n`, `\r`, `\t`, other
 * control characters and invisible format characters as `\u{...}` (NUL as `\0`), as the Rust
 * crate and the Python package write it.
 */
export function escapePeerText(text: string): string {
  let out = '';
  for (const ch of text) {
    const code = ch.codePointAt(0)!;
    if (ch === '\n') {
      out += '\\n';
    } else if (ch === '\r') {
      out += '\\r';
    } else if (ch === '\t') {
      out += '\\t';
    } else if (ch === '\0') {
      out += '\\0';
    } else if (code < 0x20 || (code >= 0x7f && code <= 0x9f) || INVISIBLE.test(ch)) {
      out += `\\u{${code.toString(16)}}`;
    } else {
      out += ch;
    }
  }
  return out;
}

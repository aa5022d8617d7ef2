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

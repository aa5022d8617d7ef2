/**
 * What a client concludes when a response stream ends (SPEC.md §9, §11.4): the classification
 * and regime of an attempt, decided from the decoder's own verdict, never from the transport's
 * claim (§7), and the retry decision on it (§11.6, §3.1). The names are the Rust crate's
 * (`VerdictKind::name`, `RetryDecision::name`, `RetryReason::name`).
 *
 * @module
 */

import { escapePeerText, isMappingErrorKind, type ClientKind, type TruncationPoint } from './errors.js';
import type { Progress, StreamHead, Verdict } from './verdict.js';

/** The eight verdict kinds (the `outcome` label of every metric, the `classification` field). */
export type Classification =
  | 'clean'
  | 'abandoned'
  | 'aborted'
  | 'corrupt'
  | 'spliced'
  | 'cross_wired'
  | 'contract_violation'
  | 'ambiguous';

/** A: the sentinel decided; B: the framing's own checks decided; C: nothing could (§9). */
export type Regime = 'A' | 'B' | 'C';

/**
 * Kinds of an attempt's end that are not the frame decoder's (SPEC.md §11.7): the response is
 * not framed (`NotFramed`, §16), its body failed (`Body`) or went quiet (`IdleTimeout`, §12),
 * the request could not be sent or its response headers did not arrive (`Send`), the server
 * answered an error status (`HttpStatus`), a complete stream does not end with the final
 * response (`NoFinalResponse`, §1) or goes on after it (`MessageAfterFinalResponse`, §1), a
 * verified message is not UTF-8 (`InvalidUtf8`).
 */
export type AttemptErrorKind = Extract<
  ClientKind,
  'NotFramed' | 'Body' | 'IdleTimeout' | 'Send' | 'HttpStatus' | 'NoFinalResponse' | 'MessageAfterFinalResponse' | 'InvalidUtf8'
>;

/**
 * What a caller's report says failed (SPEC.md §11.7): a verdict name when a response stream
 * ended, or why no stream could be used.
 */
export type ReportClassification =
  | Classification
  | 'invalid_message'
  | 'configuration_error'
  | 'http_error'
  | 'resolve_error'
  | 'invalid_request';

/** How one attempt's response ended. */
export interface Outcome {
  classification: Classification | 'invalid_message';
  regime: Regime;
  /** The error kind (SPEC.md and the manifest's names, or an {@link AttemptErrorKind}); `null` when clean. */
  kind: string | null;
  /** Where a truncated stream stopped. */
  truncation: TruncationPoint | null;
  /** The ABORT's code and reason, when aborted. */
  abort: { code: number; reason: string } | null;
  /** What happened, in words (the Rust crate's `Verdict` display): `complete`, `abandoned: ...`. */
  detail: string;
  /** What was received. */
  progress: Progress;
  /** The stream head, if it arrived. */
  head: StreamHead | null;
  /** Whether STREAM_END arrived (`false` for a final response delivered without it, §7 row 4). */
  sentinelSeen: boolean;
  /** The status of an `HttpStatus` failure. */
  httpStatus?: number;
}

const NOTHING: Progress = { frames: 0, bytes: 0, lastSequence: null, messages: 0, openMessageBytes: 0 };

const CONTRACT_KINDS: ReadonlySet<string> = new Set([
  'FrameTooLarge',
  'MessageTooLarge',
  'StreamTooLarge',
  'TooManyMessages',
  'TooManyKeepAlives',
  'TooManyIgnorableFrames',
]);

/**
 * The outcome of a stream from its decoder's verdict (SPEC.md §11.4): only a verdict that saw
 * STREAM_END and then the end of input is clean.
 */
export function outcomeOf(verdict: Verdict, mapping: 'binary' | 'sse' | 'compat' = 'binary'): Outcome {
  const base = {
    kind: verdict.error,
    truncation: verdict.truncation,
    abort: verdict.abort,
    progress: verdict.progress,
    head: verdict.head,
    sentinelSeen: verdict.sentinelSeen,
  };
  if (verdict.verdict === 'clean') {
    // §7 row 2 (Regime A), or row 4: the final response delivered without its sentinel (B)
    return { ...base, classification: 'clean', regime: verdict.regime, detail: verdict.detail };
  }
  if (verdict.verdict === 'aborted') {
    const { code, reason } = verdict.abort!;
    // The reason is the server's text: escaped as SPEC.md §3.1 says (the Python package's form).
    return { ...base, classification: 'aborted', regime: 'A', detail: `aborted by the server: code ${code} (${abortName(code)}): ${escapePeerText(reason)}` };
  }
  const kind = verdict.error!;
  const message = verdict.detail;
  if (kind === 'Truncated') {
    const where = String(verdict.fields['where'] ?? verdict.truncation);
    return { ...base, classification: 'abandoned', regime: 'B', detail: `abandoned: truncated ${where}` };
  }
  if (kind === 'RequestKeyMismatch') {
    return { ...base, classification: 'cross_wired', regime: 'B', detail: 'cross-wired: the response is for another request' };
  }
  if (kind === 'ForeignFrame') {
    return { ...base, classification: 'spliced', regime: 'B', detail: `spliced: ${message}` };
  }
  if (isMappingErrorKind(kind)) {
    // §11.7: a mapping's error is reported by its mapping, the precise rule in the detail
    const name = mapping === 'compat' ? 'compatible SSE mapping' : 'SSE mapping';
    return {
      ...base,
      kind: mapping === 'compat' ? 'Compat' : 'Sse',
      classification: 'contract_violation',
      regime: 'B',
      detail: `framing contract violated: ${name}: ${message} (${kind})`,
    };
  }
  const atStart = (kind === 'BadMagic' || kind === 'UnsupportedVersion') && verdict.fields['offset'] === 0;
  if (atStart || CONTRACT_KINDS.has(kind)) {
    return { ...base, classification: 'contract_violation', regime: 'B', detail: `framing contract violated: ${message}` };
  }
  return { ...base, classification: 'corrupt', regime: 'B', detail: `corrupt: ${message}` };
}

/**
 * An attempt that ended outside the frame decoder's verdict: never clean. `NotFramed` is a
 * contract violation (or, under an accept-ambiguity policy, `ambiguous`: Regime C),
 * `InvalidUtf8` an invalid message; the others are abandoned (the stream stopped before its
 * sentinel, or a complete stream answered nothing, §1).
 */
export function attemptFailure(
  kind: AttemptErrorKind,
  detail: string,
  progress: Progress = NOTHING,
  head: StreamHead | null = null,
  ambiguous = false,
): Outcome {
  const base = { kind, truncation: null, abort: null, progress, head, sentinelSeen: false };
  if (kind === 'NotFramed' && ambiguous) {
    return { ...base, classification: 'ambiguous', regime: 'C', detail: `completion ambiguous: ${detail}` };
  }
  if (kind === 'NotFramed') {
    return { ...base, classification: 'contract_violation', regime: 'B', detail: `framing contract violated: ${detail}` };
  }
  if (kind === 'InvalidUtf8') {
    return { ...base, classification: 'invalid_message', regime: 'B', detail };
  }
  return { ...base, classification: 'abandoned', regime: 'B', detail: `abandoned: ${detail}` };
}

const ABORT_NAMES: Record<number, string> = {
  0: 'unspecified',
  1: 'internal error',
  2: 'cancelled',
  3: 'overloaded or shutting down',
  4: 'upstream failed',
  5: 'message too large',
};

/** The name of an ABORT reason code (SPEC.md §3.1). */
export function abortName(code: number): string {
  return ABORT_NAMES[code] ?? 'reserved';
}

/** What to do after an attempt (SPEC.md §11.6). */
export type RetryDecisionName = 'retry' | 'do_not_retry' | 'surface_to_caller';

/** Why (the Rust crate's `RetryReason::name`). */
export type RetryReasonName =
  | 'complete'
  | 'idempotent'
  | 'keyed'
  | 'outcome_unknown'
  | 'not_deduplicated'
  | 'ambiguous'
  | 'cancelled'
  | 'would_repeat'
  | 'unknown_abort'
  | 'contract_violation';

/** A retry decision and its reason. */
export interface RetryDecision {
  decision: RetryDecisionName;
  reason: RetryReasonName;
}

const REASON_TEXT: Record<RetryReasonName, string> = {
  complete: 'the response is complete',
  idempotent: 'the request is idempotent',
  keyed: 'the request carries a request key, so the server can deduplicate a retry',
  outcome_unknown: 'the request may have executed and is neither idempotent nor keyed',
  not_deduplicated: 'the request carries a key, but the server does not declare deduplication',
  ambiguous: 'stream completion is ambiguous (Regime C): not retried by default',
  cancelled: 'the request was cancelled',
  would_repeat: 'a retry would fail the same way',
  unknown_abort: 'the server aborted without a known reason',
  contract_violation: 'the server broke the framing contract',
};

/** The reason in words (the Rust crate's `RetryReason` display). */
export function reasonText(reason: RetryReasonName): string {
  return REASON_TEXT[reason];
}

/** What the request is, as far as repeating it goes (SPEC.md §11.6, §17.13). */
export interface RequestTraits {
  /** Repeating it has no further effect (reads and lists). */
  idempotent: boolean;
  /** It carries a request key (reused on every retry). */
  keyed: boolean;
  /** The server declares deduplication for its method (§17.11): only then does a key make a retry safe. */
  serverDeduplicates: boolean;
}

/** The retry decision of SPEC.md §11.6 (the Rust crate's `RetryPolicy::decide`). */
export function decide(outcome: Outcome, request: RequestTraits): RetryDecision {
  const ifSafe = (): RetryDecision => {
    if (request.idempotent) {
      return { decision: 'retry', reason: 'idempotent' };
    }
    if (request.keyed && request.serverDeduplicates) {
      return { decision: 'retry', reason: 'keyed' };
    }
    return { decision: 'surface_to_caller', reason: request.keyed ? 'not_deduplicated' : 'outcome_unknown' };
  };
  switch (outcome.classification) {
    case 'clean':
      return { decision: 'do_not_retry', reason: 'complete' };
    case 'aborted':
      switch (outcome.abort?.code) {
        case 3:
        case 4:
          return ifSafe();
        case 1:
        case 5:
          return { decision: 'do_not_retry', reason: 'would_repeat' };
        case 2:
          return { decision: 'do_not_retry', reason: 'cancelled' };
        default:
          return { decision: 'surface_to_caller', reason: 'unknown_abort' };
      }
    case 'contract_violation':
    case 'invalid_message':
      return { decision: 'do_not_retry', reason: 'contract_violation' };
    case 'ambiguous':
      return { decision: 'surface_to_caller', reason: 'ambiguous' };
    default:
      return ifSafe();
  }
}

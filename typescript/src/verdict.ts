/**
 * What a body decoder says at the end of its input (SPEC.md §7, §14): clean with the verified
 * messages, aborted by the peer, or an error kind.
 *
 * @module
 */

import { createHash } from 'node:crypto';

import type { ErrorKind, TruncationPoint } from './errors.js';

/** What had been received when the stream ended (the Rust crate's `Progress`). */
export interface Progress {
  /** Whole frames accepted. */
  frames: number;
  /** Frame bytes fed to the frame decoder. */
  bytes: number;
  /** Sequence number of the last frame whose header was accepted. */
  lastSequence: number | null;
  /** Messages verified. */
  messages: number;
  /** Bytes of the message left open (received, never delivered). */
  openMessageBytes: number;
}

/** The stream head (SPEC.md §3), once HEAD arrived and passed its checks. */
export interface StreamHead {
  /** The request key it echoed, 32 hex digits (`null`: the zero key, none). */
  requestKey: string | null;
  /** The server's attempt id, 32 hex digits. */
  attemptId: string;
}

/** The verdict on one stream, in the shape of the manifest's `expect` plus what was received. */
export interface Verdict {
  /**
   * `clean` only when STREAM_END arrived and then the end of input (§7 row 2), or the input
   * ended right after the verified final response (row 4, §7.1).
   */
  verdict: 'clean' | 'aborted' | 'error';
  /** Whether STREAM_END arrived: `false` for a final response delivered without it (row 4). */
  sentinelSeen: boolean;
  /** `A`: the sentinel or ABORT decided; `B`: the framing's own checks (§9, §11.4). */
  regime: 'A' | 'B';
  /** Every message verified, in order (also for an error or an abort: §9, §14). */
  messages: Uint8Array[];
  /** The ABORT's code and reason, when aborted. */
  abort: { code: number; reason: string } | null;
  /** The error kind; `PeerAbort` when aborted; `null` when clean. */
  error: ErrorKind | null;
  /** Where a `Truncated` stream stopped. */
  truncation: TruncationPoint | null;
  /** The error's message (lowercase, as the Rust crate words it), or `complete`. */
  detail: string;
  /** The error's structured fields (offsets, lengths, limits). */
  fields: Readonly<Record<string, unknown>>;
  /** What was received. */
  progress: Progress;
  /** The stream head, if it arrived. */
  head: StreamHead | null;
}

const strictUtf8 = new TextDecoder('utf-8', { fatal: true });

/** A message as the manifest lists it: length, SHA-256 and its text (`null` if not UTF-8). */
export interface ManifestMessage {
  len: number;
  sha256: string;
  utf8: string | null;
}

/** The manifest's `expect` shape of a verdict (the batch protocol of tests/wire/reference_decoder.rs). */
export interface ManifestVerdict {
  verdict: Verdict['verdict'];
  sentinel_seen: boolean;
  regime: Verdict['regime'];
  messages: ManifestMessage[];
  abort: Verdict['abort'];
  error: ErrorKind | null;
  truncation: TruncationPoint | null;
}

/** `verdict` in the manifest's `expect` shape. */
export function toManifest(verdict: Verdict): ManifestVerdict {
  return {
    verdict: verdict.verdict,
    sentinel_seen: verdict.sentinelSeen,
    regime: verdict.regime,
    messages: verdict.messages.map((m) => {
      let utf8: string | null;
      try {
        utf8 = strictUtf8.decode(m);
      } catch {
        utf8 = null;
      }
      return { len: m.length, sha256: createHash('sha256').update(m).digest('hex'), utf8 };
    }),
    abort: verdict.abort,
    error: verdict.error,
    truncation: verdict.truncation,
  };
}

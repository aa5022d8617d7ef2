/**
 * Deduplication stores (SPEC.md §17.4, §17.5, §17.12): the four atomic operations on one record,
 * as the Redis scripts of §17.12.1 define them, and {@link MemoryStore} for one process.
 *
 * @module
 */

import { Telemetry, type MeterLike } from '../../telemetry.js';

/**
 * A store that failed, by `kind` (the Rust crate's `StoreError::kind`, the `outcome` of the
 * store metrics): `timeout` (no answer in time), `full` (a bounded store full of calls in
 * flight), `corrupt` (an answer that is not the format's), `redis` (the Redis client failed).
 */
export class StoreError extends Error {
  constructor(
    readonly kind: 'timeout' | 'full' | 'corrupt' | 'redis',
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = 'StoreError';
  }
}

/** What a claim answered (SPEC.md §17.4). */
export type ClaimReply =
  | { kind: 'claimed'; generation: number }
  | { kind: 'conflict' }
  | { kind: 'in_flight'; msLeft: number }
  | { kind: 'abandoned' }
  | { kind: 'done'; state: 'r' | 'e' | 'n'; payload: string };

/**
 * A store every instance that may receive a retry shares; every operation atomic on one record.
 * Keys are store keys (64 hex digits, §17.2); a failure of the store is a thrown error.
 */
export interface DedupeStore {
  /** Claims `key` for `fingerprint` with the fencing `token` (32 hex digits). */
  claim(key: string, fingerprint: string, token: string, leaseMs: number, retentionMs: number, reexecute: boolean): Promise<ClaimReply>;
  /** Renews the lease of the claim held with `token`; `false`: the lease was lost. */
  renew(key: string, token: string, leaseMs: number): Promise<boolean>;
  /**
   * Records the outcome of the claim held with `token`: `r` a result, `e` an error (their JSON
   * text), `n` completed but not stored (the result's size in decimal); `false`: lease lost.
   */
  complete(key: string, token: string, state: 'r' | 'e' | 'n', payload: string, retentionMs: number): Promise<boolean>;
  /** Deletes the record of the claim held with `token` (the call will not execute). */
  release(key: string, token: string): Promise<boolean>;
}

interface Entry {
  s: 'f' | 'r' | 'e' | 'n' | 'a';
  fp: string;
  t: string | null;
  g: number;
  l: number;
  r: string;
  expires: number;
}

/** Options of a {@link MemoryStore}. */
export interface MemoryStoreOptions {
  /** Records kept at most; default 100 000. */
  maxEntries?: number;
  /** Bytes of stored results kept at most; default 256 MiB. */
  maxBytes?: number;
  /** The clock, in ms (tests); default `Date.now`. */
  now?: () => number;
  /**
   * An OpenTelemetry `Meter` for `mcp_framing.dedupe.evictions` (default: the global meter
   * provider's, if `@opentelemetry/api` is installed).
   */
  meter?: MeterLike;
}

/**
 * A store in this process: bounded in records and bytes, records expiring with their retention.
 * To make room it removes expired records first, then claims whose lease expired, then completed
 * records closest to their expiry; it never evicts a claim in flight: full of those, it throws
 * (the call is refused "store unavailable", fail closed).
 */
export class MemoryStore implements DedupeStore {
  private readonly entries = new Map<string, Entry>();
  private bytes = 0;
  private readonly maxEntries: number;
  private readonly maxBytes: number;
  private readonly now: () => number;
  private readonly telemetry: Telemetry;
  /** Records removed before their window (SPEC.md §17.7). */
  evictions = 0;

  constructor(options: MemoryStoreOptions = {}) {
    this.maxEntries = options.maxEntries ?? 100_000;
    this.maxBytes = options.maxBytes ?? 256 * 1024 * 1024;
    this.now = options.now ?? Date.now;
    this.telemetry = new Telemetry(undefined, options.meter ?? null);
  }

  private get(key: string): Entry | undefined {
    const entry = this.entries.get(key);
    if (entry !== undefined && entry.expires <= this.now()) {
      this.remove(key, entry);
      return undefined;
    }
    return entry;
  }

  private remove(key: string, entry: Entry): void {
    this.entries.delete(key);
    this.bytes -= entry.r.length;
  }

  /** Makes room for one record of `bytes` more; false if only claims in flight are left. */
  private room(bytes: number): boolean {
    const now = this.now();
    const full = (): boolean => this.entries.size + 1 > this.maxEntries || this.bytes + bytes > this.maxBytes;
    if (!full()) {
      return true;
    }
    const candidates = [...this.entries].filter(([, e]) => e.expires <= now || e.s !== 'f' || e.l <= now);
    const rank = (e: Entry): number => (e.expires <= now ? 0 : e.s === 'f' ? 1 : 2);
    candidates.sort(([, a], [, b]) => rank(a) - rank(b) || a.expires - b.expires);
    for (const [key, entry] of candidates) {
      if (!full()) {
        break;
      }
      if (entry.expires > now) {
        this.evictions += 1;
        this.telemetry.evicted(entry.s === 'f' ? 'expired_claim' : 'completed');
      }
      this.remove(key, entry);
    }
    return !full();
  }

  async claim(key: string, fingerprint: string, token: string, leaseMs: number, retentionMs: number, reexecute: boolean): Promise<ClaimReply> {
    const now = this.now();
    const entry = this.get(key);
    if (entry === undefined) {
      if (!this.room(0)) {
        throw new StoreError('full', 'the in-memory store is full of calls in flight');
      }
      this.entries.set(key, { s: 'f', fp: fingerprint, t: token, g: 1, l: now + leaseMs, r: '', expires: now + retentionMs });
      return { kind: 'claimed', generation: 1 };
    }
    if (entry.fp !== fingerprint) {
      return { kind: 'conflict' };
    }
    if (entry.s === 'f') {
      const left = entry.l - now;
      if (left > 0) {
        return { kind: 'in_flight', msLeft: left };
      }
      if (reexecute) {
        Object.assign(entry, { t: token, g: entry.g + 1, l: now + leaseMs, expires: now + retentionMs });
        return { kind: 'claimed', generation: entry.g };
      }
      Object.assign(entry, { s: 'a', t: null, l: 0 });
      return { kind: 'abandoned' };
    }
    if (entry.s === 'a') {
      return { kind: 'abandoned' };
    }
    return { kind: 'done', state: entry.s, payload: entry.r };
  }

  async renew(key: string, token: string, leaseMs: number): Promise<boolean> {
    const entry = this.get(key);
    if (entry?.s !== 'f' || entry.t !== token) {
      return false;
    }
    entry.l = this.now() + leaseMs;
    return true;
  }

  async complete(key: string, token: string, state: 'r' | 'e' | 'n', payload: string, retentionMs: number): Promise<boolean> {
    const entry = this.get(key);
    if (entry === undefined || entry.t !== token) {
      return false;
    }
    if (entry.s !== 'f') {
      return true;
    }
    let [s, r] = [state, payload];
    if (!this.room(payload.length)) {
      // No room for the result: completed, not stored (a retry is refused, never re-executed).
      [s, r] = ['n', String(payload.length)];
    }
    this.bytes += r.length;
    Object.assign(entry, { s, r, l: 0, expires: this.now() + retentionMs });
    return true;
  }

  async release(key: string, token: string): Promise<boolean> {
    const entry = this.get(key);
    if (entry?.s !== 'f' || entry.t !== token) {
      return false;
    }
    this.remove(key, entry);
    return true;
  }
}

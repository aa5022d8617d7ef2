/**
 * Request keys (SPEC.md §10): 128 random bits per logical request, reused by every retry, shown
 * in logs only by their fingerprint.
 *
 * @module
 */

import { createHash, randomFillSync } from 'node:crypto';

const HEX32 = /^[0-9a-f]{32}$/;
const ZERO_KEY = '0'.repeat(32);

/** A request key: 32 lowercase hex digits, never all zero (SPEC.md §10). */
export type RequestKey = string;

/** Random bytes drawn from the CSPRNG at once, handed out 16 at a time. */
const pool = new Uint8Array(4096);
let drawn = pool.length;

/**
 * 16 bytes from the CSPRNG (a request key, an attempt id, a claim token). They are drawn 4 KiB at
 * a time, as `crypto.randomUUID` caches its draws: one call into the CSPRNG costs more than
 * framing a small response. Each handed-out piece is wiped from the pool.
 */
export function random16(): Uint8Array {
  if (drawn + 16 > pool.length) {
    randomFillSync(pool);
    drawn = 0;
  }
  const out = pool.slice(drawn, drawn + 16);
  pool.fill(0, drawn, drawn + 16);
  drawn += 16;
  return out;
}

/** Draws a random request key (never the zero key, which means "none" in HEAD). */
export function randomRequestKey(): RequestKey {
  for (;;) {
    const key = hex(random16());
    if (key !== ZERO_KEY) {
      return key;
    }
  }
}

/** Whether `value` is a well-formed request key: 32 lowercase hex digits, not all zero. */
export function isRequestKey(value: unknown): value is RequestKey {
  return typeof value === 'string' && HEX32.test(value) && value !== ZERO_KEY;
}

/** The key's 16 bytes. */
export function keyBytes(key: RequestKey): Uint8Array {
  // A copy of its own (not a view of Buffer's shared pool), made by the typed-array constructor:
  // `Uint8Array.from` iterates a Buffer element by element.
  return new Uint8Array(Buffer.from(key, 'hex'));
}

/**
 * The fingerprint logs show instead of the key: `sha256:` and the first 16 hex digits of the
 * SHA-256 of its 16 bytes (SPEC.md §10, `RequestKey::fingerprint`).
 */
export function fingerprint(key: RequestKey | Uint8Array): string {
  const bytes = typeof key === 'string' ? keyBytes(key) : key;
  return `sha256:${createHash('sha256').update(bytes).digest('hex').slice(0, 16)}`;
}

/** Hex of `bytes`. */
export function hex(bytes: Uint8Array): string {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('hex');
}

/**
 * The frame layout (SPEC.md §2, §3): a 20-byte header, then `length` payload bytes.
 *
 * ```text
 *  0       2       3       4                8                12               16               20
 *  | magic | ver   | kind  |   sequence     |    length      |  payload CRC   |  header CRC    |
 *  | 9F 4D | 01    | u8    |   u32          |    u32         |  u32           |  u32           |
 * ```
 *
 * @module
 */

import { crc32 } from 'node:zlib';

import { HEADER_LEN } from './limits.js';

/** The first two bytes of every frame (SPEC.md §2). */
export const MAGIC0 = 0x9f;
/** The second magic byte. */
export const MAGIC1 = 0x4d;
/** The wire format version of SPEC.md (§8). */
export const VERSION = 0x01;

/** HEAD: request key and attempt id (SPEC.md §3). */
export const HEAD = 0x01;
/** DATA: the next bytes of the current message. */
export const DATA = 0x02;
/** MESSAGE_END: the message's length and SHA-256. */
export const MESSAGE_END = 0x03;
/** STREAM_END: the sentinel, with the message count. */
export const STREAM_END = 0x04;
/** ABORT: the sender gave up, with a reason code and text. */
export const ABORT = 0x05;
/** KEEPALIVE: nothing. */
export const KEEPALIVE = 0x06;

const KIND_NAMES: Record<number, string> = {
  [HEAD]: 'HEAD',
  [DATA]: 'DATA',
  [MESSAGE_END]: 'MESSAGE_END',
  [STREAM_END]: 'STREAM_END',
  [ABORT]: 'ABORT',
  [KEEPALIVE]: 'KEEPALIVE',
};

/** A kind's name as the Rust crate prints it (`HEAD`, ..., `IGNORABLE(0x80)`, `UNKNOWN(0x07)`). */
export function kindName(kind: number): string {
  const name = KIND_NAMES[kind];
  if (name !== undefined) {
    return name;
  }
  const hex = kind.toString(16).padStart(2, '0');
  return kind >= 0x80 ? `IGNORABLE(0x${hex})` : `UNKNOWN(0x${hex})`;
}

/** Kinds `0x00` and `0x07..=0x7F` are unknown and rejected (SPEC.md §3). */
export function isUnknownKind(kind: number): boolean {
  return kind === 0x00 || (kind >= 0x07 && kind <= 0x7f);
}

/** Reads a big-endian u32 at `at`. */
export function u32(bytes: Uint8Array, at: number): number {
  return ((bytes[at]! << 24) | (bytes[at + 1]! << 16) | (bytes[at + 2]! << 8) | bytes[at + 3]!) >>> 0;
}

/** Reads a big-endian u64 at `at` as a number (exact up to 2^53; larger values stay larger). */
export function u64(bytes: Uint8Array, at: number): number {
  return u32(bytes, at) * 0x1_0000_0000 + u32(bytes, at + 4);
}

/** CRC-32 ISO-HDLC of `bytes` (SPEC.md §2.1), continuing from `value`. */
export function crc(bytes: Uint8Array, value = 0): number {
  return crc32(bytes, value) >>> 0;
}

/**
 * Whether `header` (at least 20 bytes from `at`) passes the checks of SPEC.md §2 steps 1 and 2:
 * magic, version and header CRC. The compatible mapping splits records only at such headers
 * (§18.5 step 1).
 */
export function headerPasses(header: Uint8Array, at = 0): boolean {
  return (
    header.length - at >= HEADER_LEN &&
    header[at] === MAGIC0 &&
    header[at + 1] === MAGIC1 &&
    header[at + 2] === VERSION &&
    crc(header.subarray(at, at + 16)) === u32(header, at + 16)
  );
}

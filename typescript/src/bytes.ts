/**
 * Byte pieces joined into one buffer: the one copy of the decoders.
 *
 * @module
 */

/**
 * `pieces` (of `length` bytes in all) as one buffer: the piece itself when there is one, a view
 * when they follow each other in one buffer (a compatible-mapping event's payloads), else a copy.
 */
export function concat(pieces: Uint8Array[], length: number): Uint8Array {
  const first = pieces[0]!;
  if (pieces.length === 1) {
    return first;
  }
  // Views that follow each other in one buffer (a compatible-mapping event's payloads) are
  // one view: no copy.
  let end = first.byteOffset + first.byteLength;
  let contiguous = true;
  for (let i = 1; i < pieces.length && contiguous; i++) {
    const piece = pieces[i]!;
    contiguous = piece.buffer === first.buffer && piece.byteOffset === end;
    end += piece.byteLength;
  }
  if (contiguous) {
    return new Uint8Array(first.buffer, first.byteOffset, length);
  }
  const out = Buffer.allocUnsafe(length); // every byte is written below
  let at = 0;
  for (const piece of pieces) {
    out.set(piece, at);
    at += piece.length;
  }
  return out;
}

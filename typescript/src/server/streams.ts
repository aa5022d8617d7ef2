/**
 * Web-standard stream helpers of the server side: a body whose failure arrives as an item (so
 * that a transform can end its stream with ABORT instead of an error), and a body read whole
 * within a bound.
 *
 * @module
 */

/** A chunk of a body, or its failure (the last item). */
export type Guarded = Uint8Array | { failed: string };

/** The reason of a thrown value, as text. */
export function reasonOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/**
 * `body` read on demand, its failure delivered as a last `{ failed }` item; cancelling it cancels
 * `body`.
 */
export function guarded(body: ReadableStream<Uint8Array>): ReadableStream<Guarded> {
  const reader = body.getReader();
  return new ReadableStream<Guarded>(
    {
      async pull(controller) {
        try {
          const { done, value } = await reader.read();
          if (done) {
            controller.close();
          } else {
            controller.enqueue(value);
          }
        } catch (error) {
          controller.enqueue({ failed: reasonOf(error) });
          controller.close();
        }
      },
      cancel(reason) {
        return reader.cancel(reason);
      },
    },
    { highWaterMark: 0 },
  );
}

/** A body read whole, or as far as a bound or a failure let it be read. */
export type Read =
  | { whole: Uint8Array }
  | {
      failure: 'tooLarge' | 'failed';
      /** The bytes read (over the bound when `tooLarge`). */
      length: number;
      reason: string;
      /** The whole body again: the bytes read, then the rest (and its failure). */
      stream(): ReadableStream<Uint8Array>;
    };

/** Reads `body` whole if it holds at most `max` bytes. */
export async function readWithin(body: ReadableStream<Uint8Array>, max: number): Promise<Read> {
  const reader = body.getReader();
  const chunks: Uint8Array[] = [];
  let length = 0;
  let failed: unknown = null;
  for (;;) {
    let next: Awaited<ReturnType<typeof reader.read>>;
    try {
      next = await reader.read();
    } catch (error) {
      failed = error;
      break;
    }
    if (next.done) {
      return { whole: chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, length) };
    }
    chunks.push(next.value);
    length += next.value.length;
    if (length > max) {
      break;
    }
  }
  const stream = (): ReadableStream<Uint8Array> =>
    new ReadableStream<Uint8Array>({
      start(controller) {
        chunks.splice(0).forEach((chunk) => controller.enqueue(chunk));
        if (failed !== null) {
          controller.error(failed);
        }
      },
      async pull(controller) {
        const { done, value } = await reader.read();
        if (done) {
          controller.close();
        } else {
          controller.enqueue(value);
        }
      },
      cancel(reason) {
        return reader.cancel(reason);
      },
    });
  return failed === null
    ? { failure: 'tooLarge', length, reason: `more than ${max} bytes`, stream }
    : { failure: 'failed', length, reason: reasonOf(failed), stream };
}

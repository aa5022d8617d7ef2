/**
 * Web-standard stream helpers of the server side: a body re-framed as it is read (its failure
 * handed to the re-framing, which can end the outer body with ABORT instead of an error), and a
 * body read whole within a bound.
 *
 * @module
 */

/** The reason of a thrown value, as text. */
export function reasonOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** What turns an inner body into the outer one, chunk by chunk (sans-I/O). */
export interface Reframer {
  /** The bytes to send for the next bytes of the inner body. */
  pass(chunk: Uint8Array): Uint8Array[];
  /** The bytes to send when the inner body ended, `failed` with its failure's reason. */
  end(failed: string | null): Uint8Array[];
  /** Whether the outer body is complete: nothing more of the inner body is read. */
  readonly done: boolean;
}

/**
 * `body` through `reframer`, read as the outer body is read (nothing is read ahead). The pieces
 * of one inner chunk are enqueued together: Node's HTTP response corks the writes of one tick,
 * so they leave in one `writev`, with no copy to join them. The outer body ends when `reframer`
 * is done (the rest of `body` is cancelled) or when `body` ends or fails (the failure goes to
 * `reframer.end`, and, with `rethrow`, to the outer body after those bytes). Cancelling the
 * outer body cancels `body`.
 *
 * One `ReadableStream` with a pull source rather than a `TransformStream` behind a guard stream:
 * on Node.js 20 building a web stream costs about as much as framing a 64 KiB message, and
 * ending a `TransformStream` early (`terminate()`) builds an error with its stack trace.
 */
export function reframe(body: ReadableStream<Uint8Array>, reframer: Reframer, options: { rethrow?: boolean } = {}): ReadableStream<Uint8Array> {
  const reader = body.getReader();
  // Reads until there is something to send: an inner chunk may give nothing yet.
  const pullInto = async (controller: ReadableStreamDefaultController<Uint8Array>): Promise<void> => {
    for (;;) {
      let next: Awaited<ReturnType<typeof reader.read>> | { failed: unknown };
      try {
        next = await reader.read();
      } catch (error) {
        next = { failed: error };
      }
      let pieces: Uint8Array[];
      let failure: { error: unknown } | null = null;
      let ended = false;
      if ('failed' in next) {
        failure = { error: next.failed };
        pieces = reframer.end(reasonOf(next.failed));
      } else if (next.done) {
        ended = true;
        pieces = reframer.end(null);
      } else {
        pieces = reframer.pass(next.value);
      }
      let sent = false;
      for (const piece of pieces) {
        if (piece.length > 0) {
          controller.enqueue(piece);
          sent = true;
        }
      }
      if (failure !== null && options.rethrow === true && !reframer.done) {
        controller.error(failure.error);
        return;
      }
      if (failure !== null || ended || reframer.done) {
        controller.close();
        if (failure === null && !ended) {
          // The outer body is complete: the inner one has nothing more for it.
          reader.cancel().catch(() => undefined);
        }
        return;
      }
      if (sent) {
        return;
      }
    }
  };
  return new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
        try {
          await pullInto(controller);
        } catch (error) {
          // A failure of the re-framing itself, not of the body: the body has no reader left.
          reader.cancel(error).catch(() => undefined);
          throw error;
        }
      },
      cancel(reason) {
        return reader.cancel(reason);
      },
    },
    { highWaterMark: 0 },
  );
}

/**
 * `request` again with `body` (its own body, read before) and `signal` (default its own): a new
 * `Request` of the fields a handler reads (URL, method, headers, signal). Building it from them
 * costs Node's `Request` a fraction of copying a whole `Request` (`new Request(request, init)`).
 */
export function withRequestBody(request: Request, body: Uint8Array | ReadableStream<Uint8Array>, signal: AbortSignal = request.signal): Request {
  const init: RequestInit & { duplex?: 'half' } = { method: request.method, headers: request.headers, body, signal };
  if (body instanceof ReadableStream) {
    init.duplex = 'half';
  }
  return new Request(request.url, init);
}

/**
 * A new `Response` of `response`'s status and headers, `edit`ed, with `body`. The handler's
 * `Headers` are edited and handed on as they are (a `Response` copies the headers it is given:
 * copying them first as well cost a framed call about as much as its CRC-32s); headers that
 * cannot change (a `fetch` response's) are copied first.
 */
export function withHeaders(response: Response, body: ConstructorParameters<typeof Response>[0], edit: (headers: Headers) => void): Response {
  let headers = response.headers;
  try {
    edit(headers);
  } catch (error) {
    if (!(error instanceof TypeError)) {
      throw error;
    }
    headers = new Headers(headers);
    edit(headers);
  }
  return new Response(body, { status: response.status, statusText: response.statusText, headers });
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

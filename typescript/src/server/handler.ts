/**
 * {@link framingHandler}: frames, declares (and with `dedupe`, deduplicates) the responses of any
 * web-standard MCP handler, as the Rust crate's `FramingLayer` does for a tower service.
 *
 * @module
 */

import type { Mapping } from '../body.js';
import { BodyEncoder } from '../body-encoder.js';
import { AbortCode, EncodeError } from '../encoder.js';
import { DEFAULT_FRAME_SIZE, DEFAULT_MAX_MESSAGE_SIZE } from '../limits.js';
import { defaultLogger, type Logger, type MeterLike } from '../telemetry.js';
import { Declaration, MAX_DISCOVERY_REQUEST, discoverySource, wrapperContract } from './declare.js';
import { dedupeHandler, type DedupeOptions } from "./dedupe/handler.js";
import { InnerMessages, SsePassthrough, tooLarge } from './inner.js';
import { OptInError, acceptsEventStream, bodyKind, mappingOf, readOptIn, setResponseHeaders, type OptIn } from './opt-in.js';
import { readWithin, reframe, withHeaders, withRequestBody, type Reframer } from './streams.js';

/**
 * A web-standard request handler: `createMcpHandler(...).fetch`, `transport.handleRequest`, ...;
 * `C`: what an adapter passes after the request (the SDK's Node adapter: `{ authInfo, parsedBody }`).
 */
export type WebHandler<C extends unknown[] = []> = (request: Request, ...context: C) => Response | Promise<Response>;

/** Options of {@link framingHandler}. */
export interface FramingHandlerOptions {
  /** The largest DATA frame payload written; default 16 KiB (a quarter of a receiver's default). */
  frameSize?: number;
  /**
   * The largest message framed; default 16 MiB (SPEC.md §6). An inner message over it (or over
   * the request's `Mcp-Framing-Limits`) ends the stream with ABORT code 5.
   */
  maxMessageSize?: number;
  /**
   * `"compat"`: frame the response to every POST in the compatible mapping, opted in or not
   * (SPEC.md §18.8), and declare `alwaysFramed`; default `false`: only opted-in requests.
   */
  frameAllResponses?: false | 'compat';
  /** Deduplicate keyed `tools/call` requests on a shared store (SPEC.md §17). */
  dedupe?: DedupeOptions;
  /** Where warnings go (a contract that could not be declared, a store failure). */
  logger?: Logger;
  /**
   * An OpenTelemetry `Meter` for the deduplication metrics of SPEC.md §17.15 (default: the
   * global meter provider's, if `@opentelemetry/api` is installed; `dedupe.meter` wins).
   */
  meter?: MeterLike;
}

interface Settings {
  frameSize: number;
  maxMessageSize: number;
}

/**
 * Wraps a web-standard MCP handler: requests that opt in (SPEC.md §10, §16) get their response
 * framed in the mapping they asked for (binary, SSE or compatible), re-framed as the handler's
 * body streams; every `initialize` and `server/discover` result carries the contract (§11.2);
 * every other response passes unchanged. What an adapter passes after the request (the SDK's Node
 * adapter: `{ authInfo, parsedBody }`) reaches the handler as it came.
 *
 * ```ts
 * import { framingHandler } from 'mcp-framing/server';
 * const handler = createMcpHandler(() => server); // @modelcontextprotocol/server
 * export default { fetch: framingHandler((request) => handler.fetch(request)) };
 * ```
 *
 * @throws RangeError for a frame size outside 1..=2^32-1.
 */
export function framingHandler<C extends unknown[] = []>(
  handler: WebHandler<C>,
  options: FramingHandlerOptions = {},
): (request: Request, ...context: C) => Promise<Response> {
  const frameSize = options.frameSize ?? DEFAULT_FRAME_SIZE;
  const maxMessageSize = options.maxMessageSize ?? DEFAULT_MAX_MESSAGE_SIZE;
  if (!Number.isSafeInteger(frameSize) || frameSize < 1 || frameSize > 0xffff_ffff) {
    throw new RangeError(`frameSize must be in 1..=4294967295, got ${frameSize}`);
  }
  const logger = options.logger ?? defaultLogger;
  const frameAll = options.frameAllResponses === 'compat';
  const inner = options.dedupe === undefined ? handler : dedupeHandler(handler, { logger, ...(options.meter === undefined ? {} : { meter: options.meter }), ...options.dedupe });
  const contract = wrapperContract({
    frameSize,
    maxMessageSize,
    alwaysFramed: frameAll,
    deduplication: options.dedupe === undefined ? null : { windowMs: options.dedupe.windowMs ?? 86_400_000 },
  });
  const settings: Settings = { frameSize, maxMessageSize };

  return async (request: Request, ...context: C): Promise<Response> => {
    let optIn: OptIn | null;
    try {
      optIn = readOptIn(request.headers);
    } catch (error) {
      if (error instanceof OptInError) {
        return new Response(error.message, { status: 400, headers: { 'content-type': 'text/plain; charset=utf-8' } });
      }
      throw error;
    }
    // Without an opt-in, a POST is framed in the compatible mapping when every response is
    // (SPEC.md §18.8); a JSON answer only if the client also takes SSE.
    const unsolicited = frameAll && request.method === 'POST' ? acceptsEventStream(request.headers) : null;
    const [forwarded, source] = await observeDiscovery(request);
    let response = await inner(forwarded, ...context);
    if (source !== null) {
      response = await declare(response, new Declaration(contract, source, logger), maxMessageSize);
    }
    if (optIn !== null) {
      return optInResponse(response, optIn, settings);
    }
    if (unsolicited !== null) {
      return compatResponse(response, null, { jsonToSse: unsolicited }, settings);
    }
    return response;
  };
}

/**
 * The request to forward, and whether it is a discovery request (SPEC.md §11.2): a POST body up
 * to 64 KiB is read before the handler reads it (it reads it whole to answer).
 */
async function observeDiscovery(request: Request): Promise<[Request, ReturnType<typeof discoverySource>]> {
  if (request.method !== 'POST' || request.body === null) {
    return [request, null];
  }
  const read = await readWithin(request.body, MAX_DISCOVERY_REQUEST);
  if ('whole' in read) {
    return [withRequestBody(request, read.whole), discoverySource(read.whole)];
  }
  return [withRequestBody(request, read.stream()), null];
}

async function declare(response: Response, declaration: Declaration, maxMessage: number): Promise<Response> {
  const kind = bodyKind(response, true);
  if (kind === 'sse') {
    const passthrough = new SsePassthrough(null, declaration, maxMessage);
    // Unframed, a failure goes on as it came.
    return withBody(response, reframe(response.body!, passthrough, { rethrow: true }));
  }
  if (kind === 'json') {
    const read = await readWithin(response.body!, maxMessage);
    if ('whole' in read) {
      const text = declaration.apply(read.whole);
      return withBody(response, text ?? read.whole);
    }
    if (read.failure === 'tooLarge') {
      declaration.notDeclared(`the response holds more than ${maxMessage} bytes`);
    }
    return withBody(response, read.stream());
  }
  return response;
}

/** A body of `parts`, in order. */
function partsBody(parts: Uint8Array[]): Uint8Array | ReadableStream<Uint8Array> {
  if (parts.length === 1) {
    return parts[0]!;
  }
  return new ReadableStream<Uint8Array>({
    start(controller) {
      parts.forEach((part) => controller.enqueue(part));
      controller.close();
    },
  });
}

/**
 * `response` with another body (and no `Content-Length`, which the body change makes wrong), and
 * with the headers of `mapping` if given.
 */
function withBody(response: Response, body: ConstructorParameters<typeof Response>[0], mapping?: Mapping): Response {
  return withHeaders(response, body, (headers) => {
    headers.delete('content-length');
    if (mapping !== undefined) {
      setResponseHeaders(headers, mapping);
    }
  });
}

function encoderFor(mapping: Mapping, optIn: OptIn | null, settings: Settings): BodyEncoder {
  // Within the smaller of the wrapper's limits and the client's (SPEC.md §11.3, §16).
  return new BodyEncoder(mapping, {
    frameSize: Math.min(settings.frameSize, optIn?.maxFramePayload ?? Number.POSITIVE_INFINITY),
    maxMessageSize: Math.min(settings.maxMessageSize, optIn?.maxMessageSize ?? Number.POSITIVE_INFINITY),
    requestKey: optIn?.requestKey ?? null,
  });
}

function optInResponse(response: Response, optIn: OptIn, settings: Settings): Promise<Response> | Response {
  const mapping = mappingOf(optIn);
  if (mapping === 'compat') {
    return compatResponse(response, optIn, null, settings);
  }
  const kind = bodyKind(response, true);
  if (kind === null) {
    return response;
  }
  const encoder = encoderFor(mapping, optIn, settings);
  const max = encoder.frames.maxMessageSize;
  return withBody(response, reframe(response.body!, new FramedBody(encoder, kind, max)), mapping);
}

/** The inner body (SSE or JSON) re-framed in the binary or SSE mapping as it streams. */
class FramedBody implements Reframer {
  private readonly messages: InnerMessages | null;
  private readonly json: Uint8Array[] = [];
  private jsonLength = 0;

  constructor(
    private readonly encoder: BodyEncoder,
    kind: 'sse' | 'json',
    private readonly max: number,
  ) {
    this.messages = kind === 'sse' ? new InnerMessages(max) : null;
  }

  get done(): boolean {
    return this.encoder.finished;
  }

  pass(chunk: Uint8Array): Uint8Array[] {
    if (this.messages === null) {
      this.jsonLength += chunk.length;
      if (this.jsonLength > this.max) {
        const err = tooLarge(this.jsonLength, this.max);
        return [this.encoder.abort(err.abortCode, err.message)];
      }
      this.json.push(chunk);
      return [];
    }
    const out: Uint8Array[] = [];
    const { items, failed } = this.messages.next(chunk);
    for (const item of items) {
      try {
        if (item.kind === 'keepAlive') {
          out.push(this.encoder.keepAlive());
        } else {
          out.push(...this.encoder.messageParts(item.data, item.last));
        }
      } catch (error) {
        if (!(error instanceof EncodeError)) {
          throw error;
        }
        out.push(this.encoder.fail(error));
      }
      if (this.encoder.finished) {
        // After the final response the POST stream has nothing more for this request.
        return out;
      }
    }
    if (failed !== null) {
      out.push(this.encoder.abort(failed.code, failed.reason));
    }
    return out;
  }

  end(failed: string | null): Uint8Array[] {
    if (failed !== null) {
      return [this.encoder.abort(AbortCode.UpstreamFailed, `upstream body failed: ${failed}`)];
    }
    if (this.messages === null) {
      return this.encoder.messageParts(Buffer.concat(this.json, this.jsonLength), true);
    }
    return [this.encoder.abort(AbortCode.UpstreamFailed, 'the upstream response stream ended before its final response')];
  }
}

async function compatResponse(
  response: Response,
  optIn: OptIn | null,
  unsolicited: { jsonToSse: boolean } | null,
  settings: Settings,
): Promise<Response> {
  const kind = bodyKind(response, unsolicited?.jsonToSse !== false);
  if (kind === null) {
    return response;
  }
  const encoder = encoderFor('compat', optIn, settings);
  const max = encoder.frames.maxMessageSize;
  if (kind === 'sse') {
    return withBody(response, reframe(response.body!, new SsePassthrough(encoder, null, max)), 'compat');
  }
  // The whole JSON body, within the message limit, before the response head is sent.
  const read = await readWithin(response.body!, max);
  if ('whole' in read) {
    try {
      return withBody(response, partsBody(encoder.messageParts(read.whole, true)), 'compat');
    } catch (error) {
      if (!(error instanceof EncodeError)) {
        throw error;
      }
      if (unsolicited !== null) {
        // Not opted in: the body as it was (an event cannot carry it).
        return withBody(response, read.whole);
      }
      return withBody(response, encoder.fail(error), 'compat');
    }
  }
  if (unsolicited !== null) {
    return withBody(response, read.stream());
  }
  const failed = read.failure === 'tooLarge' ? encoder.fail(tooLarge(read.length, max)) : encoder.abort(AbortCode.UpstreamFailed, `upstream body failed: ${read.reason}`);
  return withBody(response, failed, 'compat');
}

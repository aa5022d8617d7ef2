/**
 * Request-key deduplication for a web-standard MCP handler (SPEC.md §17, HTTP binding §17.10):
 * a keyed `tools/call` is claimed on a shared store before the handler sees it, runs to its end
 * whatever the client does (the handler's `request.signal` is not the client's), its final
 * response is recorded, and a retry with the same key gets that response under its own id.
 * The Rust crate's `http::DedupeLayer`.
 *
 * @module
 */

import { REQUEST_KEY_META } from '../../fetch.js';
import { hex, isRequestKey, keyBytes, random16, type RequestKey } from '../../ids.js';
import { Telemetry, defaultLogger, type Ended, type Logger, type MeterLike } from '../../telemetry.js';
import { locate } from '../declare.js';
import type { WebHandler } from '../handler.js';
import { InnerMessages } from '../inner.js';
import { REQUEST_KEY_HEADER, bodyKind } from '../opt-in.js';
import { reasonOf, withHeaders, withRequestBody } from '../streams.js';
import { MalformedBody, authorizationValues, canonical, fingerprint, member, principalDigest, readStrict, storeKey, type Json } from './request.js';
import { StoreError, type DedupeStore } from './store.js';

/** The response header naming the decision, for operators (SPEC.md §17.10). */
export const DEDUPE_HEADER = 'mcp-framing-dedupe';

/** Options of deduplication (SPEC.md §17); every duration in milliseconds. */
export interface DedupeOptions {
  /** The shared store: a {@link MemoryStore} (one process) or a {@link RedisStore} (a fleet). */
  store: DedupeStore;
  /** How long a completed record is kept and replayed; default 24 h (§17.7). */
  windowMs?: number;
  /** A claim's lease, renewed every third of it while the call runs; default 30 s (§17.5). */
  leaseMs?: number;
  /** How long a duplicate waits for its original; default 5 s (§17.8). */
  waitMs?: number;
  /** The largest result stored; default 1 MiB (§17.7). */
  maxResultBytes?: number;
  /** The largest request body read; default 16 MiB (§17.10). */
  maxBodyBytes?: number;
  /** A store answer slower than this is a failure; default 2 s (§17.8). */
  storeTimeoutMs?: number;
  /** The methods deduplicated; default `tools/call` (§17.1). */
  methods?: readonly string[];
  /** A lease that expired: `reexecute` (default) or `refuse` (outcome unknown, §17.5). */
  expiredLease?: 'reexecute' | 'refuse';
  /** Execute keyed calls unprotected while the store fails (unsafe; default `false`, §17.8). */
  failOpen?: boolean;
  /** The `_meta` entries the fingerprint covers (§17.3); default none. */
  coveredMeta?: readonly string[];
  /**
   * The caller's identity (§17.2), hashed as its UTF-8 bytes (`null`: anonymous); default: the
   * request's `Authorization` values joined by `,` (§17.12.1), anonymous without the field.
   */
  principal?: (request: Request) => string | null;
  /** Where warnings go. */
  logger?: Logger;
  /**
   * An OpenTelemetry `Meter` for the metrics of SPEC.md §17.15 (default: the global meter
   * provider's, if `@opentelemetry/api` is installed).
   */
  meter?: MeterLike;
}

const REFUSALS = {
  key_conflict: [-32080, false, 'the request key was already used with different parameters'],
  in_progress: [-32081, true, 'an earlier attempt with this request key is still executing'],
  result_not_stored: [-32082, false, 'the call with this request key completed, but its result was too large to store'],
  outcome_unknown: [-32083, false, 'an earlier attempt with this request key stopped without a result: outcome unknown'],
  store_unavailable: [-32084, true, 'the deduplication store is unavailable'],
  lease_lost: [-32085, false, "the execution's lease was taken over before its result was recorded"],
} as const;

type Reason = keyof typeof REFUSALS;

const textEncoder = new TextEncoder();

function jsonResponse(body: string, status: number, decision: string): Response {
  return new Response(body, { status, headers: { 'content-type': 'application/json', [DEDUPE_HEADER]: decision } });
}

/** A refusal as a JSON-RPC error under the attempt's id (SPEC.md §17.9). */
function refusal(reason: Reason, id: string, key: RequestKey, extra: Record<string, number> = {}, detail = ''): Response {
  const [code, retryable, message] = REFUSALS[reason];
  const data = { reason, retryable, requestKey: key, ...extra };
  const error = { code, message: `mcp-framing: ${message}${detail}`, data: { 'io.github.mcp-framing/dedupe': data } };
  return jsonResponse(`{"jsonrpc":"2.0","id":${id},"error":${JSON.stringify(error)}}`, 200, reason);
}

function badRequest(message: string, status = 400): Response {
  const body = JSON.stringify({ jsonrpc: '2.0', id: null, error: { code: -32700, message } });
  return new Response(body, { status, headers: { 'content-type': 'application/json' } });
}

function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new StoreError('timeout', `no answer within ${ms} ms`)), ms);
    promise.then(
      (value) => {
        clearTimeout(timer);
        resolve(value);
      },
      (error: unknown) => {
        clearTimeout(timer);
        reject(error instanceof Error ? error : new Error(String(error)));
      },
    );
  });
}

/** Reads a request body within `max` bytes; `null` past it. */
async function readBody(request: Request, max: number): Promise<Uint8Array | null> {
  const declared = Number(request.headers.get('content-length') ?? Number.NaN);
  if (declared > max || request.body === null) {
    return declared > max ? null : new Uint8Array(0);
  }
  const chunks: Uint8Array[] = [];
  let length = 0;
  for await (const chunk of request.body as unknown as AsyncIterable<Uint8Array>) {
    length += chunk.length;
    if (length > max) {
      return null;
    }
    chunks.push(chunk);
  }
  return Buffer.concat(chunks, length);
}

/** The outcome member (`result` or `error`) of a final response's text, as written. */
function outcomeOf(response: Uint8Array): ['r' | 'e', string] | null {
  const text = new TextDecoder().decode(response);
  for (const [name, state] of [
    ['result', 'r'],
    ['error', 'e'],
  ] as const) {
    const found = locate(text, [name], '{}');
    if (found !== null && 'value' in found) {
      return [state, text.slice(found.value[0], found.value[1])];
    }
  }
  return null;
}

/** Wraps `handler` with deduplication of keyed calls (SPEC.md §17.10). */
export function dedupeHandler<C extends unknown[]>(handler: WebHandler<C>, options: DedupeOptions): WebHandler<C> {
  const store = options.store;
  const windowMs = options.windowMs ?? 86_400_000;
  const leaseMs = options.leaseMs ?? 30_000;
  const waitMs = options.waitMs ?? 5_000;
  const maxResult = options.maxResultBytes ?? 1024 * 1024;
  const maxBody = options.maxBodyBytes ?? 16 * 1024 * 1024;
  const timeout = options.storeTimeoutMs ?? 2_000;
  const methods = options.methods ?? ['tools/call'];
  const reexecute = options.expiredLease !== 'refuse';
  const covered = options.coveredMeta ?? [];
  const principal = (request: Request): Parameters<typeof principalDigest>[0] => {
    if (options.principal === undefined) {
      const values = authorizationValues(request.headers);
      return values === null ? null : { authorization: values };
    }
    const id = options.principal(request);
    return id === null ? null : { id };
  };
  const logger = options.logger ?? defaultLogger;
  const telemetry = new Telemetry(logger, options.meter ?? null);
  // Every store operation within the timeout, timed (§17.15).
  const call = async <T>(operation: StoreOperation, run: () => Promise<T>): Promise<T> => {
    const started = performance.now();
    try {
      const value = await withTimeout(run(), timeout);
      telemetry.storeOperation(operation, (performance.now() - started) / 1000, 'ok');
      return value;
    } catch (error) {
      telemetry.storeOperation(operation, (performance.now() - started) / 1000, error instanceof StoreError ? error.kind : 'error');
      throw error;
    }
  };

  return async (request: Request, ...context: C): Promise<Response> => {
    if (request.method !== 'POST') {
      return handler(request, ...context);
    }
    const body = await readBody(request, maxBody);
    if (body === null) {
      return badRequest(`the request body is larger than ${maxBody} bytes`, 413);
    }
    let json: Json;
    try {
      json = readStrict(body);
    } catch (error) {
      if (error instanceof MalformedBody) {
        return badRequest(`parse error: ${error.message}`);
      }
      throw error;
    }
    const forward = (signal?: AbortSignal): Request => withRequestBody(request, body, signal);
    const method = member(json, 'method');
    const id = member(json, 'id');
    if (typeof method !== 'string' || id === undefined || !methods.includes(method)) {
      return handler(forward(), ...context);
    }
    // The key: the header's and the `_meta` entry's, equal when both are there (§17.1).
    const header = request.headers.get(REQUEST_KEY_HEADER);
    const meta = member(member(member(json, 'params'), '_meta'), REQUEST_KEY_META);
    if ((header !== null && !isRequestKey(header.trim())) || (meta !== undefined && !isRequestKey(meta))) {
      return badRequest('the request key is not 32 lowercase hex digits, or is zero');
    }
    if (header !== null && meta !== undefined && header.trim() !== meta) {
      return badRequest('the request key in params._meta differs from the Mcp-Framing-Request-Key header');
    }
    const key = (header?.trim() ?? meta) as RequestKey | undefined;
    if (key === undefined) {
      return decided(await handler(forward(), ...context), 'unprotected');
    }
    const name = member(member(json, 'params'), 'name');
    const caller = principal(request);
    const tool = method === 'tools/call' && typeof name === 'string' ? name : null;
    const recordKey = storeKey(principalDigest(caller), method, tool, keyBytes(key));
    const print = fingerprint(json, covered);
    const idText = canonical(id);
    const started = Date.now();
    const startedAt = performance.now();
    let waited = false;
    const seconds = (): number => (performance.now() - startedAt) / 1000;
    // Every keyed call decided is counted, and timed unless it executes (timed to its result).
    const decide = (decision: 'execute' | 'replay' | 'refused' | 'unprotected', reason: Reason | '', ended: Ended | null): void => {
      telemetry.dedupeDecision(decision, reason, method, waited ? seconds() : null);
      if (ended !== null) {
        telemetry.serverOperation(method, decision, seconds(), ended);
      }
    };
    const refuse = (reason: Reason, extra: Record<string, number> = {}, detail = ''): Response => {
      decide('refused', reason, { errorType: String(REFUSALS[reason][0]), code: REFUSALS[reason][0] });
      return refusal(reason, idText, key, extra, detail);
    };
    let delay = 5;
    for (;;) {
      const token = hex(random16());
      let reply;
      try {
        reply = await call('claim', () => store.claim(recordKey, print, token, leaseMs, windowMs, reexecute));
      } catch (error) {
        logger.warn(`mcp-framing: the deduplication store failed: ${reasonOf(error)}`);
        if (options.failOpen === true) {
          decide('unprotected', '', null);
          return decided(await handler(forward(), ...context), 'unprotected');
        }
        return refuse('store_unavailable', { retryAfterMs: 1000 }, `: ${reasonOf(error)}`);
      }
      switch (reply.kind) {
        case 'claimed': {
          decide('execute', '', null);
          const claim = { store, call, recordKey, token, leaseMs, windowMs, maxResult, logger, telemetry, method, startedAt };
          return execute((inner) => handler(inner, ...context), forward(new AbortController().signal), claim);
        }
        case 'conflict':
          return refuse('key_conflict');
        case 'abandoned':
          return refuse('outcome_unknown');
        case 'done':
          if (reply.state === 'n') {
            return refuse('result_not_stored', { resultBytes: Number(reply.payload) });
          }
          decide('replay', '', endedOf(reply.state, reply.payload));
          return jsonResponse(`{"jsonrpc":"2.0","id":${idText},"${reply.state === 'r' ? 'result' : 'error'}":${reply.payload}}`, 200, 'replay');
        case 'in_flight': {
          // Poll with backoff, never past the lease's end, for a bounded time (§17.8).
          waited = true;
          const left = waitMs - (Date.now() - started);
          if (left <= 0) {
            return refuse('in_progress', { retryAfterMs: reply.msLeft }, ` (waited ${Date.now() - started} ms)`);
          }
          await new Promise((resolve) => setTimeout(resolve, Math.max(1, Math.min(delay, left, reply.msLeft))));
          delay = Math.min(delay * 2, 200);
        }
      }
    }
  };
}

function decided(response: Response, decision: string): Response {
  return withHeaders(response, response.body, (headers) => headers.set(DEDUPE_HEADER, decision));
}

type StoreOperation = 'claim' | 'renew' | 'complete' | 'release';

/**
 * How a recorded outcome ends a call, for `mcp.server.operation.duration`: a JSON-RPC error by
 * its code, a result with `isError: true` as `tool_error`.
 */
function endedOf(state: 'r' | 'e', payload: string): Ended {
  let value: unknown;
  try {
    value = JSON.parse(payload);
  } catch {
    value = null;
  }
  const field = (name: string): unknown => (typeof value === 'object' && value !== null ? (value as Record<string, unknown>)[name] : undefined);
  if (state === 'e') {
    const code = field('code');
    return typeof code === 'number' && Number.isInteger(code) ? { errorType: String(code), code } : { errorType: 'invalid_error' };
  }
  return field('isError') === true ? { errorType: 'tool_error' } : { errorType: null };
}

interface Claim {
  store: DedupeStore;
  call: <T>(operation: StoreOperation, run: () => Promise<T>) => Promise<T>;
  recordKey: string;
  token: string;
  leaseMs: number;
  windowMs: number;
  maxResult: number;
  logger: Logger;
  telemetry: Telemetry;
  method: string;
  /** When the call was decided (`performance.now()`). */
  startedAt: number;
}

/**
 * Runs a claimed call: the handler gets a request whose signal no client can abort, the lease is
 * renewed while it runs, its final response is recorded whatever the client does, and the body
 * is relayed while the client reads it (§17.10).
 */
async function execute(handler: WebHandler, request: Request, claim: Claim): Promise<Response> {
  const { store, call, recordKey, token, logger, telemetry } = claim;
  const operation = (decision: string, ended: Ended): void =>
    telemetry.serverOperation(claim.method, decision, (performance.now() - claim.startedAt) / 1000, ended);
  const renewal = setInterval(() => {
    call('renew', () => store.renew(recordKey, token, claim.leaseMs)).then(
      (held) => {
        if (!held) {
          logger.warn('mcp-framing: a deduplicated call lost its lease while it ran (it may execute twice)');
          telemetry.leaseLost('heartbeat');
          clearInterval(renewal);
        }
      },
      (error: unknown) => logger.warn(`mcp-framing: renewing a lease failed: ${reasonOf(error)}`),
    );
  }, Math.max(1, claim.leaseMs / 3));
  // A call still running does not keep a process alive that is otherwise done.
  (renewal as { unref?: () => void }).unref?.();
  const stop = (): void => clearInterval(renewal);
  let response: Response;
  try {
    response = await handler(request);
  } catch (error) {
    stop();
    operation('execute', { errorType: 'no_final_response' });
    throw error;
  }
  if (response.status >= 400 && response.status < 500) {
    // The handler rejected the request before running it: the claim is given back at once.
    stop();
    operation('execute', { errorType: 'released' });
    await call('release', () => store.release(recordKey, token)).catch((error: unknown) => logger.warn(`mcp-framing: releasing a claim failed: ${reasonOf(error)}`));
    return decided(response, 'execute');
  }
  const kind = bodyKind(response, true);
  if (kind === null) {
    stop();
    operation('execute', { errorType: 'no_final_response' });
    return decided(response, 'execute');
  }
  const record = async (final: Uint8Array | null): Promise<void> => {
    stop();
    const outcome = final === null ? null : outcomeOf(final);
    if (outcome === null) {
      // No final response: nothing recorded, the claim expires with its lease.
      operation('execute', { errorType: 'no_final_response' });
      return;
    }
    const size = textEncoder.encode(outcome[1]).length;
    const [state, payload] = size > claim.maxResult ? (['n', String(size)] as const) : outcome;
    operation('execute', state === 'n' ? { errorType: null } : endedOf(state, payload));
    for (let attempt = 0; attempt < 3; attempt++) {
      try {
        if (await call('complete', () => store.complete(recordKey, token, state, payload, claim.windowMs))) {
          telemetry.completion(state === 'n' ? 'not_stored' : 'stored');
        } else {
          logger.warn('mcp-framing: a deduplicated call completed after its lease was taken over (lease_lost)');
          telemetry.completion('lease_lost');
          telemetry.leaseLost('completion');
        }
        return;
      } catch (error) {
        logger.warn(`mcp-framing: recording a completion failed: ${reasonOf(error)}`);
      }
    }
    telemetry.completion('store_error');
  };
  const reader = response.body!.getReader();
  const final = kind === 'json' ? new JsonCapture() : new SseCapture();
  let done = false;
  let recorded: Promise<void> | null = null;
  const finish = (): Promise<void> => (recorded ??= record(final.final()));
  // Reads the rest of the body for the record alone: the client went away.
  const drain = async (): Promise<void> => {
    try {
      while (!done) {
        const next = await reader.read();
        if (next.done) {
          break;
        }
        final.feed(next.value);
      }
    } catch {
      // the body failed: no final response
    }
    done = true;
    await finish();
  };
  const relayed = new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
        let next;
        try {
          next = await reader.read();
        } catch (error) {
          done = true;
          void finish();
          controller.error(error);
          return;
        }
        if (next.done) {
          done = true;
          controller.close();
          void finish();
          return;
        }
        final.feed(next.value);
        controller.enqueue(next.value);
      },
      cancel() {
        // Not the handler's body: it runs to its end and is recorded (§17.10).
        void drain();
      },
    },
    { highWaterMark: 0 },
  );
  return withHeaders(response, relayed, (headers) => headers.set(DEDUPE_HEADER, 'execute'));
}

/** The final response of a JSON body: the body. */
class JsonCapture {
  private readonly chunks: Uint8Array[] = [];

  feed(chunk: Uint8Array): void {
    this.chunks.push(chunk);
  }

  final(): Uint8Array | null {
    return Buffer.concat(this.chunks);
  }
}

/** The final response of an SSE body: the first message event that is a JSON-RPC response. */
class SseCapture {
  private readonly messages = new InnerMessages(Number.MAX_SAFE_INTEGER);
  private found: Uint8Array | null = null;

  feed(chunk: Uint8Array): void {
    if (this.found !== null) {
      return;
    }
    for (const item of this.messages.next(chunk).items) {
      if (item.kind === 'message' && item.last) {
        this.found = item.data;
      }
    }
  }

  final(): Uint8Array | null {
    return this.found;
  }
}

/**
 * `framingFetch`: a `fetch` for the official SDKs' `StreamableHTTPClientTransport(url, { fetch })`
 * (`@modelcontextprotocol/sdk` 1.x and `@modelcontextprotocol/client` 2.x), which they use
 * untouched, that opts every request in to framing and hands the SDK only verified messages.
 *
 * For each JSON-RPC request it sends the opt-in (SPEC.md §10, §16: `Mcp-Framing`, the request
 * key in the header and in `_meta`, the negotiated limits, the compatible mapping unless told
 * otherwise), verifies the response as it streams, and gives the SDK a `text/event-stream` body
 * of its own: the messages whose MESSAGE_END verified, as they verify, the final response once
 * the stream is complete, never an SSE `id:` (nothing to resume from). Every outcome that is not
 * clean becomes at once a JSON-RPC error for the pending request's id (code -32603, the outcome
 * under `data["io.github.mcp-framing/outcome"]`), where the SDK would otherwise wait for its
 * request timeout; it is retried first when SPEC.md §17.13 allows it.
 *
 * @module
 */

import { isUtf8 } from 'node:buffer';

import { bodyDecoder, type Mapping } from './body.js';
import {
  ContractError,
  deduplicates,
  negotiate,
  readDiscovery,
  recheck,
  type ClientFraming,
  type DiscoverySource,
  type Negotiated,
} from './contract.js';
import { fingerprint, randomRequestKey, type RequestKey } from './ids.js';
import { idOf, isJsonRpcResponse, isResponse, messageShape, withId } from './jsonrpc.js';
import { escapePeerText, type ClientKind } from './errors.js';
import { DEFAULT_MAX_FRAME_PAYLOAD, DEFAULT_MAX_MESSAGE_SIZE } from './limits.js';
import { attemptFailure, decide, outcomeOf, type Outcome, type ReportClassification, type RetryDecision } from './outcome.js';
import { PlainEventStream, isMessageEvent } from './sse.js';
import { Telemetry, type AttemptContext, type Logger, type MeterLike } from './telemetry.js';
import type { Progress } from './verdict.js';

/** Key under a JSON-RPC error's `data` where the outcome is (the Rust crate's `OUTCOME_DATA_KEY`). */
export const OUTCOME_DATA_KEY = 'io.github.mcp-framing/outcome';
/** Key under a JSON-RPC error's `data` where a deduplicating server describes a refusal (§17.9). */
export const DEDUPE_DATA_KEY = 'io.github.mcp-framing/dedupe';
/** The `_meta` entry of the request key (SPEC.md §10). */
export const REQUEST_KEY_META = 'io.github.mcp-framing/requestKey';
const META_PROTOCOL_VERSION = 'io.modelcontextprotocol/protocolVersion';
const META_CLIENT_CAPABILITIES = 'io.modelcontextprotocol/clientCapabilities';
const EXTENSION_KEY = 'io.github.mcp-framing/framing';

/** Methods retried without deduplication: MCP's reads and lists (the Rust crate's list). */
export const IDEMPOTENT_METHODS: readonly string[] = [
  'ping',
  'server/discover',
  'tools/list',
  'resources/list',
  'resources/templates/list',
  'resources/read',
  'prompts/list',
  'prompts/get',
  'completion/complete',
];

/** Where the next attempt goes, and what its discovery said. */
export interface Resolution {
  /** The endpoint URL. */
  endpoint: string | URL;
  /** Its discovery result (an `initialize` or `server/discover` result), re-checked before sending. */
  discovery?: unknown;
  /** Which kind of result `discovery` is (default `discover`). */
  source?: DiscoverySource;
}

/** What an {@link EndpointResolver} is asked. */
export interface ResolveContext {
  /** The attempt about to be sent (1 for the first). */
  attempt: number;
  /** The JSON-RPC method. */
  method: string;
  /** The URL the SDK was given. */
  url: string;
}

/**
 * Resolves the endpoint of every attempt, retries included (SPEC.md §17.13): a service registry,
 * a load balancer's view, `server/discover` on each candidate ({@link discoveringResolver}).
 */
export type EndpointResolver = (context: ResolveContext) => Resolution | Promise<Resolution>;

/** Attempts and backoff of the automatic retries (SPEC.md §17.13). */
export interface RetryOptions {
  /** Attempts in all, the first included (default 4; 1 disables retries). */
  maxAttempts?: number;
  /** The backoff ceiling of the first retry, doubled for each later one (default 100 ms). */
  initialBackoffMs?: number;
  /** The largest backoff ceiling (default 2 000 ms). */
  maxBackoffMs?: number;
}

/** What an observer learns about each attempt that ended. */
export interface AttemptReport {
  requestKey: RequestKey;
  attempt: number;
  endpoint: string;
  method: string;
  outcome: Outcome;
  /** The decision taken on it (`null`: a clean attempt that delivered the final response). */
  decision: RetryDecision | null;
}

/** Options of {@link framingFetch}. */
export interface FramingFetchOptions extends ClientFraming {
  /** The fetch to send with (default the global `fetch`). */
  fetch?: typeof fetch;
  /** The mapping asked for (default `compat`, SPEC.md §18); a response in another mapping the contract lists is read too. */
  mapping?: Mapping;
  /**
   * Run against a server without a framing contract (Regime C, SPEC.md §11.3): requests are still
   * opted in, a response that arrives framed is verified as any other, and an unframed one becomes
   * an `ambiguous` JSON-RPC error at once, nothing in it delivered. Default `false`: such a server
   * is refused with a configuration error.
   */
  acceptAmbiguity?: boolean;
  /** Automatic retries (default on, within SPEC.md §17.13's rules); `false` turns them off. */
  retry?: RetryOptions | false;
  /** Methods treated as idempotent (default {@link IDEMPOTENT_METHODS}). */
  idempotentMethods?: readonly string[];
  /** Resolves the endpoint before every attempt (default: the SDK's URL). */
  resolve?: EndpointResolver;
  /** The longest time between two frames before a response is abandoned (default 60 000 ms; `null`: no bound, §12). */
  idleTimeoutMs?: number | null;
  /** Where log lines go (default: warnings to `console.warn`, the rest with `NODE_DEBUG=mcp-framing`). */
  logger?: Logger;
  /** An OpenTelemetry `Meter` (default: the global meter provider's, if `@opentelemetry/api` is installed). */
  meter?: MeterLike;
  /** Called with every attempt that ended, after the telemetry. */
  onAttempt?: (report: AttemptReport) => void;
}

/** Counters of a {@link FramingFetch}. */
export interface FramingStats {
  /** Attempts sent (first ones and retries). */
  attempts: number;
  /** Retries sent. */
  retries: number;
  /** Attempts by classification. */
  outcomes: Record<string, number>;
  /** Messages handed to the SDK whose MESSAGE_END verified. */
  verified: number;
  /** Messages handed to the SDK unverified: the events of the standalone GET stream (which answers no request, SPEC.md §16). */
  unverified: number;
  /** JSON-RPC errors made for the SDK (outcomes that were not clean, refusals). */
  errors: number;
}

/** A `fetch` that frames and verifies, with its counters and the negotiated contract. */
export interface FramingFetch {
  (input: string | URL | Request, init?: RequestInit): Promise<Response>;
  /** The counters. */
  readonly stats: FramingStats;
  /** What was negotiated (`null` before the discovery result, or under an accept-ambiguity policy). */
  readonly negotiated: Negotiated | null;
}

type Policy =
  | { state: 'unknown' }
  | { state: 'framed'; negotiated: Negotiated }
  | { state: 'ambiguous' }
  | { state: 'refused'; error: ContractError };

const encoder = new TextEncoder();
const EVENT_HEAD = encoder.encode('event: message\ndata: ');
const DATA_LINE = encoder.encode('\ndata: ');
const EVENT_END = encoder.encode('\n\n');

/** One SSE `message` event carrying `message` (split into data lines at its line breaks). */
function sseEvent(message: Uint8Array): Uint8Array {
  const bytes = Buffer.from(message.buffer, message.byteOffset, message.byteLength);
  if (bytes.indexOf(0x0a) === -1 && bytes.indexOf(0x0d) === -1) {
    return Buffer.concat([EVENT_HEAD, message, EVENT_END]);
  }
  // A line break in valid JSON is whitespace; SSE joins data lines with LF.
  const parts: Uint8Array[] = [EVENT_HEAD];
  let start = 0;
  for (let i = 0; i < bytes.length; i++) {
    const b = bytes[i];
    if (b === 0x0a || b === 0x0d) {
      parts.push(bytes.subarray(start, i), DATA_LINE);
      if (b === 0x0d && bytes[i + 1] === 0x0a) {
        i += 1;
      }
      start = i + 1;
    }
  }
  parts.push(bytes.subarray(start), EVENT_END);
  return Buffer.concat(parts);
}

function errorResponse(id: unknown, message: string, data: Record<string, unknown>): Uint8Array {
  return encoder.encode(JSON.stringify({ jsonrpc: '2.0', id, error: { code: -32603, message, data: { [OUTCOME_DATA_KEY]: data } } }));
}

const VERDICTS: ReadonlySet<string> = new Set(['abandoned', 'aborted', 'corrupt', 'spliced', 'cross_wired', 'contract_violation', 'ambiguous']);

/** The classification a call's report gives `outcome`, its last attempt's. */
function reportClassification(outcome: Outcome): string {
  return outcome.kind === 'HttpStatus' ? 'http_error' : outcome.classification;
}

/** An attempt answered with an HTTP error status: abandoned, with the status and its text. */
function httpStatusOutcome(status: number, text: string): Outcome {
  const detail = `the server answered HTTP ${status}${text === '' ? '' : `: ${text}`}`;
  return { ...attemptFailure('HttpStatus', detail), httpStatus: status };
}

/** At most 512 bytes of an error response's body, as escaped diagnostic text (never trusted). */
async function errorText(response: Response): Promise<string> {
  const body = response.body;
  if (body === null) {
    return '';
  }
  const reader = body.getReader();
  const chunks: Uint8Array[] = [];
  let length = 0;
  try {
    while (length < MAX_ERROR_TEXT) {
      const { done, value } = await reader.read();
      if (done) {
        break;
      }
      chunks.push(value);
      length += value.length;
    }
  } catch {
    // what arrived is the text
  } finally {
    reader.cancel().catch(() => {});
  }
  return escapePeerText(new TextDecoder().decode(Buffer.concat(chunks, length).subarray(0, MAX_ERROR_TEXT)));
}

const MAX_ERROR_TEXT = 512;

/**
 * The outcome report of SPEC.md §11.7, and the JSON-RPC error that carries it under the
 * pending request's own id: a stream outcome with its decision, or a failure before any stream.
 */
function report(
  id: unknown,
  key: RequestKey | null,
  attempts: number,
  failure: { outcome: Outcome; decision: RetryDecision } | { classification: ReportClassification; kind: ClientKind; detail: string },
): Uint8Array {
  if ('classification' in failure) {
    const data: Record<string, unknown> = {
      classification: failure.classification,
      kind: failure.kind,
      detail: failure.detail,
      attempts,
      retryDecision: 'do_not_retry',
    };
    if (key !== null) {
      data['requestKeyFingerprint'] = fingerprint(key);
    }
    return errorResponse(id, `mcp-framing: ${failure.detail}`, data);
  }
  const { outcome, decision } = failure;
  // An HTTP error status that ended the call is reported as one (SPEC.md §11.7), its attempt
  // abandoned.
  const classification = reportClassification(outcome);
  const data: Record<string, unknown> = {
    classification,
    kind: outcome.kind,
    detail: outcome.detail,
    attempts,
    retryDecision: decision.decision === 'retry' ? 'surface_to_caller' : decision.decision,
  };
  if (key !== null) {
    data['requestKeyFingerprint'] = fingerprint(key);
  }
  if (VERDICTS.has(classification)) {
    const p = outcome.progress;
    Object.assign(data, {
      retryReason: decision.reason,
      regime: outcome.regime,
      framesReceived: p.frames,
      bytesReceived: p.bytes,
      messagesVerified: p.messages,
      openMessageBytes: p.openMessageBytes,
    });
  }
  if (outcome.head !== null) {
    data['attemptId'] = outcome.head.attemptId;
  }
  if (outcome.httpStatus !== undefined) {
    data['httpStatus'] = outcome.httpStatus;
  }
  const message = VERDICTS.has(classification) ? `mcp-framing: response ${outcome.detail}` : `mcp-framing: ${outcome.detail}`;
  return errorResponse(id, message, data);
}

/** The report of a refused contract (SPEC.md §11.3, §11.5): a configuration error. */
function refusalReport(id: unknown, key: RequestKey | null, attempts: number, error: ContractError): Uint8Array {
  return report(id, key, attempts, { classification: 'configuration_error', kind: error.kind, detail: error.message });
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * What to do about a response that is not framed, in the Rust crate's words (`MappingViolation`):
 * at the handshake this is what a server without framing, or a gateway that re-encodes
 * responses, looks like to a client that opted in.
 */
const NOT_FRAMED_HINT =
  'the server does not frame its responses, or a proxy or gateway on the way removed the framing: ' +
  'put a framing layer in front of the server (mcp-frame proxy, or FramingLayer in a Rust server), ' +
  "or connect without mcp-framing (the SDK's stock transport)";

/** The `NotFramed` message (SPEC.md §16), as every client of the repository words it. */
function notFramedDetail(contentType: string | null): string {
  const what = contentType === null ? 'no content-type' : `content-type ${JSON.stringify(contentType)}`;
  return `response is not framed (${what}) although framing was requested: ${NOT_FRAMED_HINT}`;
}

/** The framed mapping a response declares (SPEC.md §16, §18.8), or `null` if it is not framed. */
export function responseMapping(headers: Headers, version: number): Mapping | null {
  const framing = headers.get('mcp-framing');
  if (framing === null) {
    return null;
  }
  const [token, ...params] = framing.split(';');
  if (token?.trim() !== String(version)) {
    return null;
  }
  let named: string | null = null;
  for (const param of params) {
    const [name, value] = param.split('=');
    if (name?.trim().toLowerCase() === 'mapping') {
      if (named !== null) {
        return null;
      }
      named = (value ?? '').trim().replace(/^"|"$/g, '').toLowerCase();
    }
  }
  const essence = (headers.get('content-type') ?? '').split(';')[0]!.trim().toLowerCase();
  const carried: Mapping | null =
    essence === 'application/vnd.mcp-framing' ? 'binary' : essence === 'text/event-stream' ? 'sse' : null;
  if (carried === null) {
    return null;
  }
  if (named === null) {
    return carried;
  }
  if (named === 'compat' && carried === 'sse') {
    return 'compat';
  }
  return named === carried ? carried : null;
}

function sleep(ms: number, signal: AbortSignal | null | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(signal!.reason);
    };
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/** Writes the SDK's output body: SSE events, then the end. */
class Output {
  private controller!: ReadableStreamDefaultController<Uint8Array>;
  readonly stream: ReadableStream<Uint8Array>;
  cancelled = false;
  private closed = false;
  onCancel: () => void = () => {};

  constructor() {
    this.stream = new ReadableStream<Uint8Array>({
      start: (controller) => {
        this.controller = controller;
      },
      cancel: () => {
        this.cancelled = true;
        this.onCancel();
      },
    });
  }

  message(bytes: Uint8Array): void {
    if (!this.cancelled && !this.closed) {
      this.controller.enqueue(sseEvent(bytes));
    }
  }

  close(): void {
    if (!this.cancelled && !this.closed) {
      this.closed = true;
      this.controller.close();
    }
  }

  fail(reason: unknown): void {
    if (!this.cancelled && !this.closed) {
      this.closed = true;
      this.controller.error(reason);
    }
  }
}

/** What one attempt's body ended as. */
interface AttemptEnd {
  outcome: Outcome;
  /** The verified final response, when the attempt delivered it. */
  response: Uint8Array | null;
}

class Shared {
  readonly base: typeof fetch;
  readonly options: FramingFetchOptions;
  readonly telemetry: Telemetry;
  readonly stats: FramingStats = { attempts: 0, retries: 0, outcomes: {}, verified: 0, unverified: 0, errors: 0 };
  policy: Policy = { state: 'unknown' };
  /** Session id -> the endpoint that issued it: attempts of a session stay there. */
  readonly sessions = new Map<string, string>();

  constructor(base: typeof fetch, options: FramingFetchOptions) {
    this.base = base;
    this.options = options;
    this.telemetry = new Telemetry(options.logger, options.meter ?? null);
  }

  get maxAttempts(): number {
    const retry = this.options.retry;
    return retry === false ? 1 : Math.max(1, retry?.maxAttempts ?? 4);
  }

  backoff(retry: number, floorMs: number): number {
    const r = this.options.retry === false ? {} : (this.options.retry ?? {});
    const ceiling = Math.min(r.maxBackoffMs ?? 2000, (r.initialBackoffMs ?? 100) * 2 ** (retry - 1));
    return Math.max(Math.random() * ceiling, floorMs);
  }

  limits(): { maxFramePayload: number; maxMessageSize: number } {
    if (this.policy.state === 'framed') {
      return this.policy.negotiated;
    }
    return {
      maxFramePayload: this.options.maxFramePayload ?? DEFAULT_MAX_FRAME_PAYLOAD,
      maxMessageSize: this.options.maxMessageSize ?? DEFAULT_MAX_MESSAGE_SIZE,
    };
  }

  /** The mapping to ask for: the preferred one the contract lists. */
  mapping(): Mapping {
    const wanted = this.options.mapping ?? 'compat';
    if (this.policy.state === 'framed' && !this.policy.negotiated.transports.includes(wanted)) {
      return this.policy.negotiated.transports[0]!;
    }
    return wanted;
  }

  count(outcome: Outcome): void {
    this.stats.outcomes[outcome.classification] = (this.stats.outcomes[outcome.classification] ?? 0) + 1;
  }

  /** Takes a discovery result the SDK received (SPEC.md §11.3, §11.5). Returns the refusal, if any. */
  learn(result: unknown, source: DiscoverySource): ContractError | null {
    try {
      const discovery = readDiscovery(result, source);
      if (this.policy.state === 'framed') {
        recheck(this.policy.negotiated, discovery);
        return null;
      }
      const negotiated = negotiate(discovery, this.options);
      this.policy = { state: 'framed', negotiated };
      return null;
    } catch (error) {
      if (!(error instanceof ContractError)) {
        throw error;
      }
      if (this.policy.state !== 'framed' && this.options.acceptAmbiguity === true && error.isRegimeC) {
        this.policy = { state: 'ambiguous' };
        return null;
      }
      if (this.policy.state !== 'framed') {
        this.policy = { state: 'refused', error };
      }
      return error;
    }
  }
}

const DISCOVERY: Record<string, DiscoverySource> = { initialize: 'initialize', 'server/discover': 'discover' };

/** One JSON-RPC request through the wrapper: its attempts, and the SDK's output body. */
class Call {
  private readonly out = new Output();
  private readonly key: RequestKey;
  private readonly id: unknown;
  private readonly method: string;
  private readonly tool: string | undefined;
  private readonly source: DiscoverySource | undefined;
  private readonly started = performance.now();
  private attempt = 0;
  private endpoint: string;
  private outer: { resolve: (response: Response) => void; reject: (error: unknown) => void } | null = null;
  private upstream: ReadableStreamDefaultReader<Uint8Array> | null = null;

  constructor(
    private readonly shared: Shared,
    private readonly url: string,
    private readonly init: RequestInit,
    private readonly request: Record<string, unknown>,
  ) {
    this.id = request['id'];
    this.method = String(request['method']);
    const params = isRecord(request['params']) ? request['params'] : undefined;
    this.tool = this.method === 'tools/call' && typeof params?.['name'] === 'string' ? params['name'] : undefined;
    this.source = DISCOVERY[this.method];
    const meta = isRecord(params?.['_meta']) ? params['_meta'] : undefined;
    const given = meta?.[REQUEST_KEY_META];
    this.key = typeof given === 'string' && /^[0-9a-f]{32}$/.test(given) && !/^0+$/.test(given) ? given : randomRequestKey();
    this.endpoint = url;
    this.out.onCancel = () => {
      void this.upstream?.cancel().catch(() => {});
    };
  }

  private context(): AttemptContext {
    return { method: this.method, tool: this.tool, endpoint: this.endpoint, attempt: this.attempt, requestKey: this.key };
  }

  /** Runs the call; resolves with the SDK's response once its headers are known. */
  response(): Promise<Response> {
    const outer = new Promise<Response>((resolve, reject) => {
      this.outer = { resolve, reject };
    });
    void this.run()
      .catch((error: unknown) => {
        if (this.outer !== null) {
          const { reject } = this.outer;
          this.outer = null;
          reject(error); // before any header: as the fetch itself would fail
        } else {
          this.out.fail(error);
        }
      })
      .finally(() => this.headers(new Headers()));
    return outer;
  }

  /** Resolves the SDK's fetch with our event stream, with the upstream response's headers. */
  private headers(upstream: Headers): void {
    if (this.outer === null) {
      return;
    }
    const { resolve } = this.outer;
    this.outer = null;
    const out = new Headers();
    for (const [name, value] of upstream) {
      if (!['content-type', 'content-length', 'content-encoding', 'transfer-encoding', 'mcp-framing'].includes(name)) {
        out.set(name, value);
      }
    }
    out.set('content-type', 'text/event-stream');
    out.set('cache-control', 'no-cache');
    resolve(new Response(this.out.stream, { status: 200, headers: out }));
  }

  /** Resolves the SDK's fetch with `response` itself, if nothing was sent yet. */
  private handOver(response: Response): boolean {
    if (this.outer === null) {
      return false;
    }
    const { resolve } = this.outer;
    this.outer = null;
    resolve(response);
    return true;
  }

  private get signal(): AbortSignal | null | undefined {
    return this.init.signal;
  }

  private async run(): Promise<void> {
    const shared = this.shared;
    let retryAfterMs = 0;
    for (;;) {
      this.attempt += 1;
      if (this.attempt > 1) {
        shared.stats.retries += 1;
      }
      const end = await this.send();
      if (end === null) {
        return; // delivered, or ended by the SDK
      }
      const { outcome } = end;
      shared.count(outcome);
      shared.telemetry.outcome(outcome, this.context());
      let decision: RetryDecision;
      const refusal = end.response === null ? null : this.refusal(end.response);
      if (refusal !== null) {
        decision = refusal.retryable && this.mayRepeat() ? { decision: 'retry', reason: 'keyed' } : { decision: 'do_not_retry', reason: 'would_repeat' };
        retryAfterMs = refusal.retryAfterMs;
      } else {
        decision = decide(outcome, this.traits());
      }
      if (decision.decision === 'retry' && this.attempt >= shared.maxAttempts) {
        decision = { decision: 'surface_to_caller', reason: decision.reason };
      }
      shared.telemetry.decision(decision, this.context());
      this.report(outcome, decision);
      if (decision.decision !== 'retry') {
        if (end.response !== null) {
          if (!this.deliverFinal(end.response)) {
            return; // a final refusal is the server's answer, unless its id cannot be put back
          }
        } else {
          this.deliverError(outcome, decision);
        }
        this.finish(end.response === null ? reportClassification(outcome) : outcome.classification);
        return;
      }
      const delay = shared.backoff(this.attempt, retryAfterMs);
      retryAfterMs = 0;
      shared.telemetry.retry(decision, { ...this.context(), attempt: this.attempt + 1 }, delay);
      await sleep(delay, this.signal);
    }
  }

  private traits(): { idempotent: boolean; keyed: boolean; serverDeduplicates: boolean } {
    const shared = this.shared;
    const negotiated = shared.policy.state === 'framed' ? shared.policy.negotiated : null;
    return {
      idempotent: (shared.options.idempotentMethods ?? IDEMPOTENT_METHODS).includes(this.method),
      keyed: true,
      serverDeduplicates: deduplicates(negotiated, this.method),
    };
  }

  private mayRepeat(): boolean {
    const t = this.traits();
    return t.idempotent || t.serverDeduplicates;
  }

  /** A retryable or final deduplication refusal (SPEC.md §17.9) in a final response. */
  private refusal(response: Uint8Array): { retryable: boolean; retryAfterMs: number } | null {
    const shape = messageShape(response);
    if (shape === null || !shape.error) {
      return null;
    }
    try {
      const parsed = JSON.parse(Buffer.from(response).toString('utf8')) as { error?: { data?: Record<string, unknown> } };
      const data = parsed.error?.data?.[DEDUPE_DATA_KEY];
      if (!isRecord(data) || typeof data['retryable'] !== 'boolean') {
        return null;
      }
      const after = typeof data['retryAfterMs'] === 'number' ? Math.min(data['retryAfterMs'], 10_000) : 0;
      return { retryable: data['retryable'], retryAfterMs: after };
    } catch {
      return null;
    }
  }

  private report(outcome: Outcome, decision: RetryDecision | null): void {
    this.shared.options.onAttempt?.({
      requestKey: this.key,
      attempt: this.attempt,
      endpoint: this.endpoint,
      method: this.method,
      outcome,
      decision,
    });
  }

  private finish(errorType: string | null): void {
    const seconds = (performance.now() - this.started) / 1000;
    this.shared.telemetry.operation(this.context(), seconds, errorType === 'clean' ? null : errorType);
    this.out.close();
  }

  /** Hands over the final response; `false` when it cannot be (the request failed instead). */
  private deliverFinal(response: Uint8Array): boolean {
    let message = response;
    const shape = messageShape(response);
    if (this.attempt > 1) {
      if (!isResponse(shape) || shape.ids !== 1) {
        // SPEC.md §17.13: which of several id members a reader takes is not defined, so the
        // SDK's id cannot be put back by editing one of them; the request fails (§11.7).
        this.shared.stats.errors += 1;
        const detail = `attempt ${this.attempt}: the final response has ${shape?.ids ?? 0} top-level id members, so the request's id cannot be put back`;
        this.out.message(report(this.id, this.key, this.attempt, { classification: 'invalid_message', kind: 'DuplicateId', detail }));
        this.finish('invalid_message');
        return false;
      }
      message = withId(response, shape, this.id); // the SDK's id back, every other byte as verified
    }
    this.out.message(message);
    return true;
  }

  private deliverError(outcome: Outcome, decision: RetryDecision): void {
    this.shared.stats.errors += 1;
    this.out.message(report(this.id, this.key, this.attempt, { outcome, decision }));
  }

  /** A configuration error (Regime C, a downgrade): the call fails closed, nothing sent after it. */
  refuse(error: ContractError): Promise<Response> {
    this.shared.stats.errors += 1;
    this.shared.telemetry.operation(this.context(), 0, 'configuration_error');
    this.out.message(refusalReport(this.id, this.key, this.attempt, error));
    this.out.close();
    return Promise.resolve(new Response(this.out.stream, { status: 200, headers: { 'content-type': 'text/event-stream' } }));
  }

  /** The request as sent by attempt `this.attempt`: the key in `_meta`, a new id for a retry. */
  private body(): string {
    const request: Record<string, unknown> = { ...this.request };
    if (this.attempt > 1) {
      // a retry is a new JSON-RPC request with the same key (SPEC.md §10)
      request['id'] = `${typeof this.id === 'string' ? this.id : JSON.stringify(this.id)}~attempt-${this.attempt}`;
    }
    {
      const params: Record<string, unknown> = isRecord(request['params']) ? { ...request['params'] } : {};
      const meta: Record<string, unknown> = isRecord(params['_meta']) ? { ...params['_meta'] } : {};
      meta[REQUEST_KEY_META] = this.key;
      if (META_PROTOCOL_VERSION in meta) {
        // 2026-07-28 requests carry their capabilities in `_meta` (SPEC.md §16)
        const capabilities: Record<string, unknown> = isRecord(meta[META_CLIENT_CAPABILITIES]) ? { ...meta[META_CLIENT_CAPABILITIES] } : {};
        const extensions: Record<string, unknown> = isRecord(capabilities['extensions']) ? { ...capabilities['extensions'] } : {};
        extensions[EXTENSION_KEY] = { versions: [1] };
        capabilities['extensions'] = extensions;
        meta[META_CLIENT_CAPABILITIES] = capabilities;
      }
      params['_meta'] = meta;
      request['params'] = params;
    }
    return JSON.stringify(request);
  }

  private requestHeaders(): Headers {
    const headers = new Headers(this.init.headers);
    const shared = this.shared;
    const mapping = shared.mapping();
    const limits = shared.limits();
    const version = shared.policy.state === 'framed' ? shared.policy.negotiated.version : 1;
    headers.set('mcp-framing', String(version));
    headers.set('mcp-framing-request-key', this.key);
    headers.set('mcp-framing-limits', `frame=${limits.maxFramePayload}, message=${limits.maxMessageSize}`);
    headers.set(
      'accept',
      mapping === 'binary' ? 'application/vnd.mcp-framing, application/json, text/event-stream' : 'application/json, text/event-stream',
    );
    if (mapping === 'compat') {
      headers.set('mcp-framing-mapping', 'compat');
    } else {
      headers.delete('mcp-framing-mapping');
    }
    return headers;
  }

  private async resolveEndpoint(): Promise<string> {
    const shared = this.shared;
    const session = new Headers(this.init.headers).get('mcp-session-id');
    const bound = session === null ? undefined : shared.sessions.get(session);
    if (bound !== undefined) {
      return bound; // attempts of a session stay on the endpoint that issued it
    }
    const resolve = shared.options.resolve;
    if (resolve === undefined) {
      return this.url;
    }
    const resolution = await resolve({ attempt: this.attempt, method: this.method, url: this.url });
    if (resolution.discovery !== undefined && shared.policy.state === 'framed') {
      // SPEC.md §11.5: every resolution is checked before anything is sent
      recheck(shared.policy.negotiated, readDiscovery(resolution.discovery, resolution.source ?? 'discover'));
    }
    return String(resolution.endpoint);
  }

  /** Sends one attempt and reads its response; `null` once the call is over. */
  private async send(): Promise<AttemptEnd | null> {
    const shared = this.shared;
    try {
      this.endpoint = await this.resolveEndpoint();
    } catch (error) {
      this.headers(new Headers());
      this.shared.stats.errors += 1;
      if (error instanceof ContractError) {
        // SPEC.md §11.5: a downgrade fails closed, nothing is sent
        shared.telemetry.operation(this.context(), (performance.now() - this.started) / 1000, 'configuration_error');
        this.out.message(refusalReport(this.id, this.key, this.attempt - 1, error));
      } else {
        shared.telemetry.operation(this.context(), (performance.now() - this.started) / 1000, 'resolve_error');
        this.out.message(
          report(this.id, this.key, this.attempt - 1, {
            classification: 'resolve_error',
            kind: 'Resolve',
            detail: `endpoint resolution failed: ${describe(error)}`,
          }),
        );
      }
      this.out.close();
      return null;
    }
    shared.stats.attempts += 1;
    let response: Response;
    try {
      response = await shared.base(this.endpoint, {
        ...this.init,
        method: 'POST',
        headers: this.requestHeaders(),
        body: this.body(),
      });
    } catch (error) {
      if (this.signal?.aborted) {
        throw error;
      }
      // The request may or may not have reached the server: abandoned, nothing received.
      return { outcome: attemptFailure('Send', `the request could not be sent: ${describe(error)}`), response: null };
    }
    const session = response.headers.get('mcp-session-id');
    if (session !== null) {
      shared.sessions.set(session, this.endpoint);
    }
    if (response.status === 202 || response.status === 204 || (!response.ok && response.status < 500)) {
      // Accepted, or a client error status the SDK acts on itself (401 starts its authorization,
      // 404 ends its session; SPEC.md §16): handed over as is, the attempt reported.
      if (response.status !== 202 && response.status !== 204) {
        this.report(httpStatusOutcome(response.status, ''), { decision: 'do_not_retry', reason: 'complete' });
      }
      if (this.handOver(response)) {
        return null;
      }
      await response.body?.cancel().catch(() => {});
      // our event stream already began (an earlier attempt): the status is final
      this.shared.stats.errors += 1;
      this.out.message(
        report(this.id, this.key, this.attempt, { classification: 'http_error', kind: 'HttpStatus', detail: `the server answered HTTP ${response.status}` }),
      );
      this.finish('http_error');
      return null;
    }
    if (!response.ok) {
      // A server error (a proxy's 502 or 504): an attempt abandoned, retried where the request
      // may be repeated, else reported to the SDK (SPEC.md §11.7), as every client of the
      // project does.
      return { outcome: httpStatusOutcome(response.status, await errorText(response)), response: null };
    }
    this.headers(response.headers);
    const version = shared.policy.state === 'framed' ? shared.policy.negotiated.version : 1;
    const mapping = responseMapping(response.headers, version);
    if (mapping === null) {
      if (shared.policy.state === 'ambiguous' || (shared.policy.state === 'unknown' && shared.options.acceptAmbiguity === true)) {
        // SPEC.md §11.3: under an accept-ambiguity policy an unframed body is Regime C, its close
        // completion-ambiguous whatever it held, and nothing in it is delivered.
        await response.body?.cancel().catch(() => {});
        const type = response.headers.get('content-type');
        return { outcome: attemptFailure('NotFramed', `the response is not framed (content-type ${JSON.stringify(type)})`, undefined, null, true), response: null };
      }
      // A contract violation, the discovery exchange's response too (SPEC.md §11.3, §16): it
      // fails at once, as the Rust engine fails it, and nothing in it reaches the SDK. Its
      // message says what to do.
      await response.body?.cancel().catch(() => {});
      return { outcome: attemptFailure('NotFramed', notFramedDetail(response.headers.get('content-type'))), response: null };
    }
    return this.framed(response, mapping);
  }

  /** Reads a framed response as it streams (SPEC.md §16, §18). */
  private async framed(response: Response, mapping: Mapping): Promise<AttemptEnd | null> {
    const shared = this.shared;
    const decoder = bodyDecoder(mapping, { ...shared.limits(), requestKey: this.key });
    const frames = decoder.frames;
    let held: Uint8Array | null = null;
    let failure: Outcome | null = null;
    const reader = response.body!.getReader();
    this.upstream = reader;
    const idle = shared.options.idleTimeoutMs === undefined ? 60_000 : shared.options.idleTimeoutMs;
    let timedOut = false;
    const timer =
      idle === null
        ? null
        : setTimeout(() => {
            timedOut = true;
            void reader.cancel().catch(() => {});
          }, idle);
    timer?.unref();
    let seenFrames = 0;
    const progress = (): Progress => frames.progress;
    try {
      for (;;) {
        let chunk: Awaited<ReturnType<typeof reader.read>>;
        try {
          chunk = await reader.read();
        } catch (error) {
          if (this.signal?.aborted || this.out.cancelled) {
            throw error;
          }
          failure = attemptFailure('Body', `the response body failed after ${progress().frames} frames, ${progress().bytes} bytes: ${describe(error)}`, progress(), frames.head);
          break;
        }
        if (this.out.cancelled) {
          return null;
        }
        if (timedOut) {
          failure = attemptFailure('IdleTimeout', `no frame for ${idle} ms (idle timeout) after ${progress().frames} frames, ${progress().bytes} bytes`, progress(), frames.head);
          break;
        }
        if (chunk.done) {
          break;
        }
        for (const message of decoder.feed(chunk.value)) {
          const problem = this.take(message, held !== null);
          if (problem === 'final') {
            held = message;
          } else if (problem !== null) {
            failure = attemptFailure(problem.kind, problem.detail, progress(), frames.head);
            break;
          }
        }
        if (failure !== null || frames.error !== null) {
          break; // errors are final (SPEC.md §2.2): the rest of the body changes nothing
        }
        if (timer !== null && frames.progress.frames !== seenFrames) {
          seenFrames = frames.progress.frames;
          timer.refresh(); // only a complete frame restarts the idle timer (§12)
        }
      }
    } finally {
      if (timer !== null) {
        clearTimeout(timer);
      }
    }
    if (failure !== null || frames.error !== null) {
      await reader.cancel().catch(() => {});
    }
    if (failure !== null) {
      return { outcome: failure, response: null };
    }
    const outcome = outcomeOf(decoder.finish(), mapping);
    if (outcome.classification !== 'clean') {
      return { outcome, response: null };
    }
    if (held === null) {
      // §1: a complete stream that carries no response to the request answers nothing
      return { outcome: attemptFailure('NoFinalResponse', 'the stream ended clean without the final response (SPEC.md §1)', progress(), frames.head), response: null };
    }
    return this.complete(outcome, held);
  }

  /**
   * A verified message: handed to the SDK at once unless it is the final response (held until
   * the stream is complete). Returns `'final'`, `null`, or why the stream fails.
   */
  private take(message: Uint8Array, afterFinal: boolean): 'final' | null | { kind: 'InvalidUtf8' | 'MessageAfterFinalResponse'; detail: string } {
    if (!isUtf8(message)) {
      // never altered (no replacement): a JSON-RPC message is UTF-8 text (RFC 8259)
      return { kind: 'InvalidUtf8', detail: 'a verified message is not valid UTF-8' };
    }
    if (afterFinal) {
      return { kind: 'MessageAfterFinalResponse', detail: 'a message followed the final response: the stream answers nothing (SPEC.md §1)' };
    }
    const shape = messageShape(message);
    if (isResponse(shape) && isJsonRpcResponse(message)) {
      // §7.1: the stream's first JSON-RPC response is its final response, whatever its id (the
      // stream answers this request: HEAD echoed its key); as the Rust and Python clients, it is
      // delivered, a retry's under the SDK's own id.
      return 'final';
    }
    this.shared.stats.verified += 1;
    this.out.message(message);
    return null;
  }

  /** A clean attempt with its final response: a discovery result teaches the contract. */
  private complete(outcome: Outcome, held: Uint8Array): AttemptEnd | null {
    const shared = this.shared;
    if (this.refusal(held)?.retryable) {
      return { outcome, response: held }; // a retryable refusal: decided by run()
    }
    this.answer(outcome, held);
    return null;
  }

  /**
   * An attempt that ended with its verified final response: recorded, a discovery result learnt
   * from (a refused contract answers the request instead), then handed over.
   */
  private answer(outcome: Outcome, message: Uint8Array): void {
    const shared = this.shared;
    shared.count(outcome);
    shared.telemetry.outcome(outcome, this.context());
    this.report(outcome, null);
    if (this.source !== undefined) {
      const refused = this.learnFrom(message);
      if (refused !== null) {
        this.refuseDiscovery(refused);
        return;
      }
    }
    if (!this.deliverFinal(message)) {
      return;
    }
    shared.stats.verified += 1;
    this.finish(null);
  }

  private learnFrom(message: Uint8Array): ContractError | null {
    let parsed: unknown;
    try {
      parsed = JSON.parse(Buffer.from(message).toString('utf8'));
    } catch {
      return null; // not JSON: the SDK reports it
    }
    if (!isRecord(parsed) || !isRecord(parsed['result'])) {
      return null; // an error response (a server without server/discover): nothing learnt
    }
    return this.shared.learn(parsed['result'], this.source!);
  }

  private refuseDiscovery(error: ContractError): void {
    this.shared.stats.errors += 1;
    this.out.message(refusalReport(this.id, this.key, this.attempt, error));
    this.finish('configuration_error');
  }
}

function describe(error: unknown): string {
  if (error instanceof Error) {
    const cause = error.cause instanceof Error ? `: ${error.cause.message}` : '';
    return `${error.message}${cause}`;
  }
  return String(error);
}

/** The standalone GET stream (SPEC.md §16): unframed; a JSON-RPC response on it ends it. */
function getStream(response: Response, shared: Shared): Response {
  const type = (response.headers.get('content-type') ?? '').split(';')[0]!.trim().toLowerCase();
  if (!response.ok || response.body === null || type !== 'text/event-stream') {
    return response;
  }
  const out = new Output();
  const events = new PlainEventStream(shared.limits());
  const reader = response.body.getReader();
  out.onCancel = () => {
    void reader.cancel().catch(() => {});
  };
  void (async () => {
    for (;;) {
      const { value, done } = await reader.read();
      if (done || out.cancelled) {
        break;
      }
      events.feed(value);
      if (events.frames.error !== null) {
        shared.telemetry.outcome(attemptFailure('NotFramed', `the GET stream broke its event bounds: ${events.frames.error.message}`, undefined, null, true), {
          method: 'GET',
          endpoint: response.url,
          attempt: 1,
        });
        break;
      }
      for (const event of events.take()) {
        if (!isMessageEvent(event.name)) {
          continue;
        }
        if (isResponse(messageShape(event.data))) {
          // responses are accepted only framed, on the POST that asked for them
          shared.options.logger?.warn?.('mcp-framing: a JSON-RPC response on the GET stream cannot be verified; the stream ends there');
          await reader.cancel().catch(() => {});
          out.close();
          return;
        }
        shared.stats.unverified += 1;
        out.message(event.data);
      }
    }
    out.close();
  })().catch((error: unknown) => out.fail(error));
  const headers = new Headers(response.headers);
  headers.delete('content-length');
  return new Response(out.stream, { status: response.status, headers });
}

/** A JSON-RPC error for every request of a batch: batches are not framed (one key per request). */
function refuseBatch(batch: unknown[], shared: Shared): Response {
  const out = new Output();
  for (const item of batch) {
    if (isRecord(item) && 'method' in item && item['id'] !== undefined && item['id'] !== null) {
      shared.stats.errors += 1;
      out.message(
        report(item['id'], null, 0, {
          classification: 'invalid_request',
          kind: 'NotARequest',
          detail: 'JSON-RPC batches are not framed (a request key per request): send the requests one by one',
        }),
      );
    }
  }
  out.close();
  return new Response(out.stream, { status: 200, headers: { 'content-type': 'text/event-stream' } });
}

/**
 * A `fetch` for `StreamableHTTPClientTransport(url, { fetch: framingFetch() })` that frames and
 * verifies every request's response (see the module docs).
 *
 * ```ts
 * import { Client } from '@modelcontextprotocol/sdk/client/index.js';
 * import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
 * import { framingFetch } from 'mcp-framing';
 *
 * const transport = new StreamableHTTPClientTransport(new URL(url), { fetch: framingFetch() });
 * await new Client({ name: 'app', version: '1.0.0' }).connect(transport);
 * ```
 *
 * @param baseFetch the fetch to send with (default the global `fetch`), or the options.
 */
export function framingFetch(baseFetch?: typeof fetch | FramingFetchOptions, options: FramingFetchOptions = {}): FramingFetch {
  const opts = typeof baseFetch === 'function' ? { ...options, fetch: baseFetch } : { ...(baseFetch ?? {}), ...options };
  const shared = new Shared(opts.fetch ?? globalThis.fetch.bind(globalThis), opts);
  const wrapped = async (input: string | URL | Request, init: RequestInit = {}): Promise<Response> => {
    let url: string;
    let request = init;
    if (input instanceof Request) {
      url = input.url;
      request = { method: input.method, headers: input.headers, body: await input.text(), signal: input.signal, ...init };
    } else {
      url = String(input);
    }
    const method = (request.method ?? 'GET').toUpperCase();
    if (method === 'GET') {
      return getStream(await shared.base(url, request), shared);
    }
    if (method !== 'POST' || typeof request.body !== 'string') {
      return shared.base(url, request);
    }
    let message: unknown;
    try {
      message = JSON.parse(request.body);
    } catch {
      return shared.base(url, request);
    }
    if (Array.isArray(message)) {
      return message.some((m) => isRecord(m) && 'method' in m && m['id'] !== undefined) ? refuseBatch(message, shared) : shared.base(url, request);
    }
    if (!isRecord(message) || typeof message['method'] !== 'string' || message['id'] === undefined || message['id'] === null) {
      return shared.base(url, request); // a notification, or a response to the server: no stream to verify
    }
    const call = new Call(shared, url, request, message);
    const policy = shared.policy;
    if (policy.state === 'refused' && DISCOVERY[message['method']] === undefined) {
      return call.refuse(policy.error);
    }
    if (policy.state === 'unknown' && DISCOVERY[message['method']] === undefined) {
      return call.refuse(
        new ContractError(
          'NotDiscovered',
          'configuration error: no initialize or server/discover result has been read yet, so the framing contract is unknown and completion would be ambiguous (Regime C); connect the client first',
        ),
      );
    }
    return call.response();
  };
  Object.defineProperty(wrapped, 'stats', { get: () => shared.stats });
  Object.defineProperty(wrapped, 'negotiated', { get: () => (shared.policy.state === 'framed' ? shared.policy.negotiated : null) });
  return wrapped as FramingFetch;
}

/** Options of {@link discoveringResolver}. */
export interface DiscoveringResolverOptions {
  /** The fetch for the `server/discover` requests (default the global `fetch`). */
  fetch?: typeof fetch;
  /** Which endpoint an attempt goes to, by index (default: each in turn, round robin). */
  choose?: (context: ResolveContext, endpoints: readonly string[]) => number;
}

/**
 * An {@link EndpointResolver} over `endpoints` (by default taken in turn, round robin) that runs
 * `server/discover` (MCP 2026-07-28) on the chosen endpoint at every resolution, so that the
 * contract is re-checked where each attempt goes (SPEC.md §11.5).
 */
export function discoveringResolver(endpoints: readonly (string | URL)[], options: DiscoveringResolverOptions = {}): EndpointResolver {
  if (endpoints.length === 0) {
    throw new RangeError('at least one endpoint');
  }
  const list = endpoints.map(String);
  const base = options.fetch ?? globalThis.fetch.bind(globalThis);
  let next = 0;
  const choose = options.choose ?? (() => next++ % list.length);
  return async (context) => {
    const endpoint = list[choose(context, list) % list.length]!;
    // MCP 2026-07-28: the version and the client's capabilities in `_meta`, the version and the
    // method in headers too (rmcp refuses the request without them).
    const response = await base(endpoint, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        'mcp-protocol-version': '2026-07-28',
        'mcp-method': 'server/discover',
      },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 'discover',
        method: 'server/discover',
        params: { _meta: { [META_PROTOCOL_VERSION]: '2026-07-28', [META_CLIENT_CAPABILITIES]: {} } },
      }),
    });
    const body = new Uint8Array(await response.arrayBuffer());
    let message: Uint8Array | undefined = body;
    if ((response.headers.get('content-type') ?? '').split(';')[0]!.trim().toLowerCase() === 'text/event-stream') {
      // A server answering in SSE: the response is its message event that is one.
      const events = new PlainEventStream();
      events.feed(body);
      events.feed(encoder.encode('\n\n'));
      message = events.take().find((e) => isMessageEvent(e.name) && isJsonRpcResponse(e.data))?.data;
    }
    if (message === undefined) {
      throw new Error(`server/discover at ${endpoint}: no JSON-RPC response in the event stream`);
    }
    const result: unknown = JSON.parse(Buffer.from(message).toString('utf8'));
    return { endpoint, discovery: result, source: 'discover' };
  };
}


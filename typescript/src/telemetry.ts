/**
 * Telemetry: a log line per attempt, and counters and a histogram through the OpenTelemetry
 * metrics API when `@opentelemetry/api` is installed (optional), under the Rust crate's metric
 * names (`src/telemetry.rs`).
 *
 * | metric | kind | attributes |
 * |---|---|---|
 * | `mcp.client.operation.duration` | histogram, s | `mcp.method.name`, `gen_ai.tool.name`, `error.type`, `server.address`, `server.port`, `network.transport`, `network.protocol.name` |
 * | `mcp_framing.client.responses` | counter | `outcome`, `regime`, `mcp.method.name` |
 * | `mcp_framing.client.sentinel_missing` | counter | `mcp.method.name` |
 * | `mcp_framing.client.truncations` | counter | `at`, `mcp.method.name` |
 * | `mcp_framing.client.incomplete_bytes`, `mcp_framing.client.open_message_bytes` | counters, bytes | `outcome` |
 * | `mcp_framing.client.retry_decisions` | counter | `decision`, `reason` |
 * | `mcp_framing.client.retries` | counter | `reason`, `mcp.method.name` |
 *
 * Server side, deduplication (SPEC.md §17.15):
 *
 * | metric | kind | attributes |
 * |---|---|---|
 * | `mcp_framing.dedupe.decisions` | counter | `decision` (`execute`, `replay`, `refused`, `unprotected`), `reason` (a refusal's, else empty), `mcp.method.name` |
 * | `mcp_framing.dedupe.waits` | counter | `decision` (what the wait ended in: `execute`, `replay`, a refusal's reason) |
 * | `mcp_framing.dedupe.wait.duration` | histogram, s | `decision` |
 * | `mcp_framing.dedupe.completions` | counter | `recorded` (`stored`, `not_stored`, `lease_lost`, `store_error`) |
 * | `mcp_framing.dedupe.leases_lost` | counter | `detected` (`heartbeat`, `completion`) |
 * | `mcp_framing.dedupe.evictions` | counter | `record` (`completed`, `expired_claim`) |
 * | `mcp_framing.dedupe.store.duration` | histogram, s | `operation` (`claim`, `renew`, `complete`, `release`), `outcome` (`ok`, `timeout`, `full`, `corrupt`, `redis`, `error`) |
 * | `mcp.server.operation.duration` | histogram, s | `mcp.method.name`, `mcp_framing.dedupe.decision`, `error.type` (when it failed), `rpc.response.status_code` (a JSON-RPC error's code) |
 *
 * Logs show a request key only as its fingerprint (SPEC.md §10).
 *
 * @module
 */

import { debuglog } from 'node:util';

import { fingerprint, type RequestKey } from './ids.js';
import type { Outcome, RetryDecision } from './outcome.js';

export const CLIENT_OPERATION_DURATION = 'mcp.client.operation.duration';
export const CLIENT_RESPONSES = 'mcp_framing.client.responses';
export const CLIENT_TRUNCATIONS = 'mcp_framing.client.truncations';
/** Final responses delivered although their STREAM_END was cut (clean, Regime B, SPEC.md §7 row 4). */
export const CLIENT_SENTINEL_MISSING = 'mcp_framing.client.sentinel_missing';
export const CLIENT_INCOMPLETE_BYTES = 'mcp_framing.client.incomplete_bytes';
export const CLIENT_OPEN_MESSAGE_BYTES = 'mcp_framing.client.open_message_bytes';
export const CLIENT_RETRY_DECISIONS = 'mcp_framing.client.retry_decisions';
export const CLIENT_RETRIES = 'mcp_framing.client.retries';
export const DEDUPE_DECISIONS = 'mcp_framing.dedupe.decisions';
export const DEDUPE_WAITS = 'mcp_framing.dedupe.waits';
export const DEDUPE_WAIT_DURATION = 'mcp_framing.dedupe.wait.duration';
export const DEDUPE_COMPLETIONS = 'mcp_framing.dedupe.completions';
export const DEDUPE_LEASES_LOST = 'mcp_framing.dedupe.leases_lost';
export const DEDUPE_EVICTIONS = 'mcp_framing.dedupe.evictions';
export const DEDUPE_STORE_DURATION = 'mcp_framing.dedupe.store.duration';
export const SERVER_OPERATION_DURATION = 'mcp.server.operation.duration';

type Attributes = Record<string, string>;

/** The part of an OpenTelemetry `Meter` this package uses. */
export interface MeterLike {
  createCounter(name: string, options?: { description?: string; unit?: string }): { add(value: number, attributes?: Attributes): void };
  createHistogram(name: string, options?: { description?: string; unit?: string }): { record(value: number, attributes?: Attributes): void };
}

/** Where log lines go: `debug` and `info` for clean attempts and decisions, `warn` for the rest. */
export interface Logger {
  debug(message: string): void;
  info(message: string): void;
  warn(message: string): void;
}

const debug = debuglog('mcp-framing');

/** The default logger: `warn` to `console.warn`; `debug` and `info` with `NODE_DEBUG=mcp-framing`. */
export const defaultLogger: Logger = {
  debug: (message) => debug('%s', message),
  info: (message) => debug('%s', message),
  warn: (message) => console.warn(message),
};

interface OtelApi {
  metrics: { getMeterProvider(): object; getMeter(name: string, version?: string): MeterLike };
}

let otel: OtelApi | null = null;
try {
  const name = '@opentelemetry/api';
  otel = (await import(name)) as OtelApi;
} catch {
  otel = null; // not installed: metrics are off, logs stay
}

interface Instruments {
  duration: ReturnType<MeterLike['createHistogram']>;
  responses: ReturnType<MeterLike['createCounter']>;
  truncations: ReturnType<MeterLike['createCounter']>;
  sentinelMissing: ReturnType<MeterLike['createCounter']>;
  incompleteBytes: ReturnType<MeterLike['createCounter']>;
  openMessageBytes: ReturnType<MeterLike['createCounter']>;
  retryDecisions: ReturnType<MeterLike['createCounter']>;
  retries: ReturnType<MeterLike['createCounter']>;
}

function instruments(meter: MeterLike): Instruments {
  return {
    duration: meter.createHistogram(CLIENT_OPERATION_DURATION, {
      unit: 's',
      description: 'Duration of an MCP request from sending until its final result, retries included',
    }),
    responses: meter.createCounter(CLIENT_RESPONSES, { description: 'Framed response streams received, by verdict' }),
    truncations: meter.createCounter(CLIENT_TRUNCATIONS, {
      description: 'Response streams abandoned before their sentinel, by where they stopped',
    }),
    sentinelMissing: meter.createCounter(CLIENT_SENTINEL_MISSING, {
      description: "Final responses delivered although the stream's sentinel was cut (clean, Regime B)",
    }),
    incompleteBytes: meter.createCounter(CLIENT_INCOMPLETE_BYTES, {
      unit: 'By',
      description: 'Bytes received by response streams that did not complete',
    }),
    openMessageBytes: meter.createCounter(CLIENT_OPEN_MESSAGE_BYTES, {
      unit: 'By',
      description: 'Bytes of messages left open by response streams that did not complete',
    }),
    retryDecisions: meter.createCounter(CLIENT_RETRY_DECISIONS, {
      description: 'Retry decisions after a response stream ended, by decision and reason',
    }),
    retries: meter.createCounter(CLIENT_RETRIES, { description: 'Requests sent again after a response that did not complete' }),
  };
}

/** The instruments of SPEC.md §17.15. */
function serverInstruments(meter: MeterLike) {
  return {
    decisions: meter.createCounter(DEDUPE_DECISIONS, { description: 'Keyed calls decided, by decision and reason' }),
    waits: meter.createCounter(DEDUPE_WAITS, { description: 'Duplicates that waited for an attempt in flight, by what the wait ended in' }),
    waitDuration: meter.createHistogram(DEDUPE_WAIT_DURATION, { unit: 's', description: 'Time duplicates waited for an attempt in flight' }),
    completions: meter.createCounter(DEDUPE_COMPLETIONS, { description: 'Results of executed keyed calls, by whether they were recorded' }),
    leasesLost: meter.createCounter(DEDUPE_LEASES_LOST, {
      description: 'Claims taken over while their holder still ran (the call may have executed twice)',
    }),
    evictions: meter.createCounter(DEDUPE_EVICTIONS, {
      description: 'Records removed before their retention to make room (their retries execute again)',
    }),
    storeDuration: meter.createHistogram(DEDUPE_STORE_DURATION, { unit: 's', description: 'Deduplication store operations, by operation and outcome' }),
    operation: meter.createHistogram(SERVER_OPERATION_DURATION, {
      unit: 's',
      description: 'Duration of a keyed MCP request on the server, from its deduplication decision until its result',
    }),
  };
}

type ServerInstruments = ReturnType<typeof serverInstruments>;

/** How a keyed call ended, for `mcp.server.operation.duration`: `ok`, or its `error.type` and code. */
export type Ended = { errorType: null } | { errorType: string; code?: number };

/** What the telemetry knows of one attempt besides its outcome. */
export interface AttemptContext {
  method: string;
  tool?: string | undefined;
  endpoint: string;
  attempt: number;
  requestKey?: RequestKey | undefined;
}

const TRUNCATION_LABELS: Record<string, string> = {
  NoFrame: 'no_frame',
  InHeader: 'in_header',
  InPayload: 'in_payload',
  InMessage: 'in_message',
  BetweenMessages: 'between_messages',
};

function field(name: string, value: unknown): string {
  return value === undefined || value === null ? '' : ` ${name}=${typeof value === 'string' && /[\s"=]/.test(value) ? JSON.stringify(value) : String(value)}`;
}

/** Records attempts, decisions and operations: logs, and metrics when a meter is at hand. */
export class Telemetry {
  private readonly logger: Logger;
  private readonly meter: MeterLike | null;
  private provider: object | null = null;
  private cached: Instruments | null = null;
  private cachedServer: ServerInstruments | null = null;
  private global: MeterLike | null = null;

  /** With `meter`, metrics go there; without, to OpenTelemetry's global meter provider if installed. */
  constructor(logger: Logger = defaultLogger, meter: MeterLike | null = null) {
    this.logger = logger;
    this.meter = meter;
  }

  /** The meter to record with: the given one, or the global provider's (followed if it changes). */
  private currentMeter(): MeterLike | null {
    if (this.meter !== null) {
      return this.meter;
    }
    if (otel === null) {
      return null;
    }
    // The global provider may be set after this client or server was built: follow it.
    const provider = otel.metrics.getMeterProvider();
    if (provider !== this.provider || this.global === null) {
      this.provider = provider;
      this.global = otel.metrics.getMeter('mcp-framing');
      this.cached = null;
      this.cachedServer = null;
    }
    return this.global;
  }

  private get instruments(): Instruments | null {
    const meter = this.currentMeter();
    return meter === null ? null : (this.cached ??= instruments(meter));
  }

  private get server(): ServerInstruments | null {
    const meter = this.currentMeter();
    return meter === null ? null : (this.cachedServer ??= serverInstruments(meter));
  }

  /**
   * One attempt's outcome: a log line (`warn` unless clean) and the metrics.
   */
  outcome(outcome: Outcome, ctx: AttemptContext): void {
    const m = this.instruments;
    const name = outcome.classification;
    m?.responses.add(1, { outcome: name, regime: outcome.regime, 'mcp.method.name': ctx.method });
    // §7 row 4, §11.6: delivered, not retried, but a cut all the same: counted and warned
    const sentinelMissing = name === 'clean' && !outcome.sentinelSeen;
    if (sentinelMissing) {
      m?.sentinelMissing.add(1, { 'mcp.method.name': ctx.method });
    }
    if (name !== 'clean') {
      if (name === 'abandoned') {
        const at = outcome.truncation === null ? 'transport' : (TRUNCATION_LABELS[outcome.truncation] ?? 'transport');
        m?.truncations.add(1, { at, 'mcp.method.name': ctx.method });
      }
      m?.incompleteBytes.add(outcome.progress.bytes, { outcome: name });
      m?.openMessageBytes.add(outcome.progress.openMessageBytes, { outcome: name });
    }
    const p = outcome.progress;
    const line =
      (sentinelMissing
        ? 'mcp-framing: final response delivered without its sentinel (STREAM_END cut)'
        : name === 'clean'
          ? 'mcp-framing: framed stream complete'
          : 'mcp-framing: response stream did not complete cleanly') +
      field('outcome', name) +
      field('regime', outcome.regime) +
      field('sentinel_seen', outcome.sentinelSeen) +
      field('kind', outcome.kind) +
      field('frames', p.frames) +
      field('bytes', p.bytes) +
      field('messages', p.messages) +
      field('message_bytes', p.openMessageBytes) +
      field('last_sequence', p.lastSequence) +
      field('request_key', ctx.requestKey === undefined ? undefined : fingerprint(ctx.requestKey)) +
      field('attempt_id', outcome.head?.attemptId) +
      field('endpoint', ctx.endpoint) +
      field('method', ctx.method) +
      field('attempt', ctx.attempt) +
      field('detail', outcome.detail);
    if (name === 'clean' && !sentinelMissing) {
      this.logger.debug(line);
    } else {
      this.logger.warn(line);
    }
  }

  /** A retry decision. */
  decision(decision: RetryDecision, ctx: AttemptContext): void {
    this.instruments?.retryDecisions.add(1, { decision: decision.decision, reason: decision.reason });
    this.logger.info(
      'mcp-framing: retry decision' +
        field('decision', decision.decision) +
        field('reason', decision.reason) +
        field('request_key', ctx.requestKey === undefined ? undefined : fingerprint(ctx.requestKey)) +
        field('endpoint', ctx.endpoint) +
        field('method', ctx.method) +
        field('attempt', ctx.attempt),
    );
  }

  /** A request sent again; `ctx.attempt` is the attempt about to be sent. */
  retry(decision: RetryDecision, ctx: AttemptContext, delayMs: number): void {
    this.instruments?.retries.add(1, { reason: decision.reason, 'mcp.method.name': ctx.method });
    this.logger.info(
      'mcp-framing: sending the request again with the same request key' +
        field('reason', decision.reason) +
        field('request_key', ctx.requestKey === undefined ? undefined : fingerprint(ctx.requestKey)) +
        field('endpoint', ctx.endpoint) +
        field('method', ctx.method) +
        field('attempt', ctx.attempt) +
        field('delay_ms', Math.round(delayMs)),
    );
  }

  /** A logical request's duration, retries included; `errorType` when it failed. */
  operation(ctx: AttemptContext, seconds: number, errorType: string | null): void {
    const m = this.instruments;
    if (m === null) {
      return;
    }
    const attributes: Attributes = {
      'mcp.method.name': ctx.method,
      'network.transport': 'tcp',
      'network.protocol.name': 'http',
    };
    if (ctx.tool !== undefined) {
      attributes['gen_ai.tool.name'] = ctx.tool;
    }
    if (errorType !== null) {
      attributes['error.type'] = errorType;
    }
    try {
      const url = new URL(ctx.endpoint);
      attributes['server.address'] = url.hostname;
      attributes['server.port'] = url.port || (url.protocol === 'https:' ? '443' : '80');
    } catch {
      // not a URL: no server attributes
    }
    m.duration.record(seconds, attributes);
  }

  /**
   * A keyed call decided (SPEC.md §17.15): `decision` (`execute`, `replay`, `refused`,
   * `unprotected`) and the refusal's `reason`; `waitedSeconds` when it found its key in flight
   * and waited.
   */
  dedupeDecision(decision: string, reason: string, method: string, waitedSeconds: number | null): void {
    const m = this.server;
    if (m === null) {
      return;
    }
    m.decisions.add(1, { decision, reason, 'mcp.method.name': method });
    if (waitedSeconds !== null) {
      // What the wait ended in: the decision, or for a refusal its reason.
      const ended = decision === 'refused' ? reason : decision;
      m.waits.add(1, { decision: ended });
      m.waitDuration.record(waitedSeconds, { decision: ended });
    }
  }

  /** A store operation as the server waited for it: `outcome` is `ok` or the error's kind. */
  storeOperation(operation: 'claim' | 'renew' | 'complete' | 'release', seconds: number, outcome: string): void {
    this.server?.storeDuration.record(seconds, { operation, outcome });
  }

  /** The result of an executed keyed call: recorded, or why not. */
  completion(recorded: 'stored' | 'not_stored' | 'lease_lost' | 'store_error'): void {
    this.server?.completions.add(1, { recorded });
  }

  /** A claim taken over while its holder ran. */
  leaseLost(detected: 'heartbeat' | 'completion'): void {
    this.server?.leasesLost.add(1, { detected });
  }

  /** A record a bounded store removed before its retention. */
  evicted(record: 'completed' | 'expired_claim'): void {
    this.server?.evictions.add(1, { record });
  }

  /** A keyed call from its decision until its result (`mcp.server.operation.duration`). */
  serverOperation(method: string, decision: string, seconds: number, ended: Ended): void {
    const m = this.server;
    if (m === null) {
      return;
    }
    const attributes: Attributes = { 'mcp.method.name': method, 'mcp_framing.dedupe.decision': decision };
    if (ended.errorType !== null) {
      attributes['error.type'] = ended.errorType;
      if ('code' in ended && ended.code !== undefined) {
        attributes['rpc.response.status_code'] = String(ended.code);
      }
    }
    m.operation.record(seconds, attributes);
  }
}

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

  /** With `meter`, metrics go there; without, to OpenTelemetry's global meter provider if installed. */
  constructor(logger: Logger = defaultLogger, meter: MeterLike | null = null) {
    this.logger = logger;
    this.meter = meter;
  }

  private get instruments(): Instruments | null {
    if (this.meter !== null) {
      return (this.cached ??= instruments(this.meter));
    }
    if (otel === null) {
      return null;
    }
    // The global provider may be set after this client was built: follow it.
    const provider = otel.metrics.getMeterProvider();
    if (provider !== this.provider || this.cached === null) {
      this.provider = provider;
      this.cached = instruments(otel.metrics.getMeter('mcp-framing'));
    }
    return this.cached;
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
}

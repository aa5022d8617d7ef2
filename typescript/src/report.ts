/**
 * The outcome report of a request {@link framingFetch} failed (SPEC.md §11.7), and
 * {@link FramingError}, the caller's view of it, found in whatever the SDK threw.
 *
 * The SDK throws the JSON-RPC error the wrapper answered as its own error (`McpError` in
 * `@modelcontextprotocol/sdk`, the v2 line's protocol error): its message starts with the SDK's
 * `MCP error -32603: ` and the report is under `data[OUTCOME_DATA_KEY]`. {@link framingError}
 * takes any thrown value and returns the report as a `FramingError`, or `null` when mcp-framing
 * failed nothing there. The SDK's error is recognised by its shape, not imported.
 *
 * @module
 */

import { OUTCOME_DATA_KEY } from './fetch.js';
import type { Regime, ReportClassification, RetryDecisionName, RetryReasonName } from './outcome.js';

/** The members of the outcome report (SPEC.md §11.7), as the wrapper writes them. */
export interface OutcomeReport {
  /** What failed: a verdict (`abandoned`, `contract_violation`, ...) or `configuration_error`, `http_error`, ... */
  classification: ReportClassification;
  /** The precise error: `Truncated`, `NotFramed`, `NoContract`, `Send`, ... */
  kind: string;
  /** What happened, in words. */
  detail: string;
  /** Attempts made. */
  attempts: number;
  /** What was decided on the last attempt (SPEC.md §11.6). */
  retryDecision: RetryDecisionName;
  /** Why, when a response stream ended. */
  retryReason?: RetryReasonName;
  /** The regime, when a response stream ended. */
  regime?: Regime;
  /** `sha256:` and 16 hex digits of the request key. */
  requestKeyFingerprint?: string;
  framesReceived?: number;
  bytesReceived?: number;
  messagesVerified?: number;
  openMessageBytes?: number;
  attemptId?: string;
  httpStatus?: number;
}

/**
 * A request mcp-framing failed: the JSON-RPC error the wrapper answered in place of a response,
 * with its {@link OutcomeReport}. `message` is the wrapper's (`mcp-framing: ...`), `cause` the
 * error the SDK threw.
 */
export class FramingError extends Error {
  override readonly name = 'FramingError';
  /** The JSON-RPC error code (-32603). */
  readonly code: number;
  /** Every member of the report. */
  readonly report: OutcomeReport;

  constructor(message: string, report: OutcomeReport, options: { code?: number; cause?: unknown } = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.code = options.code ?? -32603;
    this.report = report;
  }

  /** What failed (the report's `classification`). */
  get classification(): ReportClassification {
    return this.report.classification;
  }

  /** The precise error (the report's `kind`). */
  get kind(): string {
    return this.report.kind;
  }

  /** What was decided (the report's `retryDecision`). */
  get retryDecision(): RetryDecisionName {
    return this.report.retryDecision;
  }
}

/** How deep {@link framingError} follows `cause` and `errors` (an `AggregateError`). */
const MAX_DEPTH = 16;

/**
 * The {@link FramingError} in `error`: the SDK's error for a request mcp-framing failed, found in
 * `error` itself, its `cause`, or the `errors` of an `AggregateError`. `null` when mcp-framing
 * failed nothing there (the server's own JSON-RPC error, a bug, ...).
 *
 * ```js
 * try {
 *   await client.connect(new StreamableHTTPClientTransport(url, { fetch: framingFetch() }));
 * } catch (error) {
 *   const failure = framingError(error);
 *   if (failure === null) throw error;
 *   console.error(failure.message); // mcp-framing: ... and what to do
 * }
 * ```
 */
export function framingError(error: unknown): FramingError | null {
  return find(error, 0);
}

function find(error: unknown, depth: number): FramingError | null {
  if (depth > MAX_DEPTH || typeof error !== 'object' || error === null) {
    return null;
  }
  if (error instanceof FramingError) {
    return error;
  }
  const report = reportOf((error as { data?: unknown }).data);
  if (report !== null) {
    const { code, message } = error as { code?: unknown; message?: unknown };
    // The SDK prefixes the JSON-RPC message with `MCP error <code>: `; the wrapper's own follows.
    const text = typeof message === 'string' ? message.replace(/^MCP error -?\d+: /, '') : `mcp-framing: ${report.detail}`;
    return new FramingError(text, report, { code: typeof code === 'number' ? code : -32603, cause: error });
  }
  const inner = (error as { errors?: unknown }).errors;
  if (Array.isArray(inner)) {
    for (const sub of inner) {
      const found = find(sub, depth + 1);
      if (found !== null) {
        return found;
      }
    }
  }
  return find((error as { cause?: unknown }).cause, depth + 1);
}

/** The report under `data[OUTCOME_DATA_KEY]`, if it has the shape of one. */
function reportOf(data: unknown): OutcomeReport | null {
  if (typeof data !== 'object' || data === null) {
    return null;
  }
  const report: unknown = (data as Record<string, unknown>)[OUTCOME_DATA_KEY];
  if (typeof report !== 'object' || report === null) {
    return null;
  }
  const { classification, kind } = report as Record<string, unknown>;
  if (typeof classification !== 'string' || typeof kind !== 'string') {
    return null;
  }
  return report as OutcomeReport;
}

/**
 * mcp-framing for TypeScript: verify framed MCP responses (SPEC.md) under the official SDKs,
 * untouched.
 *
 * - {@link framingFetch}: a `fetch` for `StreamableHTTPClientTransport(url, { fetch })` that
 *   opts in, verifies every response as it streams, hands the SDK only verified messages, turns
 *   every outcome that is not clean into an immediate JSON-RPC error, and retries what SPEC.md
 *   §17.13 allows;
 * - {@link bodyDecoder} / {@link StreamDecoder}: the sans-I/O decoders of the three mappings.
 *
 * @module
 */

export { bodyDecoder, decodeBody, type BodyDecoder, type Mapping } from './body.js';
export { optionsFromManifest, type ManifestDecoder } from './batch-options.js';
export { CompatDecoder } from './compat.js';
export {
  ContractError,
  EXTENSION_KEY,
  negotiate,
  readDiscovery,
  recheck,
  type ClientFraming,
  type ContractErrorKind,
  type Deduplication,
  type DiscoverySource,
  type FramingContract,
  type Negotiated,
  type ServerDiscovery,
} from './contract.js';
export { StreamDecoder, type DecoderOptions } from './decoder.js';
export {
  CLIENT_KINDS,
  CONTRACT_ERROR_KINDS,
  DecodeError,
  type ClientKind,
  type ErrorKind,
  type FrameErrorKind,
  type MappingErrorKind,
  type TruncationPoint,
} from './errors.js';
export {
  DEDUPE_DATA_KEY,
  IDEMPOTENT_METHODS,
  OUTCOME_DATA_KEY,
  REQUEST_KEY_META,
  discoveringResolver,
  framingFetch,
  responseMapping,
  type AttemptReport,
  type DiscoveringResolverOptions,
  type EndpointResolver,
  type FramingFetch,
  type FramingFetchOptions,
  type FramingStats,
  type ResolveContext,
  type Resolution,
  type RetryOptions,
} from './fetch.js';
export { fingerprint, isRequestKey, randomRequestKey, type RequestKey } from './ids.js';
export { FramingError, framingError, type OutcomeReport } from './report.js';
export * from './limits.js';
export {
  abortName,
  attemptFailure,
  decide,
  outcomeOf,
  type AttemptErrorKind,
  type Classification,
  type Outcome,
  type Regime,
  type RequestTraits,
  type RetryDecision,
  type RetryDecisionName,
  type RetryReasonName,
} from './outcome.js';
export { SseDecoder } from './sse.js';
export * from './telemetry.js';
export { toManifest, type ManifestMessage, type ManifestVerdict, type Progress, type StreamHead, type Verdict } from './verdict.js';

/**
 * mcp-framing for TypeScript servers: frame, declare and deduplicate the responses of any
 * web-standard MCP handler (`(request: Request) => Promise<Response>`), as the official SDKs'
 * `createMcpHandler(...).fetch` and `WebStandardStreamableHTTPServerTransport.handleRequest` are.
 *
 * - {@link StreamEncoder} / {@link BodyEncoder}: the sans-I/O encoders (SPEC.md §2–§5, and the
 *   binary, SSE and compatible mappings of §15, §16, §18), beside the package's decoders.
 *
 * @module
 */

export { BodyEncoder, checkEventData, messageEvent } from './body-encoder.js';
export { AbortCode, EncodeError, StreamEncoder, fitReason, type EncodeErrorKind, type EncoderOptions, type StreamHeadInit } from './encoder.js';
export { framingHandler, type FramingHandlerOptions, type WebHandler } from './server/handler.js';
export { OptInError } from './server/opt-in.js';
export { DEDUPE_HEADER, type DedupeOptions } from './server/dedupe/handler.js';
export { DEFAULT_PREFIX, RedisStore, type RedisCommands, type RedisStoreOptions } from './server/dedupe/redis.js';
export { MemoryStore, StoreError, type ClaimReply, type DedupeStore, type MemoryStoreOptions } from './server/dedupe/store.js';

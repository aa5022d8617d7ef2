/**
 * mcp-framing for TypeScript: verify framed MCP responses (SPEC.md) under the official SDKs,
 * untouched.
 *
 * @module
 */

export { bodyDecoder, decodeBody, type BodyDecoder, type Mapping } from './body.js';
export { optionsFromManifest, type ManifestDecoder } from './batch-options.js';
export { CompatDecoder } from './compat.js';
export { StreamDecoder, type DecoderOptions } from './decoder.js';
export { DecodeError, type ErrorKind, type FrameErrorKind, type MappingErrorKind, type TruncationPoint } from './errors.js';
export { fingerprint, isRequestKey, randomRequestKey, type RequestKey } from './ids.js';
export * from './limits.js';
export { SseDecoder } from './sse.js';
export { toManifest, type ManifestMessage, type ManifestVerdict, type Progress, type StreamHead, type Verdict } from './verdict.js';

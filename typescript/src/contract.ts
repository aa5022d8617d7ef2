/**
 * The framing contract a server declares in discovery (SPEC.md §11): read from the
 * `initialize` and `server/discover` results, negotiated into the client's policy (§11.3), and
 * re-checked on every later resolution (§11.5, a downgrade fails closed).
 *
 * @module
 */

import { CONTRACT_ERROR_KINDS } from './errors.js';
import { DEFAULT_MAX_FRAME_PAYLOAD, DEFAULT_MAX_MESSAGE_SIZE, MIN_MAX_FRAME_PAYLOAD } from './limits.js';
import type { Mapping } from './body.js';

/** The extension key of the contract (SPEC.md §11). */
export const EXTENSION_KEY = 'io.github.mcp-framing/framing';

/** The wire format versions this package decodes (SPEC.md §8). */
export const SUPPORTED_VERSIONS: readonly number[] = [1];

/** Where a contract was read from. */
export type DiscoverySource = 'initialize' | 'discover';

/** A server's request-key deduplication (SPEC.md §17.11). */
export interface Deduplication {
  methods: string[];
  windowMs: number;
  scope: string;
}

/** The contract object (SPEC.md §11.1). */
export interface FramingContract {
  versions: number[];
  sentinelRequired: boolean;
  frameChecksum: string;
  messageDigest: string;
  maxFramePayload: number;
  maxMessageSize: number;
  transports: string[];
  alwaysFramed?: string;
  deduplication?: Deduplication;
}

/** What one discovery result said about framing. */
export interface ServerDiscovery {
  source: DiscoverySource;
  /** The declared contract, if any. */
  contract: FramingContract | null;
}

/** Why a contract was refused (the Rust crate's `ContractError` kinds). */
export type ContractErrorKind = (typeof CONTRACT_ERROR_KINDS)[number];

/** A configuration error of the contract layer: refused before any request is framed. */
export class ContractError extends Error {
  readonly kind: ContractErrorKind;

  constructor(kind: ContractErrorKind, message: string) {
    super(message);
    this.name = 'ContractError';
    this.kind = kind;
  }

  /** Whether the error is Regime C (no contract, or no sentinel required, SPEC.md §11.3). */
  get isRegimeC(): boolean {
    return this.kind === 'NoContract' || this.kind === 'SentinelNotRequired';
  }
}

const ORIGIN: Record<DiscoverySource, string> = { initialize: 'initialize result', discover: 'server/discover result' };

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function isUint(value: unknown, max = Number.MAX_SAFE_INTEGER): value is number {
  return Number.isSafeInteger(value) && (value as number) >= 0 && (value as number) <= max;
}

function isStrings(value: unknown): value is string[] {
  return Array.isArray(value) && value.every((v) => typeof v === 'string');
}

function parseContract(raw: unknown, source: DiscoverySource): FramingContract {
  const malformed = (reason: string): never => {
    throw new ContractError('Malformed', `malformed framing contract under "${EXTENSION_KEY}" in the ${ORIGIN[source]}: ${reason}`);
  };
  if (!isObject(raw)) {
    return malformed('not an object');
  }
  const { versions, sentinelRequired, frameChecksum, messageDigest, transports } = raw;
  if (!Array.isArray(versions) || !versions.every((v) => isUint(v, 255))) {
    return malformed('`versions` must be an array of integers 0..=255');
  }
  if (typeof sentinelRequired !== 'boolean') {
    return malformed('`sentinelRequired` must be a boolean');
  }
  if (typeof frameChecksum !== 'string' || typeof messageDigest !== 'string') {
    return malformed('`frameChecksum` and `messageDigest` must be strings');
  }
  if (!isStrings(transports)) {
    return malformed('`transports` must be an array of strings');
  }
  const maxFramePayload = raw['maxFramePayload'] ?? DEFAULT_MAX_FRAME_PAYLOAD;
  const maxMessageSize = raw['maxMessageSize'] ?? DEFAULT_MAX_MESSAGE_SIZE;
  if (!isUint(maxFramePayload, 0xffff_ffff) || !isUint(maxMessageSize)) {
    return malformed('`maxFramePayload` and `maxMessageSize` must be non-negative integers');
  }
  const contract: FramingContract = {
    versions: versions as number[],
    sentinelRequired,
    frameChecksum,
    messageDigest,
    maxFramePayload,
    maxMessageSize,
    transports,
  };
  const alwaysFramed = raw['alwaysFramed'];
  if (alwaysFramed !== undefined && alwaysFramed !== null) {
    if (typeof alwaysFramed !== 'string') {
      return malformed('`alwaysFramed` must be a string');
    }
    contract.alwaysFramed = alwaysFramed;
  }
  const dedupe = raw['deduplication'];
  if (dedupe !== undefined && dedupe !== null) {
    if (!isObject(dedupe) || !isStrings(dedupe['methods']) || !isUint(dedupe['windowMs']) || typeof dedupe['scope'] !== 'string') {
      return malformed('`deduplication` must be {"methods": [...], "windowMs": n, "scope": "..."}');
    }
    contract.deduplication = { methods: dedupe['methods'], windowMs: dedupe['windowMs'], scope: dedupe['scope'] };
  }
  return contract;
}

/**
 * Reads a discovery result (or a whole JSON-RPC response carrying one): the contract under
 * `capabilities.experimental[KEY]` of an `initialize` result, under `capabilities.extensions[KEY]`
 * (else `experimental`) of a `server/discover` result (SPEC.md §11.2).
 *
 * @throws ContractError `NotADiscoveryResult` without a `capabilities` object, `Malformed` for a
 * contract that does not parse.
 */
export function readDiscovery(result: unknown, source: DiscoverySource): ServerDiscovery {
  let value = result;
  if (isObject(value) && 'jsonrpc' in value && isObject(value['result'])) {
    value = value['result'];
  }
  const capabilities = isObject(value) ? value['capabilities'] : undefined;
  if (!isObject(capabilities)) {
    throw new ContractError('NotADiscoveryResult', `not an MCP ${ORIGIN[source]}: no capabilities object`);
  }
  const slot = (field: string): unknown => {
    const map = capabilities[field];
    return isObject(map) ? map[EXTENSION_KEY] : undefined;
  };
  const raw = source === 'discover' ? (slot('extensions') ?? slot('experimental')) : slot('experimental');
  return { source, contract: raw === undefined ? null : parseContract(raw, source) };
}

/** What the client brings to the negotiation. */
export interface ClientFraming {
  /** The versions it decodes (default `[1]`). */
  versions?: readonly number[];
  /** Its frame limit (default 65 536). */
  maxFramePayload?: number;
  /** Its message limit (default 16 MiB). */
  maxMessageSize?: number;
  /** The mappings it reads, in its order of preference (default compatible, then SSE, then binary). */
  transports?: readonly Mapping[];
}

/** What a framed policy negotiated (SPEC.md §11.3). */
export interface Negotiated {
  version: number;
  maxFramePayload: number;
  maxMessageSize: number;
  /** The transports both support, in the client's order of preference. */
  transports: Mapping[];
  deduplication: Deduplication | null;
}

/** The mappings read by default, in order of preference (SPEC.md §18: compatible first). */
export const DEFAULT_TRANSPORTS: readonly Mapping[] = ['compat', 'sse', 'binary'];

/**
 * Negotiates with a server's discovery (SPEC.md §11.3).
 *
 * @throws ContractError `NoContract` / `SentinelNotRequired` (Regime C: a configuration error),
 * `UnsupportedChecksum`, `UnsupportedDigest`, `InvalidLimit`, `VersionMismatch`,
 * `NoCommonTransport`.
 */
export function negotiate(discovery: ServerDiscovery, client: ClientFraming = {}): Negotiated {
  const origin = ORIGIN[discovery.source];
  const contract = discovery.contract;
  if (contract === null) {
    throw new ContractError(
      'NoContract',
      `configuration error: the ${origin} declares no framing contract under "${EXTENSION_KEY}", so a clean end and an abandoned response stream would be indistinguishable (Regime C); put a framing layer in front of the server (mcp-frame proxy, or FramingLayer in a Rust server), connect without mcp-framing, or opt in with acceptAmbiguity: true to fail every close as ambiguous`,
    );
  }
  if (!contract.sentinelRequired) {
    throw new ContractError(
      'SentinelNotRequired',
      `configuration error: the framing contract in the ${origin} has sentinelRequired false, so a clean end and an abandoned response stream would be indistinguishable (Regime C); require the sentinel on the server, connect without mcp-framing, or opt in with acceptAmbiguity: true to fail every close as ambiguous`,
    );
  }
  checkAlgorithms(contract);
  const versions = client.versions ?? SUPPORTED_VERSIONS;
  const common = versions.filter((v) => contract.versions.includes(v) && SUPPORTED_VERSIONS.includes(v));
  if (common.length === 0) {
    throw new ContractError(
      'VersionMismatch',
      `framing version mismatch: client accepts ${JSON.stringify(versions)}, server offers ${JSON.stringify(contract.versions)}`,
    );
  }
  if (contract.maxFramePayload < MIN_MAX_FRAME_PAYLOAD) {
    throw new ContractError('InvalidLimit', `declared maxFramePayload ${contract.maxFramePayload} is below the minimum of 1026 bytes`);
  }
  const wanted = client.transports ?? DEFAULT_TRANSPORTS;
  const transports = wanted.filter((t) => contract.transports.includes(t));
  if (transports.length === 0) {
    throw new ContractError(
      'NoCommonTransport',
      `no common framing transport: client reads ${JSON.stringify(wanted)}, server offers ${JSON.stringify(contract.transports)}`,
    );
  }
  return {
    version: Math.max(...common),
    maxFramePayload: Math.min(client.maxFramePayload ?? DEFAULT_MAX_FRAME_PAYLOAD, contract.maxFramePayload),
    maxMessageSize: Math.min(client.maxMessageSize ?? DEFAULT_MAX_MESSAGE_SIZE, contract.maxMessageSize),
    transports,
    deduplication: contract.deduplication ?? null,
  };
}

function checkAlgorithms(contract: FramingContract): void {
  if (contract.frameChecksum !== 'crc32') {
    throw new ContractError('UnsupportedChecksum', `unsupported frame checksum ${JSON.stringify(contract.frameChecksum)} (expected "crc32")`);
  }
  if (contract.messageDigest !== 'sha256') {
    throw new ContractError('UnsupportedDigest', `unsupported message digest ${JSON.stringify(contract.messageDigest)} (expected "sha256")`);
  }
}

/**
 * Checks a later resolution against the negotiated policy (SPEC.md §11.5, §17.11).
 *
 * @throws ContractError `Downgrade` if the contract was dropped or weakened: no sentinel, the
 * version, checksum or digest changed, no negotiated transport left, or the deduplication the
 * policy relies on no longer declared as negotiated.
 */
export function recheck(negotiated: Negotiated, discovery: ServerDiscovery): void {
  const downgrade = (change: string): never => {
    throw new ContractError('Downgrade', `framing downgrade detected in a ${ORIGIN[discovery.source]}: ${change}; failing closed instead of falling into Regime C`);
  };
  const contract = discovery.contract;
  if (contract === null) {
    return downgrade('the framing contract is no longer declared');
  }
  if (!contract.sentinelRequired) {
    return downgrade('the contract no longer requires the sentinel');
  }
  if (contract.frameChecksum !== 'crc32') {
    return downgrade(`the frame checksum changed from crc32 to ${JSON.stringify(contract.frameChecksum)}`);
  }
  if (contract.messageDigest !== 'sha256') {
    return downgrade(`the message digest changed from sha256 to ${JSON.stringify(contract.messageDigest)}`);
  }
  if (!contract.versions.includes(negotiated.version)) {
    return downgrade(`the negotiated format version ${negotiated.version} is no longer offered`);
  }
  if (!negotiated.transports.some((t) => contract.transports.includes(t))) {
    return downgrade(`none of the negotiated transports ${JSON.stringify(negotiated.transports)} is offered any more`);
  }
  const promised = negotiated.deduplication;
  if (promised !== null) {
    const later = contract.deduplication;
    const kept =
      later !== undefined &&
      promised.methods.every((m) => later.methods.includes(m)) &&
      later.windowMs >= promised.windowMs &&
      later.scope === promised.scope;
    if (!kept) {
      return downgrade('request-key deduplication is no longer declared as negotiated');
    }
  }
}

/** Whether the policy may rely on deduplication for `method` (SPEC.md §17.11). */
export function deduplicates(negotiated: Negotiated | null, method: string): boolean {
  return negotiated?.deduplication?.methods.includes(method) ?? false;
}

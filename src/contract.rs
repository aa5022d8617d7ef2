//! The framing contract a server declares in discovery, and the client policy built from it
//! (SPEC.md §11).
//!
//! A server that frames its responses declares a [`FramingContract`] under [`EXTENSION_KEY`]:
//! in `capabilities.experimental` of its `initialize` result (protocol versions 2025-*) and in
//! `capabilities.extensions` of its `server/discover` result (2026-07-28). A client parses the
//! result ([`ServerDiscovery`]) and builds a [`ClientPolicy`] from it. Building fails with a
//! configuration error when the server declares no contract or one that does not mandate the
//! sentinel (Regime C), unless the client explicitly accepts ambiguity; it fails when no common
//! version, checksum, digest or transport exists. Each later resolution (discovery is re-resolved
//! per request) is checked against the policy with [`ClientPolicy::recheck`]: a contract dropped
//! or weakened is a downgrade and fails closed.
//!
//! ```
//! use mcp_framing::{ClientPolicy, RequestKey, ServerDiscovery};
//!
//! let result = serde_json::json!({
//!     "protocolVersion": "2025-06-18",
//!     "capabilities": {"tools": {}, "experimental": {"io.github.mcp-framing/framing": {
//!         "versions": [1], "sentinelRequired": true, "frameChecksum": "crc32",
//!         "messageDigest": "sha256", "maxFramePayload": 65536, "maxMessageSize": 16777216,
//!         "transports": ["binary", "sse"]}}},
//!     "serverInfo": {"name": "example", "version": "1.0.0"}
//! });
//! let policy = ClientPolicy::new(&ServerDiscovery::from_initialize(&result)?)?;
//! let key = RequestKey::random();
//! let decoder = policy.decoder(key).expect("framed");
//! # let _ = decoder;
//! # Ok::<(), mcp_framing::ContractError>(())
//! ```

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::decoder::StreamDecoder;
use crate::frame::VERSION;
use crate::ids::RequestKey;
use crate::limits::{Limits, MIN_MAX_FRAME_PAYLOAD};
use crate::outcome::{DiscoveryMode, Outcome, Regime};

/// The extension key of the framing contract: a reverse-DNS `{prefix}/{name}` identifier as MCP's
/// extension naming requires; its prefix `io.github.mcp-framing` is not a reserved one (second
/// label `modelcontextprotocol` or `mcp`).
pub const EXTENSION_KEY: &str = "io.github.mcp-framing/framing";

/// The wire format versions this crate implements (SPEC.md §8).
pub const SUPPORTED_VERSIONS: &[u8] = &[VERSION];

/// The `frameChecksum` value of SPEC.md §2.1.
pub const FRAME_CHECKSUM_CRC32: &str = "crc32";

/// The `messageDigest` value of SPEC.md §5.
pub const MESSAGE_DIGEST_SHA256: &str = "sha256";

/// The transport mappings known to this crate: a binary response body, frames in SSE events
/// (SPEC.md §15), and frames in SSE comments beside plain message events (the compatible
/// mapping, §18).
pub const KNOWN_TRANSPORTS: &[&str] = &["binary", "sse", "compat"];

/// The framing contract a server declares (SPEC.md §11.1), as JSON:
///
/// ```json
/// {"versions": [1], "sentinelRequired": true, "frameChecksum": "crc32",
///  "messageDigest": "sha256", "maxFramePayload": 65536, "maxMessageSize": 16777216,
///  "transports": ["binary", "sse"]}
/// ```
///
/// Unknown fields are ignored (a later minor extension may add some); `maxFramePayload` and
/// `maxMessageSize` default to SPEC.md §6's defaults when absent; the other fields are required.
///
/// # Examples
///
/// ```
/// use mcp_framing::FramingContract;
///
/// let contract = FramingContract::v1();
/// let json = serde_json::to_value(&contract).unwrap();
/// assert_eq!(json["sentinelRequired"], true);
/// assert_eq!(serde_json::from_value::<FramingContract>(json).unwrap(), contract);
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct FramingContract {
    /// Wire format versions the server can send (SPEC.md §8).
    pub versions: Vec<u8>,
    /// Whether every response stream ends with STREAM_END or ABORT (Regime A). A contract with
    /// `false` leaves completion undecidable: the client treats it as Regime C.
    pub sentinel_required: bool,
    /// Frame checksum algorithm: `"crc32"`.
    pub frame_checksum: String,
    /// Message digest algorithm: `"sha256"`.
    pub message_digest: String,
    /// Largest frame payload the server sends or accepts (SPEC.md §6).
    #[serde(default = "default_max_frame_payload")]
    pub max_frame_payload: u32,
    /// Largest message the server sends or accepts (SPEC.md §6).
    #[serde(default = "default_max_message_size")]
    pub max_message_size: u64,
    /// Transport mappings the server supports, e.g. `["binary", "sse", "compat"]`.
    pub transports: Vec<String>,
    /// The mapping in which the server frames the response to every POST, whether the request
    /// opted in or not (SPEC.md §11.1, §18.8); only `"compat"` is defined. `None`: only requests
    /// that opt in are framed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub always_framed: Option<String>,
    /// Request-key deduplication, if the server deduplicates (SPEC.md §17.11). Clients that do
    /// not know the member ignore it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deduplication: Option<Deduplication>,
}

/// The `deduplication` member of a [`FramingContract`] (SPEC.md §17.11): which methods the server
/// deduplicates by request key, for how long, and in which scope.
///
/// ```json
/// {"methods": ["tools/call"], "windowMs": 86400000, "scope": "principal"}
/// ```
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use mcp_framing::{Deduplication, FramingContract};
///
/// let contract = FramingContract::v1().with_deduplication(Deduplication::new(Duration::from_secs(3600)));
/// let json = serde_json::to_value(&contract).unwrap();
/// assert_eq!(json["deduplication"]["windowMs"], 3_600_000);
/// assert!(contract.deduplication.unwrap().covers("tools/call"));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct Deduplication {
    /// The deduplicated JSON-RPC methods.
    pub methods: Vec<String>,
    /// How long a completed call's record is kept, in milliseconds.
    pub window_ms: u64,
    /// What a key is scoped to: `"principal"` (the caller's principal, the method and the tool).
    pub scope: String,
}

impl Deduplication {
    /// `tools/call` deduplicated for `window`, in the principal scope.
    ///
    /// # Examples
    ///
    /// See [`Deduplication`].
    #[must_use]
    pub fn new(window: std::time::Duration) -> Self {
        Self {
            methods: vec!["tools/call".to_owned()],
            window_ms: u64::try_from(window.as_millis()).unwrap_or(u64::MAX),
            scope: "principal".to_owned(),
        }
    }

    /// Whether `method` is deduplicated.
    ///
    /// # Examples
    ///
    /// See [`Deduplication`].
    #[must_use]
    pub fn covers(&self, method: &str) -> bool {
        self.methods.iter().any(|m| m == method)
    }

    /// Whether `later` still promises at least this: every method, a window at least as long,
    /// the same scope (SPEC.md §17.11).
    fn kept_by(&self, later: &Self) -> bool {
        self.methods.iter().all(|m| later.covers(m))
            && later.window_ms >= self.window_ms
            && later.scope == self.scope
    }
}

fn default_max_frame_payload() -> u32 {
    Limits::DEFAULT.max_frame_payload
}

fn default_max_message_size() -> u64 {
    Limits::DEFAULT.max_message_size
}

impl FramingContract {
    /// The contract of this crate's defaults: version 1, sentinel required, CRC-32, SHA-256,
    /// 64 KiB frames, 16 MiB messages, the binary, SSE and compatible SSE transports.
    ///
    /// # Examples
    ///
    /// See [`FramingContract`].
    #[must_use]
    pub fn v1() -> Self {
        Self {
            versions: SUPPORTED_VERSIONS.to_vec(),
            sentinel_required: true,
            frame_checksum: FRAME_CHECKSUM_CRC32.to_owned(),
            message_digest: MESSAGE_DIGEST_SHA256.to_owned(),
            max_frame_payload: Limits::DEFAULT.max_frame_payload,
            max_message_size: Limits::DEFAULT.max_message_size,
            transports: KNOWN_TRANSPORTS.iter().map(|&t| t.to_owned()).collect(),
            always_framed: None,
            deduplication: None,
        }
    }

    /// Declares request-key deduplication (SPEC.md §17.11).
    ///
    /// # Examples
    ///
    /// See [`Deduplication`].
    #[must_use]
    pub fn with_deduplication(mut self, deduplication: Deduplication) -> Self {
        self.deduplication = Some(deduplication);
        self
    }

    /// Declares that the server frames every response, opted in or not, in `mapping` (SPEC.md
    /// §18.8: `"compat"`, what `rmcp_http::FramingLayer::frame_all_responses` does), and lists
    /// it among the transports.
    ///
    /// # Examples
    ///
    /// ```
    /// let c = mcp_framing::FramingContract::v1().with_always_framed("compat");
    /// let json = serde_json::to_value(&c).unwrap();
    /// assert_eq!(json["alwaysFramed"], "compat");
    /// ```
    #[must_use]
    pub fn with_always_framed(mut self, mapping: impl Into<String>) -> Self {
        let mapping = mapping.into();
        if !self.transports.contains(&mapping) {
            self.transports.push(mapping.clone());
        }
        self.always_framed = Some(mapping);
        self
    }

    /// Sets the limits the server declares.
    ///
    /// # Examples
    ///
    /// ```
    /// let c = mcp_framing::FramingContract::v1().with_limits(16 * 1024, 1 << 20);
    /// assert_eq!((c.max_frame_payload, c.max_message_size), (16384, 1048576));
    /// ```
    #[must_use]
    pub fn with_limits(mut self, max_frame_payload: u32, max_message_size: u64) -> Self {
        self.max_frame_payload = max_frame_payload;
        self.max_message_size = max_message_size;
        self
    }

    /// Sets the transports the server declares.
    ///
    /// # Examples
    ///
    /// ```
    /// let c = mcp_framing::FramingContract::v1().with_transports(["sse"]);
    /// assert_eq!(c.transports, ["sse"]);
    /// ```
    #[must_use]
    pub fn with_transports<I, S>(mut self, transports: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.transports = transports.into_iter().map(Into::into).collect();
        self
    }

    /// Server side: writes the contract into a discovery result where clients look for it,
    /// `capabilities.experimental[EXTENSION_KEY]` of an `initialize` result or
    /// `capabilities.extensions[EXTENSION_KEY]` of a `server/discover` result, creating the
    /// objects on the way.
    ///
    /// # Errors
    ///
    /// [`ContractError::NotADiscoveryResult`] if `result` or the objects on the way are not JSON
    /// objects.
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::{DiscoverySource, FramingContract, ServerDiscovery};
    ///
    /// let mut result = serde_json::json!({"protocolVersion": "2025-06-18", "capabilities": {},
    ///                                     "serverInfo": {"name": "s", "version": "1"}});
    /// FramingContract::v1().declare_in(&mut result, DiscoverySource::Initialize)?;
    /// let discovery = ServerDiscovery::from_initialize(&result)?;
    /// assert_eq!(discovery.contract, Some(FramingContract::v1()));
    /// # Ok::<(), mcp_framing::ContractError>(())
    /// ```
    pub fn declare_in(
        &self,
        result: &mut Value,
        source: DiscoverySource,
    ) -> Result<(), ContractError> {
        let not_result = || ContractError::NotADiscoveryResult { origin: source };
        let capabilities = result
            .as_object_mut()
            .ok_or_else(not_result)?
            .entry("capabilities")
            .or_insert_with(|| Value::Object(Map::new()))
            .as_object_mut()
            .ok_or_else(not_result)?;
        let slot = capabilities
            .entry(source.capability_field())
            .or_insert_with(|| Value::Object(Map::new()))
            .as_object_mut()
            .ok_or_else(not_result)?;
        let value = serde_json::to_value(self).map_err(|err| ContractError::Malformed {
            origin: source,
            reason: err.to_string(),
        })?;
        slot.insert(EXTENSION_KEY.to_owned(), value);
        Ok(())
    }
}

/// What writing a contract into the text of a discovery response did
/// ([`FramingContract::declare_in_text`], SPEC.md §11.2).
#[cfg(feature = "rmcp")]
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum TextDeclaration {
    /// The result declared no contract: the text with this one written in.
    Written(String),
    /// The result declared this very contract (the same values): the text stays as it is.
    Unchanged,
    /// The result declared another contract, or one that does not parse (`previous`, as
    /// written): the text with this one in its place.
    Replaced {
        /// The new text.
        text: String,
        /// The contract the result declared.
        previous: String,
    },
}

#[cfg(feature = "rmcp")]
impl FramingContract {
    /// Server side: writes the contract into the text of a JSON-RPC response carrying a
    /// discovery result, where [`declare_in`](Self::declare_in) writes it, editing the text
    /// there alone: every other byte stays as the handler wrote it (SPEC.md §11.2). A contract
    /// the result declares already is kept when it has the same values, replaced otherwise.
    ///
    /// # Errors
    ///
    /// [`ContractError::NotADiscoveryResult`] if `response` is not a JSON object whose `result`
    /// is one, or a member on the way (`capabilities`, its `experimental` or `extensions`) is
    /// not an object.
    pub(crate) fn declare_in_text(
        &self,
        response: &str,
        source: DiscoverySource,
    ) -> Result<TextDeclaration, ContractError> {
        use crate::json_text::{Found, Splice, locate};
        let not_result = |_| ContractError::NotADiscoveryResult { origin: source };
        // A response with a result: an error response has none to declare anything in.
        if !matches!(
            locate(response, &["result"], "{}").map_err(not_result)?,
            Found::Value(_)
        ) {
            return Err(ContractError::NotADiscoveryResult { origin: source });
        }
        let value = serde_json::to_string(self).map_err(|err| ContractError::Malformed {
            origin: source,
            reason: err.to_string(),
        })?;
        let path = [
            "result",
            "capabilities",
            source.capability_field(),
            EXTENSION_KEY,
        ];
        match locate(response, &path, &value).map_err(not_result)? {
            Found::Missing(splice) => Ok(TextDeclaration::Written(splice.apply(response))),
            Found::Value(range) => {
                let previous = &response[range.clone()];
                if serde_json::from_str::<Self>(previous).is_ok_and(|declared| declared == *self) {
                    return Ok(TextDeclaration::Unchanged);
                }
                let previous = previous.to_owned();
                let text = Splice { range, with: value }.apply(response);
                Ok(TextDeclaration::Replaced { text, previous })
            }
        }
    }
}

/// Which discovery result a [`ServerDiscovery`] was read from.
///
/// # Examples
///
/// ```
/// use mcp_framing::DiscoverySource;
/// assert_eq!(DiscoverySource::Discover.to_string(), "server/discover result");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DiscoverySource {
    /// An `initialize` result (protocol versions 2025-*): the contract is under
    /// `capabilities.experimental`.
    Initialize,
    /// A `server/discover` result (2026-07-28 and later): the contract is under
    /// `capabilities.extensions`.
    Discover,
}

impl DiscoverySource {
    fn capability_field(self) -> &'static str {
        match self {
            Self::Initialize => "experimental",
            Self::Discover => "extensions",
        }
    }
}

impl fmt::Display for DiscoverySource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Initialize => "initialize result",
            Self::Discover => "server/discover result",
        })
    }
}

/// What one discovery resolution said about framing.
///
/// # Examples
///
/// ```
/// use mcp_framing::{DiscoveryMode, ServerDiscovery};
///
/// let result = serde_json::json!({"resultType": "complete", "supportedVersions": ["2026-07-28"],
///     "capabilities": {"tools": {}}, "ttlMs": 60000, "cacheScope": "public"});
/// let discovery = ServerDiscovery::from_discover(&result)?;
/// assert_eq!(discovery.contract, None); // no framing contract: Regime C
/// assert_eq!(discovery.mode, DiscoveryMode::Stateless);
/// # Ok::<(), mcp_framing::ContractError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ServerDiscovery {
    /// Where it was read from.
    pub source: DiscoverySource,
    /// The MCP protocol versions of the result (`protocolVersion` of an `initialize` result,
    /// `supportedVersions` of a `server/discover` result).
    pub protocol_versions: Vec<String>,
    /// The declared framing contract, if any.
    pub contract: Option<FramingContract>,
    /// Whether retries reach the same instance: [`DiscoveryMode::Sticky`] for an `initialize`
    /// result (a session), [`DiscoveryMode::Stateless`] for `server/discover`. Override with
    /// [`with_mode`](Self::with_mode) when the deployment says otherwise.
    pub mode: DiscoveryMode,
}

impl ServerDiscovery {
    /// Reads an `initialize` result (or a JSON-RPC response carrying one): the contract under
    /// `capabilities.experimental[EXTENSION_KEY]`.
    ///
    /// # Errors
    ///
    /// [`ContractError::NotADiscoveryResult`] if `capabilities` is missing or not an object;
    /// [`ContractError::Malformed`] if a contract is declared but does not parse.
    ///
    /// # Examples
    ///
    /// See the [module docs](self).
    pub fn from_initialize(result: &Value) -> Result<Self, ContractError> {
        let source = DiscoverySource::Initialize;
        let result = unwrap_response(result);
        let protocol_versions = result
            .get("protocolVersion")
            .and_then(Value::as_str)
            .map(|v| vec![v.to_owned()])
            .unwrap_or_default();
        let capabilities = capabilities(result, source)?;
        let contract = read_contract(capabilities, "experimental", source)?;
        Ok(Self {
            source,
            protocol_versions,
            contract,
            mode: DiscoveryMode::Sticky,
        })
    }

    /// Reads a `server/discover` result (or a JSON-RPC response carrying one): the contract under
    /// `capabilities.extensions[EXTENSION_KEY]`, or under `capabilities.experimental` for a
    /// server that declares it there (`extensions` wins when both are present).
    ///
    /// # Errors
    ///
    /// As [`from_initialize`](Self::from_initialize).
    ///
    /// # Examples
    ///
    /// See [`ServerDiscovery`].
    pub fn from_discover(result: &Value) -> Result<Self, ContractError> {
        let source = DiscoverySource::Discover;
        let result = unwrap_response(result);
        let protocol_versions = result
            .get("supportedVersions")
            .and_then(Value::as_array)
            .map(|versions| {
                versions
                    .iter()
                    .filter_map(|v| v.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default();
        let capabilities = capabilities(result, source)?;
        let contract = match read_contract(capabilities, "extensions", source)? {
            Some(contract) => Some(contract),
            None => read_contract(capabilities, "experimental", source)?,
        };
        Ok(Self {
            source,
            protocol_versions,
            contract,
            mode: DiscoveryMode::Stateless,
        })
    }

    /// Overrides the discovery mode.
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::{DiscoveryMode, ServerDiscovery};
    /// let result = serde_json::json!({"protocolVersion": "2025-06-18", "capabilities": {}});
    /// let d = ServerDiscovery::from_initialize(&result)?.with_mode(DiscoveryMode::Stateless);
    /// assert_eq!(d.mode, DiscoveryMode::Stateless);
    /// # Ok::<(), mcp_framing::ContractError>(())
    /// ```
    #[must_use]
    pub fn with_mode(mut self, mode: DiscoveryMode) -> Self {
        self.mode = mode;
        self
    }
}

/// Accepts a bare result or a whole JSON-RPC response `{"jsonrpc": "2.0", "id": .., "result": ..}`.
fn unwrap_response(value: &Value) -> &Value {
    match value.get("result") {
        Some(result) if value.get("jsonrpc").is_some() => result,
        _ => value,
    }
}

fn capabilities(
    result: &Value,
    source: DiscoverySource,
) -> Result<&Map<String, Value>, ContractError> {
    result
        .get("capabilities")
        .and_then(Value::as_object)
        .ok_or(ContractError::NotADiscoveryResult { origin: source })
}

fn read_contract(
    capabilities: &Map<String, Value>,
    field: &str,
    source: DiscoverySource,
) -> Result<Option<FramingContract>, ContractError> {
    let Some(raw) = capabilities
        .get(field)
        .and_then(|map| map.get(EXTENSION_KEY))
    else {
        return Ok(None);
    };
    FramingContract::deserialize(raw)
        .map(Some)
        .map_err(|err| ContractError::Malformed {
            origin: source,
            reason: err.to_string(),
        })
}

/// What a framed policy negotiated with the server (SPEC.md §11.3).
///
/// # Examples
///
/// ```
/// use mcp_framing::{ClientPolicy, FramingContract, ServerDiscovery, DiscoverySource};
///
/// let mut result = serde_json::json!({"protocolVersion": "2025-06-18", "capabilities": {}});
/// FramingContract::v1().with_limits(16384, 1 << 30).declare_in(&mut result, DiscoverySource::Initialize)?;
/// let policy = ClientPolicy::new(&ServerDiscovery::from_initialize(&result)?)?;
/// let n = policy.negotiated().unwrap();
/// assert_eq!((n.version, n.max_frame_payload, n.max_message_size), (1, 16384, 16 << 20));
/// # Ok::<(), mcp_framing::ContractError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Negotiated {
    /// The highest version both sides support.
    pub version: u8,
    /// The smaller of the client's and the server's frame payload limits.
    pub max_frame_payload: u32,
    /// The smaller of the client's and the server's message size limits.
    pub max_message_size: u64,
    /// The transports both sides support, in the client's order of preference.
    pub transports: Vec<String>,
    /// The server's request-key deduplication (SPEC.md §17.11), if it declared it.
    pub deduplication: Option<Deduplication>,
}

/// Builds a [`ClientPolicy`] with the client's own versions, limits, transports and whether it
/// accepts ambiguity.
///
/// # Examples
///
/// ```
/// use mcp_framing::{ClientPolicy, ContractError, ServerDiscovery};
///
/// let no_contract = serde_json::json!({"protocolVersion": "2025-06-18", "capabilities": {}});
/// let discovery = ServerDiscovery::from_initialize(&no_contract)?;
/// assert!(matches!(ClientPolicy::new(&discovery), Err(ContractError::NoContract { .. })));
///
/// // Only an explicit opt-in runs in Regime C, where every close is ambiguous:
/// let policy = ClientPolicy::builder().accept_ambiguity(true).build(&discovery)?;
/// assert!(policy.decoder(mcp_framing::RequestKey::random()).is_none());
/// # Ok::<(), ContractError>(())
/// ```
#[derive(Clone, Debug)]
pub struct PolicyBuilder {
    versions: Vec<u8>,
    limits: Limits,
    transports: Vec<String>,
    accept_ambiguity: bool,
}

impl Default for PolicyBuilder {
    fn default() -> Self {
        Self {
            versions: SUPPORTED_VERSIONS.to_vec(),
            limits: Limits::DEFAULT,
            transports: KNOWN_TRANSPORTS.iter().map(|&t| t.to_owned()).collect(),
            accept_ambiguity: false,
        }
    }
}

impl PolicyBuilder {
    /// The format versions the client accepts. Default: [`SUPPORTED_VERSIONS`] (`[1]`).
    ///
    /// # Examples
    ///
    /// ```
    /// let b = mcp_framing::ClientPolicy::builder().versions([1]);
    /// # let _ = b;
    /// ```
    #[must_use]
    pub fn versions(mut self, versions: impl IntoIterator<Item = u8>) -> Self {
        self.versions = versions.into_iter().collect();
        self
    }

    // The client's own limits: negotiation takes the smaller of these and the server's declared
    // frame and message limits (SPEC.md §11.3), and every decoder the policy builds enforces the
    // result with the client's per-stream bounds.
    crate::limits::limit_setters!(limits, "mcp_framing::ClientPolicy::builder()");

    /// The transports the client can read, in order of preference. Default `["binary", "sse",
    /// "compat"]` ([`KNOWN_TRANSPORTS`]).
    ///
    /// # Examples
    ///
    /// ```
    /// let b = mcp_framing::ClientPolicy::builder().transports(["sse"]);
    /// # let _ = b;
    /// ```
    #[must_use]
    pub fn transports<I, S>(mut self, transports: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.transports = transports.into_iter().map(Into::into).collect();
        self
    }

    /// Explicitly accept Regime C (default `false`): with a server that declares no contract, or
    /// one that does not mandate the sentinel, the policy is built anyway, requests are sent
    /// unframed, and every close is [`Verdict::Ambiguous`](crate::Verdict::Ambiguous)
    /// ([`ClientPolicy::unframed_close`]). Without this, such a server is a configuration error.
    ///
    /// # Examples
    ///
    /// See [`PolicyBuilder`].
    #[must_use]
    pub fn accept_ambiguity(mut self, accept: bool) -> Self {
        self.accept_ambiguity = accept;
        self
    }

    /// Negotiates with the server's declaration (SPEC.md §11.3).
    ///
    /// # Errors
    ///
    /// - [`ContractError::NoContract`] / [`ContractError::SentinelNotRequired`]: Regime C, unless
    ///   ambiguity is accepted;
    /// - [`ContractError::UnsupportedChecksum`], [`ContractError::UnsupportedDigest`],
    ///   [`ContractError::VersionMismatch`], [`ContractError::NoCommonTransport`],
    ///   [`ContractError::InvalidLimit`]: no common ground.
    ///
    /// # Examples
    ///
    /// See [`PolicyBuilder`].
    pub fn build(&self, discovery: &ServerDiscovery) -> Result<ClientPolicy, ContractError> {
        let framing = match &discovery.contract {
            None if self.accept_ambiguity => None,
            None => {
                return Err(ContractError::NoContract {
                    origin: discovery.source,
                });
            }
            Some(contract) if !contract.sentinel_required && self.accept_ambiguity => None,
            Some(contract) if !contract.sentinel_required => {
                return Err(ContractError::SentinelNotRequired {
                    origin: discovery.source,
                });
            }
            Some(contract) => Some(self.negotiate(contract)?),
        };
        Ok(ClientPolicy {
            mode: discovery.mode,
            limits: self.limits,
            framing,
        })
    }

    fn negotiate(&self, server: &FramingContract) -> Result<Negotiated, ContractError> {
        check_algorithms(server)?;
        let version = self
            .versions
            .iter()
            .filter(|v| server.versions.contains(v) && SUPPORTED_VERSIONS.contains(v))
            .max()
            .copied()
            .ok_or_else(|| ContractError::VersionMismatch {
                client: self.versions.clone(),
                server: server.versions.clone(),
            })?;
        if server.max_frame_payload < MIN_MAX_FRAME_PAYLOAD {
            return Err(ContractError::InvalidLimit {
                max_frame_payload: server.max_frame_payload,
            });
        }
        let transports: Vec<String> = self
            .transports
            .iter()
            .filter(|t| server.transports.contains(t))
            .cloned()
            .collect();
        if transports.is_empty() {
            return Err(ContractError::NoCommonTransport {
                client: self.transports.clone(),
                server: server.transports.clone(),
            });
        }
        Ok(Negotiated {
            version,
            max_frame_payload: self.limits.max_frame_payload.min(server.max_frame_payload),
            max_message_size: self.limits.max_message_size.min(server.max_message_size),
            transports,
            deduplication: server.deduplication.clone(),
        })
    }
}

fn check_algorithms(contract: &FramingContract) -> Result<(), ContractError> {
    if contract.frame_checksum != FRAME_CHECKSUM_CRC32 {
        return Err(ContractError::UnsupportedChecksum {
            found: contract.frame_checksum.clone(),
        });
    }
    if contract.message_digest != MESSAGE_DIGEST_SHA256 {
        return Err(ContractError::UnsupportedDigest {
            found: contract.message_digest.clone(),
        });
    }
    Ok(())
}

/// The client's framing policy for one server, built from resolved discovery metadata.
///
/// A framed policy (Regime A and B) builds the decoder for each request
/// ([`decoder`](Self::decoder)) and checks every later resolution ([`recheck`](Self::recheck)).
/// An accept-ambiguity policy (Regime C, only by explicit opt-in) frames nothing, and every close
/// is ambiguous ([`unframed_close`](Self::unframed_close)).
///
/// # Examples
///
/// ```
/// use mcp_framing::{ClientPolicy, FramingContract, Regime, ServerDiscovery, DiscoverySource};
///
/// let mut result = serde_json::json!({"resultType": "complete", "supportedVersions": ["2026-07-28"],
///     "capabilities": {}, "ttlMs": 0, "cacheScope": "private"});
/// FramingContract::v1().declare_in(&mut result, DiscoverySource::Discover)?;
/// let policy = ClientPolicy::new(&ServerDiscovery::from_discover(&result)?)?;
/// assert_eq!(policy.regime(), Regime::A);
/// assert_eq!(policy.framing_header_value().as_deref(), Some("1"));
/// # Ok::<(), mcp_framing::ContractError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientPolicy {
    mode: DiscoveryMode,
    /// The client's own limits (the frame and message limits are replaced by the negotiated
    /// ones in every decoder).
    limits: Limits,
    framing: Option<Negotiated>,
}

impl ClientPolicy {
    /// A policy with the client defaults ([`PolicyBuilder`]), failing on Regime C.
    ///
    /// # Errors
    ///
    /// As [`PolicyBuilder::build`].
    ///
    /// # Examples
    ///
    /// See [`ClientPolicy`].
    pub fn new(discovery: &ServerDiscovery) -> Result<Self, ContractError> {
        Self::builder().build(discovery)
    }

    /// A builder for non-default client versions, limits, transports or accepting ambiguity.
    ///
    /// # Examples
    ///
    /// See [`PolicyBuilder`].
    #[must_use]
    pub fn builder() -> PolicyBuilder {
        PolicyBuilder::default()
    }

    /// [`Regime::A`] for a framed policy (the sentinel is mandated; framed streams are also
    /// self-delimiting, Regime B), [`Regime::C`] for an accept-ambiguity one.
    ///
    /// # Examples
    ///
    /// See [`ClientPolicy`].
    #[must_use]
    pub fn regime(&self) -> Regime {
        if self.framing.is_some() {
            Regime::A
        } else {
            Regime::C
        }
    }

    /// What was negotiated (`None` for an accept-ambiguity policy).
    ///
    /// # Examples
    ///
    /// See [`Negotiated`].
    #[must_use]
    pub fn negotiated(&self) -> Option<&Negotiated> {
        self.framing.as_ref()
    }

    /// The discovery mode the policy was built under.
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::{ClientPolicy, DiscoveryMode, ServerDiscovery};
    /// let result = serde_json::json!({"protocolVersion": "2025-06-18", "capabilities": {}});
    /// let discovery = ServerDiscovery::from_initialize(&result)?;
    /// let policy = ClientPolicy::builder().accept_ambiguity(true).build(&discovery)?;
    /// assert_eq!(policy.discovery_mode(), DiscoveryMode::Sticky);
    /// # Ok::<(), mcp_framing::ContractError>(())
    /// ```
    #[must_use]
    pub fn discovery_mode(&self) -> DiscoveryMode {
        self.mode
    }

    /// The value of the [`FRAMING_HEADER`](crate::FRAMING_HEADER) request header that opts in to
    /// framing: the negotiated version. `None` for an accept-ambiguity policy (send no header).
    ///
    /// # Examples
    ///
    /// See [`ClientPolicy`].
    #[must_use]
    pub fn framing_header_value(&self) -> Option<String> {
        self.negotiated().map(|n| n.version.to_string())
    }

    /// The decoder for one attempt of the request that carries `key`: the negotiated limits, and
    /// the request key the stream head must echo (another key is a cross-wired response).
    /// `None` for an accept-ambiguity policy: the response is unframed.
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::{ClientPolicy, FramingContract, RequestKey, ServerDiscovery,
    ///                   DiscoverySource, StreamEncoder, StreamHead, Verdict};
    ///
    /// let mut result = serde_json::json!({"protocolVersion": "2025-06-18", "capabilities": {}});
    /// FramingContract::v1().declare_in(&mut result, DiscoverySource::Initialize)?;
    /// let policy = ClientPolicy::new(&ServerDiscovery::from_initialize(&result)?)?;
    ///
    /// // The server answered another request's stream:
    /// let mut enc = StreamEncoder::new(StreamHead::for_request(Some(RequestKey::random())));
    /// let mut body = bytes::BytesMut::new();
    /// enc.end(&mut body).unwrap();
    /// let mut decoder = policy.decoder(RequestKey::random()).unwrap();
    /// assert!(decoder.decode_eof(&mut body).is_err());
    /// assert!(matches!(decoder.outcome().verdict, Verdict::CrossWired { .. }));
    /// # Ok::<(), mcp_framing::ContractError>(())
    /// ```
    #[must_use]
    pub fn decoder(&self, key: RequestKey) -> Option<StreamDecoder> {
        self.negotiated()?;
        Some(
            StreamDecoder::builder()
                .limits(self.decoder_limits())
                .expect_request_key(key)
                .build(),
        )
    }

    /// The limits every response is decoded with: the negotiated frame and message limits with
    /// the client's own per-stream bounds; the client's own limits for an accept-ambiguity
    /// policy (a server without a contract that frames anyway is held to them).
    pub(crate) fn decoder_limits(&self) -> Limits {
        match self.negotiated() {
            Some(n) => self
                .limits
                .max_frame_payload(n.max_frame_payload)
                .max_message_size(n.max_message_size),
            None => self.limits,
        }
    }

    /// The outcome of an unframed response body that closed after `bytes_received` bytes:
    /// always [`Verdict::Ambiguous`](crate::Verdict::Ambiguous) (Regime C), naming this policy's
    /// discovery mode. Under a framed policy, pass every body through [`decoder`](Self::decoder)
    /// instead: an unframed body then is a contract violation.
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::{ClientPolicy, ServerDiscovery, Verdict};
    /// let result = serde_json::json!({"resultType": "complete", "supportedVersions": ["2026-07-28"],
    ///     "capabilities": {}, "ttlMs": 0, "cacheScope": "private"});
    /// let discovery = ServerDiscovery::from_discover(&result)?;
    /// let policy = ClientPolicy::builder().accept_ambiguity(true).build(&discovery)?;
    /// let Verdict::Ambiguous(err) = policy.unframed_close(42).verdict else { panic!() };
    /// assert!(err.to_string().contains("stateless per-request discovery"));
    /// # Ok::<(), mcp_framing::ContractError>(())
    /// ```
    #[must_use]
    pub fn unframed_close(&self, bytes_received: u64) -> Outcome {
        Outcome::unframed_close(self.mode, bytes_received)
    }

    /// Checks a later resolution of the same server against this policy (SPEC.md §11.5). Call it
    /// on every re-resolution (per request under stateless discovery) before sending.
    ///
    /// # Errors
    ///
    /// [`ContractError::Downgrade`] if the policy is framed and the resolution dropped the
    /// contract, stopped mandating the sentinel, dropped the negotiated version, changed the
    /// checksum or digest, or shares no negotiated transport any more. An accept-ambiguity policy
    /// accepts any resolution (it already assumes the worst).
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::{ClientPolicy, ContractChange, ContractError, FramingContract,
    ///                   ServerDiscovery, DiscoverySource};
    ///
    /// let mut result = serde_json::json!({"protocolVersion": "2025-06-18", "capabilities": {}});
    /// FramingContract::v1().declare_in(&mut result, DiscoverySource::Initialize)?;
    /// let policy = ClientPolicy::new(&ServerDiscovery::from_initialize(&result)?)?;
    ///
    /// // An old instance behind the autoscaler, without framing:
    /// let old = serde_json::json!({"protocolVersion": "2025-06-18", "capabilities": {}});
    /// let err = policy.recheck(&ServerDiscovery::from_initialize(&old)?).unwrap_err();
    /// assert!(matches!(err, ContractError::Downgrade { change: ContractChange::ContractDropped, .. }));
    /// # Ok::<(), ContractError>(())
    /// ```
    pub fn recheck(&self, discovery: &ServerDiscovery) -> Result<(), ContractError> {
        let Some(negotiated) = &self.framing else {
            return Ok(());
        };
        let downgrade = |change| ContractError::Downgrade {
            origin: discovery.source,
            change,
        };
        let Some(contract) = &discovery.contract else {
            return Err(downgrade(ContractChange::ContractDropped));
        };
        if !contract.sentinel_required {
            return Err(downgrade(ContractChange::SentinelNotRequired));
        }
        if contract.frame_checksum != FRAME_CHECKSUM_CRC32 {
            return Err(downgrade(ContractChange::ChecksumChanged {
                found: contract.frame_checksum.clone(),
            }));
        }
        if contract.message_digest != MESSAGE_DIGEST_SHA256 {
            return Err(downgrade(ContractChange::DigestChanged {
                found: contract.message_digest.clone(),
            }));
        }
        let version = negotiated.version;
        if !contract.versions.contains(&version) {
            return Err(downgrade(ContractChange::VersionDropped { version }));
        }
        let transports = &negotiated.transports;
        if !transports.iter().any(|t| contract.transports.contains(t)) {
            return Err(downgrade(ContractChange::TransportsDropped {
                negotiated: transports.clone(),
            }));
        }
        if let Some(promised) = &negotiated.deduplication {
            // SPEC.md §17.11: retries rely on it, so losing it is a downgrade.
            if !contract
                .deduplication
                .as_ref()
                .is_some_and(|later| promised.kept_by(later))
            {
                return Err(downgrade(ContractChange::DeduplicationWeakened));
            }
        }
        Ok(())
    }

    /// Whether the server declared request-key deduplication for `method` (SPEC.md §17.11):
    /// what makes a keyed retry of a non-idempotent request safe
    /// ([`RetryPolicy::for_method`](crate::RetryPolicy::for_method)).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use mcp_framing::{ClientPolicy, Deduplication, DiscoverySource, FramingContract, ServerDiscovery};
    ///
    /// let mut result = serde_json::json!({"protocolVersion": "2025-06-18", "capabilities": {}});
    /// FramingContract::v1()
    ///     .with_deduplication(Deduplication::new(Duration::from_secs(86400)))
    ///     .declare_in(&mut result, DiscoverySource::Initialize)?;
    /// let policy = ClientPolicy::new(&ServerDiscovery::from_initialize(&result)?)?;
    /// assert!(policy.deduplicates("tools/call"));
    /// assert!(!policy.deduplicates("resources/read"));
    /// # Ok::<(), mcp_framing::ContractError>(())
    /// ```
    #[must_use]
    pub fn deduplicates(&self, method: &str) -> bool {
        self.framing
            .as_ref()
            .and_then(|n| n.deduplication.as_ref())
            .is_some_and(|d| d.covers(method))
    }
}

impl ContractError {
    /// The variant's stable name (the `kind` of a client's outcome report, SPEC.md §11.7):
    /// `NotADiscoveryResult`, `Malformed`, `NoContract`, `SentinelNotRequired`,
    /// `VersionMismatch`, `UnsupportedChecksum`, `UnsupportedDigest`, `NoCommonTransport`,
    /// `InvalidLimit` or `Downgrade`.
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::{ContractError, DiscoverySource};
    /// assert_eq!(ContractError::NoContract { origin: DiscoverySource::Initialize }.kind(), "NoContract");
    /// ```
    #[must_use]
    pub fn kind(&self) -> &'static str {
        match self {
            Self::NotADiscoveryResult { .. } => "NotADiscoveryResult",
            Self::Malformed { .. } => "Malformed",
            Self::NoContract { .. } => "NoContract",
            Self::SentinelNotRequired { .. } => "SentinelNotRequired",
            Self::VersionMismatch { .. } => "VersionMismatch",
            Self::UnsupportedChecksum { .. } => "UnsupportedChecksum",
            Self::UnsupportedDigest { .. } => "UnsupportedDigest",
            Self::NoCommonTransport { .. } => "NoCommonTransport",
            Self::InvalidLimit { .. } => "InvalidLimit",
            Self::Downgrade { .. } => "Downgrade",
        }
    }
}

/// How a later resolution weakened the contract a policy was built on (SPEC.md §11.5).
///
/// # Examples
///
/// ```
/// use mcp_framing::ContractChange;
/// assert_eq!(ContractChange::VersionDropped { version: 1 }.to_string(),
///            "the negotiated format version 1 is no longer offered");
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ContractChange {
    /// The resolution declares no contract (e.g. an old instance without framing).
    ContractDropped,
    /// The contract no longer mandates the sentinel.
    SentinelNotRequired,
    /// The negotiated format version is no longer offered.
    VersionDropped {
        /// The negotiated version.
        version: u8,
    },
    /// The frame checksum is no longer `crc32`.
    ChecksumChanged {
        /// The checksum now declared.
        found: String,
    },
    /// The message digest is no longer `sha256`.
    DigestChanged {
        /// The digest now declared.
        found: String,
    },
    /// None of the negotiated transports is offered any more.
    TransportsDropped {
        /// The negotiated transports.
        negotiated: Vec<String>,
    },
    /// Request-key deduplication is no longer declared, or covers fewer methods, a shorter
    /// window or another scope (SPEC.md §17.11).
    DeduplicationWeakened,
}

impl fmt::Display for ContractChange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::ContractDropped => f.write_str("the framing contract is no longer declared"),
            Self::SentinelNotRequired => {
                f.write_str("the contract no longer requires the sentinel")
            }
            Self::VersionDropped { version } => {
                write!(
                    f,
                    "the negotiated format version {version} is no longer offered"
                )
            }
            Self::ChecksumChanged { found } => {
                write!(f, "the frame checksum changed from crc32 to {found:?}")
            }
            Self::DigestChanged { found } => {
                write!(f, "the message digest changed from sha256 to {found:?}")
            }
            Self::TransportsDropped { negotiated } => {
                write!(
                    f,
                    "none of the negotiated transports {negotiated:?} is offered any more"
                )
            }
            Self::DeduplicationWeakened => {
                f.write_str("request-key deduplication is no longer declared as negotiated")
            }
        }
    }
}

/// Errors of the contract layer: reading discovery, negotiating, and re-checking it.
///
/// # Examples
///
/// ```
/// use mcp_framing::{ContractError, DiscoverySource};
/// let err = ContractError::NoContract { origin: DiscoverySource::Discover };
/// assert!(err.to_string().contains("Regime C"));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ContractError {
    /// The value has no `capabilities` object.
    #[error("not an MCP {origin}: no capabilities object")]
    NotADiscoveryResult {
        /// What was expected.
        origin: DiscoverySource,
    },
    /// A contract is declared under the extension key but does not parse.
    #[error("malformed framing contract under \"{EXTENSION_KEY}\" in the {origin}: {reason}")]
    Malformed {
        /// The discovery result it was found in.
        origin: DiscoverySource,
        /// The parse error.
        reason: String,
    },
    /// The server declares no framing contract: completion would be ambiguous (Regime C).
    #[error(
        "configuration error: the {origin} declares no framing contract under \"{EXTENSION_KEY}\", \
         so a clean end and an abandoned response stream would be indistinguishable (Regime C); \
         enable framing on the server, or opt in with accept_ambiguity(true) to fail every close \
         as ambiguous"
    )]
    NoContract {
        /// The discovery result it was found in.
        origin: DiscoverySource,
    },
    /// The server's contract does not mandate the sentinel: completion would be ambiguous.
    #[error(
        "configuration error: the framing contract in the {origin} has sentinelRequired false, \
         so a clean end and an abandoned response stream would be indistinguishable (Regime C); \
         require the sentinel on the server, or opt in with accept_ambiguity(true)"
    )]
    SentinelNotRequired {
        /// The discovery result it was found in.
        origin: DiscoverySource,
    },
    /// No format version both sides support.
    #[error("framing version mismatch: client accepts {client:?}, server offers {server:?}")]
    VersionMismatch {
        /// The client's versions.
        client: Vec<u8>,
        /// The server's versions.
        server: Vec<u8>,
    },
    /// The server's frame checksum is not `crc32`.
    #[error("unsupported frame checksum {found:?} (expected \"crc32\")")]
    UnsupportedChecksum {
        /// The declared checksum.
        found: String,
    },
    /// The server's message digest is not `sha256`.
    #[error("unsupported message digest {found:?} (expected \"sha256\")")]
    UnsupportedDigest {
        /// The declared digest.
        found: String,
    },
    /// No transport mapping both sides support.
    #[error("no common framing transport: client reads {client:?}, server offers {server:?}")]
    NoCommonTransport {
        /// The client's transports.
        client: Vec<String>,
        /// The server's transports.
        server: Vec<String>,
    },
    /// The server declares a frame limit too small for the control frames.
    #[error("declared maxFramePayload {max_frame_payload} is below the minimum of 1026 bytes")]
    InvalidLimit {
        /// The declared limit.
        max_frame_payload: u32,
    },
    /// A later resolution weakened the established contract: failing closed.
    #[error(
        "framing downgrade detected in a {origin}: {change}; failing closed instead of falling into Regime C"
    )]
    Downgrade {
        /// The discovery result it was found in.
        origin: DiscoverySource,
        /// What changed.
        change: ContractChange,
    },
}

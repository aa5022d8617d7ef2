//! What a server declares (SPEC.md §11.1, §11.2, §17.11): the [`FramingContract`] and its
//! `deduplication` member, and writing them into a discovery result.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::error::ContractError;
use super::source::{DiscoverySource, EXTENSION_KEY};
use crate::frame::VERSION;
use crate::limits::Limits;

/// The wire format versions this crate implements (SPEC.md §8).
pub const SUPPORTED_VERSIONS: &[u8] = &[VERSION];

/// The `frameChecksum` value of SPEC.md §2.1.
pub(crate) const FRAME_CHECKSUM_CRC32: &str = "crc32";

/// The `messageDigest` value of SPEC.md §5.
pub(crate) const MESSAGE_DIGEST_SHA256: &str = "sha256";

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
/// A server builds one with [`v1`](Self::v1) and the `with_*` setters, and reads one as its JSON
/// (`serde`), the form it is declared in; its fields are the client policy's.
///
/// # Examples
///
/// ```
/// use mcp_framing::contract::FramingContract;
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
    #[doc(hidden)] // set with the builders, read as JSON (serde); the client policy reads it
    pub versions: Vec<u8>,
    /// Whether every response stream ends with STREAM_END or ABORT (Regime A). A contract with
    /// `false` leaves completion undecidable: the client treats it as Regime C.
    #[doc(hidden)] // set with the builders, read as JSON (serde); the client policy reads it
    pub sentinel_required: bool,
    /// Frame checksum algorithm: `"crc32"`.
    #[doc(hidden)] // set with the builders, read as JSON (serde); the client policy reads it
    pub frame_checksum: String,
    /// Message digest algorithm: `"sha256"`.
    #[doc(hidden)] // set with the builders, read as JSON (serde); the client policy reads it
    pub message_digest: String,
    /// Largest frame payload the server sends or accepts (SPEC.md §6).
    #[serde(default = "default_max_frame_payload")]
    #[doc(hidden)] // set with the builders, read as JSON (serde); the client policy reads it
    pub max_frame_payload: u32,
    /// Largest message the server sends or accepts (SPEC.md §6).
    #[serde(default = "default_max_message_size")]
    #[doc(hidden)] // set with the builders, read as JSON (serde); the client policy reads it
    pub max_message_size: u64,
    /// Transport mappings the server supports, e.g. `["binary", "sse", "compat"]`.
    #[doc(hidden)] // set with the builders, read as JSON (serde); the client policy reads it
    pub transports: Vec<String>,
    /// The mapping in which the server frames the response to every POST, whether the request
    /// opted in or not (SPEC.md §11.1, §18.8); only `"compat"` is defined. `None`: only requests
    /// that opt in are framed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[doc(hidden)] // set with the builders, read as JSON (serde); the client policy reads it
    pub always_framed: Option<String>,
    /// Request-key deduplication, if the server deduplicates (SPEC.md §17.11). Clients that do
    /// not know the member ignore it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[doc(hidden)] // set with the builders, read as JSON (serde); the client policy reads it
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
/// use mcp_framing::contract::{Deduplication, FramingContract};
///
/// let contract = FramingContract::v1().with_deduplication(Deduplication::new(Duration::from_secs(3600)));
/// let json = serde_json::to_value(&contract).unwrap();
/// assert_eq!(json["deduplication"]["windowMs"], 3_600_000);
/// assert_eq!(json["deduplication"]["methods"], serde_json::json!(["tools/call"]));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct Deduplication {
    /// The deduplicated JSON-RPC methods.
    #[doc(hidden)] // set with `new`, read as JSON (serde); the client policy reads it
    pub methods: Vec<String>,
    /// How long a completed call's record is kept, in milliseconds.
    #[doc(hidden)] // set with `new`, read as JSON (serde); the client policy reads it
    pub window_ms: u64,
    /// What a key is scoped to: `"principal"` (the caller's principal, the method and the tool).
    #[doc(hidden)] // set with `new`, read as JSON (serde); the client policy reads it
    pub scope: String,
}

impl Deduplication {
    /// `tools/call` deduplicated for `window`, in the principal scope.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use mcp_framing::contract::Deduplication;
    ///
    /// let one_day = Deduplication::new(Duration::from_secs(24 * 3600));
    /// let json = serde_json::to_value(&one_day).unwrap();
    /// assert_eq!(
    ///     json,
    ///     serde_json::json!({"methods": ["tools/call"], "windowMs": 86_400_000, "scope": "principal"})
    /// );
    /// ```
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
    // Hidden: the client's question (is this method deduplicated?), asked by the engine.
    #[doc(hidden)]
    #[must_use]
    pub fn covers(&self, method: &str) -> bool {
        self.methods.iter().any(|m| m == method)
    }

    /// Whether `later` still promises at least this: every method, a window at least as long,
    /// the same scope (SPEC.md §17.11).
    pub(super) fn kept_by(&self, later: &Self) -> bool {
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
    /// ```
    /// use mcp_framing::contract::FramingContract;
    ///
    /// let json = serde_json::to_value(FramingContract::v1()).unwrap();
    /// assert_eq!(json["versions"], serde_json::json!([1]));
    /// assert_eq!((json["frameChecksum"].as_str(), json["messageDigest"].as_str()), (Some("crc32"), Some("sha256")));
    /// assert_eq!(json["maxFramePayload"], 65536);
    /// assert_eq!(json["transports"], serde_json::json!(["binary", "sse", "compat"]));
    /// assert!(json.get("deduplication").is_none()); // not declared unless asked for
    /// ```
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
    /// ```
    /// use std::time::Duration;
    /// use mcp_framing::contract::{Deduplication, FramingContract};
    ///
    /// let plain = FramingContract::v1();
    /// let deduplicating = plain.clone().with_deduplication(Deduplication::new(Duration::from_secs(600)));
    /// assert_ne!(deduplicating, plain);
    /// let json = serde_json::to_value(&deduplicating).unwrap();
    /// assert_eq!(json["deduplication"]["windowMs"], 600_000);
    /// assert_eq!(json["deduplication"]["scope"], "principal");
    /// ```
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
    /// let c = mcp_framing::contract::FramingContract::v1().with_always_framed("compat");
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
    /// let c = mcp_framing::contract::FramingContract::v1().with_limits(16 * 1024, 1 << 20);
    /// let json = serde_json::to_value(&c).unwrap(); // what clients read in discovery
    /// assert_eq!((json["maxFramePayload"].as_u64(), json["maxMessageSize"].as_u64()), (Some(16384), Some(1048576)));
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
    /// let c = mcp_framing::contract::FramingContract::v1().with_transports(["sse"]);
    /// let json = serde_json::to_value(&c).unwrap(); // what clients read in discovery
    /// assert_eq!(json["transports"], serde_json::json!(["sse"]));
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
    /// use mcp_framing::contract::{ContractError, DiscoverySource, FramingContract};
    ///
    /// let mut result = serde_json::json!({"protocolVersion": "2025-06-18", "capabilities": {},
    ///                                     "serverInfo": {"name": "s", "version": "1"}});
    /// FramingContract::v1().declare_in(&mut result, DiscoverySource::Initialize)?;
    /// let declared = &result["capabilities"]["experimental"]["io.github.mcp-framing/framing"];
    /// assert_eq!(serde_json::from_value::<FramingContract>(declared.clone()).unwrap(), FramingContract::v1());
    ///
    /// // A result that is not a JSON object cannot carry a contract.
    /// let err = FramingContract::v1().declare_in(&mut serde_json::json!([]), DiscoverySource::Initialize);
    /// assert!(matches!(err, Err(ContractError::NotADiscoveryResult { .. })));
    /// # Ok::<(), ContractError>(())
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
#[cfg(feature = "rmcp-server")]
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

#[cfg(feature = "rmcp-server")]
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

//! The client's framing policy for one server (SPEC.md §11.3–§11.5): Regime C refused unless
//! ambiguity is accepted, the decoder of each attempt, every later resolution re-checked.

use super::declaration::{KNOWN_TRANSPORTS, SUPPORTED_VERSIONS};
use super::discovery::ServerDiscovery;
use super::error::ContractError;
use super::negotiation::Negotiated;
use crate::decoder::StreamDecoder;
use crate::ids::RequestKey;
use crate::limits::Limits;
use crate::outcome::{DiscoveryMode, Regime};

/// Builds a [`ClientPolicy`] with the client's own versions, limits, transports and whether it
/// accepts ambiguity.
///
/// # Examples
///
/// ```
/// use mcp_framing::internals::contract::{ClientPolicy, ServerDiscovery};
/// use mcp_framing::contract::ContractError;
///
/// let no_contract = serde_json::json!({"protocolVersion": "2025-06-18", "capabilities": {}});
/// let discovery = ServerDiscovery::from_initialize(&no_contract)?;
/// assert!(matches!(ClientPolicy::builder().build(&discovery), Err(ContractError::NoContract { .. })));
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
    /// let b = mcp_framing::internals::contract::ClientPolicy::builder().versions([1]);
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
    crate::limits::limit_setters!(limits, "mcp_framing::internals::contract::ClientPolicy::builder()");

    /// The transports the client can read, in order of preference. Default `["binary", "sse",
    /// "compat"]` ([`KNOWN_TRANSPORTS`]).
    ///
    /// # Examples
    ///
    /// ```
    /// let b = mcp_framing::internals::contract::ClientPolicy::builder().transports(["sse"]);
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
    /// unframed, and every close is [`Verdict::Ambiguous`](crate::outcome::Verdict::Ambiguous)
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
            Some(contract) => Some(Negotiated::with(
                &self.versions,
                &self.transports,
                self.limits,
                contract,
            )?),
        };
        Ok(ClientPolicy {
            mode: discovery.mode,
            limits: self.limits,
            framing,
        })
    }
}

/// The client's framing policy for one server, built from resolved discovery metadata.
///
/// A framed policy (Regime A and B) builds the decoder for each request
/// ([`decoder`](Self::decoder)) and checks every later resolution ([`recheck`](Self::recheck)).
/// An accept-ambiguity policy (Regime C, only by explicit opt-in) frames nothing, and every close
/// is ambiguous ([`Outcome::unframed_close`](crate::outcome::Outcome::unframed_close)).
///
/// # Examples
///
/// ```
/// use mcp_framing::{internals::contract::{ClientPolicy, ServerDiscovery}, contract::{DiscoverySource, FramingContract}, outcome::Regime};
///
/// let mut result = serde_json::json!({"resultType": "complete", "supportedVersions": ["2026-07-28"],
///     "capabilities": {}, "ttlMs": 0, "cacheScope": "private"});
/// FramingContract::v1().declare_in(&mut result, DiscoverySource::Discover)?;
/// let policy = ClientPolicy::builder().build(&ServerDiscovery::from_discover(&result)?)?;
/// assert_eq!(policy.regime(), Regime::A);
/// assert_eq!(policy.framing_header_value().as_deref(), Some("1"));
/// # Ok::<(), mcp_framing::contract::ContractError>(())
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
    /// The builder of a policy: `ClientPolicy::builder().build(&discovery)` has the client
    /// defaults; its setters choose other versions, limits, transports, or accepting ambiguity.
    ///
    /// # Examples
    ///
    /// See [`ClientPolicy`].
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
    /// See [`ClientPolicy`].
    #[must_use]
    pub fn negotiated(&self) -> Option<&Negotiated> {
        self.framing.as_ref()
    }

    /// The discovery mode the policy was built under (the client names it in the outcome of an
    /// unframed body, `Outcome::unframed_close`).
    #[cfg_attr(not(feature = "client"), allow(dead_code))]
    #[must_use]
    pub(crate) fn discovery_mode(&self) -> DiscoveryMode {
        self.mode
    }

    /// The value of the `Mcp-Framing` request header (`http::OPT_IN_HEADER`) that opts in to
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
    /// use mcp_framing::{internals::contract::{ClientPolicy, ServerDiscovery}, contract::{DiscoverySource, FramingContract}, outcome::Verdict, RequestKey, StreamEncoder, StreamHead};
    ///
    /// let mut result = serde_json::json!({"protocolVersion": "2025-06-18", "capabilities": {}});
    /// FramingContract::v1().declare_in(&mut result, DiscoverySource::Initialize)?;
    /// let policy = ClientPolicy::builder().build(&ServerDiscovery::from_initialize(&result)?)?;
    ///
    /// // The server answered another request's stream:
    /// let mut enc = StreamEncoder::new(StreamHead::for_request(Some(RequestKey::random())));
    /// let mut body = bytes::BytesMut::new();
    /// enc.end(&mut body).unwrap();
    /// let mut decoder = policy.decoder(RequestKey::random()).unwrap();
    /// assert!(decoder.decode_eof(&mut body).is_err());
    /// assert!(matches!(decoder.outcome().verdict, Verdict::CrossWired { .. }));
    /// # Ok::<(), mcp_framing::contract::ContractError>(())
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
    /// use mcp_framing::internals::contract::{ClientPolicy, ServerDiscovery};
    /// use mcp_framing::contract::{ContractChange, ContractError, DiscoverySource, FramingContract};
    ///
    /// let mut result = serde_json::json!({"protocolVersion": "2025-06-18", "capabilities": {}});
    /// FramingContract::v1().declare_in(&mut result, DiscoverySource::Initialize)?;
    /// let policy = ClientPolicy::builder().build(&ServerDiscovery::from_initialize(&result)?)?;
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
        negotiated
            .kept_by(discovery.contract.as_ref())
            .map_err(|change| ContractError::Downgrade {
                origin: discovery.source,
                change,
            })
    }

    /// Whether the server declared request-key deduplication for `method` (SPEC.md §17.11):
    /// what makes a keyed retry of a non-idempotent request safe
    /// (`RetryPolicy::for_method`; the contract's unit tests show it).
    #[must_use]
    pub(crate) fn deduplicates(&self, method: &str) -> bool {
        self.framing
            .as_ref()
            .and_then(|n| n.deduplication.as_ref())
            .is_some_and(|d| d.covers(method))
    }
}

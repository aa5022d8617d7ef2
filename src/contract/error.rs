//! The contract layer's errors: reading discovery, negotiating, re-checking.

use std::fmt;

use super::source::{DiscoverySource, EXTENSION_KEY};

impl ContractError {
    /// The variant's stable name (the `kind` of a client's outcome report, SPEC.md §11.7):
    /// `NotADiscoveryResult`, `Malformed`, `NoContract`, `SentinelNotRequired`,
    /// `VersionMismatch`, `UnsupportedChecksum`, `UnsupportedDigest`, `NoCommonTransport`,
    /// `InvalidLimit` or `Downgrade`.
    ///
    /// # Examples
    ///
    /// ```
    /// use mcp_framing::contract::{ContractError, DiscoverySource};
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
/// use mcp_framing::contract::ContractChange;
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
/// use mcp_framing::contract::{ContractError, DiscoverySource};
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
         put a framing layer in front of the server (mcp-frame proxy, or FramingLayer in a Rust \
         server), connect without mcp-framing, or opt in with accept_ambiguity(true) to fail \
         every close as ambiguous"
    )]
    NoContract {
        /// The discovery result it was found in.
        origin: DiscoverySource,
    },
    /// The server's contract does not mandate the sentinel: completion would be ambiguous.
    #[error(
        "configuration error: the framing contract in the {origin} has sentinelRequired false, \
         so a clean end and an abandoned response stream would be indistinguishable (Regime C); \
         require the sentinel on the server, connect without mcp-framing, or opt in with \
         accept_ambiguity(true) to fail every close as ambiguous"
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

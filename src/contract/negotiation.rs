//! What a client and a server agree on (SPEC.md §11.3), and what a later resolution must keep
//! of it (§11.5, §17.11).

use super::declaration::{
    Deduplication, FRAME_CHECKSUM_CRC32, FramingContract, MESSAGE_DIGEST_SHA256, SUPPORTED_VERSIONS,
};
use super::error::{ContractChange, ContractError};
use crate::limits::{Limits, MIN_MAX_FRAME_PAYLOAD};

/// What a framed policy negotiated with the server (SPEC.md §11.3).
///
/// # Examples
///
/// ```
/// use mcp_framing::internals::contract::{ClientPolicy, ServerDiscovery};
/// use mcp_framing::contract::{DiscoverySource, FramingContract};
///
/// let mut result = serde_json::json!({"protocolVersion": "2025-06-18", "capabilities": {}});
/// FramingContract::v1().with_limits(16384, 1 << 30).declare_in(&mut result, DiscoverySource::Initialize)?;
/// let policy = ClientPolicy::builder().build(&ServerDiscovery::from_initialize(&result)?)?;
/// let n = policy.negotiated().unwrap();
/// assert_eq!((n.version, n.max_frame_payload, n.max_message_size), (1, 16384, 16 << 20));
/// # Ok::<(), mcp_framing::contract::ContractError>(())
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

impl Negotiated {
    /// Negotiates the client's versions, transports and limits with the server's declaration
    /// (SPEC.md §11.3): the highest common version, the smaller limits, the common transports in
    /// the client's order.
    pub(super) fn with(
        versions: &[u8],
        transports: &[String],
        limits: Limits,
        server: &FramingContract,
    ) -> Result<Self, ContractError> {
        check_algorithms(server)?;
        let version = versions
            .iter()
            .filter(|v| server.versions.contains(v) && SUPPORTED_VERSIONS.contains(v))
            .max()
            .copied()
            .ok_or_else(|| ContractError::VersionMismatch {
                client: versions.to_vec(),
                server: server.versions.clone(),
            })?;
        if server.max_frame_payload < MIN_MAX_FRAME_PAYLOAD {
            return Err(ContractError::InvalidLimit {
                max_frame_payload: server.max_frame_payload,
            });
        }
        let common: Vec<String> = transports
            .iter()
            .filter(|t| server.transports.contains(t))
            .cloned()
            .collect();
        if common.is_empty() {
            return Err(ContractError::NoCommonTransport {
                client: transports.to_vec(),
                server: server.transports.clone(),
            });
        }
        Ok(Self {
            version,
            max_frame_payload: limits.max_frame_payload.min(server.max_frame_payload),
            max_message_size: limits.max_message_size.min(server.max_message_size),
            transports: common,
            deduplication: server.deduplication.clone(),
        })
    }

    /// Whether a later resolution's contract (`None`: none declared) still gives what was
    /// negotiated (SPEC.md §11.5): the sentinel, the algorithms, the version, a common
    /// transport, and at least the deduplication promised (§17.11, retries rely on it).
    pub(super) fn kept_by(&self, later: Option<&FramingContract>) -> Result<(), ContractChange> {
        let Some(contract) = later else {
            return Err(ContractChange::ContractDropped);
        };
        if !contract.sentinel_required {
            return Err(ContractChange::SentinelNotRequired);
        }
        if contract.frame_checksum != FRAME_CHECKSUM_CRC32 {
            return Err(ContractChange::ChecksumChanged {
                found: contract.frame_checksum.clone(),
            });
        }
        if contract.message_digest != MESSAGE_DIGEST_SHA256 {
            return Err(ContractChange::DigestChanged {
                found: contract.message_digest.clone(),
            });
        }
        if !contract.versions.contains(&self.version) {
            return Err(ContractChange::VersionDropped {
                version: self.version,
            });
        }
        if !self
            .transports
            .iter()
            .any(|t| contract.transports.contains(t))
        {
            return Err(ContractChange::TransportsDropped {
                negotiated: self.transports.clone(),
            });
        }
        if let Some(promised) = &self.deduplication {
            if !contract
                .deduplication
                .as_ref()
                .is_some_and(|later| promised.kept_by(later))
            {
                return Err(ContractChange::DeduplicationWeakened);
            }
        }
        Ok(())
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

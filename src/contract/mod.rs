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
//! use mcp_framing::{contract::{ClientPolicy, ServerDiscovery}, RequestKey};
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
//! # Ok::<(), mcp_framing::contract::ContractError>(())
//! ```

//!
//! One file a job:
//!
//! | file | owns |
//! |---|---|
//! | `source.rs` | where a contract sits in a discovery result: [`EXTENSION_KEY`], [`DiscoverySource`] |
//! | `declaration.rs` | what a server declares: [`FramingContract`], [`Deduplication`], writing them into a result |
//! | `discovery.rs` | reading a result: [`ServerDiscovery`] |
//! | `negotiation.rs` | what both sides agree on, and what later weakens it: [`Negotiated`] |
//! | `policy.rs` | the client's decisions: [`ClientPolicy`], [`PolicyBuilder`] (Regime C refused, the decoder of each attempt, re-checks) |
//! | `error.rs` | [`ContractError`], [`ContractChange`] |

mod declaration;
mod discovery;
mod error;
mod negotiation;
mod policy;
mod source;

#[cfg(feature = "rmcp-server")]
pub(crate) use declaration::TextDeclaration;
pub use declaration::{
    Deduplication, FRAME_CHECKSUM_CRC32, FramingContract, KNOWN_TRANSPORTS, MESSAGE_DIGEST_SHA256,
    SUPPORTED_VERSIONS,
};
pub use discovery::ServerDiscovery;
pub use error::{ContractChange, ContractError};
pub use negotiation::Negotiated;
pub use policy::{ClientPolicy, PolicyBuilder};
pub use source::{DiscoverySource, EXTENSION_KEY};

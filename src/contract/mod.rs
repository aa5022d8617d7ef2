//! The framing contract a server declares in discovery (SPEC.md §11).
//!
//! A server that frames its responses declares a [`FramingContract`] under the extension key
//! `io.github.mcp-framing/framing`: in `capabilities.experimental` of its `initialize` result
//! (protocol versions 2025-*) and in `capabilities.extensions` of its `server/discover` result
//! (2026-07-28). [`FramingLayer`](crate::rmcp_http::FramingLayer) writes it into the results that
//! pass through it; [`FramingContract::declare_in`] writes it into one by hand. The clients
//! ([`FramingHttpClient`](crate::rmcp_http::FramingHttpClient),
//! [`RetryingClient`](crate::client::RetryingClient)) read it back (`discovery.rs`) and
//! refuse, as a configuration error, a server that declares no contract or one that does not
//! mandate the sentinel (Regime C), unless told to accept ambiguity; no common version,
//! checksum, digest or transport fails too, and a later resolution that drops or weakens the
//! contract is a downgrade ([`ContractError::Downgrade`]) and fails closed.
//!
//! ```
//! use mcp_framing::contract::{DiscoverySource, FramingContract};
//!
//! let mut result = serde_json::json!({
//!     "protocolVersion": "2025-06-18",
//!     "capabilities": {"tools": {}},
//!     "serverInfo": {"name": "example", "version": "1.0.0"}
//! });
//! FramingContract::v1().declare_in(&mut result, DiscoverySource::Initialize)?;
//! let declared = &result["capabilities"]["experimental"]["io.github.mcp-framing/framing"];
//! assert_eq!(serde_json::from_value::<FramingContract>(declared.clone())?, FramingContract::v1());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! One file a job:
//!
//! | file | owns |
//! |---|---|
//! | `source.rs` | where a contract sits in a discovery result: the extension key, [`DiscoverySource`] |
//! | `declaration.rs` | what a server declares: [`FramingContract`], [`Deduplication`], writing them into a result |
//! | `discovery.rs` | reading a result: `ServerDiscovery` (the clients') |
//! | `negotiation.rs` | what both sides agree on, and what later weakens it |
//! | `policy.rs` | the client's decisions (Regime C refused, the decoder of each attempt, re-checks) |
//! | `error.rs` | [`ContractError`], [`ContractChange`] |

// The client side of the contract (discovery parsing, negotiation, the client policy) and the
// wire constants: what the clients use, and the tests and fuzz targets through
// `internals::contract`. A server author declares a contract; the clients read it themselves.
below_the_api! {
    pub(crate) mod declaration;
    pub(crate) mod discovery;
    mod error;
    pub(crate) mod negotiation;
    pub(crate) mod policy;
    pub(crate) mod source;
}

#[cfg(feature = "rmcp-server")]
pub(crate) use declaration::TextDeclaration;
pub use declaration::{Deduplication, FramingContract};
#[cfg_attr(not(feature = "client"), allow(unused_imports))] // the clients' (feature `client`)
pub(crate) use discovery::ServerDiscovery;
pub use error::{ContractChange, ContractError};
#[cfg_attr(not(feature = "client"), allow(unused_imports))] // the clients' (feature `client`)
pub(crate) use policy::ClientPolicy;
pub use source::DiscoverySource;
#[cfg_attr(not(feature = "client"), allow(unused_imports))] // the clients' (feature `client`)
pub(crate) use source::EXTENSION_KEY;

#[cfg(test)]
mod tests;

//! Where a framing contract sits in a discovery result (SPEC.md §11.1): under [`EXTENSION_KEY`]
//! in `capabilities.experimental` of an `initialize` result, `capabilities.extensions` of a
//! `server/discover` result.

use std::fmt;

/// The extension key of the framing contract: a reverse-DNS `{prefix}/{name}` identifier as MCP's
/// extension naming requires; its prefix `io.github.mcp-framing` is not a reserved one (second
/// label `modelcontextprotocol` or `mcp`).
pub(crate) const EXTENSION_KEY: &str = "io.github.mcp-framing/framing";

/// Which discovery result a contract is declared in ([`FramingContract::declare_in`](super::FramingContract::declare_in)) or was read from.
///
/// # Examples
///
/// ```
/// use mcp_framing::contract::DiscoverySource;
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
    pub(super) fn capability_field(self) -> &'static str {
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

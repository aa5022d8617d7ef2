//! Reading a discovery result (SPEC.md §11.1): the MCP protocol versions, the declared
//! contract, the discovery mode.

use serde::Deserialize;
use serde_json::{Map, Value};

use super::declaration::FramingContract;
use super::error::ContractError;
use super::source::{DiscoverySource, EXTENSION_KEY};
use crate::outcome::DiscoveryMode;

/// What one discovery resolution said about framing.
///
/// # Examples
///
/// ```
/// use mcp_framing::{contract::DiscoverySource, internals::contract::ServerDiscovery};
///
/// let result = serde_json::json!({"resultType": "complete", "supportedVersions": ["2026-07-28"],
///     "capabilities": {"tools": {}}, "ttlMs": 60000, "cacheScope": "public"});
/// let discovery = ServerDiscovery::from_discover(&result)?;
/// assert_eq!(discovery.contract, None); // no framing contract: Regime C
/// assert_eq!(discovery.source, DiscoverySource::Discover);
/// # Ok::<(), mcp_framing::contract::ContractError>(())
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
    /// result (a session), [`DiscoveryMode::Stateless`] for `server/discover`.
    pub(crate) mode: DiscoveryMode,
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
    /// See the [module docs](crate::contract).
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

//! `contract_json`: arbitrary bytes through the framing contract parsers (SPEC.md §10, §11).
//!
//! Input: one mode byte (bit 0: read as a `server/discover` result instead of an `initialize`
//! result; bit 1: the client accepts ambiguity), then JSON text (the seeds are discovery results
//! and JSON-RPC requests; the fuzzer mutates them).
//!
//! Oracle:
//! - no panic on any input;
//! - a `FramingContract` that parses serializes to JSON that parses back to the same contract,
//!   and declared in a fresh discovery result it is read back unchanged;
//! - a policy is built exactly when SPEC.md §9 allows it: without a contract or with
//!   `sentinelRequired: false` only when the client accepts ambiguity (then Regime C, no
//!   decoder); otherwise the negotiated version, limits and transports are within both sides'
//!   declarations, the decoder can be built, and re-checking the same discovery result is not a
//!   downgrade; a refusal names a reason that the contract really has;
//! - a request key read from `params._meta`, set on another request, reads back the same.

use mcp_framing::internals::contract::{KNOWN_TRANSPORTS, SUPPORTED_VERSIONS};
use mcp_framing::{
    RequestKey,
    contract::{ContractError, DiscoverySource, FramingContract},
    internals::contract::{ClientPolicy, ServerDiscovery},
    internals::limits::{
        DEFAULT_MAX_FRAME_PAYLOAD, DEFAULT_MAX_MESSAGE_SIZE, MIN_MAX_FRAME_PAYLOAD,
    },
    outcome::Regime,
    request::{request_key, set_request_key},
};
use serde_json::Value;

fn discover(source: DiscoverySource, value: &Value) -> Result<ServerDiscovery, ContractError> {
    match source {
        DiscoverySource::Initialize => ServerDiscovery::from_initialize(value),
        DiscoverySource::Discover => ServerDiscovery::from_discover(value),
    }
}

/// Runs the oracle on one input; see the module docs.
///
/// # Panics
///
/// When a parser breaks the oracle.
pub fn run(data: &[u8]) {
    let [mode, json @ ..] = data else {
        return;
    };
    if let Ok(contract) = serde_json::from_slice::<FramingContract>(json) {
        let value = serde_json::to_value(&contract).expect("a contract serializes");
        let again: FramingContract =
            serde_json::from_value(value).expect("a serialized contract parses");
        assert_eq!(again, contract, "contract JSON round trip");
    }
    let Ok(value) = serde_json::from_slice::<Value>(json) else {
        return;
    };
    request_key_round_trip(&value);
    let source = if mode & 1 == 0 {
        DiscoverySource::Initialize
    } else {
        DiscoverySource::Discover
    };
    let Ok(discovery) = discover(source, &value) else {
        return;
    };
    assert_eq!(discovery.source, source, "discovery source");
    if let Some(contract) = &discovery.contract {
        let mut fresh = serde_json::json!({"capabilities": {}});
        contract
            .declare_in(&mut fresh, source)
            .expect("declare in an object");
        let back = discover(source, &fresh).expect("a declared contract reads back");
        assert_eq!(back.contract.as_ref(), Some(contract), "declared contract");
    }
    let accept = mode & 2 != 0;
    let policy = ClientPolicy::builder()
        .accept_ambiguity(accept)
        .build(&discovery);
    let key = RequestKey::from_bytes([7; 16]);
    match (&discovery.contract, policy) {
        (Some(contract), Ok(policy)) if contract.sentinel_required => {
            check_negotiated(contract, &policy);
            assert!(
                policy.decoder(key).is_some(),
                "framed policy without a decoder"
            );
            assert_eq!(policy.regime(), Regime::A, "framed policy's regime");
            policy
                .recheck(&discovery)
                .expect("the same discovery result is no downgrade");
        }
        (_, Ok(policy)) => {
            assert!(accept, "Regime C policy built without accepting ambiguity");
            assert_eq!(policy.regime(), Regime::C, "unframed policy's regime");
            assert!(
                policy.decoder(key).is_none(),
                "unframed policy with a decoder"
            );
            assert!(policy.negotiated().is_none(), "unframed policy negotiated");
        }
        (None, Err(err)) => {
            assert!(!accept, "refused despite accepting ambiguity: {err}");
            assert!(matches!(err, ContractError::NoContract { .. }), "{err}");
        }
        (Some(contract), Err(err)) => check_refusal(contract, accept, &err),
    }
}

fn check_negotiated(contract: &FramingContract, policy: &ClientPolicy) {
    let n = policy.negotiated().expect("framed policy negotiated");
    assert!(
        contract.versions.contains(&n.version) && SUPPORTED_VERSIONS.contains(&n.version),
        "negotiated version {} not offered by both",
        n.version
    );
    assert!(
        (MIN_MAX_FRAME_PAYLOAD..=DEFAULT_MAX_FRAME_PAYLOAD).contains(&n.max_frame_payload)
            && n.max_frame_payload <= contract.max_frame_payload,
        "negotiated frame limit {}",
        n.max_frame_payload
    );
    assert!(
        n.max_message_size <= DEFAULT_MAX_MESSAGE_SIZE
            && n.max_message_size <= contract.max_message_size,
        "negotiated message limit {}",
        n.max_message_size
    );
    assert!(!n.transports.is_empty(), "no transport negotiated");
    for transport in &n.transports {
        assert!(
            contract.transports.contains(transport)
                && KNOWN_TRANSPORTS.contains(&transport.as_str()),
            "negotiated transport {transport} not offered by both"
        );
    }
    assert_eq!(
        policy.framing_header_value(),
        Some(n.version.to_string()),
        "Mcp-Framing header value"
    );
}

fn check_refusal(contract: &FramingContract, accept: bool, err: &ContractError) {
    let justified = match err {
        ContractError::SentinelNotRequired { .. } => !contract.sentinel_required && !accept,
        ContractError::UnsupportedChecksum { found } => *found == contract.frame_checksum,
        ContractError::UnsupportedDigest { found } => *found == contract.message_digest,
        ContractError::VersionMismatch { .. } => !contract
            .versions
            .iter()
            .any(|v| SUPPORTED_VERSIONS.contains(v)),
        ContractError::InvalidLimit { max_frame_payload } => {
            *max_frame_payload == contract.max_frame_payload
                && *max_frame_payload < MIN_MAX_FRAME_PAYLOAD
        }
        ContractError::NoCommonTransport { .. } => !contract
            .transports
            .iter()
            .any(|t| KNOWN_TRANSPORTS.contains(&t.as_str())),
        _ => false,
    };
    assert!(
        justified,
        "refusal not justified by the contract: {err} ({contract:?})"
    );
}

fn request_key_round_trip(request: &Value) {
    let Ok(Some(key)) = request_key(request) else {
        return;
    };
    let mut other = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call"});
    set_request_key(&mut other, key).expect("set a key on a request object");
    assert_eq!(request_key(&other), Ok(Some(key)), "request key round trip");
}

//! The discovery contract: fixtures, policy construction, negotiation, downgrade detection.

use super::{
    ClientPolicy, ContractChange, ContractError, Deduplication, DiscoverySource, EXTENSION_KEY,
    FramingContract, ServerDiscovery,
};
use crate::RequestKey;
use crate::outcome::{DiscoveryMode, Outcome, Regime, Verdict};

/// Reads a discovery fixture from `tests/fixtures/discovery/`.
fn fixture(name: &str) -> serde_json::Value {
    let path = format!(
        "{}/tests/fixtures/discovery/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    serde_json::from_str(&std::fs::read_to_string(&path).expect(&path)).unwrap()
}

/// Parses a fixture as an `initialize` or `server/discover` result, by its file name.
fn discovery(name: &str) -> ServerDiscovery {
    let parse = match name.starts_with("initialize") {
        true => ServerDiscovery::from_initialize,
        false => ServerDiscovery::from_discover,
    };
    parse(&fixture(name)).unwrap()
}

#[test]
fn extension_key_is_a_reverse_dns_prefix_and_name_outside_the_reserved_prefixes() {
    let (prefix, name) = EXTENSION_KEY.split_once('/').expect("{prefix}/{name}");
    assert_eq!((prefix, name), ("io.github.mcp-framing", "framing"));
    let labels: Vec<&str> = prefix.split('.').collect();
    assert!(labels.len() >= 2 && labels.iter().all(|l| !l.is_empty()));
    // MCP reserves prefixes whose second label is `modelcontextprotocol` or `mcp`.
    assert!(!["modelcontextprotocol", "mcp"].contains(&labels[1]));
    assert!(!name.is_empty() && !name.contains('/'));
}

#[test]
fn initialize_fixture_declares_the_contract_under_experimental() {
    let d = discovery("initialize_framed.json");
    assert_eq!(d.source, DiscoverySource::Initialize);
    assert_eq!(d.protocol_versions, ["2025-06-18"]);
    assert_eq!(d.mode, DiscoveryMode::Sticky);
    assert_eq!(d.contract, Some(FramingContract::v1()));
}

#[test]
fn discover_fixture_declares_the_contract_under_extensions() {
    let d = discovery("discover_framed.json");
    assert_eq!(d.source, DiscoverySource::Discover);
    assert_eq!(d.protocol_versions, ["2026-07-28", "2025-11-25"]);
    assert_eq!(d.mode, DiscoveryMode::Stateless);
    assert_eq!(d.contract, Some(FramingContract::v1()));
}

#[test]
fn discover_result_with_the_contract_under_experimental_is_read_too() {
    let d = discovery("discover_framed_in_experimental.json");
    assert_eq!(d.contract, Some(FramingContract::v1()));
}

#[test]
fn bare_result_and_json_rpc_response_parse_the_same() {
    let response = fixture("discover_framed.json");
    let bare = response["result"].clone();
    assert_eq!(
        ServerDiscovery::from_discover(&bare).unwrap(),
        ServerDiscovery::from_discover(&response).unwrap()
    );
}

#[test]
fn unknown_contract_fields_are_ignored() {
    let d = discovery("discover_framed_future_fields.json");
    assert_eq!(d.contract.unwrap().versions, [1, 2]);
}

#[test]
fn malformed_contract_is_an_error_not_an_absent_contract() {
    let err = ServerDiscovery::from_initialize(&fixture("initialize_malformed_contract.json"))
        .unwrap_err();
    assert!(
        matches!(
            err,
            ContractError::Malformed {
                origin: DiscoverySource::Initialize,
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn value_without_capabilities_is_not_a_discovery_result() {
    let err = ServerDiscovery::from_discover(&serde_json::json!({"ttlMs": 5})).unwrap_err();
    assert_eq!(
        err,
        ContractError::NotADiscoveryResult {
            origin: DiscoverySource::Discover
        }
    );
}

#[test]
fn contract_written_by_the_server_reads_back_from_both_results() {
    let contract = FramingContract::v1().with_limits(32 * 1024, 8 << 20);
    for source in [DiscoverySource::Initialize, DiscoverySource::Discover] {
        let mut result = serde_json::json!({"capabilities": {"tools": {}}});
        contract.declare_in(&mut result, source).unwrap();
        let field = if source == DiscoverySource::Initialize {
            "experimental"
        } else {
            "extensions"
        };
        assert_eq!(
            result["capabilities"][field][EXTENSION_KEY]["maxFramePayload"],
            32 * 1024
        );
        let read = match source {
            DiscoverySource::Initialize => ServerDiscovery::from_initialize(&result),
            DiscoverySource::Discover => ServerDiscovery::from_discover(&result),
        };
        assert_eq!(read.unwrap().contract.as_ref(), Some(&contract));
    }
}

#[test]
fn contract_json_uses_the_documented_field_names() {
    let json = serde_json::to_value(FramingContract::v1()).unwrap();
    assert_eq!(
        json,
        serde_json::json!({"versions": [1], "sentinelRequired": true, "frameChecksum": "crc32",
            "messageDigest": "sha256", "maxFramePayload": 65536, "maxMessageSize": 16777216,
            "transports": ["binary", "sse", "compat"]})
    );
}

#[test]
fn missing_limits_default_to_the_spec_defaults() {
    let c: FramingContract = serde_json::from_value(serde_json::json!({"versions": [1],
        "sentinelRequired": true, "frameChecksum": "crc32", "messageDigest": "sha256",
        "transports": ["sse"]}))
    .unwrap();
    assert_eq!((c.max_frame_payload, c.max_message_size), (65536, 16 << 20));
}

#[test]
fn server_without_a_contract_is_a_configuration_error() {
    for name in ["initialize_no_contract.json", "discover_no_contract.json"] {
        let err = ClientPolicy::builder().build(&discovery(name)).unwrap_err();
        assert!(
            matches!(err, ContractError::NoContract { .. }),
            "{name}: {err}"
        );
        let msg = err.to_string();
        assert!(
            msg.starts_with("configuration error") && msg.contains("Regime C"),
            "{msg}"
        );
        assert!(msg.contains(EXTENSION_KEY), "{msg}");
    }
}

#[test]
fn contract_not_mandating_the_sentinel_is_a_configuration_error() {
    for name in [
        "initialize_sentinel_not_required.json",
        "discover_sentinel_not_required.json",
    ] {
        let err = ClientPolicy::builder().build(&discovery(name)).unwrap_err();
        assert!(
            matches!(err, ContractError::SentinelNotRequired { .. }),
            "{name}: {err}"
        );
    }
}

#[test]
fn accept_ambiguity_policy_frames_nothing_and_every_close_is_ambiguous() {
    for (name, mode) in [
        ("initialize_no_contract.json", "sticky discovery"),
        (
            "discover_no_contract.json",
            "stateless per-request discovery",
        ),
        (
            "discover_sentinel_not_required.json",
            "stateless per-request discovery",
        ),
    ] {
        let policy = ClientPolicy::builder()
            .accept_ambiguity(true)
            .build(&discovery(name))
            .unwrap();
        assert_eq!(policy.regime(), Regime::C);
        assert!(policy.decoder(RequestKey::random()).is_none());
        assert_eq!(policy.framing_header_value(), None);
        for bytes in [0, 1, 4096] {
            let outcome = Outcome::unframed_close(policy.discovery_mode(), bytes);
            let Verdict::Ambiguous(err) = &outcome.verdict else {
                panic!("{name}: {:?}", outcome.verdict)
            };
            assert!(err.to_string().contains(mode), "{name}: {err}");
            assert_eq!(outcome.regime, Regime::C);
        }
    }
}

#[test]
fn accept_ambiguity_still_frames_when_the_server_declares_a_contract() {
    let policy = ClientPolicy::builder()
        .accept_ambiguity(true)
        .build(&discovery("discover_framed.json"))
        .unwrap();
    assert_eq!(policy.regime(), Regime::A);
    assert!(policy.decoder(RequestKey::random()).is_some());
}

#[test]
fn negotiation_fails_with_a_clear_version_mismatch() {
    for name in [
        "initialize_version_mismatch.json",
        "discover_version_mismatch.json",
    ] {
        let err = ClientPolicy::builder().build(&discovery(name)).unwrap_err();
        assert_eq!(
            err,
            ContractError::VersionMismatch {
                client: vec![1],
                server: vec![2, 3]
            }
        );
        assert_eq!(
            err.to_string(),
            "framing version mismatch: client accepts [1], server offers [2, 3]"
        );
    }
}

#[test]
fn negotiation_picks_the_highest_common_version_this_crate_implements() {
    let d = discovery("discover_framed_future_fields.json"); // server offers [1, 2]
    let policy = ClientPolicy::builder().versions([1, 2]).build(&d).unwrap();
    assert_eq!(policy.negotiated().unwrap().version, 1);
    assert_eq!(policy.framing_header_value().as_deref(), Some("1"));
}

#[test]
fn negotiation_takes_the_smaller_limits_of_client_and_server() {
    let d = discovery("discover_framed_small_limits.json"); // 16 KiB frames, 1 MiB messages
    let n = ClientPolicy::builder()
        .build(&d)
        .unwrap()
        .negotiated()
        .unwrap()
        .clone();
    assert_eq!((n.max_frame_payload, n.max_message_size), (16384, 1 << 20));
    let strict = ClientPolicy::builder()
        .max_frame_payload(4096)
        .max_message_size(64 * 1024)
        .build(&d)
        .unwrap();
    let n = strict.negotiated().unwrap();
    assert_eq!((n.max_frame_payload, n.max_message_size), (4096, 64 * 1024));
}

#[test]
fn negotiation_keeps_the_common_transports_in_client_order() {
    let d = discovery("discover_framed_small_limits.json"); // server: ["sse"]
    assert_eq!(
        ClientPolicy::builder()
            .build(&d)
            .unwrap()
            .negotiated()
            .unwrap()
            .transports,
        ["sse"]
    );
    let err = ClientPolicy::builder()
        .transports(["binary"])
        .build(&d)
        .unwrap_err();
    assert!(
        matches!(err, ContractError::NoCommonTransport { .. }),
        "{err}"
    );
}

#[test]
fn negotiation_rejects_another_digest() {
    let err = ClientPolicy::builder()
        .build(&discovery("discover_digest_md5.json"))
        .unwrap_err();
    assert_eq!(
        err,
        ContractError::UnsupportedDigest {
            found: "md5".into()
        }
    );
}

#[test]
fn negotiation_rejects_a_frame_limit_below_the_control_frames() {
    let mut result = serde_json::json!({"capabilities": {}});
    FramingContract::v1()
        .with_limits(512, 1 << 20)
        .declare_in(&mut result, DiscoverySource::Discover)
        .unwrap();
    let err = ClientPolicy::builder()
        .build(&ServerDiscovery::from_discover(&result).unwrap())
        .unwrap_err();
    assert_eq!(
        err,
        ContractError::InvalidLimit {
            max_frame_payload: 512
        }
    );
}

#[test]
fn policy_decoder_enforces_the_negotiated_limits_and_the_request_key() {
    let policy = ClientPolicy::builder()
        .build(&discovery("discover_framed_small_limits.json"))
        .unwrap();
    let key = RequestKey::random();
    let mut enc = crate::StreamEncoder::builder()
        .frame_size(16384)
        .build(crate::StreamHead::for_request(Some(key)));
    let mut wire = bytes::BytesMut::new();
    enc.message(&vec![b'a'; (1 << 20) + 1], &mut wire).unwrap();
    enc.end(&mut wire).unwrap();
    let err = policy.decoder(key).unwrap().decode_all(&wire).unwrap_err();
    assert!(
        matches!(
            err,
            crate::DecodeError::MessageTooLarge { max: 1048576, .. }
        ),
        "{err}"
    );
}

fn established() -> ClientPolicy {
    ClientPolicy::builder()
        .build(&discovery("discover_framed.json"))
        .unwrap()
}

#[test]
fn later_resolution_with_the_same_contract_passes_the_recheck() {
    let policy = established();
    policy.recheck(&discovery("discover_framed.json")).unwrap();
    policy
        .recheck(&discovery("initialize_framed.json"))
        .unwrap();
    policy
        .recheck(&discovery("discover_framed_small_limits.json"))
        .unwrap();
    policy
        .recheck(&discovery("discover_framed_future_fields.json"))
        .unwrap();
}

#[test]
fn later_resolution_without_the_contract_is_a_downgrade() {
    let err = established()
        .recheck(&discovery("discover_no_contract.json"))
        .unwrap_err();
    assert_eq!(
        err,
        ContractError::Downgrade {
            origin: DiscoverySource::Discover,
            change: ContractChange::ContractDropped
        }
    );
    assert!(err.to_string().contains("failing closed"), "{err}");
}

#[test]
fn later_resolution_not_mandating_the_sentinel_is_a_downgrade() {
    let err = established()
        .recheck(&discovery("discover_sentinel_not_required.json"))
        .unwrap_err();
    assert!(
        matches!(
            err,
            ContractError::Downgrade {
                change: ContractChange::SentinelNotRequired,
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn later_resolution_dropping_the_negotiated_version_is_a_downgrade() {
    let err = established()
        .recheck(&discovery("initialize_version_mismatch.json"))
        .unwrap_err();
    assert!(
        matches!(
            err,
            ContractError::Downgrade {
                change: ContractChange::VersionDropped { version: 1 },
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn later_resolution_changing_the_digest_is_a_downgrade() {
    let err = established()
        .recheck(&discovery("discover_digest_md5.json"))
        .unwrap_err();
    assert!(
        matches!(
            err,
            ContractError::Downgrade {
                change: ContractChange::DigestChanged { .. },
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn later_resolution_sharing_no_negotiated_transport_is_a_downgrade() {
    let policy = ClientPolicy::builder()
        .transports(["binary"])
        .build(&discovery("discover_framed.json"))
        .unwrap();
    let err = policy
        .recheck(&discovery("discover_framed_small_limits.json"))
        .unwrap_err();
    assert!(
        matches!(
            err,
            ContractError::Downgrade {
                change: ContractChange::TransportsDropped { .. },
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn accept_ambiguity_policy_accepts_any_later_resolution() {
    let policy = ClientPolicy::builder()
        .accept_ambiguity(true)
        .build(&discovery("discover_no_contract.json"))
        .unwrap();
    policy
        .recheck(&discovery("discover_no_contract.json"))
        .unwrap();
    policy.recheck(&discovery("discover_framed.json")).unwrap();
}

/// The ```json blocks of SPEC.md §11.
fn spec_json_blocks() -> Vec<serde_json::Value> {
    let spec = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/SPEC.md")).unwrap();
    let start = spec.find("## §11 ").unwrap();
    let end = spec.find("## §12 ").unwrap();
    spec[start..end]
        .split("```json\n")
        .skip(1)
        .map(|block| serde_json::from_str(block.split("```").next().unwrap()).unwrap())
        .collect()
}

#[test]
fn spec_examples_parse_to_the_default_contract() {
    let blocks = spec_json_blocks();
    assert_eq!(
        blocks.len(),
        3,
        "schema, initialize example, server/discover example"
    );
    let init = ServerDiscovery::from_initialize(&blocks[1]).unwrap();
    let disc = ServerDiscovery::from_discover(&blocks[2]).unwrap();
    assert_eq!(init.contract, Some(FramingContract::v1()));
    assert_eq!(disc.contract, Some(FramingContract::v1()));
}

#[test]
fn spec_schema_requires_exactly_the_fields_the_parser_requires() {
    let schema = &spec_json_blocks()[0];
    // Every member present, the optional ones included: `deduplication` (SPEC.md §17.11) and
    // `alwaysFramed` (§18.8).
    let full = serde_json::to_value(
        FramingContract::v1()
            .with_deduplication(Deduplication::new(std::time::Duration::from_secs(86400)))
            .with_always_framed("compat"),
    )
    .unwrap();
    let required: Vec<&str> = schema["required"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    let properties = schema["properties"].as_object().unwrap();
    assert_eq!(
        properties.keys().collect::<std::collections::BTreeSet<_>>(),
        full.as_object().unwrap().keys().collect()
    );
    for field in properties.keys() {
        let mut partial = full.clone();
        partial.as_object_mut().unwrap().remove(field);
        let parsed = serde_json::from_value::<FramingContract>(partial);
        assert_eq!(
            parsed.is_err(),
            required.contains(&field.as_str()),
            "{field}"
        );
    }
}

fn discovery_with(contract: FramingContract) -> ServerDiscovery {
    let mut result = serde_json::json!({"supportedVersions": ["2026-07-28"], "capabilities": {}});
    contract
        .declare_in(&mut result, DiscoverySource::Discover)
        .unwrap();
    ServerDiscovery::from_discover(&result).unwrap()
}

#[test]
fn deduplication_is_negotiated_and_weakening_it_is_a_downgrade() {
    use crate::retry::RetryPolicy;
    use std::time::Duration;
    let day = Deduplication::new(Duration::from_secs(86400));
    let policy = ClientPolicy::builder()
        .build(&discovery_with(
            FramingContract::v1().with_deduplication(day.clone()),
        ))
        .unwrap();
    assert!(policy.deduplicates("tools/call"));
    assert!(!policy.deduplicates("resources/read"));
    assert_eq!(
        RetryPolicy::for_method(&policy, "tools/call"),
        RetryPolicy::default().server_deduplicates(true)
    );
    // The same, or more, is fine.
    let mut more = Deduplication::new(Duration::from_secs(2 * 86400));
    more.methods.push("sampling/createMessage".to_owned());
    policy
        .recheck(&discovery_with(
            FramingContract::v1().with_deduplication(day),
        ))
        .unwrap();
    policy
        .recheck(&discovery_with(
            FramingContract::v1().with_deduplication(more),
        ))
        .unwrap();
    // Dropped, a shorter window, fewer methods: a downgrade, fail closed.
    let mut fewer = Deduplication::new(Duration::from_secs(86400));
    fewer.methods.clear();
    for weaker in [
        FramingContract::v1(),
        FramingContract::v1().with_deduplication(Deduplication::new(Duration::from_secs(60))),
        FramingContract::v1().with_deduplication(fewer),
    ] {
        let err = policy.recheck(&discovery_with(weaker)).unwrap_err();
        assert!(
            matches!(
                err,
                ContractError::Downgrade {
                    change: ContractChange::DeduplicationWeakened,
                    ..
                }
            ),
            "{err}"
        );
    }
    // A policy built without deduplication does not retry keyed tool calls.
    let plain = ClientPolicy::builder()
        .build(&discovery_with(FramingContract::v1()))
        .unwrap();
    assert!(!plain.deduplicates("tools/call"));
    plain
        .recheck(&discovery_with(FramingContract::v1()))
        .unwrap();
}

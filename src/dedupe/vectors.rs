//! The record-format vectors of `tests/vectors/store/` (SPEC.md §17.12.1) that need no Redis:
//! store keys against the scope's derivation, canonical JSON and fingerprints, and the request
//! reading's refusals. `redis/tests/vectors.rs` runs the rest against a real Redis.

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::FingerprintRules;
use super::fingerprint::canonical_json;
#[cfg(feature = "redis")]
use super::redis::DEFAULT_PREFIX;
use super::request_json::{RequestJsonError, parse_request_json};
use super::scope::Scope;
use crate::ids::RequestKey;
use crate::test_support::store_vectors::{lowercase_hex, principal, text, vectors};

#[test]
fn store_keys_are_the_vectors_digests_of_principal_method_tool_and_key() {
    let file = vectors("keys.json");
    assert_eq!(file["format"], 1);
    #[cfg(feature = "redis")]
    assert_eq!(file["default_prefix"], DEFAULT_PREFIX);
    let cases = file["cases"].as_array().unwrap();
    assert!(cases.len() >= 10);
    for case in cases {
        let name = text(&case["name"]);
        let principal = principal(&case["principal"]);
        let digest = principal.digest().map(|d| lowercase_hex(d));
        assert_eq!(
            digest.as_deref(),
            case["principal_digest"].as_str(),
            "{name}"
        );
        let key: RequestKey = text(&case["request_key"]).parse().unwrap();
        let scope = Scope::new(principal, text(&case["method"]), case["tool"].as_str());
        let store_key = scope.store_key(key);
        assert_eq!(store_key.to_string(), text(&case["store_key"]), "{name}");
        #[cfg(feature = "redis")]
        assert_eq!(
            format!("{DEFAULT_PREFIX}{store_key}"),
            text(&case["redis_key"]),
            "{name}"
        );
    }
}

#[test]
fn canonical_json_and_fingerprints_are_the_vectors() {
    let file = vectors("fingerprints.json");
    for case in file["canonical_json"].as_array().unwrap() {
        let name = text(&case["name"]);
        let value = parse_request_json(text(&case["json"]).as_bytes()).expect(name);
        let canonical = String::from_utf8(canonical_json(&value)).unwrap();
        assert_eq!(canonical, text(&case["canonical"]), "{name}");
    }
    for case in file["fingerprints"].as_array().unwrap() {
        let name = text(&case["name"]);
        let request = parse_request_json(text(&case["request"]).as_bytes()).expect(name);
        let covered = case["include_meta"].as_array().unwrap().iter().map(text);
        let rules = FingerprintRules::default().include_meta(covered);
        let params = request.get("params").unwrap_or(&Value::Null);
        let fingerprint = rules.fingerprint(params).to_string();
        assert_eq!(fingerprint, text(&case["fingerprint"]), "{name}");
        // The canonical text given is the one hashed.
        let digest = lowercase_hex(&Sha256::digest(text(&case["canonical"]).as_bytes()));
        assert_eq!(digest, fingerprint, "{name}: canonical text");
    }
    let [same, retried, other] = ["a tools/call", "the same call re-serialised", "1.0 instead"]
        .map(|prefix| {
            file["fingerprints"]
                .as_array()
                .unwrap()
                .iter()
                .find(|c| text(&c["name"]).starts_with(prefix))
                .map(|c| text(&c["fingerprint"]).to_owned())
                .unwrap()
        });
    assert_eq!(same, retried);
    assert_ne!(same, other);
}

#[test]
fn every_canonical_double_reads_back_as_the_same_double() {
    // Doubles from every binade (a fixed xorshift sequence of bit patterns) and decimal-looking
    // ones: the canonical text is a JSON number that reads back bit for bit.
    let mut bits: u64 = 0x9e37_79b9_7f4a_7c15;
    for i in 0..200_000u64 {
        bits ^= bits << 13;
        bits ^= bits >> 7;
        bits ^= bits << 17;
        let double = if i % 2 == 0 {
            f64::from_bits(bits)
        } else {
            (bits % 1_000_000) as f64 / 10f64.powi((bits >> 40) as i32 % 40 - 20)
        };
        if !double.is_finite() {
            continue;
        }
        let text = String::from_utf8(canonical_json(&json!(double))).unwrap();
        let back: f64 = text
            .parse()
            .unwrap_or_else(|e| panic!("{double:e}: {text}: {e}"));
        assert_eq!(back.to_bits(), double.to_bits(), "{double:e}: {text}");
        let value = parse_request_json(text.as_bytes()).unwrap();
        assert!(value.is_f64(), "{double:e}: {text} reads as a double");
    }
}

#[test]
fn malformed_bodies_are_refused_and_the_deepest_accepted_is_read() {
    let file = vectors("fingerprints.json");
    for case in file["malformed"].as_array().unwrap() {
        let name = text(&case["name"]);
        let body = match case.get("body_hex") {
            Some(hex) => (0..text(hex).len() / 2)
                .map(|i| u8::from_str_radix(&text(hex)[2 * i..2 * i + 2], 16).unwrap())
                .collect(),
            None => text(&case["body"]).as_bytes().to_vec(),
        };
        let err = parse_request_json(&body).expect_err(name);
        let kind = match err {
            RequestJsonError::Syntax { .. } => "syntax",
            RequestJsonError::TooDeep => "too_deep",
            RequestJsonError::DuplicateMember { .. } => "duplicate_member",
        };
        assert_eq!(kind, text(&case["error"]), "{name}");
    }
    for case in file["accepted"].as_array().unwrap() {
        let name = text(&case["name"]);
        parse_request_json(text(&case["body"]).as_bytes()).expect(name);
    }
}

//! Request keys travel in an HTTP header and in `params._meta`, and the stream head echoes them.

use crate::support::outcome_support;

use mcp_framing::{
    RequestKey,
    outcome::Verdict,
    request::{REQUEST_KEY_META, RequestKeyError, request_key, set_request_key},
};
use outcome_support::{complete_stream, final_result, framed_policy};

#[test]
fn the_meta_key_is_the_one_spec_md_gives() {
    let spec = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/SPEC.md")).unwrap();
    assert!(
        spec.contains(REQUEST_KEY_META),
        "SPEC.md does not name {REQUEST_KEY_META}"
    );
    assert_eq!(REQUEST_KEY_META, "io.github.mcp-framing/requestKey");
}

#[cfg(feature = "http")]
#[test]
fn header_names_are_the_ones_spec_md_gives() {
    let spec = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/SPEC.md")).unwrap();
    let spec = spec.to_ascii_lowercase();
    for header in [
        mcp_framing::http::REQUEST_KEY_HEADER,
        mcp_framing::http::OPT_IN_HEADER,
    ] {
        assert!(
            spec.contains(header.as_str()),
            "SPEC.md does not name {header}"
        );
    }
    assert_eq!(
        mcp_framing::http::REQUEST_KEY_HEADER,
        "mcp-framing-request-key"
    );
}

#[test]
fn request_key_written_into_meta_reads_back_and_keeps_other_meta() {
    let key = RequestKey::random();
    let mut request = serde_json::json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": {"name": "search", "arguments": {"q": "x"},
                   "_meta": {"progressToken": 9}}});
    set_request_key(&mut request, key).unwrap();
    assert_eq!(request["params"]["_meta"]["progressToken"], 9);
    assert_eq!(
        request["params"]["_meta"][REQUEST_KEY_META],
        key.to_string()
    );
    assert_eq!(request_key(&request), Ok(Some(key)));
}

#[test]
fn request_key_is_reused_across_retries_by_overwriting_the_same_slot() {
    let key = RequestKey::random();
    let mut request = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"});
    set_request_key(&mut request, key).unwrap();
    let first = request.clone();
    request["id"] = 2.into(); // a retry is a new JSON-RPC request id, same logical request
    set_request_key(&mut request, key).unwrap();
    assert_eq!(request["params"], first["params"]);
}

#[test]
fn request_without_params_gets_params_and_meta() {
    let mut request = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "ping"});
    let key = RequestKey::from_bytes([7; 16]);
    set_request_key(&mut request, key).unwrap();
    assert_eq!(
        request["params"]["_meta"][REQUEST_KEY_META],
        "07".repeat(16)
    );
}

#[test]
fn malformed_request_keys_and_shapes_are_precise_errors() {
    let mut not_object = serde_json::json!([1]);
    assert_eq!(
        set_request_key(&mut not_object, RequestKey::random()),
        Err(RequestKeyError::NotAnObject { member: "request" })
    );
    let mut meta_string = serde_json::json!({"params": {"_meta": "x"}});
    assert_eq!(
        set_request_key(&mut meta_string, RequestKey::random()),
        Err(RequestKeyError::NotAnObject {
            member: "params._meta"
        })
    );
    let number = serde_json::json!({"params": {"_meta": {REQUEST_KEY_META: 12}}});
    assert!(matches!(
        request_key(&number),
        Err(RequestKeyError::InvalidKey(_))
    ));
}

#[test]
fn header_value_is_32_lowercase_hex_digits_that_parse_back() {
    let key = RequestKey::from_bytes([0xAB; 16]);
    let value = key.to_string();
    assert_eq!(value, "ab".repeat(16));
    assert_eq!(value.to_uppercase().parse::<RequestKey>(), Ok(key));
}

#[test]
fn echoed_request_key_is_accepted_and_another_one_is_cross_wired() {
    let key = RequestKey::random();
    let policy = framed_policy();
    let (_, wire) = complete_stream(Some(key));
    let mut decoder = policy.decoder(key).unwrap();
    assert_eq!(final_result(&mut decoder, &wire), Ok(None));
    assert_eq!(decoder.head().unwrap().request_key, Some(key));

    let other = RequestKey::random();
    let mut decoder = policy.decoder(other).unwrap();
    let _ = final_result(&mut decoder, &wire);
    let outcome = decoder.outcome();
    assert_eq!(
        outcome.verdict,
        Verdict::CrossWired {
            expected: other,
            found: Some(key)
        }
    );
    // Only the HEAD frame was read; nothing of the cross-wired stream is accepted.
    assert_eq!((outcome.received.frames, outcome.received.messages), (1, 0));
    assert_eq!(outcome.head, None);
}

#[test]
fn the_all_zero_request_key_is_refused_wherever_a_key_is_read() {
    // On the wire, 16 zero bytes in HEAD mean "the request carried no key" (SPEC.md §3, §10):
    // a key with that value would be read back as none, so it cannot be a key.
    let zeros = "0".repeat(32);
    assert!(zeros.parse::<RequestKey>().is_err());
    assert!(serde_json::from_value::<RequestKey>(serde_json::json!(zeros)).is_err());
    let request = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"_meta": {REQUEST_KEY_META: zeros}}});
    assert!(matches!(
        request_key(&request),
        Err(RequestKeyError::InvalidKey(_))
    ));
    assert!(RequestKey::try_from([0; 16]).is_err());
    assert!(std::panic::catch_unwind(|| RequestKey::from_bytes([0; 16])).is_err());
    let mut one = [0; 16];
    one[15] = 1;
    assert_eq!(
        RequestKey::from_bytes(one).to_string(),
        format!("{}01", "0".repeat(30))
    );
}

#[cfg(feature = "http")]
#[test]
fn a_server_rejects_an_opt_in_whose_key_is_all_zero() {
    use mcp_framing::http::{OptIn, OptInError};
    let mut headers = http::HeaderMap::new();
    headers.insert("mcp-framing", "1".parse().unwrap());
    headers.insert("mcp-framing-request-key", "0".repeat(32).parse().unwrap());
    assert_eq!(
        OptIn::from_headers(&headers),
        Err(OptInError::InvalidRequestKey)
    );
}

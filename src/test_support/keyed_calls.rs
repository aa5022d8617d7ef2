//! Keyed `tools/call` requests and responses for the deduplication unit tests
//! (`test_support::store_scenarios` and the stores' tests).

use mcp_framing::RequestKey;
use mcp_framing::dedupe::{FingerprintRules, KeyedCall, Principal};
use serde_json::{Value, json};

/// A keyed `tools/call` of `send_email` with `args`, by `principal` (anonymous if empty).
pub(crate) fn call(principal: &str, key: RequestKey, args: Value) -> KeyedCall {
    let mut request = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "send_email", "arguments": args, "_meta": {"progressToken": 1}}});
    mcp_framing::request::set_request_key(&mut request, key).unwrap();
    let principal = if principal.is_empty() {
        Principal::anonymous()
    } else {
        Principal::from_id(principal)
    };
    KeyedCall::from_request(principal, Some(key), &request, &FingerprintRules::default())
        .expect("a request")
        .expect("keyed")
}

/// A final JSON-RPC response under `id` whose one text content is `text`.
pub(crate) fn response(id: u64, text: &str) -> Vec<u8> {
    json!({"jsonrpc": "2.0", "id": id, "result": {"content": [{"type": "text", "text": text}]}})
        .to_string()
        .into_bytes()
}

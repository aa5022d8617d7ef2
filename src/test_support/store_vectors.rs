//! Reading the record-format vectors of `tests/vectors/store/` (SPEC.md §17.12.1), for the unit
//! tests of the derivations (store keys, canonical JSON, fingerprints, request reading:
//! `dedupe/vectors.rs`) and of the scripts and `RedisStore` against Redis
//! (`dedupe/redis/tests/vectors.rs`).
#![allow(dead_code)] // the tests without Redis use a subset

use std::path::PathBuf;

use mcp_framing::dedupe::Principal;
use serde_json::Value;

/// The vector file `name`, parsed.
pub(crate) fn vectors(name: &str) -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/vectors/store")
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A string member of a vector.
pub(crate) fn text(value: &Value) -> &str {
    value
        .as_str()
        .unwrap_or_else(|| panic!("a string: {value}"))
}

/// `N` bytes written as `2 * N` hex digits.
pub(crate) fn hex_bytes<const N: usize>(hex: &str) -> [u8; N] {
    assert_eq!(hex.len(), 2 * N, "{hex}");
    let mut out = [0; N];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).expect("hex");
    }
    out
}

/// The principal a vector names: `{"id": ...}`, or the `authorization` header values it lists.
pub(crate) fn principal(spec: &Value) -> Principal {
    if let Some(id) = spec.get("id") {
        return Principal::from_id(text(id));
    }
    let mut headers = http::HeaderMap::new();
    for value in spec
        .get("authorization")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        headers.append(http::header::AUTHORIZATION, text(value).parse().unwrap());
    }
    Principal::from_authorization(&headers)
}

/// `bytes` as lowercase hex digits, as the vectors write digests.
pub(crate) fn lowercase_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

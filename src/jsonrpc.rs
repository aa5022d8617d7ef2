//! JSON-RPC message kinds, read without building a JSON tree.
//!
//! A server that frames a response stream ends it after the final response to the request, and a
//! client holds that response back until the stream's sentinel: both must tell a response from a
//! notification or a request, on every message that passes. [`is_response`] reads the message's
//! top-level keys and skips every value (nested objects, arrays, long strings) without building
//! it: a `serde_json::Value` of a large tool result costs more than hashing it.

use std::fmt;

use serde::Deserialize;
use serde::de::{self, Deserializer, IgnoredAny, MapAccess, Visitor};

/// Whether `message` is a JSON-RPC response: one JSON object with an `id` member and a `result`
/// or an `error` member (JSON-RPC 2.0 §5), whatever their values (`"id": null` included).
///
/// Only the top level counts: keys inside nested values or inside strings do not. Escaped key
/// names are read as JSON reads them (`"\u0069d"` is `id`). Anything that is not exactly one
/// valid JSON object (a batch array, trailing bytes, a cut message) is not a response.
///
/// # Examples
///
/// ```
/// use mcp_framing::jsonrpc::is_response;
/// assert!(is_response(r#"{"jsonrpc":"2.0","id":7,"result":{"content":[]}}"#));
/// assert!(is_response(r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse error"}}"#));
/// // A notification whose params mention `id` and `result` is not one:
/// assert!(!is_response(r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"id":1,"result":2}}"#));
/// assert!(!is_response(r#"{"jsonrpc":"2.0","id":7,"result":{}"#)); // cut
/// ```
#[must_use]
pub fn is_response(message: &str) -> bool {
    let mut de = serde_json::Deserializer::from_str(message);
    matches!(de.deserialize_map(TopLevel), Ok(true)) && de.end().is_ok()
}

/// Visits the top-level object: notes which keys it has, skips every value.
struct TopLevel;

impl<'de> Visitor<'de> for TopLevel {
    type Value = bool;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON-RPC message (a JSON object)")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<bool, A::Error> {
        let (mut id, mut outcome) = (false, false);
        while let Some(key) = map.next_key::<Key>()? {
            match key {
                Key::Id => id = true,
                Key::Result | Key::Error => outcome = true,
                Key::Method | Key::Other => {}
            }
            map.next_value::<IgnoredAny>()?;
        }
        Ok(id && outcome)
    }
}

/// A top-level key, compared without allocating (serde_json hands over escaped keys unescaped).
enum Key {
    Id,
    Result,
    Error,
    Method,
    Other,
}

impl<'de> Deserialize<'de> for Key {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_identifier(KeyVisitor)
    }
}

struct KeyVisitor;

impl Visitor<'_> for KeyVisitor {
    type Value = Key;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object key")
    }

    fn visit_str<E: de::Error>(self, key: &str) -> Result<Key, E> {
        Ok(match key {
            "id" => Key::Id,
            "result" => Key::Result,
            "error" => Key::Error,
            "method" => Key::Method,
            _ => Key::Other,
        })
    }
}

/// The method of a JSON-RPC request: one JSON object with an `id` member and a string `method`
/// member (JSON-RPC 2.0 §4), read as [`is_response`] reads, skipping every other value. `None`
/// for a notification (no `id`), a response, a batch, anything that is not one JSON object.
#[cfg(feature = "rmcp")]
pub(crate) fn request_method(message: &[u8]) -> Option<String> {
    let mut de = serde_json::Deserializer::from_slice(message);
    let method = de.deserialize_map(Request).ok().flatten()?;
    de.end().ok().map(|()| method)
}

/// Visits a request's top-level object: its `id` (skipped) and `method`.
#[cfg(feature = "rmcp")]
struct Request;

#[cfg(feature = "rmcp")]
impl<'de> Visitor<'de> for Request {
    type Value = Option<String>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON-RPC request (a JSON object)")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Option<String>, A::Error> {
        let (mut id, mut method) = (false, None);
        while let Some(key) = map.next_key::<Key>()? {
            match key {
                Key::Id => {
                    id = true;
                    map.next_value::<IgnoredAny>()?;
                }
                Key::Method => method = Some(map.next_value::<String>()?),
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(method.filter(|_| id))
    }
}

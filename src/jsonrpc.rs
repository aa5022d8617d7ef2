//! JSON-RPC message kinds, read without building a JSON tree.
//!
//! A server that frames a response stream ends it after the final response to the request, and a
//! client holds that response back until the stream's sentinel: both must tell a response from a
//! notification or a request, on every message that passes. [`is_response`] reads the message's
//! top-level keys and skips every value (nested objects, arrays, long strings) without building
//! it: a `serde_json::Value` of a large tool result costs more than hashing it.
//!
//! The same scan finds where the top-level `id` and `error` values lie in the message's bytes, so
//! that a client can put a retried request's original id back by editing the id value alone, every
//! other byte of the verified response unchanged (SPEC.md §10, §17.13).

use std::fmt;
use std::ops::Range;

use serde::Deserialize;
use serde::de::{self, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde_json::value::RawValue;

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
/// use mcp_framing::internals::jsonrpc::is_response;
/// assert!(is_response(r#"{"jsonrpc":"2.0","id":7,"result":{"content":[]}}"#));
/// assert!(is_response(r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse error"}}"#));
/// // A notification whose params mention `id` and `result` is not one:
/// assert!(!is_response(r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"id":1,"result":2}}"#));
/// assert!(!is_response(r#"{"jsonrpc":"2.0","id":7,"result":{}"#)); // cut
/// ```
#[must_use]
pub fn is_response(message: &str) -> bool {
    top_level(message).is_some_and(|members| members.is_response())
}

/// What the top level of one JSON object holds, as far as JSON-RPC goes: where its `id` and
/// `error` values lie (byte ranges of the message), and whether it has a `result`. Every value is
/// skipped, never built.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct TopLevel {
    /// The byte range of the (last) `id` member's value.
    pub(crate) id: Option<Range<usize>>,
    /// How many `id` members the object has (JSON allows duplicates; which one a parser reads is
    /// not defined).
    pub(crate) ids: usize,
    /// Whether the object has a `result` member.
    pub(crate) result: bool,
    /// The byte range of the (last) `error` member's value.
    pub(crate) error: Option<Range<usize>>,
}

impl TopLevel {
    /// JSON-RPC 2.0 §5: an `id` member and a `result` or an `error` member.
    pub(crate) fn is_response(&self) -> bool {
        self.ids > 0 && (self.result || self.error.is_some())
    }
}

/// The top level of `message` if it is exactly one valid JSON object (leading and trailing JSON
/// whitespace allowed); `None` for anything else: a batch array, a scalar, trailing bytes, a cut
/// or malformed text. Escaped key names are read as JSON reads them (`"\u0069d"` is `id`).
pub(crate) fn top_level(message: &str) -> Option<TopLevel> {
    let mut de = serde_json::Deserializer::from_str(message);
    let visitor = Members {
        base: message.as_ptr() as usize,
    };
    let members = de.deserialize_map(visitor).ok()?;
    de.end().ok()?;
    Some(members)
}

/// Why [`with_id`] cannot put an id back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(not(feature = "client"), allow(dead_code))] // the clients' retries use it
pub(crate) enum IdEditError {
    /// The message is not exactly one valid JSON object.
    NotAnObject,
    /// The object has no `id` member.
    NoId,
    /// The object has several `id` members: which one a reader takes is not defined, so none is
    /// edited.
    DuplicateId,
}

/// `message` with the value of its top-level `id` member replaced by `id` (a JSON text, e.g.
/// `7` or `"a"`), every other byte unchanged: the members' order, their spelling (escapes,
/// number forms) and the whitespace stay as the peer wrote them.
#[cfg_attr(not(feature = "client"), allow(dead_code))] // the clients' retries use it
pub(crate) fn with_id(message: &str, id: &str) -> Result<String, IdEditError> {
    let members = top_level(message).ok_or(IdEditError::NotAnObject)?;
    let span = match (members.ids, members.id) {
        (1, Some(span)) => span,
        (0, _) | (_, None) => return Err(IdEditError::NoId),
        _ => return Err(IdEditError::DuplicateId),
    };
    let mut edited = String::with_capacity(message.len() - span.len() + id.len());
    edited.push_str(&message[..span.start]);
    edited.push_str(id);
    edited.push_str(&message[span.end..]);
    Ok(edited)
}

/// Visits the top-level object: notes which keys it has and where the values that matter lie,
/// skips every other value.
struct Members {
    /// The address of the message's first byte: a borrowed value's offset is its address minus
    /// this one.
    base: usize,
}

impl Members {
    fn span(&self, raw: &RawValue) -> Range<usize> {
        let text = raw.get();
        let start = text.as_ptr() as usize - self.base;
        start..start + text.len()
    }
}

impl<'de> Visitor<'de> for Members {
    type Value = TopLevel;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON-RPC message (a JSON object)")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<TopLevel, A::Error> {
        let mut members = TopLevel::default();
        while let Some(key) = map.next_key::<Key>()? {
            match key {
                Key::Id => {
                    let raw: &'de RawValue = map.next_value()?;
                    members.ids += 1;
                    members.id = Some(self.span(raw));
                }
                Key::Error => {
                    let raw: &'de RawValue = map.next_value()?;
                    members.error = Some(self.span(raw));
                }
                Key::Result => {
                    members.result = true;
                    map.next_value::<IgnoredAny>()?;
                }
                Key::Method | Key::Other => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(members)
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
#[cfg(feature = "rmcp-server")]
pub(crate) fn request_method(message: &[u8]) -> Option<String> {
    let mut de = serde_json::Deserializer::from_slice(message);
    let method = de.deserialize_map(Request).ok().flatten()?;
    de.end().ok().map(|()| method)
}

/// Visits a request's top-level object: its `id` (skipped) and `method`.
#[cfg(feature = "rmcp-server")]
struct Request;

#[cfg(feature = "rmcp-server")]
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

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::Value;

    use super::{IdEditError, top_level, with_id};

    #[test]
    fn the_id_value_is_found_where_it_lies_and_nothing_else_moves() {
        let cases: &[(&str, &str)] = &[
            (r#"{"jsonrpc":"2.0","id":1,"result":{}}"#, "1"),
            (
                r#"{"result":{"id":2},"id" :  "a~attempt-2" ,"jsonrpc":"2.0"}"#,
                r#""a~attempt-2""#,
            ),
            (
                "\n{ \"\\u0069d\"\t:\r\n[1, {\"id\": 3}] }  ",
                r#"[1, {"id": 3}]"#,
            ),
            (
                r#"{"error":{"code":-32603,"message":"\"id\":9"},"i\u0064":null}"#,
                "null",
            ),
            (r#"{"id":-1.50e+3,"result":"caf\u00e9 {}"}"#, "-1.50e+3"),
        ];
        for (message, id) in cases {
            let span = top_level(message).unwrap().id.unwrap();
            assert_eq!(&message[span.clone()], *id, "{message}");
            let edited = with_id(message, "\"x\"").unwrap();
            assert_eq!(edited[..span.start], message[..span.start]);
            assert_eq!(edited[span.start + 3..], message[span.end..]);
        }
    }

    #[test]
    fn anything_but_one_object_with_one_id_is_refused() {
        let refused: &[(&str, IdEditError)] = &[
            (r#"[{"id":1,"result":{}}]"#, IdEditError::NotAnObject),
            (r#"{"id":1,"result":{}} {}"#, IdEditError::NotAnObject),
            (r#"{"id":1,"result":{}"#, IdEditError::NotAnObject),
            (r#"{"id":1,"result":"\x"}"#, IdEditError::NotAnObject),
            (r#""id""#, IdEditError::NotAnObject),
            ("", IdEditError::NotAnObject),
            (r#"{"result":{"id":1}}"#, IdEditError::NoId),
            (r#"{"note":"\"id\":1","result":{}}"#, IdEditError::NoId),
            (
                r#"{"id":1,"\u0069d":2,"result":{}}"#,
                IdEditError::DuplicateId,
            ),
        ];
        for (message, err) in refused {
            assert_eq!(with_id(message, "7"), Err(*err), "{message}");
        }
    }

    /// JSON whitespace, as a peer may write it between tokens.
    fn ws() -> impl Strategy<Value = String> {
        prop::collection::vec(
            prop_oneof![Just(' '), Just('\t'), Just('\n'), Just('\r')],
            0..3,
        )
        .prop_map(|chars| chars.into_iter().collect())
    }

    /// A JSON string token in the spellings a peer may choose: escapes, raw UTF-8, braces and
    /// quotes inside.
    fn string() -> impl Strategy<Value = String> {
        let piece = prop_oneof![
            Just("id".to_owned()),
            Just(r"\u0069d".to_owned()),
            Just(r#"\"id\":1,"#.to_owned()),
            Just("{}[],:".to_owned()),
            Just(r"\\".to_owned()),
            Just(r"\n\t\/".to_owned()),
            Just(r"caf\u00e9".to_owned()),
            Just("café ✓".to_owned()),
            "[a-z ]{0,4}",
        ];
        prop::collection::vec(piece, 0..4).prop_map(|pieces| format!("\"{}\"", pieces.concat()))
    }

    /// An object key: `id` in its spellings, its near misses, the other JSON-RPC members.
    fn key() -> impl Strategy<Value = String> {
        prop_oneof![
            Just(r#""id""#.to_owned()),
            Just(r#""\u0069d""#.to_owned()),
            Just(r#""i\u0064""#.to_owned()),
            Just(r#""Id""#.to_owned()),
            Just(r#""ids""#.to_owned()),
            Just(r#""result""#.to_owned()),
            Just(r#""error""#.to_owned()),
            Just(r#""method""#.to_owned()),
            string(),
        ]
    }

    /// A JSON text of any value, in the spellings a peer may choose.
    fn value() -> impl Strategy<Value = String> {
        let leaf = prop_oneof![
            Just("null".to_owned()),
            Just("true".to_owned()),
            Just("false".to_owned()),
            Just("-0".to_owned()),
            Just("1.0e2".to_owned()),
            Just("-1.5E-3".to_owned()),
            any::<i64>().prop_map(|n| n.to_string()),
            string(),
        ];
        leaf.prop_recursive(4, 32, 5, |inner| {
            prop_oneof![
                prop::collection::vec((ws(), inner.clone(), ws()), 0..4).prop_map(|items| {
                    let items: Vec<String> = items
                        .into_iter()
                        .map(|(a, v, b)| format!("{a}{v}{b}"))
                        .collect();
                    format!("[{}]", items.join(","))
                }),
                object(inner),
            ]
        })
    }

    fn object(inner: impl Strategy<Value = String>) -> impl Strategy<Value = String> {
        prop::collection::vec((ws(), key(), ws(), ws(), inner, ws()), 0..6).prop_map(|members| {
            let members: Vec<String> = members
                .into_iter()
                .map(|(a, k, b, c, v, d)| format!("{a}{k}{b}:{c}{v}{d}"))
                .collect();
            format!("{{{}}}", members.join(","))
        })
    }

    /// A whole message: one object, with whitespace around it.
    fn message() -> impl Strategy<Value = String> {
        (ws(), object(value()), ws()).prop_map(|(a, o, b)| format!("{a}{o}{b}"))
    }

    proptest! {
        #[test]
        fn an_id_edit_changes_the_id_value_alone(message in message(), id in any::<u32>()) {
            let parsed: Value = serde_json::from_str(&message).expect("the generator writes JSON");
            let id = id.to_string();
            let ids = top_level(&message).expect("one object").ids;
            match with_id(&message, &id) {
                Ok(edited) => {
                    prop_assert_eq!(ids, 1);
                    let span = top_level(&message).unwrap().id.unwrap();
                    // Exactly the value: no whitespace of the peer's is taken with it.
                    prop_assert_eq!(message[span.clone()].trim_matches([' ', '\t', '\n', '\r']),
                                    &message[span.clone()]);
                    // Every other byte unchanged.
                    prop_assert_eq!(&edited[..span.start], &message[..span.start]);
                    prop_assert_eq!(&edited[span.start + id.len()..], &message[span.end..]);
                    // And JSON reads the same object with the new id.
                    let mut expected = parsed.clone();
                    expected["id"] = serde_json::from_str(&id).unwrap();
                    prop_assert_eq!(serde_json::from_str::<Value>(&edited).unwrap(), expected);
                    prop_assert_eq!(&parsed["id"],
                                    &serde_json::from_str::<Value>(&message[span]).unwrap());
                }
                Err(IdEditError::NoId) => prop_assert!(ids == 0 && parsed.get("id").is_none()),
                Err(IdEditError::DuplicateId) => prop_assert!(ids > 1),
                Err(IdEditError::NotAnObject) => prop_assert!(false, "refused one object"),
            }
        }

        #[test]
        fn no_cut_of_a_message_and_nothing_appended_to_one_is_edited(message in message()) {
            let end = message.trim_end_matches([' ', '\t', '\n', '\r']).len();
            for cut in 0..end {
                if message.is_char_boundary(cut) {
                    prop_assert_eq!(with_id(&message[..cut], "1"), Err(IdEditError::NotAnObject));
                }
            }
            for tail in ["x", "{}", ",", "]", "\"", "0"] {
                let longer = format!("{message}{tail}");
                prop_assert_eq!(with_id(&longer, "1"), Err(IdEditError::NotAnObject));
            }
        }
    }
}

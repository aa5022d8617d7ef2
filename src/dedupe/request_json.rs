//! Reading a request body as JSON before deduplicating it (SPEC.md §17.10): strictly, so that
//! the parameters the fingerprint covers are the parameters the tool receives.

use std::fmt;

use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

/// Deepest nesting of arrays and objects accepted: serde_json's recursion limit.
pub(crate) const MAX_JSON_DEPTH: usize = 128;

/// Why a request body is not one well-formed JSON text ([`parse_request_json`]).
///
/// # Examples
///
/// ```
/// use mcp_framing::internals::dedupe::{RequestJsonError, parse_request_json};
/// let err = parse_request_json(br#"{"a": 1, "a": 2}"#).unwrap_err();
/// assert!(matches!(err, RequestJsonError::DuplicateMember { .. }));
/// assert_eq!(err.to_string(), "duplicate member name at line 1, column 16");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RequestJsonError {
    /// Not JSON: a syntax error, bytes that are not UTF-8, or text after the value.
    #[error("not JSON: syntax error at line {line}, column {column}")]
    Syntax {
        /// Line of the error (1-based).
        line: usize,
        /// Column of the error (1-based).
        column: usize,
    },
    /// Arrays and objects nested deeper than `MAX_JSON_DEPTH`.
    #[error("JSON nested deeper than {max} levels", max = MAX_JSON_DEPTH)]
    TooDeep,
    /// An object with two members of the same name (RFC 8259 §4 leaves their meaning to the
    /// parser; parsers disagree, so the fingerprint could cover other parameters than the tool
    /// receives).
    #[error("duplicate member name at line {line}, column {column}")]
    DuplicateMember {
        /// Line where the second occurrence's value ends (1-based).
        line: usize,
        /// Column where it ends (1-based).
        column: usize,
    },
}

/// Parses a request body as JSON the way a deduplicating server must (SPEC.md §17.10): UTF-8,
/// arrays and objects nested at most `MAX_JSON_DEPTH` deep, and **no object with two members
/// of the same name**, at any depth. Such a body is refused rather than fingerprinted: JSON
/// parsers disagree on which duplicate wins (first, last, or an error), so the layer and the
/// tool behind it could read different parameters. Otherwise the value is what
/// `serde_json::from_slice` reads.
///
/// # Errors
///
/// [`RequestJsonError`]: not JSON, too deep, or a duplicate member name.
///
/// # Examples
///
/// ```
/// use mcp_framing::internals::dedupe::{RequestJsonError, parse_request_json};
/// let value = parse_request_json(br#"{"jsonrpc": "2.0", "id": 1, "method": "tools/call"}"#)?;
/// assert_eq!(value["id"], 1);
/// let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
/// assert_eq!(parse_request_json(deep.as_bytes()), Err(RequestJsonError::TooDeep));
/// assert!(matches!(parse_request_json(b"{\"a\": \"\xff\"}"), Err(RequestJsonError::Syntax { .. })));
/// # Ok::<(), RequestJsonError>(())
/// ```
pub fn parse_request_json(bytes: &[u8]) -> Result<Value, RequestJsonError> {
    let mut deserializer = serde_json::Deserializer::from_slice(bytes);
    let value = Strict
        .deserialize(&mut deserializer)
        .and_then(|value| deserializer.end().map(|()| value));
    value.map_err(|err| {
        let (line, column) = (err.line(), err.column());
        if err.is_data() {
            // The only data error this visitor raises (any JSON value is a `Value`).
            RequestJsonError::DuplicateMember { line, column }
        } else if err.to_string().starts_with("recursion limit exceeded") {
            RequestJsonError::TooDeep
        } else {
            RequestJsonError::Syntax { line, column }
        }
    })
}

/// A `Value`, refusing duplicate member names.
struct Strict;

impl<'de> DeserializeSeed<'de> for Strict {
    type Value = Value;

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Strict {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(Strict)? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut members = Map::new();
        while let Some(name) = map.next_key::<String>()? {
            let value = map.next_value_seed(Strict)?;
            if members.insert(name, value).is_some() {
                return Err(de::Error::custom("duplicate member name"));
            }
        }
        Ok(Value::Object(members))
    }
}

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
    is_response_text(message.as_bytes())
}

/// [`is_response`] of text its caller already knows to be UTF-8 (an SSE parser's data, which it
/// validated): the bytes are not validated again.
///
/// A scan of its own decides the usual message alone, in one pass that skips long strings a
/// block at a time (serde_json's skipping of a 1 MiB result took a quarter of its SHA-256's
/// time); whatever it does not read the way serde_json does (an escaped top-level key, nesting
/// deeper than [`MAX_SCAN_DEPTH`], anything that is not valid JSON) goes to the serde_json
/// reading, which is the definition.
pub(crate) fn is_response_text(text: &[u8]) -> bool {
    Scan::new(text)
        .top_level()
        .unwrap_or_else(|| by_serde(text))
}

/// The definition of [`is_response`]: serde_json reads the top-level keys and skips every value.
fn by_serde(text: &[u8]) -> bool {
    let mut de = serde_json::Deserializer::from_slice(text);
    matches!(de.deserialize_map(TopLevel), Ok(true)) && de.end().is_ok()
}

/// Containers nested deeper than this are left to serde_json.
const MAX_SCAN_DEPTH: u32 = 64;

/// Bytes looked at together when a string is skipped: a block without a quote, a backslash or a
/// control character is passed over whole (the compiler checks it with vector instructions).
const SKIP_BLOCK: usize = 64;

/// A byte that ends the plain run of a JSON string: a quote, a backslash or a control character (which JSON
/// forbids in strings). `b ^ 0x02 <= 0x20` holds for exactly `"` (0x22) and 0x00..=0x1f.
#[inline(always)]
fn ends_run(b: u8) -> bool {
    // `|`, not `||`: no branch, so that a block's bytes are checked together.
    ((b ^ 0x02) <= 0x20) | (b == b'\\')
}

/// A one-pass reading of a JSON-RPC message's top-level keys with the grammar serde_json reads
/// and skips values by (RFC 8259: its white space, numbers, literals, strings and escapes). Each
/// step returns `None` where it cannot go on: the text is then read by [`by_serde`], so that
/// only a text this reading accepts whole is decided here.
struct Scan<'a> {
    text: &'a [u8],
    at: usize,
}

impl<'a> Scan<'a> {
    fn new(text: &'a [u8]) -> Self {
        Self { text, at: 0 }
    }

    /// Whether the text is one JSON object with `id` and `result` or `error` at its top level;
    /// `None`: left to serde_json.
    fn top_level(mut self) -> Option<bool> {
        let (mut id, mut outcome) = (false, false);
        self.expect(b'{')?;
        self.skip_ws();
        if self.peek() == Some(b'}') {
            self.at += 1;
        } else {
            loop {
                let key = self.key()?;
                if key.contains(&b'\\') {
                    // serde_json resolves (and checks) escapes in the keys it reads.
                    return None;
                }
                match key {
                    b"id" => id = true,
                    b"result" | b"error" => outcome = true,
                    _ => {}
                }
                self.value()?;
                self.skip_ws();
                match self.bump()? {
                    b',' => {}
                    b'}' => break,
                    _ => return None,
                }
            }
        }
        self.skip_ws();
        (self.at == self.text.len()).then_some(id && outcome)
    }

    fn peek(&self) -> Option<u8> {
        self.text.get(self.at).copied()
    }

    fn bump(&mut self) -> Option<u8> {
        let b = self.peek()?;
        self.at += 1;
        Some(b)
    }

    /// Skips white space, then takes `b`.
    fn expect(&mut self, b: u8) -> Option<()> {
        self.skip_ws();
        (self.bump()? == b).then_some(())
    }

    fn skip_ws(&mut self) {
        while let Some(b' ' | b'\n' | b'\t' | b'\r') = self.peek() {
            self.at += 1;
        }
    }

    /// An object's key and its colon: the key's bytes as written (escapes not resolved).
    fn key(&mut self) -> Option<&'a [u8]> {
        self.expect(b'"')?;
        let start = self.at;
        self.string()?;
        let key = &self.text[start..self.at - 1];
        self.expect(b':')?;
        Some(key)
    }

    /// The rest of a string whose opening quote was taken, its closing quote included.
    fn string(&mut self) -> Option<()> {
        loop {
            while let Some(block) = self.text.get(self.at..self.at + SKIP_BLOCK) {
                if block.iter().fold(false, |hit, &b| hit | ends_run(b)) {
                    break;
                }
                self.at += SKIP_BLOCK;
            }
            while !ends_run(self.peek()?) {
                self.at += 1;
            }
            match self.bump()? {
                b'"' => return Some(()),
                b'\\' => match self.bump()? {
                    b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => {}
                    b'u' => {
                        let hex = self.text.get(self.at..self.at + 4)?;
                        if !hex.iter().all(u8::is_ascii_hexdigit) {
                            return None;
                        }
                        self.at += 4;
                    }
                    _ => return None,
                },
                // A control character.
                _ => return None,
            }
        }
    }

    /// The rest of a literal whose first byte was taken.
    fn literal(&mut self, rest: &[u8]) -> Option<()> {
        let found = self.text.get(self.at..self.at + rest.len())?;
        self.at += rest.len();
        (found == rest).then_some(())
    }

    /// The rest of a number whose first digit, `first`, was taken.
    fn number(&mut self, first: u8) -> Option<()> {
        let digits = |scan: &mut Self| {
            let start = scan.at;
            while scan.peek().is_some_and(|b| b.is_ascii_digit()) {
                scan.at += 1;
            }
            scan.at > start
        };
        match first {
            // One leading zero only.
            b'0' if self.peek().is_some_and(|b| b.is_ascii_digit()) => return None,
            b'0' => {}
            b'1'..=b'9' => {
                digits(self);
            }
            _ => return None,
        }
        if self.peek() == Some(b'.') {
            self.at += 1;
            if !digits(self) {
                return None;
            }
        }
        if let Some(b'e' | b'E') = self.peek() {
            self.at += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.at += 1;
            }
            if !digits(self) {
                return None;
            }
        }
        Some(())
    }

    /// One value, skipped: containers are followed with a stack of one bit a level (set: an
    /// object), within [`MAX_SCAN_DEPTH`].
    fn value(&mut self) -> Option<()> {
        let (mut objects, mut depth) = (0u64, 0u32);
        loop {
            self.skip_ws();
            match self.bump()? {
                b'"' => self.string()?,
                open @ (b'{' | b'[') => {
                    if depth == MAX_SCAN_DEPTH {
                        return None;
                    }
                    let object = open == b'{';
                    self.skip_ws();
                    if self.peek() == Some(if object { b'}' } else { b']' }) {
                        // Empty: a value like any other.
                        self.at += 1;
                    } else {
                        objects = (objects << 1) | u64::from(object);
                        depth += 1;
                        if object {
                            self.key()?;
                        }
                        continue;
                    }
                }
                b't' => self.literal(b"rue")?,
                b'f' => self.literal(b"alse")?,
                b'n' => self.literal(b"ull")?,
                b'-' => {
                    let first = self.bump()?;
                    self.number(first)?;
                }
                first @ b'0'..=b'9' => self.number(first)?,
                _ => return None,
            }
            // A value ended: close the containers it ends, or go on to the next element.
            loop {
                if depth == 0 {
                    return Some(());
                }
                let object = objects & 1 == 1;
                self.skip_ws();
                match self.bump()? {
                    b',' => {
                        if object {
                            self.key()?;
                        }
                        break;
                    }
                    b'}' if object => {}
                    b']' if !object => {}
                    _ => return None,
                }
                objects >>= 1;
                depth -= 1;
            }
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_usual_messages_are_decided_by_the_scan_alone() {
        let long = "x".repeat(3 * SKIP_BLOCK + 5);
        let cases = [
            (format!(r#"{{"jsonrpc":"2.0","id":1,"result":{{"content":[{{"type":"text","text":"{long}"}}],"isError":false}}}}"#), true),
            (r#"{"jsonrpc":"2.0","id":"a","error":{"code":-32603,"message":"é \"q\" \u00e9","data":[1.5e-3,-0,true,null]}}"#.to_owned(), true),
            (r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":0.5}}"#.to_owned(), false),
            (r#" { } "#.to_owned(), false),
        ];
        for (message, expected) in cases {
            assert_eq!(
                Scan::new(message.as_bytes()).top_level(),
                Some(expected),
                "{message}"
            );
        }
    }

    #[test]
    fn what_the_scan_does_not_read_as_serde_json_does_is_left_to_serde_json() {
        let deep = format!(
            r#"{{"id":1,"result":{}{}}}"#,
            "[".repeat(65),
            "]".repeat(65)
        );
        for message in [
            r#"{"\u0069d":1,"result":{}}"#,
            r#"{"id":1,"result":{}"#,
            r#"{"id":1,"result":01}"#,
            r#"{"id":1,"result":"\x"}"#,
            deep.as_str(),
        ] {
            assert_eq!(Scan::new(message.as_bytes()).top_level(), None, "{message}");
        }
        // And serde_json decides them.
        assert!(is_response(r#"{"\u0069d":1,"result":{}}"#));
        assert!(is_response(&deep));
        assert!(!is_response(r#"{"id":1,"result":01}"#));
    }
}

//! Oracle of the JSON-RPC scan (`src/jsonrpc.rs`, `src/jsonrpc/stops.rs`): whether a message is
//! a JSON-RPC response, the final response of a stream (SPEC.md §7.1), decided by the crate's
//! one-pass scan, which skips strings a block at a time and hands what it does not read to
//! `serde_json`.
//!
//! Input: a mode byte, then the message. Mode bit 0: the rest is an `arbitrary` JSON-RPC-ish
//! message ([`Message`]) rendered as text (escaped and unescaped key spellings, `\u` escapes and
//! surrogate pairs, lone surrogates, control characters, strings long enough to cross the scan's
//! 64-byte blocks, deep nesting, numbers of every form, white space, a cut or an extra byte);
//! otherwise the rest is the message's bytes as they are. Mode bits 1-7: where the rendered
//! message is cut or gets a byte overwritten (only with bit 0).
//!
//! The expected answer ([`expected`]) is `serde_json`'s strict reading: the bytes are UTF-8 and
//! read as exactly one JSON object, as strictly as `serde_json::from_slice::<Value>` reads them
//! (every number converted, every string decoded, nesting up to its recursion limit), with an `id`
//! member and a `result` or an `error` member (JSON-RPC 2.0 §5, the rule of
//! `internals::jsonrpc::is_response` and SPEC.md §7.1). Three texts that reading refuses are JSON
//! all the same (RFC 8259's grammar, which the scan is documented to read and which the crate's
//! definition, `serde_json` skipping every value, accepts); there the expected answer is
//! `serde_json`'s reading of the object's member names with every value skipped (`IgnoredAny`).
//! Each exclusion, with its reason:
//!
//! - a number out of `f64`'s range (`1e400`): RFC 8259 §6 allows any magnitude, and a response's
//!   id or result is never converted to a number to decide that it is one;
//! - a lone surrogate escape (`"\ud800"`) in a value: RFC 8259 §8.2 lets the grammar hold one,
//!   and no value is decoded to decide (a top-level *member name* with a lone surrogate is still
//!   refused: names are decoded to be compared);
//! - nesting deeper than `Value`'s recursion limit (128): a deep `params` does not change what
//!   the top level holds.
//!
//! `Value`'s own `Deserialize` is not the reference: with `serde_json`'s `raw_value` feature
//! (which the crate turns on) it reads an object whose first member is named
//! `$serde_json::private::RawValue` as the JSON text in that member's string, not as the object.
//! The reference reads values with `deserialize_any` as `Value` does, without that token.
//! Duplicate member names need nothing: a name present once or twice is present.
//!
//! The answer is checked on every public road to the scan:
//! - `internals::jsonrpc::is_response` (text: the scan without UTF-8 validation, then
//!   `serde_json` for what it leaves);
//! - a keyed `StreamDecoder`'s `Message::is_final_response` over a binary stream carrying the
//!   bytes (the scan that validates UTF-8 as it goes: arbitrary, non-UTF-8 bytes reach it), with a
//!   notification before it and the message repeated after it (only the first response is final);
//! - a keyed `BodyDecoder` in the compatible SSE mapping (the message is the event's data, already
//!   UTF-8: the scan without validation), for a message that an SSE event can carry.

use std::fmt::Write as _;

use arbitrary::{Arbitrary, Unstructured};
use bytes::BytesMut;
use mcp_framing::internals::jsonrpc::is_response;
use mcp_framing::internals::sse_compat::CompatEncoder;
use mcp_framing::mapping::Mapping;
use mcp_framing::{
    AttemptId, BodyDecoder, Event, RequestKey, StreamDecoder, StreamEncoder, StreamHead,
};
use serde::de::{self, IgnoredAny, MapAccess, Visitor};

/// Runs the oracle on one input; see the module docs.
///
/// # Panics
///
/// When a road to the scan disagrees with the expected answer.
pub fn run(data: &[u8]) {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let message = if mode & 1 == 1 {
        let Ok(message) = Message::arbitrary_take_rest(Unstructured::new(rest)) else {
            return;
        };
        let mut text = message.render().into_bytes();
        let at = usize::from(mode >> 1);
        match mode >> 6 {
            // Mostly whole.
            0 | 1 => {}
            // Cut.
            2 => text.truncate(text.len().saturating_sub(at & 0x1f)),
            // One byte overwritten.
            _ => {
                if !text.is_empty() {
                    let i = (at * 7919) % text.len();
                    text[i] = rest.first().copied().unwrap_or(b'"');
                }
            }
        }
        text
    } else {
        rest.to_vec()
    };
    check(&message);
}

/// Checks every road to the scan against [`expected`] for `message`.
///
/// # Panics
///
/// When one disagrees.
pub fn check(message: &[u8]) {
    let expected = expected(message);
    if let Ok(text) = std::str::from_utf8(message) {
        assert_eq!(
            is_response(text),
            expected,
            "is_response({text:?}) against serde_json"
        );
    }
    assert_eq!(
        keyed_binary(message),
        expected,
        "a keyed StreamDecoder's final response against serde_json"
    );
    if let Some(found) = keyed_compat(message) {
        assert_eq!(
            found, expected,
            "a keyed compatible-mapping BodyDecoder's final response against serde_json"
        );
    }
}

/// Whether `message` is a JSON-RPC response by `serde_json`'s strict reading, but for the
/// documented exceptions of the module docs.
pub fn expected(message: &[u8]) -> bool {
    let Ok(text) = std::str::from_utf8(message) else {
        return false;
    };
    match serde_json::from_str::<Json>(text) {
        Ok(Json::Object(names)) => {
            names.iter().any(|n| n == "id") && names.iter().any(|n| n == "result" || n == "error")
        }
        Ok(Json::Other) => false,
        Err(err) if tolerated(&err) => by_member_names(text),
        Err(_) => false,
    }
}

/// `Value`'s errors on texts RFC 8259 reads as JSON (the module docs name each).
fn tolerated(err: &serde_json::Error) -> bool {
    let message = err.to_string();
    err.is_syntax()
        && [
            "number out of range",
            "lone leading surrogate",
            "unexpected end of hex escape",
            "recursion limit exceeded",
        ]
        .iter()
        .any(|what| message.starts_with(what))
}

/// A JSON value read as strictly as `serde_json::Value` (every number converted, every string
/// decoded, nesting up to the recursion limit), keeping only the top level's member names:
/// `Value`'s own `Deserialize` is not used, since it reads an object whose member is named
/// `$serde_json::private::RawValue` as another value (see the module docs).
enum Json {
    Object(Vec<String>),
    Other,
}

/// Any value, strictly (its parts are dropped).
struct Strict;

impl<'de> de::Deserialize<'de> for Strict {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(StrictVisitor).map(|_| Strict)
    }
}

impl<'de> de::Deserialize<'de> for Json {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(StrictVisitor)
    }
}

struct StrictVisitor;

impl<'de> Visitor<'de> for StrictVisitor {
    type Value = Json;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, _: bool) -> Result<Json, E> {
        Ok(Json::Other)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Json, E> {
        Ok(Json::Other)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Json, E> {
        Ok(Json::Other)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Json, E> {
        Ok(Json::Other)
    }
    fn visit_str<E>(self, _: &str) -> Result<Json, E> {
        Ok(Json::Other)
    }
    fn visit_unit<E>(self) -> Result<Json, E> {
        Ok(Json::Other)
    }
    fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Json, A::Error> {
        while seq.next_element::<Strict>()?.is_some() {}
        Ok(Json::Other)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Json, A::Error> {
        let mut names = Vec::new();
        while let Some(name) = map.next_key::<String>()? {
            map.next_value::<Strict>()?;
            names.push(name);
        }
        Ok(Json::Object(names))
    }
}

/// The response rule on the top-level member names, every value skipped.
fn by_member_names(text: &str) -> bool {
    member_names(text).is_some_and(|names| {
        names.iter().any(|n| n == "id") && names.iter().any(|n| n == "result" || n == "error")
    })
}

/// The member names of `text` if it is one JSON object (values skipped, not built).
fn member_names(text: &str) -> Option<Vec<String>> {
    struct Names;
    impl<'de> Visitor<'de> for Names {
        type Value = Vec<String>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("an object")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Vec<String>, A::Error> {
            let mut names = Vec::new();
            while let Some(name) = map.next_key::<String>()? {
                map.next_value::<IgnoredAny>()?;
                names.push(name);
            }
            Ok(names)
        }
    }
    let mut de = serde_json::Deserializer::from_str(text);
    let names = de::Deserializer::deserialize_map(&mut de, Names).ok()?;
    de.end().ok()?;
    Some(names)
}

const KEY: [u8; 16] = *b"jsonrpc-scan-key";

fn head() -> StreamHead {
    StreamHead {
        request_key: Some(RequestKey::from_bytes(KEY)),
        attempt_id: AttemptId::from_bytes([7; 16]),
    }
}

fn decoder() -> StreamDecoder {
    StreamDecoder::builder()
        .expect_request_key(RequestKey::from_bytes(KEY))
        .build()
}

const NOTIFICATION: &[u8] =
    br#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"id":1,"result":2}}"#;

/// Whether a keyed decoder reads `message`, sent after a notification and before itself again,
/// as the final response (and never the notification, nor the repetition).
fn keyed_binary(message: &[u8]) -> bool {
    let mut enc = StreamEncoder::new(head());
    let mut wire = BytesMut::new();
    enc.message(NOTIFICATION, &mut wire).unwrap();
    enc.message(message, &mut wire).unwrap();
    enc.message(message, &mut wire).unwrap();
    enc.end(&mut wire).unwrap();
    let stream = decoder()
        .decode_all(&wire)
        .expect("a stream the encoder wrote");
    let finals: Vec<bool> = stream
        .messages
        .iter()
        .map(|m| m.is_final_response())
        .collect();
    assert_eq!(finals.len(), 3);
    assert!(!finals[0] && !finals[2], "final responses: {finals:?}");
    assert_eq!(&stream.messages[1].bytes()[..], message);
    finals[1]
}

/// The same in the compatible SSE mapping; `None` when an SSE event cannot carry `message` (not
/// UTF-8, a CR, empty).
fn keyed_compat(message: &[u8]) -> Option<bool> {
    let mut enc = CompatEncoder::new(StreamEncoder::new(head()));
    let mut body = BytesMut::new();
    enc.message(NOTIFICATION, &mut body).unwrap();
    enc.message(message, &mut body).ok()?;
    enc.end(&mut body).unwrap();
    let mut decoder = BodyDecoder::new(Mapping::Compat, decoder());
    decoder.feed(&body);
    decoder.finish();
    let mut finals = Vec::new();
    while let Some(event) = decoder.next_event().expect("a body the encoder wrote") {
        if let Event::Message(m) = event {
            finals.push(m.is_final_response());
            assert_eq!(
                &m.bytes()[..],
                if finals.len() == 1 {
                    NOTIFICATION
                } else {
                    message
                }
            );
        }
    }
    assert_eq!(finals.len(), 2, "final responses: {finals:?}");
    assert!(!finals[0]);
    Some(finals[1])
}

/// A JSON-RPC-ish message: top-level members, then what surrounds them.
#[derive(Arbitrary, Debug)]
pub struct Message {
    /// White space before, between and after (a seed).
    space: u8,
    /// The top level: an object's members, or another value.
    top: Top,
    /// Bytes after the value (none, white space, or a second value).
    trailing: Trailing,
}

#[derive(Arbitrary, Debug)]
enum Top {
    Object(Vec<(Name, Node)>),
    Other(Node),
}

#[derive(Arbitrary, Debug)]
enum Trailing {
    None,
    Space,
    Byte(u8),
}

/// A member name: one of those the rule reads, spelled plainly or with escapes, or another.
#[derive(Arbitrary, Debug)]
enum Name {
    Known(KnownName, Spelling),
    Other(Text),
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum KnownName {
    Id,
    Result,
    Error,
    Method,
    Jsonrpc,
    Params,
    /// `$serde_json::private::RawValue`.
    Private,
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum Spelling {
    Plain,
    /// Character `i % len` as `\u00XX` (lower or upper hex by bit 7).
    Escaped(u8),
    /// With a NUL or another character after it (another name).
    Suffixed(char),
}

#[derive(Arbitrary, Debug)]
enum Node {
    Null,
    True,
    False,
    Integer(i64),
    Float(f64),
    /// A number written by hand: sign, digits, fraction, exponent (possibly malformed).
    Number(NumberText),
    String(Text),
    Array(Vec<Node>),
    Object(Vec<(Name, Node)>),
    /// `depth` arrays or objects around a value.
    Deep(u8, bool, Box<Node>),
    /// A bare literal or garbage.
    Raw(String),
}

#[derive(Arbitrary, Debug)]
struct NumberText {
    minus: bool,
    int: u32,
    zeros: u8,
    frac: Option<u16>,
    exp: Option<(u8, i16)>,
}

/// A string's content, in pieces.
#[derive(Arbitrary, Debug)]
struct Text(Vec<Piece>);

#[derive(Arbitrary, Debug)]
enum Piece {
    Char(char),
    /// A byte repeated (up to 1023 times): long strings across blocks.
    Run(u8, u16),
    /// `\"`, `\\`, `\/`, `\b`, `\f`, `\n`, `\r`, `\t`, or an invalid escape, by the byte.
    Escape(u8),
    /// `\uXXXX` of any code unit (lone surrogates included).
    Unicode(u16),
    /// A surrogate pair of a supplementary character, escaped.
    Pair(char),
    /// A raw control character (invalid in JSON).
    Control(u8),
    /// A cut `\u` escape.
    CutUnicode(u8),
}

impl Message {
    /// The message as text.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let mut space = Space(self.space);
        space.put(&mut out);
        match &self.top {
            Top::Object(members) => object(members, &mut space, &mut out),
            Top::Other(node) => node.render(&mut space, &mut out),
        }
        space.put(&mut out);
        match self.trailing {
            Trailing::None => {}
            Trailing::Space => out.push_str(" \r\n\t"),
            Trailing::Byte(b) => out.push(char::from(b)),
        }
        out
    }
}

/// White space between tokens, from a seed.
struct Space(u8);

impl Space {
    fn put(&mut self, out: &mut String) {
        self.0 = self.0.rotate_left(3) ^ 0x5a;
        match self.0 & 7 {
            0 => out.push(' '),
            1 => out.push_str("\r\n  "),
            2 => out.push('\t'),
            3 => out.push('\n'),
            _ => {}
        }
    }
}

fn object(members: &[(Name, Node)], space: &mut Space, out: &mut String) {
    out.push('{');
    for (i, (name, value)) in members.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        space.put(out);
        name.render(out);
        space.put(out);
        out.push(':');
        space.put(out);
        value.render(space, out);
        space.put(out);
    }
    out.push('}');
}

impl Name {
    fn render(&self, out: &mut String) {
        match self {
            Name::Other(text) => text.render(out),
            Name::Known(name, spelling) => {
                let name = match name {
                    KnownName::Id => "id",
                    KnownName::Result => "result",
                    KnownName::Error => "error",
                    KnownName::Method => "method",
                    KnownName::Jsonrpc => "jsonrpc",
                    KnownName::Params => "params",
                    KnownName::Private => "$serde_json::private::RawValue",
                };
                out.push('"');
                match *spelling {
                    Spelling::Plain => out.push_str(name),
                    Spelling::Escaped(at) => {
                        let escaped = usize::from(at & 0x7f) % name.len();
                        for (i, c) in name.chars().enumerate() {
                            if i == escaped {
                                if at & 0x80 == 0 {
                                    let _ = write!(out, "\\u{:04x}", u32::from(c));
                                } else {
                                    let _ = write!(out, "\\u{:04X}", u32::from(c));
                                }
                            } else {
                                out.push(c);
                            }
                        }
                    }
                    Spelling::Suffixed(c) => {
                        out.push_str(name);
                        push_json_char(c, out);
                    }
                }
                out.push('"');
            }
        }
    }
}

/// A character as JSON writes it in a string (escaped where it must be).
fn push_json_char(c: char, out: &mut String) {
    match c {
        '"' => out.push_str("\\\""),
        '\\' => out.push_str("\\\\"),
        c if u32::from(c) < 0x20 => {
            let _ = write!(out, "\\u{:04x}", u32::from(c));
        }
        c => out.push(c),
    }
}

impl Text {
    fn render(&self, out: &mut String) {
        out.push('"');
        for piece in &self.0 {
            match *piece {
                Piece::Char(c) => push_json_char(c, out),
                Piece::Run(b, n) => {
                    let c = match b {
                        b'"' | b'\\' => 'x',
                        0..0x20 => ' ',
                        0x80.. => char::from_u32(0x80 + u32::from(b) * 67).unwrap_or('é'),
                        _ => char::from(b),
                    };
                    out.extend(std::iter::repeat_n(c, usize::from(n % 1024)));
                }
                Piece::Escape(b) => {
                    out.push('\\');
                    out.push(match b % 10 {
                        0 => '"',
                        1 => '\\',
                        2 => '/',
                        3 => 'b',
                        4 => 'f',
                        5 => 'n',
                        6 => 'r',
                        7 => 't',
                        8 => 'x',
                        _ => char::from(b & 0x7f),
                    });
                }
                Piece::Unicode(u) => {
                    let _ = write!(out, "\\u{u:04x}");
                }
                Piece::Pair(c) => {
                    let mut units = [0; 2];
                    for unit in c.encode_utf16(&mut units) {
                        let _ = write!(out, "\\u{unit:04X}");
                    }
                }
                Piece::Control(b) => out.push(char::from(b & 0x1f)),
                Piece::CutUnicode(n) => {
                    out.push_str("\\u");
                    out.push_str(&"0d8a"[..usize::from(n % 4)]);
                }
            }
        }
        out.push('"');
    }
}

impl Node {
    fn render(&self, space: &mut Space, out: &mut String) {
        match self {
            Node::Null => out.push_str("null"),
            Node::True => out.push_str("true"),
            Node::False => out.push_str("false"),
            Node::Integer(i) => {
                let _ = write!(out, "{i}");
            }
            Node::Float(f) => {
                let _ = write!(out, "{f:e}");
            }
            Node::Number(n) => {
                if n.minus {
                    out.push('-');
                }
                out.extend(std::iter::repeat_n('0', usize::from(n.zeros % 3)));
                let _ = write!(out, "{}", n.int);
                if let Some(frac) = n.frac {
                    let _ = write!(out, ".{frac}");
                }
                if let Some((form, exp)) = n.exp {
                    out.push(if form & 1 == 0 { 'e' } else { 'E' });
                    match form >> 1 & 3 {
                        0 => {
                            let _ = write!(out, "{exp}");
                        }
                        1 => {
                            let _ = write!(out, "+{}", exp.unsigned_abs());
                        }
                        2 => {
                            let _ = write!(out, "-{}", exp.unsigned_abs());
                        }
                        _ => {}
                    }
                }
            }
            Node::String(text) => text.render(out),
            Node::Array(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    space.put(out);
                    item.render(space, out);
                }
                space.put(out);
                out.push(']');
            }
            Node::Object(members) => object(members, space, out),
            Node::Deep(depth, objects, inner) => {
                let depth = usize::from(*depth);
                for _ in 0..depth {
                    out.push_str(if *objects { "{\"a\":" } else { "[" });
                }
                inner.render(space, out);
                for _ in 0..depth {
                    out.push(if *objects { '}' } else { ']' });
                }
            }
            Node::Raw(text) => out.push_str(text),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_expected_answer_follows_the_documented_rule() {
        let yes = [
            r#"{"jsonrpc":"2.0","id":1,"result":{}}"#,
            r#" {"id":null,"error":{"code":1,"message":"x"}} "#,
            r#"{"\u0069d":1,"result":1e400}"#,
            r#"{"id":1,"result":"\ud800"}"#,
            r#"{"id":1,"id":2,"result":0}"#,
        ];
        for text in yes {
            assert!(expected(text.as_bytes()), "{text}");
            check(text.as_bytes());
        }
        let deep = format!(
            r#"{{"id":1,"result":{}1{}}}"#,
            "[".repeat(200),
            "]".repeat(200)
        );
        assert!(expected(deep.as_bytes()));
        check(deep.as_bytes());
        let no = [
            r#"{"jsonrpc":"2.0","method":"x","params":{"id":1,"result":2}}"#,
            r#"[{"id":1,"result":{}}]"#,
            r#"{"id":1,"result":{}"#,
            r#"{"id":1,"result":{}} x"#,
            r#"{"id":1,"result":"a	b"}"#,
            r#"{"id":01,"result":0}"#,
            r#"{"\ud800":1,"id":1,"result":0}"#,
        ];
        for text in no {
            assert!(!expected(text.as_bytes()), "{text}");
            check(text.as_bytes());
        }
        check(b"{\"id\":1,\"result\":\"\xff\"}");
    }
}

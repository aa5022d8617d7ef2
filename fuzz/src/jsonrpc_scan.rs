//! Oracle of the JSON-RPC scan (`src/jsonrpc.rs`, `src/jsonrpc/stops.rs`): whether a message is
//! a JSON-RPC response, the final response of a stream (SPEC.md §7.1), decided by the crate's
//! one-pass scan, which skips strings a block at a time and hands what it does not read to
//! `serde_json`.
//!
//! Input: a mode byte, then the message. Mode bit 0: the rest is an `arbitrary` JSON-RPC-ish
//! message ([`Message`]) rendered as text (escaped and unescaped key spellings, `\u` escapes and
//! surrogate pairs, lone surrogates, control characters, strings long enough to cross the scan's
//! 64-byte blocks, deep nesting, numbers of every form, white space, a cut or an extra byte);
//! with it come the layer's piece sizes and route and whether 16 KiB of white space lead, and
//! mode bits 6-7 cut the rendered text (2) or overwrite a byte of it (3). Otherwise the rest is
//! the message's bytes as they are, mode bits 1-3 pick a piece size, bits 4-6 the route through
//! `FramingLayer` ([`through_layer`]), bit 7 the 16 KiB of leading white space.
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
//!   UTF-8: the scan without validation), for a message that an SSE event can carry;
//! - `FramingLayer` (feature `rmcp-server`) in front of an inner server whose body (JSON, or an
//!   SSE event) holds the message and arrives in fuzzer-chosen pieces: the layer reads a message
//!   past 16 KiB with the resumable scan as its bytes arrive, and frames it by what the scan
//!   found (the final response, whose `id` must be the request's; another message; no JSON-RPC
//!   message at all, never verified): [`expected_framing`].

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
use serde_json::value::RawValue;

/// Runs the oracle on one input; see the module docs.
///
/// # Panics
///
/// When a road to the scan disagrees with the expected answer.
pub fn run(data: &[u8]) {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    if mode & 1 == 1 {
        let Ok(input) = Input::arbitrary_take_rest(Unstructured::new(rest)) else {
            return;
        };
        let mut text = input.message.render().into_bytes();
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
                    text[i] = input.byte;
                }
            }
        }
        check(&pad(&text, input.pad), &input.splits, input.route);
    } else {
        let size = [1, 2, 3, 7, 64, 100, 1000, 4096][usize::from(mode >> 1 & 7)];
        check(&pad(rest, mode & 0x80 != 0), &[size], mode >> 4);
    }
}

/// `message` after enough white space for `FramingLayer` to send it on as it arrives.
fn pad(message: &[u8], pad: bool) -> Vec<u8> {
    let mut padded = if pad {
        vec![b' '; 16 * 1024]
    } else {
        Vec::new()
    };
    padded.extend_from_slice(message);
    padded
}

/// A structured input.
#[derive(Arbitrary, Debug)]
struct Input {
    /// Piece sizes of the inner body through `FramingLayer` (cycled).
    splits: Vec<u16>,
    /// 16 KiB of white space before the message (so the layer streams it).
    pad: bool,
    /// How the message goes through `FramingLayer` (see [`through_layer`]).
    route: u8,
    /// The byte a mutation writes.
    byte: u8,
    message: Message,
}

/// Checks every road to the scan against [`expected`] for `message` (and, through
/// `FramingLayer`, with its inner body in pieces of the sizes `splits`, by `route`: see
/// [`through_layer`]).
///
/// # Panics
///
/// When one disagrees.
#[cfg_attr(not(feature = "rmcp-server"), allow(unused_variables))] // the layer's
pub fn check(message: &[u8], splits: &[u16], route: u8) {
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
    #[cfg(feature = "rmcp-server")]
    if !message.is_empty() {
        let (found, expected) = (
            through_layer(message, splits, route),
            expected_framing(message, route),
        );
        assert_eq!(
            found.finals,
            expected.finals,
            "FramingLayer (route {route:#b}) over the inner body in pieces of {splits:?}: verified messages of {:?}",
            String::from_utf8_lossy(message)
                .trim_start()
                .chars()
                .take(400)
                .collect::<String>()
        );
        // A message that is not the final response, alone in a JSON body: how the stream ends
        // is the layer's business, not the scan's.
        if expected.finals != [false] {
            assert_eq!(found.clean, expected.clean, "FramingLayer: a clean end");
        }
    }
}

/// Whether `message` is a JSON-RPC response by `serde_json`'s strict reading, but for the
/// documented exceptions of the module docs.
pub fn expected(message: &[u8]) -> bool {
    std::str::from_utf8(message).is_ok_and(|text| shape(text).is_response())
}

/// What a text is, by the reference reading of the module docs.
#[derive(Debug, PartialEq)]
pub enum Shape {
    /// One JSON object: its member names, and the text of its last `id` member's value.
    Object {
        /// The member names, in order (duplicates kept).
        names: Vec<String>,
        /// The last `id` member's value as written.
        id: Option<String>,
    },
    /// One JSON array.
    Array,
    /// Another JSON value.
    Scalar,
    /// Not one JSON value.
    Invalid,
}

impl Shape {
    /// JSON-RPC 2.0 §5: an `id` member and a `result` or an `error` member.
    pub fn is_response(&self) -> bool {
        matches!(self, Shape::Object { names, .. }
            if names.iter().any(|n| n == "id")
                && names.iter().any(|n| n == "result" || n == "error"))
    }
}

/// `text` by the reference reading: strictly, but for the exceptions of the module docs.
pub fn shape(text: &str) -> Shape {
    match read(text, true) {
        Ok(Shape::Object { .. }) => read(text, false).unwrap_or(Shape::Invalid),
        Ok(shape) => shape,
        Err(err) if tolerated(&err) => read(text, false).unwrap_or(Shape::Invalid),
        Err(_) => Shape::Invalid,
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

/// `text` read as one JSON value. `strict`: as strictly as `serde_json::Value` reads it (every
/// number converted, every string decoded, nesting up to the recursion limit; `Value`'s own
/// `Deserialize` is not used, since it reads an object whose member is named
/// `$serde_json::private::RawValue` as another value, see the module docs), the `id` not kept.
/// Otherwise with every value skipped (`IgnoredAny`, which reads the grammar without converting
/// numbers or decoding strings), member names decoded, the last `id` member's text kept.
fn read(text: &str, strict: bool) -> Result<Shape, serde_json::Error> {
    let mut de = serde_json::Deserializer::from_str(text);
    let shape = de::Deserializer::deserialize_any(&mut de, Reader(strict))?;
    de.end()?;
    Ok(shape)
}

/// Reads one JSON value (see [`read`]).
struct Reader(bool);

/// Any value, strictly (its reading dropped).
struct Strict;

impl<'de> de::Deserialize<'de> for Strict {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(Reader(true)).map(|_| Strict)
    }
}

impl<'de> Visitor<'de> for Reader {
    type Value = Shape;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, _: bool) -> Result<Shape, E> {
        Ok(Shape::Scalar)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Shape, E> {
        Ok(Shape::Scalar)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Shape, E> {
        Ok(Shape::Scalar)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Shape, E> {
        Ok(Shape::Scalar)
    }
    fn visit_str<E>(self, _: &str) -> Result<Shape, E> {
        Ok(Shape::Scalar)
    }
    fn visit_unit<E>(self) -> Result<Shape, E> {
        Ok(Shape::Scalar)
    }
    fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Shape, A::Error> {
        if self.0 {
            while seq.next_element::<Strict>()?.is_some() {}
        } else {
            while seq.next_element::<IgnoredAny>()?.is_some() {}
        }
        Ok(Shape::Array)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Shape, A::Error> {
        let (mut names, mut id) = (Vec::new(), None);
        while let Some(name) = map.next_key::<String>()? {
            if self.0 {
                map.next_value::<Strict>()?;
            } else if name == "id" {
                let raw: &RawValue = map.next_value()?;
                id = Some(raw.get().to_owned());
            } else {
                map.next_value::<IgnoredAny>()?;
            }
            names.push(name);
        }
        Ok(Shape::Object { names, id })
    }
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

/// What `FramingLayer` made of an inner server's JSON body: the verified messages (their
/// final-response flags) and whether the stream ended clean.
#[cfg(feature = "rmcp-server")]
#[derive(Debug, PartialEq, Eq)]
pub struct Framed {
    /// `is_final_response` of each verified message.
    pub finals: Vec<bool>,
    /// The stream's verdict was clean.
    pub clean: bool,
}

/// What `FramingLayer` must make of an inner JSON body holding `message` (read as an SSE client
/// reads it, UTF-8 with replacement) for a request whose id is 1: a response answering id 1 (or
/// one whose id is no value `serde_json` builds: the layer cannot tell it answers another) is the
/// verified final response and the stream ends clean; another JSON-RPC message (an object, an
/// array: a batch) is verified, not as the final response; anything else (not JSON-RPC, or a response to another id) is never verified.
///
/// In the compatible mapping a JSON body an SSE event cannot carry unchanged (not UTF-8, or
/// holding a CR, SPEC.md §18.3) is never verified either (the layer sends its ABORT record).
#[cfg(feature = "rmcp-server")]
pub fn expected_framing(message: &[u8], route: u8) -> Framed {
    if mapping(route) == Mapping::Compat
        && !sse_inner(message, route)
        && (message.contains(&b'\r') || std::str::from_utf8(message).is_err())
    {
        return Framed {
            finals: vec![],
            clean: false,
        };
    }
    let text = String::from_utf8_lossy(message);
    match shape(&text) {
        shape @ Shape::Object { .. } if shape.is_response() => {
            let Shape::Object { id, .. } = shape else {
                unreachable!()
            };
            let id: Option<serde_json::Value> = id.and_then(|id| serde_json::from_str(&id).ok());
            if id.is_none_or(|id| id == serde_json::json!(1)) {
                Framed {
                    finals: vec![true],
                    clean: true,
                }
            } else {
                Framed {
                    finals: vec![],
                    clean: false,
                }
            }
        }
        Shape::Object { .. } | Shape::Array => Framed {
            finals: vec![false],
            clean: false,
        },
        Shape::Scalar | Shape::Invalid => Framed {
            finals: vec![],
            clean: false,
        },
    }
}

/// `message` as the body of an inner server, in pieces of the sizes `splits` (cycled; 0 reads
/// as 1), through `FramingLayer` (a keyed request with id 1): what a keyed decoder reads of the
/// framed body. `route` bits 0-1: the mapping asked for (binary, SSE, compatible; 3 is binary);
/// bit 2: the inner body is an SSE event whose data is the message (one `data:` line per line;
/// a JSON body when the message holds a CR or is empty), otherwise a JSON body. A message longer
/// than the layer's streaming threshold (16 KiB) is read as it arrives by the resumable scan (in
/// the binary and SSE mappings; the compatible one writes a message whole, after it is read).
#[cfg(feature = "rmcp-server")]
pub fn through_layer(message: &[u8], splits: &[u16], route: u8) -> Framed {
    use http_body_util::BodyExt as _;
    use tower_layer::Layer as _;
    use tower_service::Service as _;

    let mapping = mapping(route);
    let sse = sse_inner(message, route);
    let body = if sse {
        let mut event = b"event: message\n".to_vec();
        for line in message.split(|&b| b == b'\n') {
            event.extend_from_slice(b"data: ");
            event.extend_from_slice(line);
            event.push(b'\n');
        }
        event.push(b'\n');
        event
    } else {
        message.to_vec()
    };
    let mut pieces = Vec::new();
    let mut at = 0;
    let mut sizes = splits.iter().cycle();
    while at < body.len() {
        let size = sizes.next().map_or(body.len(), |&n| usize::from(n).max(1));
        let end = body.len().min(at + size);
        pieces.push(bytes::Bytes::copy_from_slice(&body[at..end]));
        at = end;
    }
    let key = RequestKey::from_bytes(KEY);
    let mut request = http::Request::post("/mcp");
    for (name, value) in &mcp_framing::http::opt_in_headers(key, mapping == Mapping::Binary) {
        request = request.header(name, value);
    }
    if mapping == Mapping::Compat {
        request = request.header("mcp-framing-mapping", "compat");
    }
    let request = request
        .body(r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t"}}"#.to_owned())
        .expect("a request");
    let content_type = if sse {
        "text/event-stream"
    } else {
        "application/json"
    };
    let mut service =
        mcp_framing::rmcp_http::FramingLayer::new().layer(Inner(content_type, pieces));
    let body = RUNTIME.with(|runtime| {
        runtime.borrow().block_on(async {
            let response = service.call(request).await.expect("infallible");
            response.into_body().collect().await.map(|b| b.to_bytes())
        })
    });
    let body = body.expect("the inner body does not fail");
    let mut decoder = BodyDecoder::new(mapping, decoder());
    decoder.feed(&body);
    decoder.finish();
    let mut framed = Framed {
        finals: Vec::new(),
        clean: false,
    };
    loop {
        match decoder.next_event() {
            Ok(Some(Event::Message(m))) => {
                assert_eq!(
                    &m.bytes()[..],
                    String::from_utf8_lossy(message).as_bytes(),
                    "the verified message is the inner one as an SSE client reads it"
                );
                framed.finals.push(m.is_final_response());
            }
            Ok(Some(_)) => {}
            Ok(None) => {
                framed.clean = true;
                return framed;
            }
            Err(_) => return framed,
        }
    }
}

/// The mapping `route` asks for (see [`through_layer`]).
#[cfg(feature = "rmcp-server")]
fn mapping(route: u8) -> Mapping {
    [
        Mapping::Binary,
        Mapping::Sse,
        Mapping::Compat,
        Mapping::Binary,
    ][usize::from(route & 3)]
}

/// Whether `message` goes through the layer as an SSE event's data (see [`through_layer`]).
#[cfg(feature = "rmcp-server")]
fn sse_inner(message: &[u8], route: u8) -> bool {
    route & 4 != 0 && !message.is_empty() && !message.contains(&b'\r')
}

#[cfg(feature = "rmcp-server")]
thread_local! {
    static RUNTIME: std::cell::RefCell<tokio::runtime::Runtime> = std::cell::RefCell::new(
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("a runtime"),
    );
}

/// An inner server answering with a body of a content type in the given pieces (it reads the
/// request first, as a server does, so that the layer knows the request's id).
#[cfg(feature = "rmcp-server")]
#[derive(Clone)]
struct Inner(&'static str, Vec<bytes::Bytes>);

#[cfg(feature = "rmcp-server")]
type Pieces = http_body_util::StreamBody<
    futures::stream::Iter<
        std::vec::IntoIter<Result<http_body::Frame<bytes::Bytes>, std::convert::Infallible>>,
    >,
>;

#[cfg(feature = "rmcp-server")]
impl<B> tower_service::Service<http::Request<B>> for Inner
where
    B: http_body::Body + Send + 'static,
    B::Data: Send,
{
    type Response = http::Response<Pieces>;
    type Error = std::convert::Infallible;
    type Future = std::pin::Pin<
        Box<dyn std::future::Future<Output = Result<Self::Response, Self::Error>> + Send>,
    >;

    fn poll_ready(
        &mut self,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Self::Error>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        use http_body_util::BodyExt as _;
        let content_type = self.0;
        let frames: Vec<_> = self
            .1
            .iter()
            .map(|piece| Ok(http_body::Frame::data(piece.clone())))
            .collect();
        Box::pin(async move {
            let _ = request.into_body().collect().await;
            Ok(http::Response::builder()
                .header("content-type", content_type)
                .body(http_body_util::StreamBody::new(futures::stream::iter(
                    frames,
                )))
                .expect("a response"))
        })
    }
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
            for route in 0..8 {
                check(text.as_bytes(), &[3], route);
            }
        }
        let deep = format!(
            r#"{{"id":1,"result":{}1{}}}"#,
            "[".repeat(200),
            "]".repeat(200)
        );
        assert!(expected(deep.as_bytes()));
        check(deep.as_bytes(), &[1], 4);
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
            for route in 0..8 {
                check(text.as_bytes(), &[3], route);
            }
        }
        check(b"{\"id\":1,\"result\":\"\xff\"}", &[5], 5);
        let long = format!(r#"{{"id":1,"result":"{}\u00e9\"x"}}"#, "a".repeat(20_000));
        for route in 0..8 {
            check(&pad(long.as_bytes(), true), &[1000, 63, 1], route);
        }
        check(&pad(br#"{"id":2,"result":0}"#, true), &[7], 6);
    }

    #[test]
    fn a_text_that_starts_like_an_array_but_is_not_json_is_not_json_rpc() {
        for route in 0..8 {
            check(b"[1,", &[1], route);
        }
    }
}

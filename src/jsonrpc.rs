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

#[cfg(feature = "rmcp-server")]
use bytes::Bytes;
use serde::Deserialize;
use serde::de::{self, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde_json::value::RawValue;

mod stops;

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
    scanned::<false>(message.as_bytes()).map(|m| m.is_response())
        .unwrap_or_else(|| by_serde(message))
}

/// [`is_response`] of text its caller already knows to be UTF-8 (an SSE parser's data, which it
/// validated): the bytes are not validated again.
///
/// A scan of its own decides the usual message alone, in one pass that reads long strings a
/// block of bytes at a time (serde_json's skipping of a 1 MiB result took a quarter of its
/// SHA-256's time); whatever it does not read the way serde_json does (an escaped top-level key,
/// nesting deeper than [`MAX_SCAN_DEPTH`], anything that is not valid JSON) goes to serde_json's reading
/// ([`top_level`]), which is the definition.
pub(crate) fn is_response_text(text: &[u8]) -> bool {
    scanned::<false>(text).map(|m| m.is_response())
        .unwrap_or_else(|| std::str::from_utf8(text).is_ok_and(by_serde))
}

/// Whether `bytes` are UTF-8 and a JSON-RPC response ([`is_response`]), in one pass: the scan
/// validates the text of the strings it skips (the only place a valid message has bytes above
/// ASCII), so that message bytes no one validated before (a frame decoder's verified message)
/// are not read twice.
pub(crate) fn is_utf8_response(bytes: &[u8]) -> bool {
    scanned_utf8_response(bytes).unwrap_or_else(|| std::str::from_utf8(bytes).is_ok_and(by_serde))
}

/// [`is_utf8_response`] as far as its scan decides, in its one pass: `Some` only when the scan
/// read the whole text, which is then UTF-8 (the scan validates the strings, and accepts no
/// other byte above ASCII); `None` when the text is left to serde_json and to a UTF-8 check of
/// the caller's. For a caller that needs both answers, the text's validity and whether it is the
/// final response, and would otherwise read a long message twice (issue 21).
pub(crate) fn scanned_utf8_response(bytes: &[u8]) -> Option<bool> {
    scanned::<true>(bytes).map(|m| m.is_response())
}

/// What an inner server's event carries, as the layer reads it ([`message_text`]).
#[cfg(feature = "rmcp-server")]
#[derive(Clone, Debug)]
pub(crate) enum Carried {
    /// A JSON-RPC response (the final response of a POST stream), with its top level.
    Response(TopLevel),
    /// Another JSON object (a request, a notification), or an array (a JSON-RPC 2.0 batch, which
    /// earlier MCP revisions sent).
    Message,
    /// No JSON object or array: not a JSON-RPC message, never framed as one.
    NotJsonRpc,
}

#[cfg(feature = "rmcp-server")]
impl Carried {
    /// Whether it is the final response.
    pub(crate) fn is_final(&self) -> bool {
        matches!(self, Self::Response(_))
    }

    /// What a message whose top level the scan read whole carries (its [`Scan::finish`]).
    pub(crate) fn scanned(members: TopLevel) -> Self {
        Self::of(Some(members), &[])
    }

    fn of(members: Option<TopLevel>, text: &[u8]) -> Self {
        match members {
            Some(members) if members.is_response() => Self::Response(members),
            Some(_) => Self::Message,
            // A batch: its members are not read here (no final response is found in it).
            None if is_json_array(text) => Self::Message,
            None => Self::NotJsonRpc,
        }
    }
}

/// Whether `text` is exactly one JSON array (a JSON-RPC 2.0 batch; its members are skipped, as
/// serde_json skips values): a text that only starts with `[` is not JSON, so no JSON-RPC message.
#[cfg(feature = "rmcp-server")]
fn is_json_array(text: &[u8]) -> bool {
    text.iter().find(|b| !is_ws(**b)) == Some(&b'[')
        && serde_json::from_slice::<IgnoredAny>(text).is_ok()
}

/// An inner server's event data (as it came, its lines joined with LF) as an SSE client reads
/// it, UTF-8 with replacement (WHATWG), and what it carries (the final response, another message,
/// or no JSON-RPC message at all): for the usual message one pass decides both (the scan of
/// [`scanned_utf8_response`]), where a UTF-8 check and then the final-response scan read a long
/// message twice (issue 21). Valid text is `data` itself.
#[cfg(feature = "rmcp-server")]
pub(crate) fn message_text(data: Bytes) -> (Bytes, Carried) {
    if let Some(members) = scanned::<true>(&data) {
        let carried = Carried::of(Some(members), &data);
        return (data, carried);
    }
    match simdutf8::basic::from_utf8(&data) {
        Ok(text) => {
            let carried = Carried::of(top_level_by_serde(text), &data);
            (data, carried)
        }
        Err(_) => {
            let text = String::from_utf8_lossy(&data).into_owned();
            let carried = Carried::of(top_level(&text), text.as_bytes());
            (Bytes::from(text), carried)
        }
    }
}

/// What the text of a message carries when the scan did not read it (serde_json reads it; it
/// may be a batch): the reading [`message_text`] falls back to, for text known to be UTF-8.
#[cfg(feature = "rmcp-server")]
pub(crate) fn carried_by_serde(text: &[u8]) -> Carried {
    let members = simdutf8::basic::from_utf8(text)
        .ok()
        .and_then(top_level_by_serde);
    Carried::of(members, text)
}

/// The definition of [`is_response`]: serde_json reads the top-level keys and skips the values.
fn by_serde(message: &str) -> bool {
    top_level_by_serde(message).is_some_and(|members| members.is_response())
}

/// The top level of the whole text `text` as the scan reads it; `None`: left to serde_json.
fn scanned<const UTF8: bool>(text: &[u8]) -> Option<TopLevel> {
    Scan::<UTF8>::default().finish(text)
}

/// The length of the escape that starts with a backslash and this byte (RFC 8259 §7): 2, 6 for
/// `\u` (with four hex digits), 0 for a byte that starts no escape.
const ESCAPE_LEN: [u8; 256] = {
    let mut len = [0; 256];
    let mut simple: &[u8] = b"\"\\/bfnrt";
    while let [b, rest @ ..] = simple {
        len[*b as usize] = 2;
        simple = rest;
    }
    len[b'u' as usize] = 6;
    len
};

/// Containers nested deeper than this are left to serde_json.
const MAX_SCAN_DEPTH: u32 = 64;

/// A one-pass reading of a JSON-RPC message's top-level keys with the grammar serde_json reads
/// and skips values by (RFC 8259: its white space, numbers, literals, strings and escapes),
/// resumable: [`feed`](Self::feed) reads the message as far as it arrived and stops where its
/// bytes end, between any two of them (inside a string, a number, an escape), keeping what it
/// needs to go on; [`finish`](Self::finish) reads the rest of the whole message and gives the
/// answer. Each byte is read once, whatever the cuts (a cut escape or literal is read again from
/// its start, at most six bytes). Where it cannot go on the scan refuses (`None` from
/// [`finish`](Self::finish)): the text is then read by [`by_serde`], so that only a text this
/// reading accepts whole is decided here. With `UTF8`, the bytes of strings are validated as
/// UTF-8 too (every other byte it accepts is ASCII).
///
/// The text it reads need not be kept whole: [`rebase`](Self::rebase) moves its start past the
/// bytes read (to at most [`needed`](Self::needed)), and the next feeds hold the message from
/// there on; the spans it finds are the message's offsets whatever the start.
#[derive(Clone, Debug, Default)]
pub(crate) struct Scan<const UTF8: bool> {
    /// Where the text fed starts in the message (see [`rebase`](Self::rebase)).
    origin: usize,
    /// Bytes of the text read.
    at: usize,
    step: Step,
    /// The containers open inside the top-level object, one bit a level (set: an object).
    objects: u64,
    depth: u32,
    /// What the top level holds so far.
    members: TopLevel,
    /// The top-level member whose value is being read, and where that value starts (an offset
    /// of the message).
    field: Field,
    value_start: usize,
}

/// Where a [`Scan`] stands between two bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Step {
    /// Before the top-level object's `{`.
    #[default]
    Start,
    /// After the top-level `{`: a key or `}`.
    FirstMember,
    /// After a `,` of the top level: a key.
    Member,
    /// After a top-level member's value: `,` or `}`.
    AfterMember,
    /// After a key: its colon.
    Colon,
    /// A value.
    Value,
    /// After a nested `{`: a key or `}`.
    FirstKey,
    /// After a `,` of a nested object: a key.
    Key,
    /// After `[`: a value or `]`.
    FirstElement,
    /// After a nested value: `,` or the end of its container.
    AfterValue,
    /// Inside a string whose content starts at `start`; its bytes before `checked` were checked
    /// for control characters (and, with `UTF8`, validated). Only a top-level key's content is
    /// read (`start` is kept for it alone, see [`Scan::needed`]).
    String {
        kind: Str,
        start: usize,
        checked: usize,
    },
    /// Inside a number.
    Number(Num),
    /// Inside a literal: its bytes still to come.
    Literal(&'static [u8]),
    /// After the top-level object: white space only.
    End,
    /// Not read as serde_json reads it: left to serde_json.
    Refused,
}

/// What a string is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Str {
    /// A key of the top-level object.
    TopKey,
    /// A key of a nested object.
    Key,
    /// A value.
    Value,
}

/// Where a number stands (RFC 8259 §6).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Num {
    /// After `-`: a digit.
    Minus,
    /// After a leading `0`: no digit.
    Zero,
    /// In the integer's digits.
    Int,
    /// After `.`: a digit.
    Dot,
    /// In the fraction's digits.
    Frac,
    /// After `e`: a sign or a digit.
    Exp,
    /// After the exponent's sign: a digit.
    ExpSign,
    /// In the exponent's digits.
    ExpDigits,
}

/// The top-level member being read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Field {
    #[default]
    Other,
    Id,
    Result,
    Error,
}

/// What a step of a [`Scan`] did.
enum Flow {
    /// It read on (the next step is set).
    Go,
    /// The bytes arrived so far end here.
    Wait,
    /// Not read as serde_json reads it.
    Refuse,
}

/// JSON white space (RFC 8259 §2).
fn is_ws(b: u8) -> bool {
    matches!(b, b' ' | b'\n' | b'\t' | b'\r')
}

impl<const UTF8: bool> Scan<UTF8> {
    /// Reads `text`, the message as far as it arrived (each call with the same bytes and maybe
    /// more after them), up to its end.
    pub(crate) fn feed(&mut self, text: &[u8]) {
        loop {
            let flow = self.step(text);
            match flow {
                Flow::Go => {}
                Flow::Wait => return,
                Flow::Refuse => {
                    self.step = Step::Refused;
                    return;
                }
            }
        }
    }

    /// How far into the text fed the bytes go that the scan still reads: those of a top-level
    /// key being read, a character cut at the end of the text, an escape cut there, and what
    /// was not read; the bytes before may be dropped ([`rebase`](Self::rebase)).
    #[cfg(any(test, feature = "rmcp-server"))]
    pub(crate) fn needed(&self) -> usize {
        match self.step {
            Step::String {
                kind: Str::TopKey,
                start,
                ..
            } => start,
            Step::String { checked, .. } => checked,
            _ => self.at,
        }
    }

    /// The text fed from now on starts `by` bytes later in the message (at most
    /// [`needed`](Self::needed)): the next feeds hold the message from there on.
    #[cfg(any(test, feature = "rmcp-server"))]
    pub(crate) fn rebase(&mut self, by: usize) {
        debug_assert!(by <= self.needed());
        self.origin += by;
        self.at -= by;
        if let Step::String {
            kind,
            start,
            checked,
        } = &mut self.step
        {
            *checked -= by;
            // Only a top-level key's content is read (`needed` keeps it); another's start is
            // not.
            *start = if *kind == Str::TopKey {
                *start - by
            } else {
                start.saturating_sub(by)
            };
        }
    }

    /// The top level of the whole message `text` (the bytes fed so far and the rest), if it is
    /// exactly one JSON object this reading accepts: the same spans as [`top_level`] finds.
    /// `None`: left to serde_json.
    pub(crate) fn finish(mut self, text: &[u8]) -> Option<TopLevel> {
        self.feed(text);
        (self.step == Step::End && self.at == text.len()).then_some(self.members)
    }

    /// Skips white space; the next byte, not taken (`None`: the text ends first).
    fn next_token(&mut self, text: &[u8]) -> Option<u8> {
        while let Some(&b) = text.get(self.at) {
            if !is_ws(b) {
                return Some(b);
            }
            self.at += 1;
        }
        None
    }

    /// One step: a token, or as much of a string or a number as has arrived.
    fn step(&mut self, text: &[u8]) -> Flow {
        match self.step {
            Step::String {
                kind,
                start,
                checked,
            } => return self.string(text, kind, start, checked),
            Step::Number(num) => return self.number(text, num),
            Step::Literal(rest) => {
                let Some(&b) = text.get(self.at) else {
                    return Flow::Wait;
                };
                if b != rest[0] {
                    return Flow::Refuse;
                }
                self.at += 1;
                self.step = Step::Literal(&rest[1..]);
                if rest.len() == 1 {
                    self.value_ended();
                }
                return Flow::Go;
            }
            Step::Refused => return Flow::Wait,
            _ => {}
        }
        let Some(b) = self.next_token(text) else {
            return Flow::Wait;
        };
        let open_string = |kind, at: usize| Step::String {
            kind,
            start: at + 1,
            checked: at + 1,
        };
        self.step = match (self.step, b) {
            (Step::Start, b'{') => Step::FirstMember,
            (Step::FirstMember, b'}') => Step::End,
            (Step::FirstMember | Step::Member, b'"') => open_string(Str::TopKey, self.at),
            (Step::AfterMember, b',') => Step::Member,
            (Step::AfterMember, b'}') => Step::End,
            (Step::Colon, b':') => Step::Value,
            (Step::FirstKey | Step::Key, b'"') => open_string(Str::Key, self.at),
            (Step::FirstKey, b'}') | (Step::FirstElement, b']') => {
                self.at += 1;
                self.close();
                return Flow::Go;
            }
            (Step::FirstElement, _) => {
                // A value: read by the next step.
                self.step = Step::Value;
                return Flow::Go;
            }
            (Step::AfterValue, b',') => {
                if self.objects & 1 == 1 {
                    Step::Key
                } else {
                    Step::Value
                }
            }
            (Step::AfterValue, b'}' | b']') => {
                let object = self.objects & 1 == 1;
                if object != (b == b'}') {
                    return Flow::Refuse;
                }
                self.at += 1;
                self.close();
                return Flow::Go;
            }
            (Step::Value, _) => return self.value(b),
            _ => return Flow::Refuse,
        };
        self.at += 1;
        Flow::Go
    }

    /// The first byte `b` of a value, at `self.at`.
    fn value(&mut self, b: u8) -> Flow {
        if self.depth == 0 {
            self.value_start = self.origin + self.at;
        }
        self.step = match b {
            b'"' => Step::String {
                kind: Str::Value,
                start: self.at + 1,
                checked: self.at + 1,
            },
            b'{' | b'[' => {
                if self.depth == MAX_SCAN_DEPTH {
                    return Flow::Refuse;
                }
                let object = b == b'{';
                self.objects = (self.objects << 1) | u64::from(object);
                self.depth += 1;
                if object {
                    Step::FirstKey
                } else {
                    Step::FirstElement
                }
            }
            b't' => Step::Literal(b"rue"),
            b'f' => Step::Literal(b"alse"),
            b'n' => Step::Literal(b"ull"),
            b'-' => Step::Number(Num::Minus),
            b'0' => Step::Number(Num::Zero),
            b'1'..=b'9' => Step::Number(Num::Int),
            _ => return Flow::Refuse,
        };
        self.at += 1;
        Flow::Go
    }

    /// A container ended: the value it was ended.
    fn close(&mut self) {
        self.objects >>= 1;
        self.depth -= 1;
        self.value_ended();
    }

    /// A value ended at `self.at`: a top-level member's (noted), or an element of a container.
    fn value_ended(&mut self) {
        if self.depth > 0 {
            self.step = Step::AfterValue;
            return;
        }
        let span = self.value_start..self.origin + self.at;
        match std::mem::take(&mut self.field) {
            Field::Id => {
                self.members.ids += 1;
                self.members.id = Some(span);
            }
            Field::Result => self.members.result = true,
            Field::Error => self.members.error = Some(span),
            Field::Other => {}
        }
        self.step = Step::AfterMember;
    }

    /// As much of a string as has arrived, from `self.at`.
    ///
    /// The string is read a block of 64 bytes at a time: the block's stops (quotes, backslashes,
    /// control characters: [`stops::mask`]) are found together, and then taken one after the
    /// other, a bit each, whatever their density (a result full of `\n` escapes has one every
    /// line). A control character refuses the string where it is found; once the closing quote
    /// is found (or the bytes arrived end), with `UTF8` the string's bytes not validated yet are
    /// validated in one pass, as a whole (the bytes of a valid escape are ASCII: they change
    /// nothing). No byte outside the escapes is looked at alone.
    fn string(&mut self, text: &[u8], kind: Str, start: usize, checked: usize) -> Flow {
        // The block read starts at `base`; its bits are its bytes' stops not taken yet.
        let mut base = self.at;
        let mut last = [b' '; stops::BLOCK];
        'blocks: loop {
            let (block, len) = match text.get(base..base + stops::BLOCK) {
                Some(block) => (block.try_into().expect("a block"), stops::BLOCK),
                None => {
                    // The last bytes arrived, with bytes that are not stops after them.
                    let rest = &text[base..];
                    last[..rest.len()].copy_from_slice(rest);
                    (&last, rest.len())
                }
            };
            let mut stops = stops::mask(block);
            while stops != 0 {
                let at = stops.trailing_zeros() as usize;
                let found = base + at;
                let escape_len = match block[at] {
                    b'"' => {
                        if check_prefix::<UTF8>(&text[checked..found]) != Some(found - checked) {
                            return Flow::Refuse;
                        }
                        self.at = found + 1;
                        return self.string_ended(&text[start..found], kind);
                    }
                    // An escape: read whole, or again once its bytes arrived.
                    b'\\' => match text.get(found + 1).map(|&b| ESCAPE_LEN[usize::from(b)]) {
                        Some(2) => 2,
                        Some(6) => match text.get(found + 2..found + 6) {
                            Some(hex) if hex.iter().all(u8::is_ascii_hexdigit) => 6,
                            Some(_) => return Flow::Refuse,
                            None => {
                                self.at = found;
                                return self.string_waits(text, kind, start, checked);
                            }
                        },
                        Some(_) => return Flow::Refuse,
                        None => {
                            self.at = found;
                            return self.string_waits(text, kind, start, checked);
                        }
                    },
                    // A control character.
                    _ => return Flow::Refuse,
                };
                // The stops inside the escape (an escaped quote or backslash) are not stops.
                let after = at + escape_len;
                if after >= stops::BLOCK {
                    base += after;
                    continue 'blocks;
                }
                stops &= u64::MAX << after;
            }
            base += len;
            if len < stops::BLOCK {
                self.at = base;
                return self.string_waits(text, kind, start, checked);
            }
        }
    }

    /// The bytes arrived end inside a string (before `self.at`, or inside an escape at it): what
    /// arrived of it is checked now, as far as it is whole characters.
    fn string_waits(&mut self, text: &[u8], kind: Str, start: usize, checked: usize) -> Flow {
        let checked = match check_prefix::<UTF8>(&text[checked..self.at]) {
            Some(len) => checked + len,
            None => return Flow::Refuse,
        };
        self.step = Step::String {
            kind,
            start,
            checked,
        };
        Flow::Wait
    }

    /// A string ended (its closing quote taken); `content` is its bytes, escapes as written.
    fn string_ended(&mut self, content: &[u8], kind: Str) -> Flow {
        match kind {
            Str::TopKey => {
                if content.contains(&b'\\') {
                    // serde_json resolves (and checks) escapes in the keys it reads.
                    return Flow::Refuse;
                }
                self.field = match content {
                    b"id" => Field::Id,
                    b"result" => Field::Result,
                    b"error" => Field::Error,
                    _ => Field::Other,
                };
                self.step = Step::Colon;
            }
            Str::Key => self.step = Step::Colon,
            Str::Value => self.value_ended(),
        }
        Flow::Go
    }

    /// As much of a number as has arrived, from `self.at`.
    fn number(&mut self, text: &[u8], mut num: Num) -> Flow {
        loop {
            let Some(&b) = text.get(self.at) else {
                self.step = Step::Number(num);
                return Flow::Wait;
            };
            num = match (num, b) {
                (Num::Minus, b'0') => Num::Zero,
                (Num::Minus, b'1'..=b'9') => Num::Int,
                // One leading zero only.
                (Num::Minus | Num::Zero, _) if b.is_ascii_digit() => return Flow::Refuse,
                (Num::Int | Num::Frac | Num::ExpDigits, b'0'..=b'9') => {
                    let digits = text[self.at..]
                        .iter()
                        .position(|b| !b.is_ascii_digit())
                        .unwrap_or(text.len() - self.at);
                    self.at += digits;
                    continue;
                }
                (Num::Zero | Num::Int, b'.') => Num::Dot,
                (Num::Zero | Num::Int | Num::Frac, b'e' | b'E') => Num::Exp,
                (Num::Dot, b'0'..=b'9') => Num::Frac,
                (Num::Exp, b'+' | b'-') => Num::ExpSign,
                (Num::Exp | Num::ExpSign, b'0'..=b'9') => Num::ExpDigits,
                (Num::Zero | Num::Int | Num::Frac | Num::ExpDigits, _) => {
                    // The number ended before this byte.
                    self.value_ended();
                    return Flow::Go;
                }
                _ => return Flow::Refuse,
            };
            self.at += 1;
        }
    }
}

/// How many of the string bytes `bytes` (which hold no control character: the scan stopped at
/// every one) are checked: with `UTF8`, they are UTF-8 but for a character cut at their end
/// (which the bytes to come complete: not counted); without, all of them. `None`: bytes that
/// are not UTF-8.
fn check_prefix<const UTF8: bool>(bytes: &[u8]) -> Option<usize> {
    // Their greatest byte (the compiler finds it with vector instructions): all ASCII?
    if !UTF8 || bytes.iter().fold(0, |high, &b| high | b) < 0x80 {
        return Some(bytes.len());
    }
    // Bytes above ASCII: whole characters if they are UTF-8 at all (the bytes around a string
    // are ASCII).
    match simdutf8::compat::from_utf8(bytes) {
        Ok(_) => Some(bytes.len()),
        Err(err) if err.error_len().is_none() => Some(err.valid_up_to()),
        Err(_) => None,
    }
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
///
/// The scan of [`is_response`] reads the usual message (a long result skipped a block at a time,
/// for the client's final response); what it leaves goes to serde_json's reading, the definition.
pub(crate) fn top_level(message: &str) -> Option<TopLevel> {
    scanned::<false>(message.as_bytes())
        .or_else(|| top_level_by_serde(message))
}

/// [`top_level`] as serde_json reads it.
fn top_level_by_serde(message: &str) -> Option<TopLevel> {
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
    pub(super) fn message() -> impl Strategy<Value = String> {
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

#[cfg(test)]
mod scan_tests {
    use super::*;

    #[test]
    fn the_usual_messages_are_decided_by_the_scan_alone() {
        let long = "x".repeat(197);
        let cases = [
            (format!(r#"{{"jsonrpc":"2.0","id":1,"result":{{"content":[{{"type":"text","text":"{long}"}}],"isError":false}}}}"#), true),
            (r#"{"jsonrpc":"2.0","id":"a","error":{"code":-32603,"message":"é \"q\" \u00e9","data":[1.5e-3,-0,true,null]}}"#.to_owned(), true),
            (r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":0.5}}"#.to_owned(), false),
            (r#" { } "#.to_owned(), false),
        ];
        for (message, expected) in cases {
            assert_eq!(
                scanned::<false>(message.as_bytes()).map(|m| m.is_response()),
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
            assert_eq!(
                scanned::<false>(message.as_bytes()).map(|m| m.is_response()),
                None,
                "{message}"
            );
        }
        // And serde_json decides them.
        assert!(is_response(r#"{"\u0069d":1,"result":{}}"#));
        assert!(is_response(&deep));
        assert!(!is_response(r#"{"id":1,"result":01}"#));
    }
}

#[cfg(test)]
mod members_tests {
    use super::*;

    #[test]
    fn the_scan_finds_the_members_serde_json_finds_at_every_cut_and_byte_edited() {
        let long = "a quick \\\"brown\\\" fox é ".repeat(40);
        let messages = [
            format!(r#"{{"jsonrpc":"2.0","id":1,"result":{{"content":[{{"type":"text","text":"{long}"}}]}}}}"#),
            r#" { "id" : "x" , "error" : { "code" : -32000 , "message" : "m", "data" : [1.5e-3, -0, true, null] } } "#.to_owned(),
            r#"{"id":1,"id":[2,{"id":3}],"result":null,"error":{"id":4}}"#.to_owned(),
            r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"id":1,"result":2}}"#.to_owned(),
            r#"{}"#.to_owned(),
        ];
        // Bytes that end or open strings and containers, separate values, escape, or break JSON.
        let edits = [
            b'"', b'\\', b'{', b'}', b'[', b']', b',', b':', b' ', b'0', b'e', b'\n',
        ];
        let mut decided = 0;
        let mut check = |text: &[u8]| {
            let Ok(text) = std::str::from_utf8(text) else {
                return;
            };
            let read = scanned::<false>(text.as_bytes());
            if read.is_some() {
                decided += 1;
                assert_eq!(read, top_level_by_serde(text), "{text}");
            }
            assert_eq!(top_level(text), top_level_by_serde(text), "{text}");
        };
        for message in &messages {
            let bytes = message.as_bytes();
            for cut in 0..=bytes.len() {
                check(&bytes[..cut]);
            }
            for at in 0..bytes.len() {
                for edit in edits {
                    let mut replaced = bytes.to_vec();
                    replaced[at] = edit;
                    check(&replaced);
                }
            }
        }
        // The scan decided many of them itself.
        assert!(decided > 1000, "{decided}");
    }
}

/// The string scan against the definition, on strings made of the pieces that stop it (escapes,
/// quotes, control characters, bytes above ASCII, invalid UTF-8) between plain runs of lengths
/// up to 140 (past two of the scan's 64-byte blocks), so that each stop byte falls at every
/// position of a block.
#[cfg(test)]
mod string_scan_tests {
    use super::*;
    use proptest::prelude::*;

    /// What a string of a message may hold, in bytes: plain runs and the bytes that end them,
    /// valid or not.
    pub(super) fn piece() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            8 => valid_piece(),
            1 => (0..140usize).prop_map(|len| vec![b' '; len]),
            1 => Just(br"\u12".to_vec()),
            1 => Just(br"\x".to_vec()),
            1 => Just(b"\\".to_vec()),
            1 => Just(b"\"".to_vec()),
            1 => Just(b"\n".to_vec()),
            1 => Just(b"\x1f".to_vec()),
            1 => Just(b"\x7f".to_vec()),
            1 => Just(b"\xc3".to_vec()),
            1 => Just(b"\xff".to_vec()),
            1 => Just(b"\xe2\x82".to_vec()),
        ]
    }

    /// What a valid string may hold: plain runs of every length up to 140 (past two of the scan's
    /// 64-byte blocks, so that each stop falls at every place of them), every escape, characters.
    pub(super) fn valid_piece() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            (0..140usize).prop_map(|len| b"abcdefgh".repeat(len / 8 + 1)[..len].to_vec()),
            Just(br"\n".to_vec()),
            Just(br#"\""#.to_vec()),
            Just(br"\\".to_vec()),
            Just(br"\\x".to_vec()),
            Just(br"\/\b\f\r\t".to_vec()),
            Just(br"\u00e9\uD83D\uDE00".to_vec()),
            Just("é€😀".as_bytes().to_vec()),
        ]
    }

    proptest! {
        #[test]
        fn the_scan_decides_every_valid_string_itself_as_serde_json_reads_it_whatever_its_stops(
            pieces in prop::collection::vec(valid_piece(), 0..16),
        ) {
            let mut message = br#"{"jsonrpc":"2.0","id":1,"result":{"text":""#.to_vec();
            message.extend_from_slice(&pieces.concat());
            message.extend_from_slice(br#""}}"#);
            let text = std::str::from_utf8(&message).unwrap();
            let expected = top_level_by_serde(text);
            prop_assert!(expected.as_ref().is_some_and(TopLevel::is_response));
            // Not left to serde_json: the scan reads it whole, validating or not, and in pieces.
            prop_assert_eq!(&scanned::<true>(&message), &expected);
            prop_assert_eq!(&scanned::<false>(&message), &expected);
            let mut scan = Scan::<false>::default();
            for cut in (0..message.len()).step_by(7) {
                scan.feed(&message[..cut]);
            }
            prop_assert_eq!(&scan.finish(&message), &expected);
        }

        #[test]
        fn the_scan_reads_every_string_as_serde_json_does_whatever_stops_it_where(
            pieces in prop::collection::vec(piece(), 0..12),
        ) {
            let text = pieces.concat();
            let mut message = br#"{"jsonrpc":"2.0","id":1,"result":{"text":""#.to_vec();
            message.extend_from_slice(&text);
            message.extend_from_slice(br#""}}"#);
            // With UTF-8 validation: decided as UTF-8 and then the rule decide it.
            let valid = std::str::from_utf8(&message).ok();
            let expected = valid.is_some_and(|m| top_level_by_serde(m).is_some_and(|t| t.is_response()));
            if let Some(decided) = scanned::<true>(&message).map(|m| m.is_response()) {
                prop_assert_eq!(decided, expected);
            }
            prop_assert_eq!(is_utf8_response(&message), expected);
            // Text known to be UTF-8: the same members as serde_json's whenever the scan decides.
            if let Some(message) = valid {
                if let Some(members) = scanned::<false>(message.as_bytes()) {
                    prop_assert_eq!(Some(members), top_level_by_serde(message));
                }
                prop_assert_eq!(top_level(message), top_level_by_serde(message));
            }
        }
    }
}

#[cfg(test)]
mod utf8_tests {
    use super::*;

    /// The definition the one pass replaces: UTF-8, then the rule.
    fn two_passes(bytes: &[u8]) -> bool {
        std::str::from_utf8(bytes).is_ok_and(is_response)
    }

    #[test]
    fn utf8_and_a_response_in_one_pass_agrees_with_two_passes_at_every_byte_edited() {
        let messages = [
            r#"{"jsonrpc":"2.0","id":1,"result":{"text":"é ü 😀 € abcdefghijklmnopqrstuvwxyz0123456789 abcdefghijklmnopqrstuvwxyz0123456789"}}"#,
            r#"{"id":"é","error":{"message":"\u00e9 ok"}}"#,
            r#"{"jsonrpc":"2.0","method":"m","params":{"é":[1,2,"ü"]}}"#,
        ];
        // Bytes that break or make UTF-8: a lone continuation byte, lead bytes, an invalid one.
        let edits: [&[u8]; 6] = [
            b"\x80",
            b"\xc3",
            b"\xc3\xa9",
            b"\xe2\x82",
            b"\xff",
            b"\xf0\x9f\x98\x80",
        ];
        let mut decided = 0;
        for message in messages {
            let bytes = message.as_bytes();
            assert_eq!(is_utf8_response(bytes), two_passes(bytes), "{message}");
            for at in 0..=bytes.len() {
                for edit in edits {
                    let mut inserted = bytes[..at].to_vec();
                    inserted.extend_from_slice(edit);
                    inserted.extend_from_slice(&bytes[at..]);
                    assert_eq!(
                        is_utf8_response(&inserted),
                        two_passes(&inserted),
                        "{inserted:?}"
                    );
                    if at < bytes.len() {
                        let mut replaced = bytes.to_vec();
                        replaced[at] = edit[0];
                        assert_eq!(
                            is_utf8_response(&replaced),
                            two_passes(&replaced),
                            "{replaced:?}"
                        );
                    }
                    decided += usize::from(scanned::<true>(&inserted).map(|m| m.is_response()).is_some());
                }
            }
        }
        // The scan decided many of them itself (valid characters inserted inside strings).
        assert!(decided > 100, "{decided}");
    }
}

/// The layer's reading of its inner server's event data (issue 21).
#[cfg(all(test, feature = "rmcp-server"))]
mod message_text_tests {
    use super::*;
    use proptest::prelude::*;

    /// What an SSE client reads (UTF-8 with replacement) and the one rule on it.
    fn as_a_client_reads(data: &[u8]) -> (Vec<u8>, bool) {
        let text = String::from_utf8_lossy(data).into_owned();
        let last = is_response(&text);
        (text.into_bytes(), last)
    }

    #[test]
    fn valid_event_data_is_handed_on_as_the_same_buffer() {
        let data = bytes::Bytes::from(r#"{"jsonrpc":"2.0","id":1,"result":{"text":"café \u00e9"}}"#);
        let (text, carried) = message_text(data.clone());
        assert!(carried.is_final());
        assert_eq!(text.as_ptr(), data.as_ptr());
        let request = bytes::Bytes::from_static(br#"{"jsonrpc":"2.0","id":1,"method":"tools/call"}"#);
        assert!(matches!(message_text(request).1, Carried::Message));
        let batch = bytes::Bytes::from_static(br#" [{"jsonrpc":"2.0","method":"n"}]"#);
        assert!(matches!(message_text(batch).1, Carried::Message));
        for garbage in [&b"not json"[..], b"{\"jsonrpc\":\"2.0\",\"id\":1,\"res", b"42", b"\xff\xfe"] {
            let carried = message_text(bytes::Bytes::copy_from_slice(garbage)).1;
            assert!(matches!(carried, Carried::NotJsonRpc), "{garbage:?}");
        }
    }

    /// Found by the `jsonrpc_scan` fuzz target (`fuzz/regressions/jsonrpc_scan/`): event data
    /// that only started with `[` was taken for a batch and framed as a verified message.
    #[test]
    fn event_data_that_only_starts_like_an_array_is_no_json_rpc_message() {
        for garbage in [&b"[1,"[..], b"[", b" [] x", b"[}", b"\x0c[]"] {
            let carried = message_text(bytes::Bytes::copy_from_slice(garbage)).1;
            assert!(matches!(carried, Carried::NotJsonRpc), "{garbage:?}");
            assert!(matches!(carried_by_serde(garbage), Carried::NotJsonRpc), "{garbage:?}");
        }
        for batch in [&b"[]"[..], b" [1, {\"id\": 1e400}]\r\n", b"[\"\\ud800\"]"] {
            let carried = message_text(bytes::Bytes::copy_from_slice(batch)).1;
            assert!(matches!(carried, Carried::Message), "{batch:?}");
        }
    }

    proptest! {
        #[test]
        fn event_data_reads_as_a_client_reads_it_whatever_its_bytes(
            text in proptest::collection::vec(any::<u8>(), 0..64),
            key in prop_oneof![Just("result"), Just("error"), Just("method"), Just("re\\u0073ult")],
            wrapped in any::<bool>(),
        ) {
            let data = if wrapped {
                let mut data = format!(r#"{{"jsonrpc":"2.0","id":7,"{key}":{{"text":""#).into_bytes();
                data.extend_from_slice(&text);
                data.extend_from_slice(b"\"}}");
                data
            } else {
                text
            };
            let (read, carried) = message_text(bytes::Bytes::from(data.clone()));
            prop_assert_eq!((read.to_vec(), carried.is_final()), as_a_client_reads(&data));
        }
    }
}

#[cfg(test)]
mod is_response_tests;

/// The scan fed as the bytes arrive, cut anywhere, against its reading of the whole text (which
/// the tests above hold to serde_json's).
#[cfg(test)]
mod resume_tests {
    use super::*;
    use proptest::prelude::*;

    /// The scan of `text` in pieces ending at `cuts` (ascending), then whole.
    fn in_pieces<const UTF8: bool>(text: &[u8], cuts: &[usize]) -> Option<TopLevel> {
        let mut scan = Scan::<UTF8>::default();
        for &cut in cuts {
            scan.feed(&text[..cut]);
        }
        scan.finish(text)
    }

    /// The scan of `text` in pieces ending at `cuts` (ascending), then whole, keeping of the
    /// text only the bytes it still needs: after each piece its start moves to
    /// [`Scan::needed`], and the next piece holds the text from there on.
    fn in_windows<const UTF8: bool>(text: &[u8], cuts: &[usize]) -> Option<TopLevel> {
        let mut scan = Scan::<UTF8>::default();
        let mut start = 0;
        for &cut in cuts {
            scan.feed(&text[start..cut]);
            let needed = scan.needed();
            scan.rebase(needed);
            start += needed;
        }
        scan.finish(&text[start..])
    }

    /// Cut in two at every point, and a byte at a time: the same reading as the whole text's,
    /// validating (any cut, characters too) and on text (cuts between characters), with the
    /// text kept whole and with only the bytes the scan still needs kept.
    pub(super) fn assert_resumes(text: &[u8]) {
        let whole = scanned::<true>(text);
        let as_text = std::str::from_utf8(text).ok().map(|_| scanned::<false>(text));
        for cut in 0..=text.len() {
            assert_eq!(in_pieces::<true>(text, &[cut]), whole, "{text:?} cut at {cut}");
            assert_eq!(in_windows::<true>(text, &[cut]), whole, "{text:?} cut at {cut}");
            if let Some(as_text) = &as_text {
                if std::str::from_utf8(&text[..cut]).is_ok() {
                    assert_eq!(&in_pieces::<false>(text, &[cut]), as_text, "{text:?} at {cut}");
                    assert_eq!(&in_windows::<false>(text, &[cut]), as_text, "{text:?} at {cut}");
                }
            }
        }
        let every: Vec<usize> = (0..=text.len()).collect();
        assert_eq!(in_pieces::<true>(text, &every), whole, "{text:?} a byte at a time");
        assert_eq!(in_windows::<true>(text, &every), whole, "{text:?} a byte at a time");
    }

    #[test]
    fn a_message_cut_anywhere_is_read_as_the_whole_message_is() {
        let long = "a quick \\\"brown\\\" fox é ✓ 😀 \\u00e9\\n ".repeat(12);
        let messages = [
            format!(r#"{{"jsonrpc":"2.0","id":1,"result":{{"content":[{{"type":"text","text":"{long}"}}],"isError":false}}}}"#),
            r#" { "id" : "x" , "error" : { "code" : -32000 , "message" : "m", "data" : [1.5e-3, -0, 0, 10E+2, 2e-0, true, false, null, [], {}, [[]], {"a":{}}] } } "#.to_owned(),
            r#"{"id":1,"id":[2,{"id":3}],"result":null,"error":{"id":4}}"#.to_owned(),
            r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"id":1,"result":2}}"#.to_owned(),
            r#"{"\u0069d":1,"result":{}}"#.to_owned(),
            r#"{"id":-12.5e+10,"result":"\u00e9\"\\\/\b\f\n\r\t"}"#.to_owned(),
            format!(r#"{{"id":1,"result":{}{}}}"#, "[".repeat(65), "]".repeat(65)),
            r#"{}"#.to_owned(),
        ];
        for message in &messages {
            assert_resumes(message.as_bytes());
        }
        // Texts the scan refuses, or that are not one object, cut anywhere too.
        for text in [
            &br#"{"id":1,"result":01}"#[..],
            br#"{"id":1,"result":"\x"}"#,
            br#"{"id":1,"result":"\u12g4"}"#,
            br#"{"id":1,"result":tru}"#,
            br#"{"id":1,"result":-}"#,
            br#"{"id":1,"result":1.}"#,
            br#"{"id":1,"result":1e}"#,
            b"{\"id\":1,\"result\":\"\x01\"}",
            b"{\"id\":1,\"result\":\"\xc3\"}",
            b"{\"id\":1,\"result\":\"\xe2\x82\"}",
            b"{\"id\":1,\"result\":\"\xff\"}",
            br#"{"id":1,"result":{}} {}"#,
            br#"{"id":1,"result":[}"#,
            br#"{"id":1,"result":{]}"#,
            br#"[{"id":1,"result":{}}]"#,
            b"",
        ] {
            assert_resumes(text);
        }
    }

    /// A message whose strings (values, nested keys, the id) are made of `strings`.
    fn with_strings(strings: &[Vec<u8>; 4]) -> Vec<u8> {
        let [id, key, value, inner] = strings.each_ref().map(|s| s.as_slice());
        [
            &br#"{"jsonrpc":"2.0","id":""#[..],
            id,
            br#"","result":{""#,
            key,
            br#"":[""#,
            value,
            br#"",{"k":""#,
            inner,
            br#""}]}}"#,
        ]
        .concat()
    }

    proptest! {
        #[test]
        fn strings_whose_escapes_fall_anywhere_in_a_block_are_read_alike_wherever_the_reads_end(
            strings in prop::array::uniform4(
                prop::collection::vec(super::string_scan_tests::valid_piece(), 0..6)
                    .prop_map(|pieces| pieces.concat()),
            ),
        ) {
            let message = with_strings(&strings);
            let text = std::str::from_utf8(&message).expect("valid pieces");
            // Decided by the scan, as serde_json reads it, and alike for every cut.
            prop_assert_eq!(scanned::<false>(&message), top_level_by_serde(text));
            prop_assert!(scanned::<false>(&message).is_some());
            assert_resumes(&message);
        }

        #[test]
        fn strings_with_any_stop_anywhere_in_a_block_are_read_alike_wherever_the_reads_end(
            strings in prop::array::uniform4(
                prop::collection::vec(super::string_scan_tests::piece(), 0..4)
                    .prop_map(|pieces| pieces.concat()),
            ),
        ) {
            assert_resumes(&with_strings(&strings));
        }

        #[test]
        fn a_generated_message_cut_anywhere_is_read_as_the_whole_message_is(
            message in super::tests::message(),
            at in any::<prop::sample::Index>(),
            byte in prop::sample::select(b"{}[]:,\"\\ 0-.eE+tfnux\x01\xc3".to_vec()),
        ) {
            assert_resumes(message.as_bytes());
            // With one byte replaced: what the whole scan refuses, the cut scan refuses too.
            let mut edited = message.into_bytes();
            let at = at.index(edited.len());
            edited[at] = byte;
            assert_resumes(&edited);
        }
    }
}

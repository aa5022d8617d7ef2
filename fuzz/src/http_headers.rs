//! `http_headers`: the framing's HTTP header parsers (SPEC.md §16): the limits header a client
//! sends (`Mcp-Framing-Limits`, read by `OptIn::from_headers`), and a response's mapping
//! (`Mapping::from_response_headers`).
//!
//! Input: one mode byte, a frame limit (4 bytes, big endian), a message limit (8 bytes), then
//! header lines `name: value` separated by `\n` (the seeds are opt-in requests and framed
//! responses; the fuzzer mutates them). Lines that are not a valid header are skipped.
//!
//! Oracle:
//! - no panic on any input;
//! - the limits header parses what it prints: the headers `opt_in_headers_for` writes for a
//!   decoder with the input's limits read back (`OptIn::from_headers`) as exactly that key and
//!   those limits; and limits read from the input's own headers, printed the same way, read
//!   back the same;
//! - `Mapping::from_response_headers` never accepts two mappings: a mapping it accepts is what
//!   every pairing of one `Mcp-Framing` field line with one `Content-Type` field line reads as
//!   on its own, so a response whose lines disagree (two content types, two `mapping`
//!   parameters) is not framed.

use http::{HeaderMap, HeaderName, HeaderValue};
use mcp_framing::{RequestKey, StreamDecoder, internals::limits::MIN_MAX_FRAME_PAYLOAD};
use mcp_framing::{
    http::{OPT_IN_HEADER, OptIn},
    internals::http::{LIMITS_HEADER, opt_in_headers_for},
    mapping::Mapping,
};

/// Runs the oracle on one input; see the module docs.
///
/// # Panics
///
/// When a header parser breaks the oracle.
pub fn run(data: &[u8]) {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let Some((frame, rest)) = rest.split_first_chunk::<4>() else {
        return;
    };
    let Some((message, text)) = rest.split_first_chunk::<8>() else {
        return;
    };
    printed_limits_read_back(
        u32::from_be_bytes(*frame),
        u64::from_be_bytes(*message),
        mode,
    );
    let headers = parse_headers(text);
    read_limits_print_again(&headers);
    one_mapping(&headers);
}

fn parse_headers(text: &[u8]) -> HeaderMap {
    let mut headers = HeaderMap::new();
    for line in text.split(|&b| b == b'\n') {
        let Some(colon) = line.iter().position(|&b| b == b':') else {
            continue;
        };
        let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(line[..colon].trim_ascii()),
            HeaderValue::from_bytes(line[colon + 1..].trim_ascii()),
        ) else {
            continue;
        };
        headers.append(name, value);
    }
    headers
}

fn printed_limits_read_back(frame: u32, message: u64, mode: u8) {
    let decoder = StreamDecoder::builder()
        .max_frame_payload(frame.max(MIN_MAX_FRAME_PAYLOAD))
        .max_message_size(message)
        .build();
    let key = RequestKey::from_bytes([mode | 0x80; 16]); // never all zero (no key)
    let headers = opt_in_headers_for(key, mode & 1 == 1, &decoder);
    let opt_in = OptIn::from_headers(&headers)
        .expect("the headers a client prints parse")
        .expect("they opt in");
    assert_eq!(opt_in.request_key, Some(key));
    assert_eq!(opt_in.max_frame_payload, Some(decoder.max_frame_payload()));
    assert_eq!(opt_in.max_message_size, Some(decoder.max_message_size()));
    assert_eq!(opt_in.accepts_binary, mode & 1 == 1);
}

fn read_limits_print_again(headers: &HeaderMap) {
    let mut opting_in = headers.clone();
    opting_in.insert(OPT_IN_HEADER, HeaderValue::from_static("1"));
    let Ok(Some(opt_in)) = OptIn::from_headers(&opting_in) else {
        return;
    };
    let mut printed = Vec::new();
    if let Some(frame) = opt_in.max_frame_payload {
        printed.push(format!("frame={frame}"));
    }
    if let Some(message) = opt_in.max_message_size {
        printed.push(format!("message={message}"));
    }
    let mut again = HeaderMap::new();
    again.insert(OPT_IN_HEADER, HeaderValue::from_static("1"));
    if !printed.is_empty() {
        let value = HeaderValue::from_str(&printed.join(", ")).expect("digits are a header value");
        again.insert(LIMITS_HEADER, value);
    }
    let reread = OptIn::from_headers(&again)
        .expect("printed limits parse")
        .expect("they opt in");
    assert_eq!(
        (reread.max_frame_payload, reread.max_message_size),
        (opt_in.max_frame_payload, opt_in.max_message_size),
        "the limits header parses what it prints"
    );
}

fn one_mapping(headers: &HeaderMap) {
    let Some(accepted) = Mapping::from_response_headers(headers) else {
        return;
    };
    for opt_in in headers.get_all(OPT_IN_HEADER) {
        for content_type in headers.get_all(http::header::CONTENT_TYPE) {
            let mut single = HeaderMap::new();
            single.insert(OPT_IN_HEADER, opt_in.clone());
            single.insert(http::header::CONTENT_TYPE, content_type.clone());
            assert_eq!(
                Mapping::from_response_headers(&single),
                Some(accepted),
                "accepted {accepted:?}, but the lines {opt_in:?} and {content_type:?} read otherwise"
            );
        }
    }
}

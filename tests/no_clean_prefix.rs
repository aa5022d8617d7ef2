//! Fail closed (SPEC.md §7, §11.4): a stream cut anywhere before its end is never classified
//! clean, whichever public way the outcome is obtained. Every strict prefix of every valid
//! conformance vector goes through each of them; the whole vector is the control (clean for the
//! clean vectors), so a path that can never say clean would fail here too.

mod common;

use bytes::BytesMut;
use common::vectors::{self, Vector};
use futures::TryStreamExt;
use mcp_framing::{DecodeError, Outcome, StreamDecoder, Verdict};
use tokio_util::codec::FramedRead;

/// The outcome of each public path for one input, named.
type Outcomes = Vec<(&'static str, Outcome)>;

/// A sans-I/O loop that stops at the first `Ok(None)` ("need more bytes") and asks the decoder,
/// without telling it that the input ended: the case of issue 11 item 1.
fn decode_until_more_bytes_needed(mut decoder: StreamDecoder, input: &[u8]) -> Outcome {
    let mut buf = BytesMut::from(input);
    while let Ok(Some(_)) = decoder.decode(&mut buf) {}
    decoder.outcome()
}

/// `decode_eof` until it answers `Ok(None)` or an error, then the decoder's outcome.
fn decode_eof_to_the_end(mut decoder: StreamDecoder, input: &[u8]) -> Outcome {
    let mut buf = BytesMut::from(input);
    while let Ok(Some(_)) = decoder.decode_eof(&mut buf) {}
    decoder.outcome()
}

/// `decode_to_end`: the decoder's outcome, and the outcome of the last item if it is an error.
fn decode_to_end(mut decoder: StreamDecoder, input: &[u8]) -> Outcomes {
    let events = decoder.decode_to_end(&mut BytesMut::from(input));
    let mut outcomes = vec![(
        "decode_to_end, then StreamDecoder::outcome",
        decoder.outcome(),
    )];
    if let Some(Err(err)) = events.last() {
        outcomes.push((
            "decode_to_end's error, Outcome::from_error",
            Outcome::from_error(err),
        ));
    }
    outcomes
}

/// `decode_all`: its error through `Outcome::from_error` (`None` when it decoded the stream).
fn decode_all(decoder: StreamDecoder, input: &[u8]) -> Option<Outcome> {
    decoder
        .decode_all(input)
        .err()
        .map(|err| Outcome::from_error(&err))
}

/// `FramedRead` over the bytes (feature `codec`): the decoder's outcome after the last item.
fn framed_read(decoder: StreamDecoder, input: &[u8]) -> Outcome {
    futures::executor::block_on(async {
        let mut frames = FramedRead::new(input, decoder);
        while let Ok(Some(_)) = frames.try_next().await {}
        frames.decoder().outcome()
    })
}

/// `VerifiedResponse` (feature `http`) over a body of one chunk: its outcome, and the outcome of
/// its last item if it is an error.
#[cfg(feature = "http")]
fn verified_response(
    decoder: StreamDecoder,
    input: &[u8],
    mapping: mcp_framing::http::Mapping,
) -> Outcomes {
    use futures::StreamExt;
    use mcp_framing::http::VerifiedResponse;
    let body = futures::stream::iter([Ok::<_, std::io::Error>(bytes::Bytes::copy_from_slice(
        input,
    ))]);
    let mut response = VerifiedResponse::new(body, mapping, decoder);
    let mut last = None;
    futures::executor::block_on(async {
        while let Some(item) = response.next().await {
            last = Some(item);
        }
    });
    let mut outcomes = vec![(
        "VerifiedResponse::outcome",
        response
            .outcome()
            .cloned()
            .expect("an ended response has an outcome"),
    )];
    if let Some(Err(err)) = last {
        let outcome = err.outcome().expect("every receive error has an outcome");
        outcomes.push(("ReceiveError::outcome", outcome));
    }
    outcomes
}

/// `BodyDecoder` (feature `sse`), the path `VerifiedResponse` and `mcp-frame` share: its outcome
/// after the end of the body, and the outcome of its error alone.
#[cfg(feature = "sse")]
fn body_decoder(decoder: StreamDecoder, input: &[u8], mapping: mcp_framing::Mapping) -> Outcomes {
    let mut body = mcp_framing::BodyDecoder::new(mapping, decoder);
    body.feed(input);
    body.finish();
    let error = loop {
        match body.next_event() {
            Ok(Some(_)) => {}
            Ok(None) => break None,
            Err(err) => break Some(err),
        }
    };
    let mut outcomes = vec![("BodyDecoder::outcome", body.outcome())];
    if let Some(err) = error {
        outcomes.push(("BodyError::outcome", err.outcome()));
    }
    outcomes
}

/// Every public path for a binary body.
fn binary_outcomes(vector: &Vector, input: &[u8]) -> Outcomes {
    let mut outcomes = vec![
        (
            "decode until Ok(None), then StreamDecoder::outcome",
            decode_until_more_bytes_needed(vector.decoder(), input),
        ),
        (
            "decode_eof to the end, then StreamDecoder::outcome",
            decode_eof_to_the_end(vector.decoder(), input),
        ),
        (
            "FramedRead, then decoder().outcome",
            framed_read(vector.decoder(), input),
        ),
    ];
    outcomes.extend(decode_to_end(vector.decoder(), input));
    if let Some(outcome) = decode_all(vector.decoder(), input) {
        outcomes.push(("decode_all's error, Outcome::from_error", outcome));
    }
    #[cfg(feature = "sse")]
    outcomes.extend(body_decoder(
        vector.decoder(),
        input,
        mcp_framing::Mapping::Binary,
    ));
    #[cfg(feature = "http")]
    outcomes.extend(verified_response(
        vector.decoder(),
        input,
        mcp_framing::http::Mapping::Binary,
    ));
    outcomes
}

/// Every public path for a body in one of the SSE mappings (SPEC.md §15, §18; features `sse`,
/// `http`).
fn sse_outcomes(vector: &Vector, input: &[u8], mapping: mcp_framing::Mapping) -> Outcomes {
    let mut outcomes = Outcomes::new();
    #[cfg(feature = "sse")]
    {
        // The mapping's decoder (SSE frame decoder or compatible decoder) feeding a stream
        // decoder by hand.
        let decoder = vector.decoder();
        let mut unwrap = mcp_framing::MappingDecoder::new(mapping, decoder.limits(), None);
        let mut frames = BytesMut::new();
        let fed = unwrap.feed(input, &mut frames);
        unwrap.finish();
        let outcome = if fed.is_ok() {
            decode_eof_to_the_end(decoder, &frames)
        } else {
            decode_until_more_bytes_needed(decoder, &frames)
        };
        outcomes.push(("MappingDecoder, then StreamDecoder::outcome", outcome));
        outcomes.extend(body_decoder(vector.decoder(), input, mapping));
    }
    #[cfg(feature = "http")]
    outcomes.extend(verified_response(vector.decoder(), input, mapping));
    outcomes
}

fn outcomes(vector: &Vector, input: &[u8]) -> Outcomes {
    match vector.mapping {
        "binary" => binary_outcomes(vector, input),
        name => sse_outcomes(vector, input, name.parse().expect("a mapping")),
    }
}

/// Where the framed stream of a vector ends: its length for a binary body; for an SSE body, the
/// end of the line after which the body carries every frame (what follows, such as a keep-alive
/// comment or the blank line after a record, carries no frame, so a cut there loses nothing).
fn frames_end(vector: &Vector) -> usize {
    #[cfg(feature = "sse")]
    if vector.mapping != "binary" {
        let mapping: mcp_framing::Mapping = vector.mapping.parse().expect("a mapping");
        let frames_of = |body: &[u8]| {
            let mut frames = BytesMut::new();
            let mut unwrap =
                mcp_framing::MappingDecoder::new(mapping, &mcp_framing::Limits::DEFAULT, None);
            let _ = unwrap.feed(body, &mut frames);
            frames
        };
        let all = frames_of(&vector.bytes);
        return (0..=vector.bytes.len())
            .find(|&cut| frames_of(&vector.bytes[..cut]) == all)
            .expect("the whole body carries every frame");
    }
    vector.bytes.len()
}

#[test]
fn no_strict_prefix_of_a_valid_vector_is_clean_by_any_public_path() {
    let valid: Vec<Vector> = vectors::all_mappings()
        .into_iter()
        .filter(Vector::is_valid)
        .collect();
    assert!(valid.len() >= 15, "the suite has its valid vectors");
    let mut checked = 0u64;
    for vector in &valid {
        // The control: the whole vector reaches its manifest verdict on every path.
        for (path, outcome) in outcomes(vector, &vector.bytes) {
            // A sans-I/O loop that never signals the end of input is not clean even for the
            // whole stream: bytes could still follow the sentinel (SPEC.md §3).
            let told_the_end = !path.starts_with("decode until Ok(None)");
            let reached = match (vector.expect.verdict, told_the_end) {
                ("clean", true) => outcome.is_clean(),
                ("clean", false) => outcome.verdict == Verdict::Abandoned { at: None },
                ("aborted", _) => matches!(outcome.verdict, Verdict::Aborted(_)),
                (other, _) => panic!("{}: a valid vector with verdict {other}", vector.file),
            };
            assert!(
                reached,
                "{} whole, {path}: {:?}",
                vector.file, outcome.verdict
            );
        }
        for cut in 0..frames_end(vector) {
            for (path, outcome) in outcomes(vector, &vector.bytes[..cut]) {
                assert!(
                    !outcome.is_clean(),
                    "{} cut at {cut} of {}: {path} says clean",
                    vector.file,
                    vector.bytes.len()
                );
                checked += 1;
            }
        }
    }
    eprintln!("{checked} outcomes of strict prefixes checked, none clean");
}

#[test]
fn a_decoder_told_nothing_about_the_end_of_input_is_never_clean() {
    // The stream of SPEC.md §13, whole: the sentinel arrived, but without the end of input a
    // trailing byte could still come (SPEC.md §3).
    let wire = vectors::single_message();
    let mut decoder = StreamDecoder::new();
    let mut buf = BytesMut::from(&wire[..]);
    while let Some(_event) = decoder.decode(&mut buf).unwrap() {}
    assert!(decoder.is_complete(), "the sentinel arrived");
    assert_eq!(decoder.outcome().verdict, Verdict::Abandoned { at: None });
    // Told, it is clean ...
    assert_eq!(decoder.decode_eof(&mut buf), Ok(None));
    assert!(decoder.outcome().is_clean());
    // ... and a byte after the sentinel makes it corrupt, whenever it comes.
    let mut decoder = StreamDecoder::new();
    let mut buf = BytesMut::from(&wire[..]);
    while let Some(_event) = decoder.decode(&mut buf).unwrap() {}
    buf.extend_from_slice(b"\n");
    assert_eq!(
        decoder.decode_eof(&mut buf),
        Err(DecodeError::TrailingData { len: 1 })
    );
    assert!(matches!(decoder.outcome().verdict, Verdict::Corrupt(_)));
}

//! Fail closed, and deliver what arrived whole (SPEC.md §7, §7.1, §11.4): no prefix of a stream
//! that ends before its final response's MESSAGE_END is classified clean, whichever public way
//! the outcome is obtained; a prefix that ends after it (right after it, after filler frames,
//! inside STREAM_END's header or payload) is delivered, clean in Regime B, with the sentinel
//! recorded as missing. Every prefix of every conformance vector, in every mapping, goes through
//! each path: for a valid vector against the verdict the manifest states for it (`prefixes`,
//! derived from the frame layout), for an invalid one against the layout's bound (never clean
//! before the final response; after it, delivered or the vector's error). The whole vector is
//! the control, so a path that can never say clean or delivered fails here too.

use crate::support::common;

use bytes::BytesMut;
use common::vectors::{self, PrefixVerdict, Vector};
use futures::TryStreamExt;
use mcp_framing::{
    DecodeError, RequestKey, StreamDecoder, StreamEncoder, StreamHead,
    outcome::{Outcome, Regime, Verdict},
};
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
    mapping: mcp_framing::mapping::Mapping,
    max_event_data: Option<usize>,
) -> Outcomes {
    use futures::StreamExt;
    use mcp_framing::http::VerifiedResponse;
    let body = futures::stream::iter([Ok::<_, std::io::Error>(bytes::Bytes::copy_from_slice(
        input,
    ))]);
    let mut response = VerifiedResponse::new(body, mapping, decoder);
    if let Some(max) = max_event_data {
        response = response.max_event_data(max);
    }
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
fn body_decoder(
    decoder: StreamDecoder,
    input: &[u8],
    mapping: mcp_framing::mapping::Mapping,
    max_event_data: Option<usize>,
) -> Outcomes {
    let mut body = mcp_framing::BodyDecoder::new(mapping, decoder);
    if let Some(max) = max_event_data {
        body = body.max_event_data(max);
    }
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
        mcp_framing::mapping::Mapping::Binary,
        None,
    ));
    #[cfg(feature = "http")]
    outcomes.extend(verified_response(
        vector.decoder(),
        input,
        mcp_framing::mapping::Mapping::Binary,
        None,
    ));
    outcomes
}

/// Every public path for a body in one of the SSE mappings (SPEC.md §15, §18; features `sse`,
/// `http`).
fn sse_outcomes(vector: &Vector, input: &[u8], mapping: mcp_framing::mapping::Mapping) -> Outcomes {
    let mut outcomes = Outcomes::new();
    #[cfg(feature = "sse")]
    {
        // The mapping's decoder (SSE frame decoder or compatible decoder) feeding a stream
        // decoder by hand.
        let decoder = vector.decoder();
        let mut unwrap = mcp_framing::internals::body::MappingDecoder::new(
            mapping,
            decoder.limits(),
            vector.max_event_data,
        );
        let mut frames = BytesMut::new();
        let fed = unwrap.feed(input, &mut frames);
        unwrap.finish();
        let outcome = if fed.is_ok() {
            decode_eof_to_the_end(decoder, &frames)
        } else {
            decode_until_more_bytes_needed(decoder, &frames)
        };
        outcomes.push(("MappingDecoder, then StreamDecoder::outcome", outcome));
        outcomes.extend(body_decoder(
            vector.decoder(),
            input,
            mapping,
            vector.max_event_data,
        ));
    }
    #[cfg(feature = "http")]
    outcomes.extend(verified_response(
        vector.decoder(),
        input,
        mapping,
        vector.max_event_data,
    ));
    outcomes
}

fn outcomes(vector: &Vector, input: &[u8]) -> Outcomes {
    match vector.mapping {
        "binary" => binary_outcomes(vector, input),
        name => sse_outcomes(vector, input, name.parse().expect("a mapping")),
    }
}

/// What every path must report for one prefix.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Want {
    /// Not clean (a truncation, or the vector's error).
    NotClean,
    /// Delivered: clean, Regime B, the sentinel not seen (SPEC.md §7 row 4).
    Delivered,
    /// Delivered, or the (invalid) vector's error: never clean with the sentinel.
    DeliveredOrNotClean,
    /// Clean with the sentinel, or the (invalid) vector's error.
    CleanOrNotClean,
    /// Clean with the sentinel (Regime A).
    Clean,
    /// Aborted by the peer.
    Aborted,
}

/// The prefix lengths checked: all of them up to 8 KiB; above, every one within 64 bytes of a
/// change of verdict, of a line end (SSE) or of either end, and every 61st (inside one long
/// payload or line every cut reads alike).
fn cuts(vector: &Vector, verdicts: &[PrefixVerdict]) -> Vec<usize> {
    let len = vector.bytes.len();
    if len <= 8 * 1024 {
        return (0..=len).collect();
    }
    let mut marks: Vec<usize> = (1..=len)
        .filter(|&at| {
            verdicts[at] != verdicts[at - 1] || matches!(vector.bytes[at - 1], b'\n' | b'\r')
        })
        .chain([0, len])
        .collect();
    marks.extend(
        common::frame_boundaries(&vector.bytes)
            .into_iter()
            .filter(|_| vector.mapping == "binary"),
    );
    (0..=len)
        .filter(|&at| at % 61 == 0 || marks.iter().any(|&mark| at.abs_diff(mark) <= 64))
        .collect()
}

/// Whether `outcome`, from a path that was (`told_the_end`) or was not told that the input
/// ended, is what `want` says.
fn reached(want: Want, outcome: &Outcome, told_the_end: bool) -> bool {
    let delivered = outcome.is_clean() && outcome.regime == Regime::B && !outcome.sentinel_seen;
    if !told_the_end {
        // A sans-I/O loop that never signals the end of input is never clean, not even for the
        // whole stream: bytes could still follow (SPEC.md §3, §7).
        return match want {
            Want::Clean | Want::Delivered => outcome.verdict == Verdict::Abandoned { at: None },
            Want::Aborted => matches!(outcome.verdict, Verdict::Aborted(_)),
            Want::NotClean | Want::DeliveredOrNotClean | Want::CleanOrNotClean => {
                !outcome.is_clean()
            }
        };
    }
    match want {
        Want::NotClean => !outcome.is_clean(),
        Want::Delivered => delivered,
        Want::DeliveredOrNotClean => delivered || !outcome.is_clean(),
        Want::Clean => outcome.is_clean() && outcome.regime == Regime::A && outcome.sentinel_seen,
        Want::CleanOrNotClean => {
            !outcome.is_clean() || (outcome.regime == Regime::A && outcome.sentinel_seen)
        }
        Want::Aborted => matches!(outcome.verdict, Verdict::Aborted(_)),
    }
}

/// What each prefix of `vector` must end as: the manifest's `prefixes` for a valid vector, the
/// layout's bound for an invalid one.
fn wants(vector: &Vector) -> Vec<Want> {
    let layout = vector.layout_prefix_verdicts();
    if !vector.is_valid() {
        return layout
            .iter()
            .map(|verdict| match verdict {
                PrefixVerdict::Delivered => Want::DeliveredOrNotClean,
                // A prefix that is a whole stream before the vector's fault (e.g. trailing data).
                PrefixVerdict::Clean => Want::CleanOrNotClean,
                PrefixVerdict::Truncated | PrefixVerdict::Aborted => Want::NotClean,
            })
            .collect();
    }
    // The committed manifest states them; the generator's layout must agree with it.
    let entry = manifest_entry(&vector.file);
    let steps = entry["prefixes"].as_array().expect("prefixes");
    (0..=vector.bytes.len())
        .map(|cut| {
            let step = steps
                .iter()
                .rev()
                .find(|step| step["from"].as_u64().is_some_and(|from| from <= cut as u64))
                .expect("a step from 0");
            let want = match step["verdict"].as_str().expect("verdict") {
                "truncated" => Want::NotClean,
                "delivered" => Want::Delivered,
                "clean" => Want::Clean,
                "aborted" => Want::Aborted,
                other => panic!("{}: prefix verdict {other}", vector.file),
            };
            let from_layout = match layout[cut] {
                PrefixVerdict::Truncated => Want::NotClean,
                PrefixVerdict::Delivered => Want::Delivered,
                PrefixVerdict::Clean => Want::Clean,
                PrefixVerdict::Aborted => Want::Aborted,
            };
            assert_eq!(
                want, from_layout,
                "{} cut at {cut}: manifest vs layout",
                vector.file
            );
            want
        })
        .collect()
}

/// The committed manifest's entry for `file`.
fn manifest_entry(file: &str) -> serde_json::Value {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/vectors/manifest.json");
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).expect("manifest")).expect("JSON");
    manifest["vectors"]
        .as_array()
        .expect("vectors")
        .iter()
        .find(|entry| entry["file"] == file)
        .unwrap_or_else(|| panic!("{file} is not in the manifest"))
        .clone()
}

#[test]
fn no_prefix_before_the_final_response_is_clean_and_every_one_after_it_is_delivered_by_every_public_path()
 {
    let all = vectors::all_mappings();
    assert!(
        all.iter().filter(|v| v.is_valid()).count() >= 15,
        "the suite has its valid vectors"
    );
    let (mut checked, mut delivered) = (0u64, 0u64);
    for vector in &all {
        // Without the SSE feature only the binary vectors have public paths here.
        if vector.mapping != "binary" && !cfg!(feature = "sse") {
            continue;
        }
        let wants = wants(vector);
        let layout = vector.layout_prefix_verdicts();
        for cut in cuts(vector, &layout) {
            let want = wants[cut];
            for (path, outcome) in outcomes(vector, &vector.bytes[..cut]) {
                let told_the_end = !path.starts_with("decode until Ok(None)");
                assert!(
                    reached(want, &outcome, told_the_end),
                    "{} cut at {cut} of {}: {path} says {:?} (regime {}, sentinel seen {}), expected {want:?}",
                    vector.file,
                    vector.bytes.len(),
                    outcome.verdict,
                    outcome.regime,
                    outcome.sentinel_seen,
                );
                checked += 1;
                delivered += u64::from(want == Want::Delivered && told_the_end);
            }
        }
    }
    assert!(delivered > 0, "some prefixes are delivered");
    eprintln!("{checked} outcomes of prefixes checked, {delivered} of them delivered");
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

/// Issue 18, defect 6: a final response verified by its MESSAGE_END (sequence unbroken, the
/// request key echoed in HEAD) whose STREAM_END a proxy cut was reported abandoned and withheld.
/// It is delivered, clean in Regime B (so not retried), by every public path (SPEC.md §7 row 4).
#[test]
fn a_final_response_whose_sentinel_was_cut_is_delivered_clean_in_regime_b_and_not_retried() {
    let key = RequestKey::random();
    let response =
        br#"{"jsonrpc":"2.0","id":9,"result":{"content":[{"type":"text","text":"sent"}]}}"#;
    let mut enc = StreamEncoder::new(StreamHead::for_request(Some(key)));
    let mut wire = BytesMut::new();
    enc.message(
        br#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1}}"#,
        &mut wire,
    )
    .unwrap();
    enc.message(response, &mut wire).unwrap();
    enc.end(&mut wire).unwrap();
    // The body ends normally inside STREAM_END, as a proxy that cut it would end it.
    let cut = &wire[..wire.len() - 3];
    let decoder = || StreamDecoder::builder().expect_request_key(key).build();
    let check = |path: &str, outcome: &Outcome| {
        assert!(outcome.is_clean(), "{path}: {:?}", outcome.verdict);
        assert_eq!(outcome.regime, Regime::B, "{path}");
        assert_eq!(outcome.received.messages, 2, "{path}");
        // Clean: never retried (retry/tests.rs, `clean_outcome_is_never_retried`).
    };

    // Sans-I/O: decode_eof ends without an error.
    let mut sans_io = decoder();
    let mut buf = BytesMut::from(cut);
    let mut messages = Vec::new();
    loop {
        match sans_io.decode_eof(&mut buf) {
            Ok(Some(mcp_framing::Event::Message(m))) => messages.push(m.into_bytes()),
            Ok(Some(_)) => {}
            Ok(None) => break,
            Err(err) => panic!("decode_eof: {err}"),
        }
    }
    assert_eq!(messages.last().map(|m| &m[..]), Some(&response[..]));
    check("decode_eof", &sans_io.outcome());

    // decode_all hands the response over.
    let stream = decoder()
        .decode_all(cut)
        .expect("decode_all delivers the response");
    assert_eq!(stream.messages[1].bytes().as_ref(), &response[..]);

    // FramedRead over the bytes ends with no error.
    let framed = futures::executor::block_on(async {
        let mut frames = FramedRead::new(cut, decoder());
        while let Some(item) = frames.try_next().await.expect("no error") {
            let _ = item;
        }
        frames.decoder().outcome()
    });
    check("FramedRead", &framed);

    // VerifiedResponse (what the HTTP clients build on) completes.
    #[cfg(feature = "http")]
    {
        use futures::StreamExt;
        use mcp_framing::{
            http::{Delivery, VerifiedResponse},
            mapping::Mapping,
        };
        let body =
            futures::stream::iter([Ok::<_, std::io::Error>(bytes::Bytes::copy_from_slice(cut))]);
        let mut verified = VerifiedResponse::new(body, Mapping::Binary, decoder());
        let items = futures::executor::block_on(async {
            let mut items = Vec::new();
            while let Some(item) = verified.next().await {
                items.push(item.expect("no receive error"));
            }
            items
        });
        assert!(
            matches!(items.last(), Some(Delivery::Complete(_))),
            "{items:?}"
        );
        assert!(matches!(&items[1], Delivery::Message(m) if m.bytes().as_ref() == &response[..]));
        check("VerifiedResponse", verified.outcome().expect("an outcome"));
    }
}

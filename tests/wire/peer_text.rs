//! Text a peer chooses (an ABORT reason) is displayed with its control characters escaped, and
//! request keys are displayed as fingerprints, never in full, in errors and outcomes.

use mcp_framing::{
    Abort, AbortCode, DecodeError, RequestKey, StreamDecoder, StreamEncoder, StreamHead,
    outcome::Outcome,
};

/// A reason that would move the cursor, clear a terminal, forge a log line and reverse text.
const HOSTILE: &str = "boom\x1b[2J\r\nERROR forged log line\u{7}\u{202e}txet\u{0}\u{85}";

fn assert_escaped(shown: &str) {
    assert!(
        !shown.chars().any(|c| c.is_control() || c == '\u{202e}'),
        "control characters reached the display: {shown:?}"
    );
    assert!(
        shown.contains(r"boom\u{1b}[2J\r\nERROR forged log line\u{7}\u{202e}txet\0\u{85}"),
        "{shown}"
    );
}

#[test]
fn abort_reasons_are_displayed_with_control_characters_escaped() {
    let abort = Abort::new(AbortCode::InternalError, HOSTILE);
    assert_escaped(&abort.to_string());
    assert_eq!(
        abort.reason, HOSTILE,
        "the reason itself is kept as received"
    );

    // Through the decoder: the error and the outcome built from it.
    let mut enc = StreamEncoder::new(StreamHead::for_request(None));
    let mut wire = bytes::BytesMut::new();
    enc.abort(AbortCode::InternalError, HOSTILE, &mut wire)
        .unwrap();
    let err = StreamDecoder::new().decode_all(&wire).unwrap_err();
    assert!(matches!(err, DecodeError::PeerAbort(_)));
    assert_escaped(&err.to_string());
    assert_escaped(&Outcome::from_error(&err).verdict.to_string());
    // Readable text passes unchanged.
    let plain = Abort::new(
        AbortCode::Overloaded,
        "draining: try another instance (é, 日本)",
    );
    assert_eq!(
        plain.to_string(),
        "overloaded: draining: try another instance (é, 日本)"
    );
}

#[test]
fn errors_and_outcomes_show_request_keys_as_fingerprints_not_in_full() {
    let expected = RequestKey::random();
    let found = RequestKey::random();
    let err = DecodeError::RequestKeyMismatch {
        expected,
        found: Some(found),
    };
    let outcome = Outcome::from_error(&err);
    // The fingerprints still say which keys were involved.
    for shown in [err.to_string(), format!("{outcome:?}")] {
        assert!(
            shown.contains(&expected.fingerprint().to_string()),
            "{shown}"
        );
        assert!(shown.contains(&found.fingerprint().to_string()), "{shown}");
    }
    for shown in [
        err.to_string(),
        format!("{err:?}"),
        outcome.verdict.to_string(),
        format!("{outcome:?}"),
        format!("{expected:?}"),
    ] {
        for key in [expected, found] {
            assert!(
                !shown.contains(&key.to_string()),
                "a full request key is shown: {shown}"
            );
        }
    }
}

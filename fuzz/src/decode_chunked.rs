//! `decode_chunked`: the same bytes through `FramedRead` in fuzzer-chosen reads.
//!
//! Input: one limits byte ([`Limits::from_byte`]), one byte `n`, `n` schedule bytes for
//! [`ScheduledReader`] (read sizes, `Pending` points), then the stream.
//!
//! Oracle: `FramedRead` over the scheduled reader yields exactly the events and the verdict that
//! one-shot decoding of the whole input yields (SPEC.md §14: "whatever way the input is split
//! into reads"), and after its verdict it yields nothing more. The one field allowed to differ is
//! `TrailingData::len`, documented as the bytes found after the end *in that read*.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::BytesMut;
use futures::Stream;
use mcp_framing::{DecodeError, Event};
use tokio_util::codec::FramedRead;

use super::limits::Limits;
use super::reader::ScheduledReader;

/// Every event of a decoder fed all of `input` at once, then its verdict if that is an error.
#[must_use]
pub fn one_shot(limits: &Limits, input: &[u8]) -> Vec<Result<Event, DecodeError>> {
    limits.decoder().decode_to_end(&mut BytesMut::from(input))
}

/// Every event `FramedRead` yields over a [`ScheduledReader`], then its verdict if an error.
///
/// # Panics
///
/// If the stream yields an I/O error, yields more after an error, or polls without progress.
#[must_use]
pub fn framed(limits: &Limits, input: &[u8], schedule: &[u8]) -> Vec<Result<Event, DecodeError>> {
    let reader = ScheduledReader::new(input, schedule);
    let mut frames = FramedRead::new(reader, limits.decoder());
    let mut cx = Context::from_waker(futures::task::noop_waker_ref());
    let mut events = Vec::new();
    loop {
        match Pin::new(&mut frames).poll_next(&mut cx) {
            Poll::Pending => {
                // The reader woke the task itself and makes progress on the next poll.
                assert!(
                    frames.get_ref().pendings() <= input.len(),
                    "more Pending than bytes: no progress"
                );
            }
            Poll::Ready(Some(Ok(event))) => events.push(Ok(event)),
            Poll::Ready(Some(Err(err))) => {
                let err = err.as_decode().cloned();
                events.push(Err(
                    err.expect("only decode errors from an in-memory reader")
                ));
                let next = Pin::new(&mut frames).poll_next(&mut cx);
                assert!(
                    matches!(next, Poll::Ready(None)),
                    "FramedRead goes on after an error"
                );
                return events;
            }
            Poll::Ready(None) => return events,
        }
    }
}

/// Sets what may depend on read boundaries (`TrailingData::len`) to 0.
fn normalized(mut events: Vec<Result<Event, DecodeError>>) -> Vec<Result<Event, DecodeError>> {
    if let Some(Err(DecodeError::TrailingData { len })) = events.last_mut() {
        *len = 0;
    }
    events
}

/// Runs the oracle on one input; see the module docs.
///
/// # Panics
///
/// When chunked decoding differs from one-shot decoding.
pub fn run(data: &[u8]) {
    let [config, n, rest @ ..] = data else {
        return;
    };
    let limits = Limits::from_byte(*config);
    let (schedule, input) = rest.split_at(usize::from(*n).min(rest.len()));
    let whole = normalized(one_shot(&limits, input));
    let pieces = normalized(framed(&limits, input, schedule));
    assert_eq!(
        whole.len(),
        pieces.len(),
        "event count: one-shot vs chunked"
    );
    for (i, (a, b)) in whole.iter().zip(&pieces).enumerate() {
        assert_eq!(a, b, "event {i}: one-shot vs chunked");
    }
}

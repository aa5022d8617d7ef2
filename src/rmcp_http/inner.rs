//! The inner response body `FramingLayer` frames, and what becomes of it after its final
//! response (read to its end, bounded, so that an HTTP connection under it is kept).

use std::fmt;
use std::pin::Pin;
use std::time::Duration;

use bytes::Bytes;
use http_body::Body;
use http_body_util::BodyExt;

/// An inner response body the layer can frame.
pub(super) trait InnerBody:
    Body<Data = Bytes, Error: fmt::Display + Send + 'static> + Send + 'static
{
}

impl<B> InnerBody for B where
    B: Body<Data = Bytes, Error: fmt::Display + Send + 'static> + Send + 'static
{
}

/// The most bytes [`drain_rest`] reads of what follows an inner body's final response: the
/// end of an SSE stream (the chunked encoding's last chunk, a closing comment), not more.
const DRAIN_BYTES: usize = 64 * 1024;

/// How long [`drain_rest`] waits for the end of an inner body after its final response.
const DRAIN_WAIT: Duration = Duration::from_secs(1);

/// Reads what is left of an inner response body once its final response went out, in a task of
/// its own, rather than dropping it: the framed body has ended (the client has the sentinel and
/// the end of the HTTP body at once), and an inner body that comes over HTTP (a proxy's upstream
/// client, as `mcp-frame proxy`'s) reaches its end, so that its connection goes back to the
/// client's pool. Dropped before its end, the connection is closed: every framed call would pay
/// a new connection, whose first segments wait on the receive window and on delayed ACKs of a
/// server with Nagle's algorithm on. Bounded: at most [`DRAIN_BYTES`] for at most
/// [`DRAIN_WAIT`], then dropped; dropped at once when it ended already or outside a tokio
/// runtime. Only after the final response: a body dropped before it is how the inner server
/// learns that the client went away (the request is cancelled).
pub(super) fn drain_rest<B: InnerBody>(mut body: Pin<Box<B>>) {
    if body.is_end_stream() {
        return;
    }
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return;
    };
    runtime.spawn(async move {
        let rest = async {
            let mut left = DRAIN_BYTES;
            while let Some(Ok(frame)) = body.frame().await {
                let len = frame.data_ref().map_or(0, Bytes::len);
                match left.checked_sub(len) {
                    Some(still) => left = still,
                    None => break,
                }
            }
        };
        let _ = tokio::time::timeout(DRAIN_WAIT, rest).await;
    });
}

//! The standalone GET stream of [`FramingHttpClient`](super::FramingHttpClient): rmcp's SSE
//! events, parsed within rmcp's event limit, with responses refused.

use std::collections::VecDeque;

use bytes::Bytes;
use futures_core::Stream;
use futures_util::StreamExt;

use super::SseItem;
use super::error::FramingClientError;
use crate::jsonrpc::is_response;
use crate::{
    mapping::SseError,
    mapping::sse::{SseEvent, SseParser, is_message_event},
};

/// The state of one GET stream.
struct Standalone<S> {
    body: S,
    parser: SseParser,
    /// Events parsed and not yet handed over.
    queue: VecDeque<SseEvent>,
    /// A parse error, handed over after the events completed before it (body order).
    failed: Option<SseError>,
    done: bool,
}

impl<S> Standalone<S>
where
    S: Stream<Item = Result<Bytes, reqwest::Error>> + Unpin,
{
    async fn next(&mut self) -> Option<SseItem> {
        loop {
            if let Some(event) = self.queue.pop_front() {
                if is_message_event(event.event.as_deref()) && is_response(&event.data) {
                    self.done = true;
                    self.queue.clear();
                    let err = FramingClientError::ResponseOnGetStream;
                    return Some(Err(sse_stream::Error::Body(Box::new(err))));
                }
                return Some(Ok(sse_stream::Sse {
                    event: event.event,
                    data: (!event.data.is_empty()).then_some(event.data),
                    id: event.id,
                    retry: None,
                }));
            }
            if let Some(err) = self.failed.take() {
                self.done = true;
                return Some(Err(sse_stream::Error::Body(Box::new(err))));
            }
            if self.done {
                return None;
            }
            let mut events = Vec::new();
            match self.body.next().await {
                Some(Ok(bytes)) => {
                    // SPEC.md §15's parser: an event or a line over the limit fails here, before
                    // it is buffered further.
                    if let Err(err) = self.parser.feed(&bytes, &mut events) {
                        self.failed = Some(err);
                    }
                }
                Some(Err(err)) => {
                    self.done = true;
                    return Some(Err(sse_stream::Error::Body(Box::new(err))));
                }
                None => {
                    // An event left open at the end is discarded, as SSE requires.
                    self.parser.finish();
                    self.done = true;
                }
            }
            self.queue.extend(events);
        }
    }
}

/// The events of a GET stream's `body`, each bounded by `max_event_size` bytes of data.
pub(super) fn events<S>(body: S, max_event_size: usize) -> impl Stream<Item = SseItem>
where
    S: Stream<Item = Result<Bytes, reqwest::Error>> + Unpin,
{
    let state = Standalone {
        body,
        parser: SseParser::with_max_event_data(max_event_size),
        queue: VecDeque::new(),
        failed: None,
        done: false,
    };
    futures_util::stream::unfold(state, |mut state| async move {
        let item = state.next().await?;
        Some((item, state))
    })
}

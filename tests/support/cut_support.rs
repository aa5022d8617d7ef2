//! A proxy's cut, used by `tests/dedupe_e2e.rs`: a response whose body
//! ends normally after `limit` bytes (an idle timeout, a redeploy, a misbehaving load balancer).

use axum::body::Body;
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;

/// `response` with its body ended normally after `limit` bytes, at once (without waiting for
/// the upstream's next piece).
pub(crate) fn cut_after(response: Response, limit: usize) -> Response {
    let (parts, body) = response.into_parts();
    let stream = futures_util::stream::unfold(
        (body.into_data_stream(), 0usize),
        move |(mut body, sent)| async move {
            if sent >= limit {
                return None;
            }
            let piece = body.next().await?.ok()?;
            let take = piece.len().min(limit - sent);
            Some((
                Ok::<_, std::io::Error>(piece.slice(..take)),
                (body, sent + take),
            ))
        },
    );
    (parts, Body::from_stream(stream)).into_response()
}

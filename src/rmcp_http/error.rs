//! The transport errors of [`FramingHttpClient`](super::FramingHttpClient), as rmcp reports them.

/// Errors of [`FramingHttpClient`](super::FramingHttpClient) that rmcp reports as transport
/// errors (a response that did not complete is not one: it reaches the caller as a JSON-RPC
/// error carrying the outcome report, SPEC.md §11.7).
///
/// # Examples
///
/// ```
/// use mcp_framing::rmcp_http::FramingClientError;
/// let err = FramingClientError::from(serde_json::from_str::<u8>("x").unwrap_err());
/// assert!(err.to_string().starts_with("serialize request: "));
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FramingClientError {
    /// The HTTP request failed.
    #[error("http: {0}")]
    Http(#[from] reqwest::Error),
    /// The request could not be serialized.
    #[error("serialize request: {0}")]
    Serialize(#[from] serde_json::Error),
    /// The request key could not be written into `params._meta`.
    #[error("request key: {0}")]
    RequestKey(#[from] crate::request::RequestKeyError),
    /// A JSON-RPC response arrived on the standalone GET stream. Responses are framed and
    /// verified on the POST that asked for them; one on the GET stream (a replay after a
    /// reconnection, a misbehaving server) cannot be verified, so the stream ends there.
    #[error(
        "a JSON-RPC response on the GET stream cannot be verified (responses are framed on the POST that asked for them)"
    )]
    ResponseOnGetStream,
}

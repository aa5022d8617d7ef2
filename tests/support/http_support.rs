//! The client half of the HTTP tests: the opt-in headers of each mapping, and an opted-in POST
//! whose response is verified as a framing client does (headers first, then the body, with the
//! request's key expected).

use bytes::Bytes;
use futures_util::Stream;
use mcp_framing::http::{ReceiveError, VerifiedResponse, opt_in_headers};
use mcp_framing::mapping::Mapping;
use mcp_framing::{RequestKey, StreamDecoder};

/// The headers a framing client sends to ask for `mapping`, as a user writes them: the public
/// [`opt_in_headers`] (the binary media type listed in `Accept` for [`Mapping::Binary`]), and
/// `Mcp-Framing-Mapping: compat` for [`Mapping::Compat`] (SPEC.md §18.8).
pub(crate) fn opt_in_headers_asking(key: RequestKey, mapping: Mapping) -> http::HeaderMap {
    let mut headers = opt_in_headers(key, mapping == Mapping::Binary);
    if mapping == Mapping::Compat {
        headers.insert(
            "mcp-framing-mapping",
            http::HeaderValue::from_static("compat"),
        );
    }
    headers
}

/// POSTs `request` to `url`, opted in (a fresh request key in the headers and `params._meta`;
/// the binary mapping if `binary`), and returns the response being verified.
pub(crate) async fn post_framed(
    client: &reqwest::Client,
    url: &str,
    mut request: serde_json::Value,
    binary: bool,
) -> Result<
    VerifiedResponse<impl Stream<Item = reqwest::Result<Bytes>> + Unpin + use<>>,
    ReceiveError<reqwest::Error>,
> {
    let key = RequestKey::random();
    mcp_framing::request::set_request_key(&mut request, key).expect("a JSON-RPC request object");
    let response = client
        .post(url)
        .headers(opt_in_headers(key, binary))
        .header("content-type", "application/json")
        .body(request.to_string())
        .send()
        .await
        .expect("the server answers");
    let headers = response.headers().clone();
    let decoder = StreamDecoder::builder().expect_request_key(key).build();
    VerifiedResponse::from_headers(response.bytes_stream(), &headers, decoder)
}

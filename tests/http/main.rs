//! The HTTP binding over loopback: `FramedBody` and `VerifiedResponse`, `FramingLayer` on rmcp and
//! on hand-written services, `FramingHttpClient` and the client engine, HTTPS, idle timeouts, what
//! a server declares, and how a framed response leaves the server.

#[path = "../support/mod.rs"]
mod support;

mod client_engine;
mod declaration;
mod http_compat;
mod http_layer;
mod http_loopback;
mod http_rmcp;
mod http_rmcp_client;
#[cfg(feature = "rustls")]
mod https_rmcp;
mod idle_timeout;
mod inner_body_end;
mod no_nagle_stall;
mod server_body;
mod streamed_messages;

/// What `FramingLayer` around `S` answers a request with a `String` body.
type Framed<S> = mcp_framing::rmcp_http::FramingService<S>;

/// POSTs a `tools/call` (id 1) with `request`'s headers to `inner` behind `layer`: its response.
async fn tool_call_through<S>(
    layer: mcp_framing::rmcp_http::FramingLayer,
    inner: S,
    request: http::request::Builder,
) -> <Framed<S> as tower_service::Service<http::Request<String>>>::Response
where
    Framed<S>: tower_service::Service<http::Request<String>, Error: std::fmt::Debug>,
{
    use tower_layer::Layer;
    use tower_service::Service;
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t"}}"#;
    layer
        .layer(inner)
        .call(request.body(body.to_owned()).unwrap())
        .await
        .unwrap()
}

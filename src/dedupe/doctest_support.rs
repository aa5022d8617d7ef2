// What the deduplication doctests share: the MCP service behind the layer and the calls a client
// sends. Not a module of the crate (no `mod` line): each such doctest includes it with
//     # include!(concat!(env!("CARGO_MANIFEST_DIR"), "/src/dedupe/doctest_support.rs"));
//     # fn main() { ... }
// Not every doctest uses every item, hence the `allow`s.

#[allow(unused_imports)]
use bytes::Bytes;
#[allow(unused_imports)]
use http_body_util::{BodyExt, Full};
#[allow(unused_imports)]
use mcp_framing::RequestKey;
#[allow(unused_imports)]
use tower_layer::Layer;
#[allow(unused_imports)]
use tower_service::Service;

/// The MCP service behind the layer: answers each call with `result` as its JSON-RPC result and
/// counts its executions (clones share the count). A call of the tool `slow` never answers (it
/// is still running); one of `crash` fails with a `500` and no answer.
#[derive(Clone)]
struct Tool {
    result: String,
    executions: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

#[allow(dead_code)]
impl Tool {
    fn new(result: &str) -> Self {
        Self {
            result: result.to_owned(),
            executions: std::sync::Arc::default(),
        }
    }

    /// The calls that reached the tool.
    fn executions(&self) -> usize {
        self.executions.load(std::sync::atomic::Ordering::SeqCst)
    }
}

impl Service<http::Request<Full<Bytes>>> for Tool {
    type Response = http::Response<Full<Bytes>>;
    type Error = std::convert::Infallible;
    type Future = std::pin::Pin<
        Box<dyn std::future::Future<Output = Result<Self::Response, Self::Error>> + Send>,
    >;

    fn poll_ready(
        &mut self,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Self::Error>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<Full<Bytes>>) -> Self::Future {
        self.executions
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let result = self.result.clone();
        Box::pin(async move {
            let call = request.into_body().collect().await.unwrap().to_bytes();
            let named = |tool: &[u8]| call.windows(tool.len()).any(|w| w == tool);
            if named(br#""name":"slow""#) {
                std::future::pending::<()>().await;
            }
            if named(br#""name":"crash""#) {
                let failed = http::Response::builder().status(500);
                return Ok(failed.body(Full::new(Bytes::new())).unwrap());
            }
            let body = format!(r#"{{"jsonrpc":"2.0","id":1,"result":{result}}}"#);
            let answer = http::Response::builder().header("content-type", "application/json");
            Ok(answer.body(Full::new(Bytes::from(body))).unwrap())
        })
    }
}

/// An attempt of a keyed `tools/call` with these `params`, as a client sends it.
#[allow(dead_code)]
fn request(key: RequestKey, params: serde_json::Value) -> http::Request<Full<Bytes>> {
    let call = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params});
    http::Request::post("/mcp")
        .header("mcp-framing-request-key", key.to_string())
        .body(Full::new(Bytes::from(call.to_string())))
        .unwrap()
}

/// An attempt of a keyed call of `tool`, without arguments.
#[allow(dead_code)]
fn tools_call(key: RequestKey, tool: &str) -> http::Request<Full<Bytes>> {
    request(key, serde_json::json!({"name": tool, "arguments": {}}))
}

/// The same call without a request key: not deduplicated.
#[allow(dead_code)]
fn unkeyed(mut request: http::Request<Full<Bytes>>) -> http::Request<Full<Bytes>> {
    request.headers_mut().remove("mcp-framing-request-key");
    request
}

/// Sends the attempt, reads the answer to its end and returns what the layer decided (its
/// `mcp-framing-dedupe` response header: `execute`, `replay`, `unprotected` or the refusal).
#[allow(dead_code)]
async fn send<S, B>(service: &mut S, request: http::Request<Full<Bytes>>) -> String
where
    S: Service<http::Request<Full<Bytes>>, Response = http::Response<B>>,
    S::Error: std::fmt::Debug,
    B: http_body::Body,
    B::Error: std::fmt::Debug,
{
    let response = service.call(request).await.unwrap();
    let decision = response.headers()["mcp-framing-dedupe"].to_str().unwrap().to_owned();
    response.into_body().collect().await.unwrap();
    decision
}

/// [`send`] of a keyed call of `tool`.
#[allow(dead_code)]
async fn attempt<S, B>(service: &mut S, key: RequestKey, tool: &str) -> String
where
    S: Service<http::Request<Full<Bytes>>, Response = http::Response<B>>,
    S::Error: std::fmt::Debug,
    B: http_body::Body,
    B::Error: std::fmt::Debug,
{
    send(service, tools_call(key, tool)).await
}

/// A runtime on tokio's paused clock: the windows and leases pass with `tokio::time::advance`,
/// and a wait ends when nothing else can run, whatever the machine's load.
#[allow(dead_code)]
fn paused_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap()
}

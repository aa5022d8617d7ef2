//! The rmcp tool server shared by `tests/http/http_rmcp.rs` and the `rmcp_server` / `rmcp_client`
//! examples: a real tool whose arguments and result span many frames.
// Each includer uses a part of it (the client example needs only `document`).
#![allow(dead_code)]

use std::sync::Arc;

use mcp_framing::rmcp_http::{FramingLayer, FramingService};
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{
    CallToolRequestParams, NumberOrString, ProgressNotificationParam, ProgressToken,
    RequestMetaObject,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{RoleServer, tool, tool_router};
use tower_layer::Layer;

#[derive(Debug, serde::Deserialize, rmcp::schemars::JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
pub(crate) struct ReportArgs {
    /// The title.
    pub(crate) title: String,
    /// The document to render, large.
    pub(crate) body: String,
}

#[derive(Clone)]
pub(crate) struct Reports;

#[tool_router(server_handler)]
impl Reports {
    #[tool(description = "Render a report: returns the document with numbered lines")]
    async fn render_report(
        &self,
        Parameters(args): Parameters<ReportArgs>,
        context: RequestContext<RoleServer>,
    ) -> String {
        // A notification before the final result, on the same response stream.
        if let Some(token) = context.meta.get_progress_token() {
            let _ = context
                .peer
                .notify_progress(ProgressNotificationParam::new(token, 0.5))
                .await;
        }
        let lines: Vec<String> = args
            .body
            .lines()
            .enumerate()
            .map(|(i, line)| format!("{:05} {line}", i + 1))
            .collect();
        format!("# {}\n{}", args.title, lines.join("\n"))
    }
}

/// A document of about 31 KiB: tool-call arguments that span many frames.
pub(crate) fn document() -> String {
    (0..400)
        .map(|i| format!("line {i} of a long report body, {}\n", "x".repeat(40)))
        .collect()
}

/// rmcp's stateless Streamable HTTP service for [`Reports`], without framing.
pub(crate) fn unframed_service() -> StreamableHttpService<Reports, LocalSessionManager> {
    stateless_service(Reports)
}

/// rmcp's stateless Streamable HTTP service for `handler` (no sessions, no keep-alives), without
/// framing.
pub(crate) fn stateless_service<S>(handler: S) -> StreamableHttpService<S, LocalSessionManager>
where
    S: rmcp::ServerHandler + Clone + Send + Sync + 'static,
{
    let mut config = StreamableHttpServerConfig::default();
    config.legacy_session_mode = false;
    config.sse_keep_alive = None;
    StreamableHttpService::new(
        move || Ok(handler.clone()),
        Arc::new(LocalSessionManager::default()),
        config,
    )
}

/// rmcp's Streamable HTTP service for [`Reports`] with rmcp's default configuration: legacy
/// sessions on (`Mcp-Session-Id`), keep-alives and priming events.
pub(crate) fn session_service() -> StreamableHttpService<Reports, LocalSessionManager> {
    StreamableHttpService::new(
        || Ok(Reports),
        Arc::new(LocalSessionManager::default()),
        StreamableHttpServerConfig::default(),
    )
}

/// The same service behind the framing layer.
pub(crate) fn framed_service(
    frame_size: usize,
) -> FramingService<StreamableHttpService<Reports, LocalSessionManager>> {
    FramingLayer::new()
        .frame_size(frame_size)
        .layer(unframed_service())
}

/// The `render_report` call for `document()`, with a progress token so the tool reports
/// progress before its result.
pub(crate) fn render_report_call(title: &str) -> CallToolRequestParams {
    let arguments = serde_json::json!({"title": title, "body": document()});
    let mut params = CallToolRequestParams::new("render_report")
        .with_arguments(arguments.as_object().expect("an object").clone());
    params.meta = Some(RequestMetaObject::with_progress_token(ProgressToken(
        NumberOrString::Number(1),
    )));
    params
}

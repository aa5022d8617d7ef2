//! HTTPS end to end, as production MCP servers are served: an rmcp server behind `FramingLayer`,
//! served by `axum::serve` over rustls with a certificate made in the test, and an rmcp client on
//! `FramingHttpClient` over a reqwest client that trusts only that certificate.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use mcp_framing::rmcp_http::FramingHttpClient;
use rmcp::ServiceExt;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::ServerConfig;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio_rustls::server::TlsStream;

use crate::support::rmcp_support;
use rmcp_support::{document, framed_service, render_report_call};

/// A TLS listener for `axum::serve`: accepts TCP, then completes the handshake. A failed
/// handshake drops that connection and accepts the next one.
struct TlsListener {
    tcp: TcpListener,
    acceptor: TlsAcceptor,
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            let Ok((tcp, addr)) = self.tcp.accept().await else {
                continue;
            };
            if let Ok(tls) = self.acceptor.accept(tcp).await {
                return (tls, addr);
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        self.tcp.local_addr()
    }
}

/// A self-signed certificate for `localhost`, made afresh: (DER certificate, PEM certificate,
/// private key).
fn certificate() -> (CertificateDer<'static>, String, PrivateKeyDer<'static>) {
    let certified = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()])
        .expect("generate a certificate");
    let pem = certified.cert.pem();
    let der = certified.cert.der().clone();
    let key = PrivatePkcs8KeyDer::from(certified.signing_key.serialize_der()).into();
    (der, pem, key)
}

async fn https_server() -> (SocketAddr, String) {
    let (der, pem, key) = certificate();
    let config = ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(vec![der], key)
        .expect("a valid certificate and key");
    let listener = TlsListener {
        tcp: TcpListener::bind("127.0.0.1:0").await.expect("bind"),
        acceptor: TlsAcceptor::from(Arc::new(config)),
    };
    let addr = axum::serve::Listener::local_addr(&listener).expect("addr");
    let app = Router::new().nest_service("/mcp", framed_service(4096));
    tokio::spawn(async move { axum::serve(listener, app).await });
    (addr, pem)
}

fn trusting(pem: &str) -> reqwest::Client {
    let cert = reqwest::Certificate::from_pem(pem.as_bytes()).expect("a PEM certificate");
    reqwest::Client::builder()
        .tls_certs_only([cert])
        .build()
        .expect("a TLS client")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_a_framed_tool_over_https_and_verifies_the_result() {
    let (addr, pem) = https_server().await;
    for binary in [false, true] {
        let client = FramingHttpClient::new(trusting(&pem)).binary(binary);
        let stats = client.stats();
        let transport = StreamableHttpClientTransport::with_client(
            client,
            StreamableHttpClientTransportConfig::with_uri(format!(
                "https://localhost:{}/mcp",
                addr.port()
            )),
        );
        let peer = ().serve(transport).await.expect("initialize over https");
        let result = peer
            .call_tool(render_report_call("Over TLS"))
            .await
            .expect("the tool call completes");
        let text = &result.content[0].as_text().expect("text").text;
        let expected_lines = document().lines().count() + 1;
        assert!(text.starts_with("# Over TLS\n00001 line 0 of a long report body"));
        assert_eq!(text.lines().count(), expected_lines);
        assert!(stats.complete() >= 2, "initialize and the call were framed");
        assert_eq!(stats.abandoned() + stats.failed(), 0);
        let _ = peer.cancel().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refuses_a_server_whose_certificate_is_not_trusted() {
    let (addr, _pem) = https_server().await;
    let (_, other_pem, _) = certificate();
    let client = FramingHttpClient::new(trusting(&other_pem));
    let transport = StreamableHttpClientTransport::with_client(
        client,
        StreamableHttpClientTransportConfig::with_uri(format!(
            "https://localhost:{}/mcp",
            addr.port()
        )),
    );
    let err = ().serve(transport).await.expect_err("an untrusted certificate");
    let chain = format!("{err:?}");
    assert!(
        chain.contains("certificate") || chain.contains("Certificate"),
        "the error names the certificate: {chain}"
    );
}

//! The metrics endpoint of `serve --metrics-addr`: `GET /metrics` answers the host's metrics
//! ([`provider_host::metrics`]) in the Prometheus text format, anything else 404. Plain HTTP
//! on the address the operator names (keep it on loopback or a pod's own address: the metrics
//! carry operation names and counts, never a request's content).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context;
use bytes::Bytes;
use http::{Method, Request, Response, StatusCode, header};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use provider_host::metrics::{CONTENT_TYPE, HostMetrics};

/// Listens on `addr` and answers scrapes until the process ends; the address it listens on
/// (port 0 picks a free one).
pub async fn start(addr: SocketAddr, metrics: Arc<HostMetrics>) -> anyhow::Result<SocketAddr> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("listen for metrics scrapes on {addr} (--metrics-addr)"))?;
    let bound = listener.local_addr()?;
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else { continue };
            let metrics = Arc::clone(&metrics);
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |request| {
                    let metrics = Arc::clone(&metrics);
                    async move { Ok::<_, Infallible>(answer(&request, &metrics)) }
                });
                let _ =
                    hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(stream), service).await;
            });
        }
    });
    Ok(bound)
}

/// The answer to one request.
fn answer(request: &Request<Incoming>, metrics: &HostMetrics) -> Response<Full<Bytes>> {
    let response = if request.method() == Method::GET && request.uri().path() == "/metrics" {
        Response::builder().header(header::CONTENT_TYPE, CONTENT_TYPE).body(Full::from(metrics.encode()))
    } else {
        Response::builder()
            .status(StatusCode::NOT_FOUND)
            .header(header::CONTENT_TYPE, "text/plain; charset=utf-8")
            .body(Full::from("the metrics are at GET /metrics\n"))
    };
    response.unwrap_or_else(|_| Response::new(Full::from("")))
}

//! The host's Kubernetes client: kube-rs's own stack (TLS and credentials from the kubeconfig,
//! its auth, base-URI and extra-header layers, the connect, read and write timeouts) over a
//! connection with `TCP_NODELAY`, and without kube-rs's transparent retries.
//!
//! Why not `kube::Client::try_from(config)` as it is:
//! - **Nagle's algorithm.** Its connector leaves it on, so a small write sent while an earlier
//!   one is unacknowledged waits for the API server's delayed acknowledgement (40 ms on Linux).
//!   An exec's stdin leaves as several WebSocket messages (kube-rs sends at most 4 KiB each), so
//!   every execute with more input than that paid the wait, as a few percent of the other
//!   requests did. Go's `net` package, and with it `kubectl` and client-go, sets `TCP_NODELAY`
//!   on every TCP connection ([`net.TCPConn.SetNoDelay`]); the host does the same.
//! - **Retries.** kube-rs retries 429, 503 and 504 for up to minutes, hidden inside one guest
//!   request, while the contract gives the provider `unavailable` with `retry-after` so that it
//!   decides within its own deadline.
//!
//! A kubeconfig that names a proxy keeps kube-rs's stack as it is (the proxy connectors are
//! its own), Nagle included.
//!
//! [`net.TCPConn.SetNoDelay`]: https://pkg.go.dev/net#TCPConn.SetNoDelay

use hyper_timeout::TimeoutConnector;
use hyper_util::client::legacy::Client as HttpClient;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use kube::client::ConfigExt;
use tower::{BoxError, ServiceBuilder};

use crate::error::HostError;

/// Builds the host's client from a kube config (see the module docs).
pub fn client_from_config(mut config: kube::Config) -> Result<kube::Client, HostError> {
    config.default_retry = false;
    if config.proxy_url.is_some() {
        return kube::Client::try_from(config).map_err(cannot_build);
    }
    let https = config.rustls_https_connector_with_connector(tcp_connector()).map_err(cannot_build)?;
    let mut connector = TimeoutConnector::new(https);
    connector.set_connect_timeout(config.connect_timeout);
    connector.set_read_timeout(config.read_timeout);
    connector.set_write_timeout(config.write_timeout);
    connector.set_reset_reader_on_write(config.reset_reader_on_write);
    let http = HttpClient::builder(TokioExecutor::new()).build(connector);
    let service = ServiceBuilder::new()
        .layer(config.base_uri_layer())
        .option_layer(config.auth_layer().map_err(cannot_build)?)
        .layer(config.extra_headers_layer().map_err(cannot_build)?)
        .map_err(BoxError::from)
        .service(http);
    Ok(kube::Client::new(service, config.default_namespace))
}

/// The TCP connector under TLS: any scheme (TLS decides), no Nagle.
fn tcp_connector() -> HttpConnector {
    let mut connector = HttpConnector::new();
    connector.enforce_http(false);
    connector.set_nodelay(true);
    connector
}

fn cannot_build(e: kube::Error) -> HostError {
    HostError::Config(format!("cannot build the Kubernetes client: {e}"))
}

#[cfg(test)]
mod tests {
    use tower::Service;

    use super::*;

    #[tokio::test]
    async fn connections_are_made_without_nagle() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let uri: http::Uri = format!("http://{}", listener.local_addr().unwrap()).parse().unwrap();
        let accepted = tokio::spawn(async move { listener.accept().await.map(|(socket, _)| socket) });
        let connection = tcp_connector().call(uri).await.expect("connect to the local listener");
        assert!(connection.inner().nodelay().unwrap(), "the host's connections must set TCP_NODELAY, as Go's do");
        drop(accepted.await);
    }
}

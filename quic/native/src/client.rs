//! The WebTransport client (Node): one endpoint and one session per connect, the server
//! authenticated by certificate hashes as browsers do with `serverCertificateHashes`.

use crate::session::{EventSink, Session, TransportOptions};
use std::sync::Arc;
use std::time::Duration;
use wtransport::endpoint::endpoint_side;
use wtransport::error::{ConnectingError, ConnectionError};
use wtransport::tls::Sha256Digest;
use wtransport::{ClientConfig, Endpoint};

#[derive(Clone, Debug)]
pub struct ClientOptions {
    pub url: String,
    pub hashes: Vec<[u8; 32]>,
    pub connect_timeout: Duration,
    pub transport: TransportOptions,
}

/// Why a connect failed; the JS wrapper turns the kind into `QuicConnectError.code`.
#[derive(Debug)]
pub struct ConnectFailure {
    pub kind: &'static str,
    pub message: String,
}

impl ConnectFailure {
    fn new(kind: &'static str, message: String) -> Self {
        ConnectFailure { kind, message }
    }
}

fn describe(url: &str, e: ConnectingError) -> ConnectFailure {
    match e {
        ConnectingError::SessionRejected => ConnectFailure::new(
            "refused",
            format!("the server refused the WebTransport session at {url} (an HTTP error status; wtransport 0.7 does not report which)"),
        ),
        ConnectingError::InvalidUrl(m) => ConnectFailure::new("url", format!("invalid URL {url}: {m}")),
        ConnectingError::ConnectionError(ConnectionError::TimedOut) => {
            ConnectFailure::new("timeout", format!("QUIC handshake with {url} timed out"))
        }
        ConnectingError::ConnectionError(ce) => {
            let m = ce.to_string();
            if m.contains("certificate") || m.contains("Certificate") {
                ConnectFailure::new("certificate", format!("TLS handshake with {url} failed on the server certificate: {m}"))
            } else {
                ConnectFailure::new("failed", format!("connection to {url} failed: {m}"))
            }
        }
        other => ConnectFailure::new("failed", format!("connection to {url} failed: {other}")),
    }
}

pub struct ClientSession {
    pub endpoint: Endpoint<endpoint_side::Client>,
    pub session: Arc<Session>,
}

/// Connects and starts the session's tasks. Must run inside the tokio runtime.
pub async fn connect(opts: ClientOptions, sink: Arc<EventSink>) -> Result<ClientSession, ConnectFailure> {
    if opts.hashes.is_empty() {
        return Err(ConnectFailure::new(
            "url",
            "serverCertificateHashes must list at least one SHA-256 hash".into(),
        ));
    }
    let transport = opts
        .transport
        .quinn_config()
        .map_err(|m| ConnectFailure::new("url", m))?;
    let mut config = ClientConfig::builder()
        .with_bind_default()
        .with_server_certificate_hashes(opts.hashes.iter().map(|h| Sha256Digest::new(*h)))
        .build();
    config.quic_config_mut().transport_config(Arc::new(transport));
    let endpoint = Endpoint::client(config)
        .map_err(|e| ConnectFailure::new("failed", format!("cannot bind a UDP socket: {e}")))?;
    let conn = match tokio::time::timeout(opts.connect_timeout, endpoint.connect(opts.url.as_str())).await {
        Ok(Ok(conn)) => conn,
        Ok(Err(e)) => return Err(describe(&opts.url, e)),
        Err(_) => {
            return Err(ConnectFailure::new(
                "timeout",
                format!(
                    "WebTransport connect to {} timed out after {} ms",
                    opts.url,
                    opts.connect_timeout.as_millis()
                ),
            ))
        }
    };
    let session = Session::new(0, conn, opts.transport.send_buffer);
    let sink_on_close = sink.clone();
    // The closed event is queued before the callback is released, so it is delivered; then the
    // process may exit.
    session.spawn_tasks(sink, move |_| sink_on_close.shutdown());
    Ok(ClientSession { endpoint, session })
}

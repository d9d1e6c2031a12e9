//! The WebTransport client (Node): one endpoint and one session per connect. The server is
//! authenticated either by certificate hashes, as browsers do with `serverCertificateHashes`
//! (a proxy's self-signed, rotated certificates), or the ordinary WebPKI way: a chain to a
//! trusted root that names the URL's host (an operator's CA certificate).

use crate::cert::parse_certificates;
use crate::client_datagrams;
use crate::session::{EventSink, Session, TransportOptions};
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use wtransport::endpoint::endpoint_side;
use wtransport::error::{ConnectingError, ConnectionError};
use wtransport::tls::{build_native_cert_store, client::build_default_tls_config, rustls, Sha256Digest};
use wtransport::{ClientConfig, Endpoint};

/// How the server's certificate is checked.
#[derive(Clone, Debug)]
pub enum ServerAuth {
    /// Its SHA-256 must be one of these (and it must be a ≤ 14-day ECDSA P-256 certificate).
    Hashes(Vec<[u8; 32]>),
    /// WebPKI: a chain to the system's roots or to one of `extra_roots_pem`'s, valid now, for the
    /// URL's host name or IP address.
    CertificateAuthority { extra_roots_pem: Option<String> },
}

#[derive(Clone, Debug)]
pub struct ClientOptions {
    pub url: String,
    pub auth: ServerAuth,
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

/// The system's roots (rustls-native-certs: on Linux the distribution's bundle), read once: reading
/// them parses every file of the system's certificate directory.
fn system_roots() -> &'static rustls::RootCertStore {
    static ROOTS: OnceLock<rustls::RootCertStore> = OnceLock::new();
    ROOTS.get_or_init(build_native_cert_store)
}

/// The system's roots plus the extra ones (e.g. an operator's private CA, a test CA).
fn root_store(extra_roots_pem: Option<&str>) -> Result<rustls::RootCertStore, String> {
    let mut roots = system_roots().clone();
    if let Some(pem_text) = extra_roots_pem {
        for cert in parse_certificates(pem_text)? {
            roots
                .add(cert)
                .map_err(|e| format!("an extra root certificate is not a usable trust anchor: {e}"))?;
        }
    }
    Ok(roots)
}

fn client_config(auth: &ServerAuth, transport: quinn::TransportConfig) -> Result<ClientConfig, String> {
    let builder = ClientConfig::builder().with_bind_default();
    match auth {
        ServerAuth::Hashes(hashes) => {
            if hashes.is_empty() {
                return Err("serverCertificateHashes must list at least one SHA-256 hash".into());
            }
            let mut config = builder
                .with_server_certificate_hashes(hashes.iter().map(|h| Sha256Digest::new(*h)))
                .build();
            config.quic_config_mut().transport_config(Arc::new(transport));
            Ok(config)
        }
        ServerAuth::CertificateAuthority { extra_roots_pem } => {
            // wtransport's TLS defaults (TLS 1.3, ALPN h3) with rustls's WebPKI verifier.
            let tls = build_default_tls_config(Arc::new(root_store(extra_roots_pem.as_deref())?), None);
            Ok(builder.with_custom_tls_and_transport(tls, transport).build())
        }
    }
}

/// Connects and starts the session's tasks. Must run inside the tokio runtime.
/// `sink` takes the session's own events, `datagrams` its datagrams (the clients' shared sink).
pub async fn connect(
    opts: ClientOptions,
    sink: Arc<EventSink>,
    datagrams: Arc<EventSink>,
) -> Result<ClientSession, ConnectFailure> {
    let transport = opts
        .transport
        .quinn_config()
        .map_err(|m| ConnectFailure::new("url", m))?;
    let config = client_config(&opts.auth, transport).map_err(|m| ConnectFailure::new("url", m))?;
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
    let session = Session::new(client_datagrams::next_session_id(), conn, opts.transport.send_buffer);
    let sink_on_close = sink.clone();
    // The closed event is queued before the callback is released, so it is delivered; then the
    // process may exit.
    session.spawn_tasks(sink, datagrams, move |_| sink_on_close.shutdown());
    Ok(ClientSession { endpoint, session })
}

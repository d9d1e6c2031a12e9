//! `@mutp/quic` native addon: QUIC datagrams over WebTransport (HTTP/3, wtransport on quinn) for
//! Node, with MutpRate, a loss-blind delay-based rate controller (`rate_control`). The typed
//! JavaScript API is quic/src/index.ts; this file is its native half (napi-rs).

pub mod cert;
pub mod client;
pub mod client_datagrams;
pub mod rate_control;
pub mod server;
pub mod session;

use napi::bindgen_prelude::*;
use napi_derive::napi;
use session::{
    event_to_js, DatagramQueue, Event, EventCarrier, EventFn, EventSink, NativeEvent, SessionInfo, TransportOptions,
};
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// One runtime worker, not one per core (napi-rs's default): every session's work is small and
/// per datagram, and with two workers they handed datagrams and wake-ups to each other (issue 33:
/// cross-thread wake-ups were most of the addon's CPU on a 2-core machine). Node's own thread is
/// the other core's.
#[napi_derive::module_init]
fn init_runtime() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("the QUIC addon's runtime");
    create_custom_tokio_runtime(runtime);
}

fn err(m: impl Into<String>) -> Error {
    Error::new(Status::InvalidArg, m.into())
}

#[napi(object)]
pub struct CertificateOptions {
    pub names: Vec<String>,
    pub validity_days: u32,
}

#[napi(object)]
pub struct GeneratedCertificate {
    pub certificate_pem: String,
    pub private_key_pem: String,
    /// SHA-256 of the DER certificate (for `serverCertificateHashes`).
    pub sha256: Uint8Array,
    /// Milliseconds since the epoch.
    pub not_before: f64,
    pub not_after: f64,
}

/// A self-signed ECDSA P-256 X.509v3 certificate valid for at most 14 days.
#[napi]
pub fn generate_certificate(options: CertificateOptions) -> Result<GeneratedCertificate> {
    let g = cert::generate(&options.names, options.validity_days).map_err(err)?;
    Ok(GeneratedCertificate {
        certificate_pem: g.certificate_pem,
        private_key_pem: g.private_key_pem,
        sha256: Uint8Array::new(g.sha256.to_vec()),
        not_before: g.not_before_ms as f64,
        not_after: g.not_after_ms as f64,
    })
}

/// SHA-256 of the DER of the first certificate in a PEM text.
#[napi]
pub fn certificate_hash(certificate_pem: String) -> Result<Uint8Array> {
    Ok(Uint8Array::new(
        cert::certificate_hash(&certificate_pem).map_err(err)?.to_vec(),
    ))
}

/// Rate controller options, bytes per second.
#[napi(object)]
pub struct RateOptions {
    pub initial_rate_bps: Option<f64>,
    pub max_rate_bps: Option<f64>,
    pub min_rate_bps: Option<f64>,
}

/// Transport tuning shared by server and client options.
#[napi(object)]
pub struct TransportTuning {
    pub idle_timeout_ms: Option<u32>,
    pub keep_alive_ms: Option<u32>,
    pub initial_rtt_ms: Option<u32>,
    pub datagram_send_buffer_bytes: Option<u32>,
    pub datagram_receive_buffer_bytes: Option<u32>,
}

fn transport_options(t: &TransportTuning, rate: &Option<RateOptions>) -> Result<TransportOptions> {
    let idle = Duration::from_millis(
        t.idle_timeout_ms
            .map_or(session::DEFAULT_IDLE_TIMEOUT.as_millis() as u64, |v| v as u64),
    );
    if idle < Duration::from_millis(100) {
        return Err(err("idleTimeoutMs must be at least 100"));
    }
    let keep_alive = t.keep_alive_ms.map_or(idle / 3, |v| Duration::from_millis(v as u64));
    let initial_rtt = t
        .initial_rtt_ms
        .map_or(session::DEFAULT_INITIAL_RTT, |v| Duration::from_millis(v.max(1) as u64));
    let send_buffer = t
        .datagram_send_buffer_bytes
        .map_or(session::DEFAULT_SEND_BUFFER, |v| v as usize);
    if send_buffer < 4 * 1500 {
        return Err(err("datagramSendBufferBytes must be at least 6000"));
    }
    let receive_buffer = t
        .datagram_receive_buffer_bytes
        .map_or(session::DEFAULT_RECEIVE_BUFFER, |v| v as usize);
    let mut cfg = rate_control::RateConfig {
        initial_rtt,
        ..Default::default()
    };
    if let Some(r) = rate {
        let bps = |v: Option<f64>, name: &str| -> Result<Option<u64>> {
            match v {
                None => Ok(None),
                Some(x) if x.is_finite() && x >= 0.0 => Ok(Some(x as u64)),
                Some(x) => Err(err(format!(
                    "rate.{name} must be a non-negative number of bytes/s, got {x}"
                ))),
            }
        };
        cfg.initial_rate = bps(r.initial_rate_bps, "initialRateBps")?.filter(|&v| v > 0);
        cfg.max_rate = bps(r.max_rate_bps, "maxRateBps")?.unwrap_or(0);
        if let Some(m) = bps(r.min_rate_bps, "minRateBps")? {
            cfg.min_rate = m;
        }
    }
    Ok(TransportOptions {
        idle_timeout: idle,
        keep_alive,
        initial_rtt,
        send_buffer,
        receive_buffer,
        rate: cfg,
    })
}

/// Builds the one threadsafe function that carries every event of a server or client.
fn event_sink(callback: Function<NativeEvent, ()>) -> Result<Arc<EventSink>> {
    let queue = Arc::new(Mutex::new(DatagramQueue::default()));
    let q = queue.clone();
    let tsfn: EventFn = callback
        .build_threadsafe_function::<Event>()
        .callee_handled::<false>()
        .build_callback(move |ctx| Ok(event_to_js(ctx.value, &q)))?;
    Ok(Arc::new(EventSink::new(EventCarrier::Strong(tsfn), queue)))
}

#[napi(object)]
pub struct ServerOptions {
    pub host: String,
    pub port: u32,
    pub certificate_pem: String,
    pub private_key_pem: String,
    pub max_sessions: u32,
    pub max_pending_sessions: u32,
    /// A connection attempt from an address not yet validated is answered with a stateless Retry
    /// while at least this many are pending (0: always; default: a quarter of
    /// `max_pending_sessions`).
    pub retry_above_pending_sessions: Option<u32>,
    /// QUIC handshake plus the CONNECT request (default 10 s).
    pub handshake_timeout_ms: Option<u32>,
    /// How long JavaScript has to accept or reject a session request (default 2 s).
    pub request_timeout_ms: Option<u32>,
    pub transport: TransportTuning,
    pub rate: Option<RateOptions>,
}

#[napi]
pub struct NativeServer {
    inner: Arc<server::ServerInner>,
}

/// Binds a WebTransport server; events go to `onEvent`.
#[napi]
pub fn listen(options: ServerOptions, on_event: Function<NativeEvent, ()>) -> Result<NativeServer> {
    let ip: IpAddr = options
        .host
        .parse()
        .map_err(|_| err(format!("host must be an IP address, got {:?}", options.host)))?;
    if options.port > 65535 {
        return Err(err(format!("port must be 0..65535, got {}", options.port)));
    }
    let transport = transport_options(&options.transport, &options.rate)?;
    let opts = server::ServerOptions {
        addr: SocketAddr::new(ip, options.port as u16),
        certificate_pem: options.certificate_pem,
        private_key_pem: options.private_key_pem,
        max_sessions: options.max_sessions as usize,
        max_pending: options.max_pending_sessions.max(1) as usize,
        retry_above_pending: options
            .retry_above_pending_sessions
            .map_or(options.max_pending_sessions.max(1) as usize / 4, |v| v as usize),
        handshake_timeout: Duration::from_millis(options.handshake_timeout_ms.unwrap_or(10_000) as u64),
        request_timeout: Duration::from_millis(options.request_timeout_ms.unwrap_or(2_000) as u64),
        transport,
    };
    let sink = event_sink(on_event)?;
    let started = within_runtime_if_available(|| server::ServerInner::start(opts, sink.clone()));
    match started {
        Ok(inner) => Ok(NativeServer { inner }),
        Err(m) => {
            sink.shutdown();
            Err(err(m))
        }
    }
}

#[napi]
impl NativeServer {
    #[napi(getter)]
    pub fn port(&self) -> u32 {
        self.inner.port() as u32
    }

    #[napi]
    pub fn accept_session(&self, session_id: u32) -> bool {
        self.inner.accept_session(session_id)
    }

    /// The HTTP status sent (403, 404 or 429: the statuses wtransport 0.7 can send), 0 when the
    /// request is unknown or already answered or expired.
    #[napi]
    pub fn reject_session(&self, session_id: u32, http_status: u32) -> u32 {
        self.inner
            .reject_session(session_id, http_status.min(999) as u16)
            .unwrap_or(0) as u32
    }

    #[napi]
    pub fn send_datagram(&self, session_id: u32, data: &[u8]) -> bool {
        self.inner.session(session_id).is_some_and(|s| s.send(data))
    }

    #[napi]
    pub fn session_info(&self, session_id: u32) -> Option<SessionInfo> {
        self.inner.session(session_id).map(|s| s.info())
    }

    /// Bytes queued in the session's datagram send buffer (0 when it is gone): the cheap read a
    /// sender's pump makes before every datagram (`session_info` builds a whole object).
    #[napi]
    pub fn buffered_bytes(&self, session_id: u32) -> u32 {
        self.inner.session(session_id).map_or(0, |s| s.buffered() as u32)
    }

    #[napi]
    pub fn set_rate_cap(&self, session_id: u32, bytes_per_second: f64) -> bool {
        self.inner
            .session(session_id)
            .map(|s| s.set_rate_cap(bytes_per_second.max(0.0) as u64))
            .is_some()
    }

    #[napi]
    pub fn set_low_water_mark(&self, session_id: u32, bytes: u32) -> bool {
        self.inner
            .session(session_id)
            .map(|s| s.set_low_water(bytes as usize))
            .is_some()
    }

    #[napi]
    pub fn close_session(&self, session_id: u32, code: u32, reason: String) -> bool {
        self.inner.session(session_id).map(|s| s.close(code, &reason)).is_some()
    }

    #[napi]
    pub fn reload_certificate(&self, certificate_pem: String, private_key_pem: String) -> Result<()> {
        within_runtime_if_available(|| self.inner.reload_certificate(&certificate_pem, &private_key_pem)).map_err(err)
    }

    /// Retry packets sent so far (connection attempts asked to validate their address).
    #[napi(getter)]
    pub fn retries_sent(&self) -> f64 {
        self.inner.retries_sent() as f64
    }

    /// Sessions accepted and not yet closed.
    #[napi(getter)]
    pub fn session_count(&self) -> u32 {
        self.inner.session_count() as u32
    }

    #[napi]
    pub fn close<'env>(&self, env: &'env Env) -> Result<PromiseRaw<'env, ()>> {
        let inner = self.inner.clone();
        env.spawn_future(async move {
            inner.close().await;
            Ok(())
        })
    }
}

/// Where every client session's datagrams go from now on: one batch for all of them per hold
/// (client_datagrams.rs). `connect` needs it set; quic/src/index.ts sets it once per JS realm.
#[napi]
pub fn set_client_datagram_handler(on_event: Function<NativeEvent, ()>) -> Result<()> {
    client_datagrams::install(on_event)
}

#[napi(object)]
pub struct ClientOptions {
    pub url: String,
    /// Accept only certificates with these SHA-256 hashes; absent: WebPKI (a chain to a trusted
    /// root that names the URL's host).
    pub server_certificate_hashes: Option<Vec<Uint8Array>>,
    /// WebPKI only: roots trusted besides the system's (PEM).
    pub extra_root_certificates_pem: Option<String>,
    /// Handshake plus session request (default 10 s).
    pub connect_timeout_ms: Option<u32>,
    pub transport: TransportTuning,
    pub rate: Option<RateOptions>,
}

#[napi]
pub struct NativeClient {
    session: Arc<session::Session>,
    _endpoint: wtransport::Endpoint<wtransport::endpoint::endpoint_side::Client>,
}

/// Connects; rejects with an Error whose message starts with `<kind>: ` (refused, timeout,
/// certificate, url, failed).
#[napi]
pub fn connect<'env>(
    env: &'env Env,
    options: ClientOptions,
    on_event: Function<NativeEvent, ()>,
) -> Result<PromiseRaw<'env, NativeClient>> {
    let auth = match &options.server_certificate_hashes {
        Some(list) => {
            if options.extra_root_certificates_pem.is_some() {
                return Err(err(
                    "extraRootCertificatesPem applies to WebPKI validation, not to serverCertificateHashes",
                ));
            }
            let mut hashes = Vec::new();
            for h in list {
                let bytes: [u8; 32] = h.as_ref().try_into().map_err(|_| {
                    err(format!(
                        "serverCertificateHashes: a SHA-256 hash has 32 bytes, got {}",
                        h.len()
                    ))
                })?;
                hashes.push(bytes);
            }
            client::ServerAuth::Hashes(hashes)
        }
        None => client::ServerAuth::CertificateAuthority {
            extra_roots_pem: options.extra_root_certificates_pem,
        },
    };
    let opts = client::ClientOptions {
        url: options.url,
        auth,
        connect_timeout: Duration::from_millis(options.connect_timeout_ms.unwrap_or(10_000) as u64),
        transport: transport_options(&options.transport, &options.rate)?,
    };
    let datagrams = client_datagrams::current().ok_or_else(|| err("setClientDatagramHandler must be called first"))?;
    let sink = event_sink(on_event)?;
    env.spawn_future(async move {
        match client::connect(opts, sink.clone(), datagrams).await {
            Ok(c) => Ok(NativeClient {
                session: c.session,
                _endpoint: c.endpoint,
            }),
            Err(f) => {
                sink.shutdown();
                Err(Error::new(Status::GenericFailure, format!("{}: {}", f.kind, f.message)))
            }
        }
    })
}

#[napi]
impl NativeClient {
    #[napi]
    pub fn send_datagram(&self, data: &[u8]) -> bool {
        self.session.send(data)
    }

    #[napi]
    pub fn queue_datagram(&self, data: &[u8]) -> bool {
        self.session.send_queued(data)
    }

    #[napi]
    pub fn info(&self) -> SessionInfo {
        self.session.info()
    }

    #[napi]
    pub fn set_rate_cap(&self, bytes_per_second: f64) {
        self.session.set_rate_cap(bytes_per_second.max(0.0) as u64)
    }

    #[napi]
    pub fn set_low_water_mark(&self, bytes: u32) {
        self.session.set_low_water(bytes as usize)
    }

    #[napi]
    pub fn close(&self, code: u32, reason: String) {
        self.session.close(code, &reason)
    }

    #[napi(getter)]
    pub fn closed(&self) -> bool {
        self.session.is_closed()
    }

    /// The process-wide id the shared datagram batches name this session by.
    #[napi(getter)]
    pub fn session_id(&self) -> u32 {
        self.session.id
    }
}

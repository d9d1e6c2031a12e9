//! The WebTransport server: accepts QUIC connections and WebTransport session requests, asks
//! JavaScript to accept or reject each (bounded: `max_pending` at once, answered within
//! `request_timeout` or rejected), and keeps the accepted sessions.

use crate::cert::{parse_certificates, parse_private_key};
use crate::session::{Event, EventSink, Session, TransportOptions};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;
use wtransport::endpoint::endpoint_side;
use wtransport::endpoint::SessionRequest;
use wtransport::tls::rustls;
use wtransport::{Endpoint, ServerConfig, VarInt};

#[derive(Clone, Debug)]
pub struct ServerOptions {
    pub addr: SocketAddr,
    pub certificate_pem: String,
    pub private_key_pem: String,
    pub max_sessions: usize,
    pub max_pending: usize,
    /// Unvalidated connection attempts get a Retry while at least this many are pending.
    pub retry_above_pending: usize,
    /// QUIC handshake plus the WebTransport CONNECT request.
    pub handshake_timeout: Duration,
    /// How long JavaScript has to accept or reject a session request.
    pub request_timeout: Duration,
    pub transport: TransportOptions,
}

enum Decision {
    Accept,
    Reject(u16),
}

pub struct ServerInner {
    endpoint: Endpoint<endpoint_side::Server>,
    opts: ServerOptions,
    sink: Arc<EventSink>,
    sessions: Mutex<HashMap<u32, Arc<Session>>>,
    pending: Mutex<HashMap<u32, oneshot::Sender<Decision>>>,
    pending_count: AtomicUsize,
    /// Retry packets sent (address validation asked of a new connection attempt).
    retries: AtomicU64,
    next_id: AtomicU32,
    closed: AtomicBool,
    shutdown: watch::Sender<bool>,
    accept_task: Mutex<Option<JoinHandle<()>>>,
}

/// The rustls configuration for a certificate chain and key (TLS 1.3, ALPN h3), validated here so
/// that a bad key is an error rather than a panic inside wtransport.
fn tls_config(certificate_pem: &str, private_key_pem: &str) -> Result<rustls::ServerConfig, String> {
    let certs = parse_certificates(certificate_pem)?;
    let key = parse_private_key(private_key_pem)?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut cfg = rustls::ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(|e| e.to_string())?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| format!("certificate and private key do not form a usable identity: {e}"))?;
    cfg.alpn_protocols = vec![b"h3".to_vec()];
    Ok(cfg)
}

fn server_config(opts: &ServerOptions, certificate_pem: &str, private_key_pem: &str) -> Result<ServerConfig, String> {
    let tls = tls_config(certificate_pem, private_key_pem)?;
    let transport = opts.transport.quinn_config()?;
    Ok(ServerConfig::builder()
        .with_bind_address(opts.addr)
        .with_custom_tls_and_transport(tls, transport)
        .build())
}

/// Rejection with the nearest status wtransport 0.7 can send (403, 404 or 429).
async fn reject(req: SessionRequest, status: u16) -> u16 {
    match status {
        404 => {
            req.not_found().await;
            404
        }
        429 | 503 => {
            req.too_many_requests().await;
            429
        }
        _ => {
            req.forbidden().await;
            403
        }
    }
}

/// The status `reject` sends for a requested one.
pub fn effective_status(status: u16) -> u16 {
    match status {
        404 => 404,
        429 | 503 => 429,
        _ => 403,
    }
}

struct PendingGuard(Arc<ServerInner>);
impl Drop for PendingGuard {
    fn drop(&mut self) {
        self.0.pending_count.fetch_sub(1, Ordering::AcqRel);
    }
}

impl ServerInner {
    /// Binds and starts accepting. Must run inside the tokio runtime.
    pub fn start(opts: ServerOptions, sink: Arc<EventSink>) -> Result<Arc<Self>, String> {
        let config = server_config(&opts, &opts.certificate_pem, &opts.private_key_pem)?;
        let endpoint = Endpoint::server(config).map_err(|e| format!("cannot bind {}: {e}", opts.addr))?;
        let (shutdown, _) = watch::channel(false);
        let inner = Arc::new(ServerInner {
            endpoint,
            opts,
            sink,
            sessions: Mutex::new(HashMap::new()),
            pending: Mutex::new(HashMap::new()),
            pending_count: AtomicUsize::new(0),
            retries: AtomicU64::new(0),
            next_id: AtomicU32::new(1),
            closed: AtomicBool::new(false),
            shutdown,
            accept_task: Mutex::new(None),
        });
        let task = napi::bindgen_prelude::spawn(inner.clone().accept_loop());
        *inner.accept_task.lock().unwrap() = Some(task);
        Ok(inner)
    }

    pub fn port(&self) -> u16 {
        self.endpoint.local_addr().map(|a| a.port()).unwrap_or(0)
    }

    async fn accept_loop(self: Arc<Self>) {
        let mut shutdown = self.shutdown.subscribe();
        loop {
            let incoming = tokio::select! {
                _ = shutdown.changed() => break,
                incoming = self.endpoint.accept() => incoming,
            };
            let pending = self.pending_count.load(Ordering::Acquire);
            if pending >= self.opts.retry_above_pending && !incoming.remote_address_validated() {
                // Address validation (RFC 9000 §8.1.2): a stateless Retry, no handshake state and a
                // reply smaller than the Initial, until the client proves it receives at its
                // address by echoing the token. A spoofed source never does, so an Initial flood
                // from forged addresses neither fills the pending slots nor draws 3x replies.
                self.retries.fetch_add(1, Ordering::Relaxed);
                incoming.retry();
                continue;
            }
            if pending >= self.opts.max_pending {
                // Bounded cost: refuse at the QUIC level before any handshake work.
                incoming.refuse();
                continue;
            }
            self.pending_count.fetch_add(1, Ordering::AcqRel);
            let guard = PendingGuard(self.clone());
            napi::bindgen_prelude::spawn(self.clone().handle_incoming(incoming, guard));
        }
    }

    async fn handle_incoming(self: Arc<Self>, incoming: wtransport::endpoint::IncomingSession, guard: PendingGuard) {
        let req = match tokio::time::timeout(self.opts.handshake_timeout, incoming).await {
            Ok(Ok(req)) => req,
            _ => return,
        };
        if self.closed.load(Ordering::Acquire) {
            return;
        }
        if self.sessions.lock().unwrap().len() >= self.opts.max_sessions {
            req.too_many_requests().await;
            return;
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        self.pending.lock().unwrap().insert(id, tx);
        self.sink.emit(Event::Request {
            id,
            path: req.path().to_string(),
            addr: req.remote_address(),
        });
        let decision = tokio::time::timeout(self.opts.request_timeout, rx).await;
        self.pending.lock().unwrap().remove(&id);
        match decision {
            Ok(Ok(Decision::Accept)) if !self.closed.load(Ordering::Acquire) => {
                if self.sessions.lock().unwrap().len() >= self.opts.max_sessions {
                    req.too_many_requests().await;
                    return;
                }
                let conn = match tokio::time::timeout(self.opts.handshake_timeout, req.accept()).await {
                    Ok(Ok(conn)) => conn,
                    _ => return,
                };
                drop(guard);
                let session = Session::new(id, conn, self.opts.transport.send_buffer);
                self.sessions.lock().unwrap().insert(id, session.clone());
                self.sink.emit(Event::Open { id });
                let weak = Arc::downgrade(&self);
                session.spawn_tasks(self.sink.clone(), self.sink.clone(), move |id| {
                    if let Some(s) = weak.upgrade() {
                        s.sessions.lock().unwrap().remove(&id);
                    }
                });
                if self.closed.load(Ordering::Acquire) {
                    session.close(0, "server closing");
                }
            }
            Ok(Ok(Decision::Reject(status))) => {
                reject(req, status).await;
            }
            // Unanswered in time, or the server is closing.
            _ => {
                req.too_many_requests().await;
            }
        }
    }

    pub fn accept_session(&self, id: u32) -> bool {
        match self.pending.lock().unwrap().remove(&id) {
            Some(tx) => tx.send(Decision::Accept).is_ok(),
            None => false,
        }
    }

    /// The status sent (403, 404 or 429), or None for an unknown or expired request.
    pub fn reject_session(&self, id: u32, status: u16) -> Option<u16> {
        let tx = self.pending.lock().unwrap().remove(&id)?;
        tx.send(Decision::Reject(status)).ok()?;
        Some(effective_status(status))
    }

    pub fn retries_sent(&self) -> u64 {
        self.retries.load(Ordering::Relaxed)
    }

    pub fn session_count(&self) -> usize {
        self.sessions.lock().unwrap().len()
    }

    pub fn session(&self, id: u32) -> Option<Arc<Session>> {
        self.sessions.lock().unwrap().get(&id).cloned()
    }

    pub fn reload_certificate(&self, certificate_pem: &str, private_key_pem: &str) -> Result<(), String> {
        let config = server_config(&self.opts, certificate_pem, private_key_pem)?;
        self.endpoint.reload_config(config, false).map_err(|e| e.to_string())
    }

    /// Closes every session and the endpoint, waits (bounded) for the closed events, then releases
    /// the JavaScript callback so that the process can exit.
    pub async fn close(self: Arc<Self>) {
        if self.closed.swap(true, Ordering::AcqRel) {
            return;
        }
        let _ = self.shutdown.send(true);
        let task = self.accept_task.lock().unwrap().take();
        if let Some(task) = task {
            let _ = task.await;
        }
        // Pending requests: dropping their senders rejects them.
        self.pending.lock().unwrap().clear();
        let sessions: Vec<_> = self.sessions.lock().unwrap().values().cloned().collect();
        for s in &sessions {
            s.close(0, "server closing");
        }
        self.endpoint.close(VarInt::from_u32(0), b"server closing");
        let _ = tokio::time::timeout(Duration::from_millis(500), self.endpoint.wait_idle()).await;
        // The sessions' receive loops emit their closed events and leave the map.
        let deadline = tokio::time::Instant::now() + Duration::from_millis(500);
        while !self.sessions.lock().unwrap().is_empty() && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        self.sink.shutdown();
    }
}

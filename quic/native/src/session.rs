//! What the server and the client share: the QUIC transport configuration, a WebTransport session
//! (datagrams out with back-pressure, datagrams in, statistics, rate cap, low-water wake-up) and
//! the event sink that carries events to JavaScript through one threadsafe function.

use crate::rate_control::{rate_handle_of, MutpRateFactory, RateConfig, RateHandle};
use bytes::Bytes;
use napi::bindgen_prelude::{Buffer, Uint32Array};
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi::Status;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, Notify};
use wtransport::error::ConnectionError;
use wtransport::proto::datagram::Datagram as H3Datagram;
use wtransport::{Connection, SessionId, VarInt};

/// Transport settings common to both sides.
#[derive(Clone, Debug)]
pub struct TransportOptions {
    pub idle_timeout: Duration,
    pub keep_alive: Duration,
    pub initial_rtt: Duration,
    pub send_buffer: usize,
    pub receive_buffer: usize,
    pub rate: RateConfig,
}

pub const DEFAULT_SEND_BUFFER: usize = 64 * 1024;
pub const DEFAULT_RECEIVE_BUFFER: usize = 1024 * 1024;
pub const DEFAULT_INITIAL_RTT: Duration = Duration::from_millis(100);
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(30);

impl TransportOptions {
    /// quinn's transport configuration: our controller, the initial RTT, buffers, timers.
    pub fn quinn_config(&self) -> Result<quinn::TransportConfig, String> {
        let mut t = quinn::TransportConfig::default();
        let idle = quinn::IdleTimeout::try_from(self.idle_timeout)
            .map_err(|_| format!("idle timeout {:?} is out of range", self.idle_timeout))?;
        t.max_idle_timeout(Some(idle));
        t.keep_alive_interval(Some(self.keep_alive));
        t.initial_rtt(self.initial_rtt);
        t.datagram_send_buffer_size(self.send_buffer);
        t.datagram_receive_buffer_size(Some(self.receive_buffer));
        let mut rate = self.rate.clone();
        rate.initial_rtt = self.initial_rtt;
        t.congestion_controller_factory(Arc::new(MutpRateFactory { cfg: rate }));
        Ok(t)
    }
}

/// Events for JavaScript. Datagrams are not carried in the event: they wait in `DatagramQueue`
/// and the JS-thread conversion takes whatever has accumulated (one callback per batch).
pub enum Event {
    Request { id: u32, path: String, addr: SocketAddr },
    Datagrams,
    Open { id: u32 },
    Closed { id: u32, code: u32, reason: String },
    Low { id: u32 },
}

/// The JS side of an event (see quic/src/index.ts).
#[napi_derive::napi(object)]
pub struct NativeEvent {
    /// "request" | "open" | "datagrams" | "closed" | "low"
    pub kind: String,
    pub session_id: u32,
    pub path: Option<String>,
    pub remote_address: Option<String>,
    pub remote_port: Option<u32>,
    pub code: Option<u32>,
    pub reason: Option<String>,
    /// Datagram batches: per datagram three numbers, its session id, its length and how many
    /// microseconds it waited between its arrival and the batch's dispatch (a batch is read at
    /// once: without these, its arrival spacing would be lost); payloads back to back in `data`.
    /// One array, not three: each typed array handed over is an external buffer V8 must track and
    /// finalize (issue 33).
    pub meta: Option<Uint32Array>,
    pub data: Option<Buffer>,
    /// Datagrams dropped since the last batch because JavaScript fell behind.
    pub dropped: Option<u32>,
}

pub type EventFn = ThreadsafeFunction<Event, (), NativeEvent, Status, false>;
/// As `EventFn`, but it does not keep the Node process alive (the clients' shared datagram sink:
/// each client's own `EventFn` does that while its session is open).
pub type WeakEventFn = ThreadsafeFunction<Event, (), NativeEvent, Status, false, true>;

/// The threadsafe function an `EventSink` calls.
pub enum EventCarrier {
    Strong(EventFn),
    Weak(WeakEventFn),
}

impl EventCarrier {
    fn call(&self, ev: Event) -> Status {
        match self {
            EventCarrier::Strong(f) => f.call(ev, ThreadsafeFunctionCallMode::NonBlocking),
            EventCarrier::Weak(f) => f.call(ev, ThreadsafeFunctionCallMode::NonBlocking),
        }
    }
}

/// Incoming datagrams waiting for the JS thread; bounded.
#[derive(Default)]
pub struct DatagramQueue {
    /// Session id and length of each datagram (the age is added at dispatch).
    ids_lens: Vec<(u32, u32)>,
    data: Vec<u8>,
    arrived: Vec<Instant>,
    /// A `Datagrams` event is on its way to JavaScript (it takes whatever has queued by then).
    scheduled: bool,
    /// A hold timer runs: it schedules the batch when it fires, unless the batch filled first.
    holding: bool,
    dropped: u64,
}

/// How long a datagram may wait for others before JavaScript is woken for it. On a 2-core machine
/// each wake-up of the JS thread costs more than handling a datagram (issue 33: ~4,400 datagrams/s
/// of one download were ~4,400 wake-ups); QUIC's own ACKs, which time the sender's rate control,
/// do not wait, and each datagram's arrival time still travels with it (its age in `meta`).
pub const DELIVERY_HOLD: Duration = Duration::from_millis(1);
/// A batch this large goes to JavaScript at once, without waiting for the hold.
pub const DELIVERY_BATCH: usize = 32;

/// Bytes of datagrams that may wait for JavaScript before new ones are dropped.
pub const MAX_QUEUED_BYTES: usize = 16 * 1024 * 1024;

impl DatagramQueue {
    /// Called on the JS thread: the batch accumulated so far.
    pub fn take_event(&mut self) -> NativeEvent {
        self.scheduled = false;
        let dropped = std::mem::take(&mut self.dropped);
        let now = Instant::now();
        let mut meta = Vec::with_capacity(3 * self.ids_lens.len());
        for (&(id, len), at) in self.ids_lens.iter().zip(self.arrived.drain(..)) {
            let age = now.saturating_duration_since(at).as_micros().min(u32::MAX as u128) as u32;
            meta.extend_from_slice(&[id, len, age]);
        }
        self.ids_lens.clear();
        NativeEvent {
            kind: "datagrams".into(),
            session_id: 0,
            path: None,
            remote_address: None,
            remote_port: None,
            code: None,
            reason: None,
            meta: Some(Uint32Array::new(meta)),
            data: Some(Buffer::from(std::mem::take(&mut self.data))),
            dropped: Some(dropped.min(u32::MAX as u64) as u32),
        }
    }
}

pub fn event_to_js(ev: Event, queue: &Mutex<DatagramQueue>) -> NativeEvent {
    let base = |kind: &str, id: u32| NativeEvent {
        kind: kind.into(),
        session_id: id,
        path: None,
        remote_address: None,
        remote_port: None,
        code: None,
        reason: None,
        meta: None,
        data: None,
        dropped: None,
    };
    match ev {
        Event::Request { id, path, addr } => NativeEvent {
            path: Some(path),
            remote_address: Some(addr.ip().to_canonical().to_string()),
            remote_port: Some(addr.port() as u32),
            ..base("request", id)
        },
        Event::Datagrams => queue.lock().unwrap().take_event(),
        Event::Closed { id, code, reason } => NativeEvent {
            code: Some(code),
            reason: Some(reason),
            ..base("closed", id)
        },
        Event::Low { id } => base("low", id),
        Event::Open { id } => base("open", id),
    }
}

/// Carries events to JavaScript. `shutdown` releases the threadsafe function (the Node process
/// may then exit); events after it are dropped.
pub struct EventSink {
    tsfn: RwLock<Option<EventCarrier>>,
    queue: Arc<Mutex<DatagramQueue>>,
}

impl EventSink {
    pub fn new(tsfn: EventCarrier, queue: Arc<Mutex<DatagramQueue>>) -> Self {
        EventSink {
            tsfn: RwLock::new(Some(tsfn)),
            queue,
        }
    }

    pub fn emit(&self, ev: Event) {
        if let Some(f) = self.tsfn.read().unwrap().as_ref() {
            f.call(ev);
        }
    }

    /// Queues a datagram for JavaScript: delivered with the batch it joins, after at most
    /// `DELIVERY_HOLD` or once `DELIVERY_BATCH` datagrams wait. Runs on the runtime's threads.
    pub fn push_datagram(self: &Arc<Self>, id: u32, payload: &[u8]) {
        self.push_datagrams(id, std::iter::once(payload));
    }

    /// As `push_datagram` for datagrams that arrived together (one reading of the socket): one
    /// lock of the queue and one arrival time for all of them.
    pub fn push_datagrams<'a>(self: &Arc<Self>, id: u32, payloads: impl IntoIterator<Item = &'a [u8]>) {
        let (schedule, hold) = {
            let mut q = self.queue.lock().unwrap();
            let now = Instant::now();
            let mut queued = false;
            for payload in payloads {
                if q.data.len() + payload.len() > MAX_QUEUED_BYTES {
                    q.dropped += 1;
                    continue;
                }
                q.ids_lens.push((id, payload.len() as u32));
                q.data.extend_from_slice(payload);
                q.arrived.push(now);
                queued = true;
            }
            if !queued || q.scheduled {
                (false, false)
            } else if q.ids_lens.len() >= DELIVERY_BATCH {
                q.scheduled = true;
                (true, false)
            } else {
                (false, !std::mem::replace(&mut q.holding, true))
            }
        };
        if schedule {
            self.emit(Event::Datagrams);
        }
        if hold {
            let sink = self.clone();
            napi::bindgen_prelude::spawn(async move {
                tokio::time::sleep(DELIVERY_HOLD).await;
                let schedule = {
                    let mut q = sink.queue.lock().unwrap();
                    q.holding = false;
                    !q.ids_lens.is_empty() && !std::mem::replace(&mut q.scheduled, true)
                };
                if schedule {
                    sink.emit(Event::Datagrams);
                }
            });
        }
    }

    pub fn shutdown(&self) {
        self.tsfn.write().unwrap().take();
    }
}

/// Statistics of a session (JS `SessionInfo`).
#[napi_derive::napi(object)]
pub struct SessionInfo {
    pub max_datagram_size: u32,
    /// Datagram send-buffer bytes not yet sent.
    pub buffered_bytes: u32,
    pub rtt_ms: f64,
    /// Windowed (10 s) min RTT of the rate controller.
    pub min_rtt_ms: f64,
    /// The rate controller's current rate, bytes/s.
    pub rate_bps: f64,
    /// The per-session cap (0 = none), bytes/s.
    pub cap_bps: f64,
    /// Last delivery-rate sample, bytes/s.
    pub delivery_rate_bps: f64,
    /// Whether the rate controller competes TCP-like (a standing queue that is not ours).
    pub competing: bool,
    /// How often it entered that mode.
    pub competing_entries: f64,
    pub lost_packets: f64,
    pub sent_packets: f64,
    pub congestion_window: f64,
}

/// One WebTransport session (one QUIC connection).
pub struct Session {
    pub id: u32,
    pub conn: Connection,
    send_buffer: usize,
    /// What quinn counts as used with nothing queued (its per-datagram bookkeeping).
    baseline: usize,
    low_water: AtomicUsize,
    armed: AtomicBool,
    wake: Notify,
    closed: AtomicBool,
    cap: AtomicU64,
    local_close: Mutex<Option<(u32, String)>>,
    /// `send_queued`'s datagrams, sent by a task on the runtime (`spawn_tasks` takes the receiver).
    outbox: mpsc::Sender<Vec<u8>>,
    outbox_rx: Mutex<Option<mpsc::Receiver<Vec<u8>>>>,
}

/// Datagrams `send_queued` holds for the runtime before it refuses more.
const OUTBOX_DATAGRAMS: usize = 256;

/// Longest wtransport datagram header (quarter stream id varint).
const DATAGRAM_HEADER_MAX: usize = 8;

impl Session {
    pub fn new(id: u32, conn: Connection, send_buffer: usize) -> Arc<Self> {
        let baseline = send_buffer.saturating_sub(conn.quic_connection().datagram_send_buffer_space());
        let (outbox, outbox_rx) = mpsc::channel(OUTBOX_DATAGRAMS);
        Arc::new(Session {
            outbox,
            outbox_rx: Mutex::new(Some(outbox_rx)),
            id,
            conn,
            send_buffer,
            baseline,
            low_water: AtomicUsize::new(send_buffer / 2),
            armed: AtomicBool::new(false),
            wake: Notify::new(),
            closed: AtomicBool::new(false),
            cap: AtomicU64::new(0),
            local_close: Mutex::new(None),
        })
    }

    fn quic(&self) -> &quinn::Connection {
        self.conn.quic_connection()
    }

    pub fn buffered(&self) -> usize {
        self.send_buffer
            .saturating_sub(self.quic().datagram_send_buffer_space() + self.baseline)
    }

    fn arm(&self) {
        if !self.armed.swap(true, Ordering::AcqRel) {
            self.wake.notify_one();
        }
    }

    /// Queues a datagram. False when the session is closed, the datagram is larger than
    /// `max_datagram_size` (quinn refuses it), or the send buffer has no room (quinn would otherwise
    /// drop the oldest queued datagram silently); the low-water event follows when it drains.
    /// Each reading of quinn's state takes the connection's lock, which its runtime thread holds
    /// while it handles packets: one reading before the send, not three (issue 33).
    pub fn send(&self, data: &[u8]) -> bool {
        if self.closed.load(Ordering::Relaxed) {
            return false;
        }
        let space = self.quic().datagram_send_buffer_space();
        if space < data.len() + DATAGRAM_HEADER_MAX {
            self.arm();
            return false;
        }
        if self.conn.send_datagram(data).is_err() {
            return false;
        }
        let buffered = self
            .send_buffer
            .saturating_sub(space - data.len() - DATAGRAM_HEADER_MAX + self.baseline);
        if buffered > self.low_water.load(Ordering::Relaxed) {
            self.arm();
        }
        true
    }

    /// Queues a datagram for the runtime to send: the calling (JavaScript) thread never takes
    /// quinn's connection lock, which the runtime holds while it handles packets; on a busy 2-core
    /// machine a send waited there ~80 us on average (issue 33), longer when the holder was
    /// preempted. For a client's feedback: no send-buffer accounting, no low-water event. False
    /// when the session is closed or `OUTBOX_DATAGRAMS` wait already.
    pub fn send_queued(&self, data: &[u8]) -> bool {
        !self.closed.load(Ordering::Relaxed) && self.outbox.try_send(data.to_vec()).is_ok()
    }

    pub fn set_low_water(&self, bytes: usize) {
        self.low_water.store(bytes.min(self.send_buffer), Ordering::Relaxed);
    }

    fn rate_handle(&self) -> Option<Arc<RateHandle>> {
        let h = rate_handle_of(self.quic())?;
        // quinn may rebuild the controller (a new path): keep the cap on the current one.
        h.cap.store(self.cap.load(Ordering::Relaxed), Ordering::Relaxed);
        Some(h)
    }

    pub fn set_rate_cap(&self, bps: u64) {
        self.cap.store(bps, Ordering::Relaxed);
        let _ = self.rate_handle();
    }

    pub fn info(&self) -> SessionInfo {
        let stats = self.quic().stats();
        let h = self.rate_handle();
        let load = |f: fn(&RateHandle) -> &AtomicU64| h.as_ref().map_or(0, |h| f(h).load(Ordering::Relaxed)) as f64;
        SessionInfo {
            max_datagram_size: self.conn.max_datagram_size().unwrap_or(0) as u32,
            buffered_bytes: self.buffered() as u32,
            rtt_ms: stats.path.rtt.as_secs_f64() * 1e3,
            min_rtt_ms: load(|h| &h.min_rtt_us) / 1e3,
            rate_bps: h.as_ref().map_or(0, |h| h.current_rate()) as f64,
            cap_bps: self.cap.load(Ordering::Relaxed) as f64,
            delivery_rate_bps: load(|h| &h.delivery_rate),
            competing: load(|h| &h.competing) > 0.0,
            competing_entries: load(|h| &h.competing_entries),
            lost_packets: stats.path.lost_packets as f64,
            sent_packets: stats.path.sent_packets as f64,
            congestion_window: stats.path.cwnd as f64,
        }
    }

    pub fn close(&self, code: u32, reason: &str) {
        let mut lc = self.local_close.lock().unwrap();
        if lc.is_none() {
            *lc = Some((code, reason.to_string()));
        }
        drop(lc);
        self.conn.close(VarInt::from_u32(code), reason.as_bytes());
    }

    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Relaxed)
    }

    fn describe(&self, err: &ConnectionError) -> (u32, String) {
        if let Some((code, reason)) = self.local_close.lock().unwrap().clone() {
            return (code, reason);
        }
        match err {
            ConnectionError::ApplicationClosed(c) => (
                c.code().into_inner().min(u32::MAX as u64) as u32,
                String::from_utf8_lossy(c.reason()).into_owned(),
            ),
            ConnectionError::TimedOut => (0, "idle timeout".into()),
            other => (0, other.to_string()),
        }
    }

    /// The receive loop (datagrams to `datagrams`, a server's own sink or the clients' shared one;
    /// the closed event to `sink` at the end, then `on_closed`) and the low-water watcher.
    pub fn spawn_tasks(
        self: &Arc<Self>,
        sink: Arc<EventSink>,
        datagrams: Arc<EventSink>,
        on_closed: impl FnOnce(u32) + Send + 'static,
    ) {
        if let Some(mut outbox) = self.outbox_rx.lock().unwrap().take() {
            let s = self.clone();
            napi::bindgen_prelude::spawn(async move {
                while let Some(datagram) = outbox.recv().await {
                    if s.is_closed() {
                        return;
                    }
                    // Too large or the session gone: dropped, as an unreliable datagram may be.
                    let _ = s.conn.send_datagram(datagram);
                }
            });
        }
        let s = self.clone();
        let rx_sink = sink.clone();
        napi::bindgen_prelude::spawn(async move {
            let quic = s.quic().clone();
            let mut ready = Vec::new();
            let err = loop {
                // Straight from quinn, every datagram it holds per wake-up: wtransport's own
                // worker hands them over one at a time, each through a channel of one and a
                // rebuilt `select!` over all its streams (~12 % of a receiving client's runtime
                // thread; issue 33). Once that channel holds a datagram the worker waits for room
                // and reads no more; the one it took is delivered by the second branch.
                tokio::select! {
                    biased;
                    r = quic.read_datagram() => match r {
                        Ok(first) => {
                            ready.push(first);
                            ready.extend(std::iter::from_fn(|| ready_datagram(&quic)));
                            let id = s.conn.session_id();
                            datagrams.push_datagrams(s.id, ready.iter().filter_map(|d| session_payload(d, id)));
                            ready.clear();
                        }
                        Err(_) => break s.conn.closed().await,
                    },
                    r = stolen_datagram(&s.conn) => match r {
                        Ok(d) => datagrams.push_datagram(s.id, &d.payload()),
                        Err(e) => break e,
                    },
                }
            };
            s.closed.store(true, Ordering::Relaxed);
            s.wake.notify_one();
            let (code, reason) = s.describe(&err);
            rx_sink.emit(Event::Closed { id: s.id, code, reason });
            on_closed(s.id);
        });
        let s = self.clone();
        napi::bindgen_prelude::spawn(async move {
            loop {
                s.wake.notified().await;
                loop {
                    if s.is_closed() {
                        return;
                    }
                    if s.buffered() <= s.low_water.load(Ordering::Relaxed) {
                        s.armed.store(false, Ordering::Release);
                        sink.emit(Event::Low { id: s.id });
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
            }
        });
    }
}

/// How long the session must have received nothing before the receive loop takes the datagram
/// wtransport's worker may hold: taking it gives the worker room, and it then races the loop for
/// quinn's next datagram at every wake-up (as costly as before). A datagram it took while the
/// session is busy is late by at most the first such pause.
const STOLEN_DATAGRAM_AFTER: Duration = Duration::from_millis(5);

async fn stolen_datagram(conn: &Connection) -> Result<wtransport::datagram::Datagram, ConnectionError> {
    tokio::time::sleep(STOLEN_DATAGRAM_AFTER).await;
    conn.receive_datagram().await
}

/// A datagram quinn already holds, without waiting (None when it holds none, or on an error:
/// the next `read_datagram` reports that).
fn ready_datagram(quic: &quinn::Connection) -> Option<Bytes> {
    let mut read = std::pin::pin!(quic.read_datagram());
    match read.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(Ok(d)) => Some(d),
        _ => None,
    }
}

/// The payload of an HTTP/3 datagram (RFC 9297: the session's quarter stream id, then the
/// payload) if it belongs to `session`. Another session's is dropped, as wtransport's worker drops
/// it; so is a malformed one (the worker closed the connection for it): a varint's parse each.
pub fn session_payload(quic_datagram: &[u8], session: SessionId) -> Option<&[u8]> {
    let d = H3Datagram::read(quic_datagram).ok()?;
    let header = quic_datagram.len() - d.payload().len();
    (d.qstream_id().into_session_id() == session).then_some(&quic_datagram[header..])
}

#[cfg(test)]
#[path = "session_tests.rs"]
mod tests;

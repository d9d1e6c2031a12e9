//! MutpRate: a loss-blind, delay-based rate controller for quinn (`quinn::congestion`).
//!
//! Why: MUTP datagrams are coded (RLNC / fountain); a lost datagram is replaced by any other coded
//! datagram, so random loss (radio, policers upstream) must not slow the sender down. Loss-based
//! controllers (NewReno, Cubic, and SCTP's in WebRTC) halve their window on every loss and stall on
//! a lossy mobile link. MutpRate ignores loss and backs off on *queueing delay* instead, and its
//! rate is bounded by a cap from outside (the proxy's upload limit, the client's reported cap):
//! a loss-blind controller without a cap and without a delay signal would be Hysteria's "Brutal".
//!
//! Design (quic/README.md, "Rate controller"):
//! - Loss-blind: `on_congestion_event` only counts losses. Persistent congestion (every packet in
//!   ~3 PTOs lost) does not collapse the window either; it clamps the rate to the last measured
//!   delivery rate (never below the floor), so a random-loss link never stalls.
//! - Delay-based: min RTT is a windowed minimum (10 s) of the smoothed RTT samples; queueing delay
//!   q = srtt - min_rtt, target = max(5 ms, min_rtt / 4). Once per round (max(srtt, 2 ms)) the
//!   delivery rate D = bytes acked / elapsed is measured, then: if q <= target and the round was
//!   not application-limited, rate *= 2 (until the first back-off: "slow start") or 1.25 per
//!   round, up to the cap; if q > target, rate = max(floor, min(rate, 0.9 * D)), then two rounds
//!   without a decision so the queue can drain before the (smoothed) RTT is read again.
//!   Loss never enters either branch (D counts acked bytes, so growth does not depend on it).
//! - Window = max(min_window, min(rate, cap) * (min(srtt, min_rtt + target) + ack hold)). quinn
//!   sends at most a window per smoothed RTT (its pacer spreads it, at 1.25x), so the window sends
//!   ~ rate; the window never exceeds cap * (min_rtt + target + MAX_ACK_HOLD) (or min_window).
//!   Where cap * RTT < min_window (e.g. loopback) the floor window, not the cap, bounds the
//!   sending. The ack hold is the average of (raw RTT sample - srtt) over acknowledged packets,
//!   at most 25 ms: quinn's srtt leaves the peer's ACK delay out, but a packet is in flight until
//!   its ACK arrives; a peer that acknowledges every ~5 packets (Chromium) held the window ~5 %
//!   below the rate (bench:quic-clients on paper-loss2: 0.88 of the cap where Node and Firefox,
//!   acknowledging every other packet, got 0.94).
//! - Competing with a loss-based flow: a queue that is not ours does not drain when we slow
//!   down. Back-offs in a row compound (x0.9 each), so a queue we built drains; when each round's
//!   smallest RTT sample has stayed above min_rtt + target/2 for `COMPETE_AFTER` (at least 16 min
//!   RTTs) while our rate fell to half of what it was (or to the floor), another flow holds the
//!   queue (a TCP flow fills any drop-tail buffer). Yielding further would starve us (beside CUBIC
//!   a delay-based flow kept 5-7 %), so the controller turns TCP-like until the queue drains: from
//!   half the rate it held when the queue stood up (or of the last 10 s's peak delivery), x1.25
//!   per round until the first loss event, then +3 packets per round, x0.7 on a loss event (once
//!   per RTT), window = rate * srtt. Every `PROBE_INTERVAL` it halves its rate for `PROBE_ROUNDS`
//!   rounds; two rounds in a row whose smallest samples are within target/2 of the base RTT mean
//!   the competitor is gone, and the delay mode resumes at the current rate. Only this mode reads
//!   loss, and only with the evidence of a standing queue: random loss on an empty queue still
//!   changes nothing.
//! - Cap: per connection, an `Arc<RateHandle>` shared between this controller and the application
//!   (`setRateCap`), plus a server-wide cap (`RateOptions.maxRateBps`); 0 means none. With
//!   `initialRateBps` the controller starts at that rate (no slow start).
//!
//! The rate logic is `RateCore` (rate_control/rate_core.rs), pure and driven with plain `Instant`s
//! and `Duration`s so that it is unit-tested without sockets (quinn's `RttEstimator` cannot be
//! built outside quinn).

mod min_filter;
mod rate_core;

pub use rate_core::RateCore;

use quinn::congestion::{Controller, ControllerFactory};
use quinn_proto::RttEstimator;
use std::any::Any;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Options of the controller (JS `RateOptions`), all rates in bytes per second.
#[derive(Clone, Debug)]
pub struct RateConfig {
    /// Start at this rate instead of slow start (clamped to the caps). `None`: slow start.
    pub initial_rate: Option<u64>,
    /// Server-wide (or client-wide) cap; 0 = none.
    pub max_rate: u64,
    /// The rate never falls below this.
    pub min_rate: u64,
    /// The RTT assumed before the first sample (quinn's `initial_rtt` is set to the same value).
    pub initial_rtt: Duration,
    /// Floor of the congestion window, bytes.
    pub min_window: u64,
}

impl Default for RateConfig {
    fn default() -> Self {
        RateConfig {
            initial_rate: None,
            max_rate: 0,
            min_rate: 64 * 1024,
            initial_rtt: Duration::from_millis(100),
            min_window: MIN_WINDOW,
        }
    }
}

/// Default window floor: 10 packets of 1200 bytes.
pub const MIN_WINDOW: u64 = 10 * 1200;
/// Window of the min-RTT filter.
pub const MIN_RTT_WINDOW: Duration = Duration::from_secs(10);
const MIN_RTT_BUCKETS: usize = 10;
/// Shortest measurement round.
pub const MIN_ROUND: Duration = Duration::from_millis(2);
/// Smallest queueing-delay target.
pub const MIN_TARGET: Duration = Duration::from_millis(5);
/// The longest ACK hold the window makes room for: QUIC's default max_ack_delay (RFC 9000,
/// 18.2). A peer that holds its ACKs longer gets no more room than this.
pub const MAX_ACK_HOLD: Duration = Duration::from_millis(25);
/// Per acknowledged packet, the weight of its hold in the average (tens of packets per RTT).
const ACK_HOLD_GAIN: f64 = 1.0 / 16.0;
const SLOW_START_GAIN: f64 = 2.0;
const GROWTH_GAIN: f64 = 1.25;
const BACKOFF: f64 = 0.9;
/// Rounds without a decision after a back-off (the queue drains, srtt follows).
const HOLD_ROUNDS: u32 = 2;
/// A standing queue this long (and at least `COMPETE_AFTER_RTTS` min RTTs) is someone else's...
pub const COMPETE_AFTER: Duration = Duration::from_secs(1);
const COMPETE_AFTER_RTTS: u32 = 16;
/// ...when our rate fell to this fraction of what it was when the queue stood up.
const COMPETE_RATE_FRACTION: f64 = 0.5;
/// TCP-like mode: multiplicative decrease on a loss event (CUBIC's beta).
const COMPETE_DECREASE: f64 = 0.7;
/// TCP-like mode: how often the controller halves its rate to see whether the queue drains.
pub const PROBE_INTERVAL: Duration = Duration::from_secs(4);
const PROBE_ROUNDS: u32 = 3;
/// Drained rounds in a row that end the TCP-like mode (one can be the other flow's own back-off).
const EXIT_DRAINED_ROUNDS: u32 = 2;
/// How long the base RTT and the rate of a TCP-like episode are remembered after it ended: a
/// competitor that is still there is met again at that rate, against that base.
const COMPETE_MEMORY: Duration = Duration::from_secs(30);
const PROBE_GAIN: f64 = 0.5;
/// TCP-like mode: additive increase per round, bytes. CUBIC grows faster than Reno's one packet
/// per round at tens of Mbit/s and tens of ms; beside CUBIC in bench:fairness (20 Mbit/s, 40 ms,
/// ~2 BDP of queue), MUTP kept ~0.3 of the bottleneck with one and two packets, ~0.4 with three.
const COMPETE_INCREASE: f64 = 3.0 * 1200.0;

/// What the application shares with a connection's controller: the cap it sets, the state it reads.
#[derive(Debug, Default)]
pub struct RateHandle {
    /// Per-connection cap set by the application, bytes/s; 0 = none.
    pub cap: AtomicU64,
    /// The configured (server- or client-wide) cap, bytes/s; 0 = none.
    pub max_rate: AtomicU64,
    /// Current rate, bytes/s, as of the last ack (see `current_rate` for the caps applied now).
    pub rate: AtomicU64,
    /// Current window, bytes.
    pub window: AtomicU64,
    /// Windowed min RTT, microseconds.
    pub min_rtt_us: AtomicU64,
    /// Last delivery-rate sample, bytes/s.
    pub delivery_rate: AtomicU64,
    /// Loss (congestion) events reported by quinn, counted only.
    pub loss_events: AtomicU64,
    /// Bytes quinn declared lost.
    pub lost_bytes: AtomicU64,
    /// 1 while the controller competes TCP-like (a standing queue that is not ours), else 0.
    pub competing: AtomicU64,
    /// How often it entered that mode.
    pub competing_entries: AtomicU64,
}

impl RateHandle {
    /// The effective cap: the smaller non-zero of the application's and the configured one; 0 = none.
    pub fn effective_cap(&self) -> u64 {
        match (self.cap.load(Ordering::Relaxed), self.max_rate.load(Ordering::Relaxed)) {
            (0, g) => g,
            (a, 0) => a,
            (a, g) => a.min(g),
        }
    }

    /// The rate with the caps as they are now (a cap set since the last ack applies at once).
    pub fn current_rate(&self) -> u64 {
        let rate = self.rate.load(Ordering::Relaxed);
        match self.effective_cap() {
            0 => rate,
            cap => rate.min(cap),
        }
    }
}

/// The quinn adapter around `RateCore`.
#[derive(Clone, Debug)]
pub struct MutpRate {
    core: RateCore,
}

impl MutpRate {
    pub fn handle(&self) -> Arc<RateHandle> {
        self.core.handle().clone()
    }
}

impl Controller for MutpRate {
    fn on_sent(&mut self, now: Instant, bytes: u64, _last_packet_number: u64) {
        self.core.on_sent(now, bytes);
    }

    fn on_ack(&mut self, now: Instant, sent: Instant, bytes: u64, app_limited: bool, rtt: &RttEstimator) {
        self.core
            .on_ack(now, bytes, app_limited, rtt.get(), now.saturating_duration_since(sent));
    }

    fn on_congestion_event(&mut self, now: Instant, _sent: Instant, is_persistent_congestion: bool, lost_bytes: u64) {
        self.core.on_congestion_event(now, is_persistent_congestion, lost_bytes);
    }

    fn on_mtu_update(&mut self, _new_mtu: u16) {}

    fn window(&self) -> u64 {
        self.core.window_at(Instant::now())
    }

    fn clone_box(&self) -> Box<dyn Controller> {
        Box::new(self.clone())
    }

    fn initial_window(&self) -> u64 {
        self.core.window_at(Instant::now())
    }

    fn into_any(self: Box<Self>) -> Box<dyn Any> {
        self
    }
}

/// Builds a `MutpRate` per connection. The handle of the connection's controller is found with
/// `rate_handle_of` (quinn's `congestion_state()` clones the controller, and the clone shares it).
#[derive(Debug, Clone)]
pub struct MutpRateFactory {
    pub cfg: RateConfig,
}

impl ControllerFactory for MutpRateFactory {
    fn build(self: Arc<Self>, _now: Instant, _current_mtu: u16) -> Box<dyn Controller> {
        Box::new(MutpRate {
            core: RateCore::new(self.cfg.clone(), Arc::new(RateHandle::default())),
        })
    }
}

/// The `RateHandle` of a connection's current controller (None if it is not a `MutpRate`).
pub fn rate_handle_of(conn: &quinn::Connection) -> Option<Arc<RateHandle>> {
    conn.congestion_state()
        .into_any()
        .downcast::<MutpRate>()
        .ok()
        .map(|c| c.handle())
}

#[cfg(test)]
mod tests;

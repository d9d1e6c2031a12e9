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
//! - Window = max(min_window, min(rate, cap) * min(srtt, min_rtt + target)). quinn sends at most a
//!   window per smoothed RTT (its pacer spreads it, at 1.25x), so the window sends ~ rate; the
//!   window never exceeds cap * (min_rtt + target) (or min_window). Where cap * RTT < min_window
//!   (e.g. loopback) the floor window, not the cap, bounds the sending.
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
//! The rate logic is `RateCore`, pure and driven with plain `Instant`s and `Duration`s so that it is
//! unit-tested without sockets (quinn's `RttEstimator` cannot be built outside quinn).

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

/// Windowed minimum over `MIN_RTT_BUCKETS` buckets spanning `MIN_RTT_WINDOW`.
#[derive(Clone, Debug)]
struct MinFilter {
    buckets: [(Option<Instant>, Duration); MIN_RTT_BUCKETS],
}

impl MinFilter {
    fn new() -> Self {
        MinFilter {
            buckets: [(None, Duration::MAX); MIN_RTT_BUCKETS],
        }
    }

    fn bucket_len() -> Duration {
        MIN_RTT_WINDOW / MIN_RTT_BUCKETS as u32
    }

    fn update(&mut self, now: Instant, sample: Duration) {
        // The newest bucket is the last one; start a new one when it is older than a bucket length.
        let last = self.buckets[MIN_RTT_BUCKETS - 1];
        match last.0 {
            Some(start) if now.saturating_duration_since(start) < Self::bucket_len() => {
                self.buckets[MIN_RTT_BUCKETS - 1].1 = last.1.min(sample);
            }
            _ => {
                self.buckets.rotate_left(1);
                self.buckets[MIN_RTT_BUCKETS - 1] = (Some(now), sample);
            }
        }
    }

    fn get(&self, now: Instant) -> Option<Duration> {
        self.buckets
            .iter()
            .filter(|(start, _)| matches!(start, Some(s) if now.saturating_duration_since(*s) < MIN_RTT_WINDOW))
            .map(|(_, d)| *d)
            .min()
    }
}

/// The rate logic, free of quinn types.
#[derive(Clone, Debug)]
pub struct RateCore {
    cfg: RateConfig,
    handle: Arc<RateHandle>,
    rate: f64,
    slow_start: bool,
    srtt: Option<Duration>,
    min_rtt: MinFilter,
    round_start: Option<Instant>,
    round_acked: u64,
    round_sent: u64,
    round_app_limited: bool,
    hold: u32,
    delivery_rate: f64,
    /// Smallest raw RTT sample (ack time - send time) of the current round.
    round_min_sample: Option<Duration>,
    /// Since when every round's smallest sample stood above the drain threshold, and our rate then.
    undrained: Option<(Instant, f64)>,
    /// Back-offs since the queue last drained (each after the first compounds).
    backoffs_in_row: u32,
    compete: Option<Compete>,
    /// After a TCP-like episode: its base RTT, its last rate and until when they count.
    after_compete: Option<(Duration, f64, Instant)>,
    /// The largest delivery rate of a round in the last `MIN_RTT_WINDOW`, and when.
    peak_delivery: Option<(f64, Instant)>,
}

/// State of the TCP-like mode (a standing queue that is not ours).
#[derive(Clone, Debug)]
struct Compete {
    /// The min RTT when the mode began: the drain test's base (the windowed filter would forget it).
    base_rtt: Duration,
    /// Growing x1.25 per round until the first loss event.
    slow_start: bool,
    last_decrease: Option<Instant>,
    next_probe: Instant,
    /// Rounds left in a drain probe (rate halved).
    probe_rounds: u32,
    /// Drained rounds in a row.
    drained_rounds: u32,
}

impl RateCore {
    pub fn new(cfg: RateConfig, handle: Arc<RateHandle>) -> Self {
        handle.max_rate.store(cfg.max_rate, Ordering::Relaxed);
        let (rate, slow_start) = match cfg.initial_rate {
            Some(r) if r > 0 => (r as f64, false),
            _ => (cfg.min_window as f64 / cfg.initial_rtt.as_secs_f64().max(1e-3), true),
        };
        let mut core = RateCore {
            cfg,
            handle,
            rate,
            slow_start,
            srtt: None,
            min_rtt: MinFilter::new(),
            round_start: None,
            round_acked: 0,
            round_sent: 0,
            round_app_limited: false,
            hold: 0,
            delivery_rate: 0.0,
            round_min_sample: None,
            undrained: None,
            backoffs_in_row: 0,
            compete: None,
            after_compete: None,
            peak_delivery: None,
        };
        core.rate = core.clamp_rate(core.rate);
        core.publish(None);
        core
    }

    pub fn handle(&self) -> &Arc<RateHandle> {
        &self.handle
    }

    /// The effective cap (the smaller non-zero of the application's and the configured one), 0 = none.
    pub fn cap(&self) -> u64 {
        self.handle.effective_cap()
    }

    fn clamp_rate(&self, rate: f64) -> f64 {
        let cap = self.cap();
        let floor = self.cfg.min_rate as f64;
        let r = if cap > 0 { rate.min(cap as f64) } else { rate };
        // The floor wins over the cap only when the cap is below it (then the cap wins: it is the
        // operator's limit).
        if cap > 0 && (cap as f64) < floor {
            r
        } else {
            r.max(floor)
        }
    }

    /// Current rate, bytes/s (the cap applied; halved during a drain probe).
    pub fn rate(&self) -> f64 {
        match &self.compete {
            Some(c) if c.probe_rounds > 0 => self.clamp_rate(self.rate * PROBE_GAIN),
            _ => self.clamp_rate(self.rate),
        }
    }

    /// Whether the controller competes TCP-like (a standing queue that is not ours).
    pub fn competing(&self) -> bool {
        self.compete.is_some()
    }

    /// Windowed minimum RTT (the initial RTT before any sample).
    /// After a TCP-like episode its base counts too (for `COMPETE_MEMORY`): the windowed filter
    /// forgot it under the other flow's standing queue.
    pub fn min_rtt(&self, now: Instant) -> Duration {
        let windowed = self
            .min_rtt
            .get(now)
            .unwrap_or_else(|| self.srtt.unwrap_or(self.cfg.initial_rtt));
        match self.after_compete {
            Some((base, _, until)) if now < until => windowed.min(base),
            _ => windowed,
        }
    }

    pub fn srtt(&self) -> Duration {
        self.srtt.unwrap_or(self.cfg.initial_rtt)
    }

    /// Queueing-delay target for a given min RTT.
    pub fn target(min_rtt: Duration) -> Duration {
        MIN_TARGET.max(min_rtt / 4)
    }

    /// Congestion window, bytes.
    pub fn window_at(&self, now: Instant) -> u64 {
        let min_rtt = self.min_rtt(now);
        // Competing, the queue is part of the path: a window of rate * min RTT would send a
        // fraction of the rate.
        let rtt = if self.compete.is_some() {
            self.srtt()
        } else {
            self.srtt().min(min_rtt + Self::target(min_rtt))
        };
        let w = self.rate() * rtt.as_secs_f64();
        (w as u64).max(self.cfg.min_window)
    }

    pub fn on_sent(&mut self, _now: Instant, bytes: u64) {
        self.round_sent = self.round_sent.saturating_add(bytes);
    }

    /// Acknowledged bytes with the RTT estimate after them (quinn's smoothed RTT) and the packet's
    /// own RTT sample (ack time - send time).
    pub fn on_ack(&mut self, now: Instant, bytes: u64, app_limited: bool, srtt: Duration, sample: Duration) {
        self.srtt = Some(srtt);
        self.min_rtt.update(now, srtt);
        self.round_min_sample = Some(self.round_min_sample.map_or(sample, |m| m.min(sample)));
        self.round_acked = self.round_acked.saturating_add(bytes);
        self.round_app_limited |= app_limited;
        let start = *self.round_start.get_or_insert(now);
        let elapsed = now.saturating_duration_since(start);
        if elapsed >= srtt.max(MIN_ROUND) {
            self.end_round(now, elapsed);
        }
        self.publish(Some(now));
    }

    fn end_round(&mut self, now: Instant, elapsed: Duration) {
        let secs = elapsed.as_secs_f64().max(1e-6);
        let delivered = self.round_acked as f64 / secs;
        let sent = self.round_sent as f64 / secs;
        self.delivery_rate = delivered;
        let app_limited = self.round_app_limited || sent < 0.5 * self.rate();
        let round_min = self.round_min_sample.take();
        if self
            .peak_delivery
            .is_none_or(|(peak, at)| delivered >= peak || now.saturating_duration_since(at) > MIN_RTT_WINDOW)
        {
            self.peak_delivery = Some((delivered, now));
        }
        self.round_start = Some(now);
        self.round_acked = 0;
        self.round_sent = 0;
        self.round_app_limited = false;
        self.track_drain(now, round_min);
        if self.compete.is_some() {
            self.compete_round(now, app_limited);
            return;
        }
        if self.hold > 0 {
            self.hold -= 1;
            return;
        }
        let min_rtt = self.min_rtt(now);
        let queueing = self.srtt().saturating_sub(min_rtt);
        let current = self.rate();
        if queueing > Self::target(min_rtt) {
            // Back off to what the path delivers (never up, never below the floor); in a row, the
            // back-offs compound, so that a queue of our own drains.
            let compound = if self.backoffs_in_row > 0 { BACKOFF } else { 1.0 };
            self.rate = self.clamp_rate((current * compound).min(BACKOFF * delivered));
            self.slow_start = false;
            self.hold = HOLD_ROUNDS;
            self.backoffs_in_row += 1;
            self.maybe_compete(now, min_rtt);
        } else if !app_limited {
            let gain = if self.slow_start { SLOW_START_GAIN } else { GROWTH_GAIN };
            self.rate = self.clamp_rate(current * gain);
        } else {
            self.rate = current;
        }
    }

    /// Whether the queue drained this round: its smallest RTT sample within half the target of the base.
    fn track_drain(&mut self, now: Instant, round_min: Option<Duration>) {
        let Some(sample) = round_min else { return };
        if self.after_compete.is_some_and(|(_, _, until)| now >= until) {
            self.after_compete = None;
        }
        let base = match &self.compete {
            Some(c) => c.base_rtt,
            None => self.min_rtt(now),
        };
        // Half the target: a flow that holds the queue near the target (CUBIC on its plateau)
        // would otherwise flicker between drained and not while we back off on the smoothed RTT.
        let drained = sample <= base + Self::target(base) / 2;
        if let Some(c) = self.compete.as_mut() {
            c.drained_rounds = if drained { c.drained_rounds + 1 } else { 0 };
            if c.drained_rounds < EXIT_DRAINED_ROUNDS {
                return;
            }
            // The competitor left: back to the delay mode at the rate before the probe.
            self.after_compete = Some((c.base_rtt, self.rate, now + COMPETE_MEMORY));
            self.compete = None;
            self.handle.competing.store(0, Ordering::Relaxed);
            self.hold = HOLD_ROUNDS;
        }
        if drained {
            self.undrained = None;
            self.backoffs_in_row = 0;
        } else if self.undrained.is_none() {
            self.undrained = Some((now, self.rate()));
        }
    }

    /// After a back-off: a queue standing for long while our rate halved is not ours.
    fn maybe_compete(&mut self, now: Instant, min_rtt: Duration) {
        let Some((since, rate_then)) = self.undrained else {
            return;
        };
        let long = COMPETE_AFTER.max(min_rtt * COMPETE_AFTER_RTTS);
        // At the floor the rate cannot halve any more: that is as far as yielding goes.
        let yielded =
            self.rate() <= COMPETE_RATE_FRACTION * rate_then || self.rate() <= self.cfg.min_rate as f64 * 1.01;
        if now.saturating_duration_since(since) < long || !yielded {
            return;
        }
        // A fair share's guess instead of a climb from the floor (the x0.7 on loss and the
        // additive increase correct it): half of what we held when the queue stood up or of the
        // path's recent peak delivery, or most of what a recent episode ended at.
        let peak = self.peak_delivery.map_or(0.0, |(p, _)| p);
        let mut guess = COMPETE_RATE_FRACTION * rate_then.max(peak);
        if let Some((_, rate, _)) = self.after_compete.take() {
            guess = guess.max(COMPETE_DECREASE * rate);
        }
        self.rate = self.clamp_rate(self.rate.max(guess));
        self.compete = Some(Compete {
            base_rtt: min_rtt,
            slow_start: true,
            last_decrease: None,
            next_probe: now + PROBE_INTERVAL,
            probe_rounds: 0,
            drained_rounds: 0,
        });
        self.hold = 0;
        self.handle.competing.store(1, Ordering::Relaxed);
        self.handle.competing_entries.fetch_add(1, Ordering::Relaxed);
    }

    /// A round in the TCP-like mode: probe, or grow (x1.25 until the first loss, then +3 packets).
    fn compete_round(&mut self, now: Instant, app_limited: bool) {
        let srtt = self.srtt().as_secs_f64().max(1e-3);
        let Some(c) = self.compete.as_mut() else { return };
        if c.probe_rounds > 0 {
            c.probe_rounds -= 1;
            return;
        }
        if now >= c.next_probe {
            c.probe_rounds = PROBE_ROUNDS;
            c.next_probe = now + PROBE_INTERVAL;
            return;
        }
        if app_limited {
            return;
        }
        let grown = if c.slow_start {
            self.rate * GROWTH_GAIN
        } else {
            self.rate + COMPETE_INCREASE / srtt
        };
        self.rate = self.clamp_rate(grown);
    }

    /// Loss: counted, never acted on in the delay mode (persistent congestion clamps the rate to
    /// the delivery rate); in the TCP-like mode a loss event is a decrease.
    pub fn on_congestion_event(&mut self, now: Instant, persistent: bool, lost_bytes: u64) {
        self.handle.loss_events.fetch_add(1, Ordering::Relaxed);
        self.handle.lost_bytes.fetch_add(lost_bytes, Ordering::Relaxed);
        let srtt = self.srtt();
        if let Some(c) = self.compete.as_mut() {
            // TCP-like: a loss event (at most one per RTT) cuts the rate; a probe's own rounds do not.
            if c.probe_rounds == 0 && c.last_decrease.is_none_or(|t| now.saturating_duration_since(t) >= srtt) {
                c.slow_start = false;
                c.last_decrease = Some(now);
                self.rate = self.clamp_rate(self.rate * COMPETE_DECREASE);
            }
        } else if persistent && self.delivery_rate > 0.0 {
            self.rate = self.clamp_rate(self.rate().min(self.delivery_rate));
        }
        self.publish(Some(now));
    }

    fn publish(&self, now: Option<Instant>) {
        let h = &self.handle;
        h.rate.store(self.rate() as u64, Ordering::Relaxed);
        let now = now.unwrap_or_else(Instant::now);
        h.window.store(self.window_at(now), Ordering::Relaxed);
        h.min_rtt_us
            .store(self.min_rtt(now).as_micros() as u64, Ordering::Relaxed);
        h.delivery_rate.store(self.delivery_rate as u64, Ordering::Relaxed);
    }
}

/// The quinn adapter around `RateCore`.
#[derive(Clone, Debug)]
pub struct MutpRate {
    core: RateCore,
}

impl MutpRate {
    pub fn handle(&self) -> Arc<RateHandle> {
        self.core.handle.clone()
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
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_pcg::Pcg64;

    const PKT: u64 = 1200;

    fn core(cfg: RateConfig) -> RateCore {
        RateCore::new(cfg, Arc::new(RateHandle::default()))
    }

    /// One round trip of a sender that always has data: sends the window in packets, each lost
    /// with probability `loss`, acks the rest at `rtt`. Returns the time after the round.
    fn round(c: &mut RateCore, now: Instant, rtt: Duration, loss: f64, rng: &mut Pcg64) -> Instant {
        // At most 200 "packets" per round (large windows send larger aggregates per ack).
        let window = c.window_at(now);
        let packets = (window / PKT).clamp(1, 200);
        let size = (window / packets).max(PKT);
        let step = rtt / packets as u32;
        let mut t = now;
        for _ in 0..packets {
            c.on_sent(t, size);
            t += step;
        }
        let mut t = now + rtt;
        for _ in 0..packets {
            if rng.gen::<f64>() < loss {
                c.on_congestion_event(t, false, size);
            } else {
                c.on_ack(t, size, false, rtt, rtt);
            }
            t += step;
        }
        now + rtt
    }

    #[test]
    fn random_loss_never_lowers_rate_or_window() {
        // (a) Property: for loss rates across 0..0.5, RTTs, caps and initial rates, with a constant
        // RTT the rate and the window never go down.
        let mut rng = Pcg64::seed_from_u64(0x6d75_7470);
        for case in 0..200 {
            let loss = rng.gen_range(0.0..0.5);
            let rtt = Duration::from_micros(rng.gen_range(2_000..300_000));
            let cap = if rng.gen_bool(0.5) {
                rng.gen_range(200_000..20_000_000)
            } else {
                0
            };
            let initial = if rng.gen_bool(0.5) {
                Some(rng.gen_range(100_000..5_000_000))
            } else {
                None
            };
            let mut c = core(RateConfig {
                initial_rate: initial,
                max_rate: cap,
                ..RateConfig::default()
            });
            let base = Instant::now();
            let mut now = base;
            // The first RTT sample replaces the initial RTT (100 ms, which sized the first
            // window): from then on the RTT is constant.
            now = round(&mut c, now, rtt, loss, &mut rng);
            let (mut rate, mut window) = (c.rate(), c.window_at(now));
            for r in 0..60 {
                now = round(&mut c, now, rtt, loss, &mut rng);
                let (nr, nw) = (c.rate(), c.window_at(now));
                assert!(
                    nr >= rate && nw >= window,
                    "case {case} round {r}: loss {loss:.3} rtt {rtt:?} cap {cap}: rate {rate} -> {nr}, window {window} -> {nw}"
                );
                rate = nr;
                window = nw;
            }
            assert!(c.handle().loss_events.load(Ordering::Relaxed) > 0 || loss < 0.05);
        }
    }

    #[test]
    fn persistent_congestion_does_not_collapse() {
        let mut c = core(RateConfig {
            initial_rate: Some(2_000_000),
            ..RateConfig::default()
        });
        let mut rng = Pcg64::seed_from_u64(7);
        let mut now = Instant::now();
        let rtt = Duration::from_millis(40);
        for _ in 0..10 {
            now = round(&mut c, now, rtt, 0.3, &mut rng);
        }
        let before = c.rate();
        let delivered = c.handle().delivery_rate.load(Ordering::Relaxed) as f64;
        c.on_congestion_event(now, true, 50 * PKT);
        // Clamped to the last delivery rate (here ~ (1 - loss) of the rate), not collapsed...
        assert!(
            c.rate() >= delivered.min(before) - 1.0,
            "rate {} after persistent congestion, delivered {delivered}",
            c.rate()
        );
        assert!(c.rate() >= 0.3 * before && c.window_at(now) >= MIN_WINDOW);
        // ...and it grows back while the RTT stays flat.
        for _ in 0..10 {
            now = round(&mut c, now, rtt, 0.3, &mut rng);
        }
        assert!(c.rate() >= before, "rate {} did not recover to {before}", c.rate());
    }

    #[test]
    fn queueing_delay_lowers_rate() {
        // (b) The RTT rises from 40 ms to 120 ms (a queue builds): the rate comes down.
        let mut c = core(RateConfig {
            initial_rate: Some(4_000_000),
            ..RateConfig::default()
        });
        let mut rng = Pcg64::seed_from_u64(1);
        let mut now = Instant::now();
        for _ in 0..20 {
            now = round(&mut c, now, Duration::from_millis(40), 0.0, &mut rng);
        }
        let high = c.rate();
        let high_window = c.window_at(now);
        // Shorter than COMPETE_AFTER: a queue that lasts is another flow's (tests below).
        for step in 0..12 {
            let rtt = Duration::from_millis(40 + 6 * step);
            now = round(&mut c, now, rtt, 0.0, &mut rng);
        }
        // Delivery at the bottleneck: the window over the inflated RTT is below the rate sent.
        assert!(c.rate() < 0.9 * high, "rate {} should fall below {high}", c.rate());
        assert!(
            c.window_at(now) < high_window,
            "window {} should fall below {high_window}",
            c.window_at(now)
        );
    }

    #[test]
    fn window_bounded_by_cap_and_floor() {
        // (c) Never above max(min_window, cap * (min_rtt + target)) (cap * srtt when competing),
        // never below min_window.
        let mut rng = Pcg64::seed_from_u64(3);
        for case in 0..100 {
            let cap = rng.gen_range(50_000..10_000_000);
            let mut c = core(RateConfig {
                initial_rate: Some(rng.gen_range(10_000..50_000_000)),
                max_rate: if case % 2 == 0 { cap } else { 0 },
                ..RateConfig::default()
            });
            if case % 2 == 1 {
                c.handle().cap.store(cap, Ordering::Relaxed);
            }
            let mut now = Instant::now();
            for _ in 0..40 {
                let rtt = Duration::from_micros(rng.gen_range(1_000..200_000));
                let loss = rng.gen_range(0.0..0.3);
                now = round(&mut c, now, rtt, loss, &mut rng);
                let min_rtt = c.min_rtt(now);
                // Competing TCP-like, the window spans the smoothed RTT (the other flow's queue).
                let rtt = if c.competing() {
                    c.srtt()
                } else {
                    min_rtt + RateCore::target(min_rtt)
                };
                let bound = (cap as f64 * rtt.as_secs_f64()) as u64;
                let w = c.window_at(now);
                assert!(w >= MIN_WINDOW, "case {case}: window {w} below the floor");
                assert!(
                    w <= bound.max(MIN_WINDOW) + 1,
                    "case {case}: window {w} above cap bound {bound}"
                );
                assert!(
                    c.rate() <= cap as f64 + 1.0,
                    "case {case}: rate {} above cap {cap}",
                    c.rate()
                );
            }
        }
    }

    #[test]
    fn app_cap_changes_take_effect_at_once() {
        let c = core(RateConfig {
            initial_rate: Some(5_000_000),
            ..RateConfig::default()
        });
        assert_eq!(c.rate() as u64, 5_000_000);
        c.handle().cap.store(1_000_000, Ordering::Relaxed);
        assert_eq!(c.rate() as u64, 1_000_000);
        c.handle().cap.store(0, Ordering::Relaxed);
        assert_eq!(c.rate() as u64, 5_000_000);
    }

    #[test]
    fn starts_at_initial_rate() {
        // (d) With initialRateBps the first window carries that rate over the initial RTT.
        let now = Instant::now();
        let c = core(RateConfig {
            initial_rate: Some(3_000_000),
            ..RateConfig::default()
        });
        assert_eq!(c.rate() as u64, 3_000_000);
        assert_eq!(c.window_at(now), 300_000);
        // Clamped to the cap.
        let c = core(RateConfig {
            initial_rate: Some(3_000_000),
            max_rate: 1_000_000,
            ..RateConfig::default()
        });
        assert_eq!(c.rate() as u64, 1_000_000);
        // Without it: slow start from the floor window, doubling per round without queueing.
        let mut c = core(RateConfig::default());
        assert_eq!(c.window_at(now), MIN_WINDOW);
        let mut rng = Pcg64::seed_from_u64(9);
        let mut t = now;
        let r0 = c.rate();
        for _ in 0..3 {
            t = round(&mut c, t, Duration::from_millis(20), 0.0, &mut rng);
        }
        assert!(
            c.rate() >= 4.0 * r0,
            "slow start: {} after 3 rounds from {r0}",
            c.rate()
        );
    }

    /// A drop-tail bottleneck of `capacity` bytes/s, `base` RTT and `queue_max` bytes, shared with
    /// a flow that keeps `other_queue` bytes standing in it: one round of this controller.
    struct Bottleneck {
        capacity: f64,
        base: Duration,
        queue_max: f64,
        queue: f64,
        other_queue: f64,
    }

    impl Bottleneck {
        fn rtt(&self) -> Duration {
            self.base + Duration::from_secs_f64((self.queue + self.other_queue) / self.capacity)
        }

        /// Sends a round's worth (window or rate x RTT), delivers what the link serves, drops the
        /// overflow; returns the time after the round.
        fn round(&mut self, c: &mut RateCore, now: Instant) -> Instant {
            let rtt = self.rtt();
            let sent = (c.window_at(now) as f64)
                .min(c.rate() * rtt.as_secs_f64())
                .max(PKT as f64);
            let served = self.capacity * rtt.as_secs_f64();
            // Our share of the service: the link serves the queue in arrival order; the other
            // flow's standing queue only adds delay (it is refilled as fast as it drains).
            let share = if self.other_queue > 0.0 { 0.5 } else { 1.0 };
            self.queue = (self.queue + sent - share * served).max(0.0);
            let lost = (self.queue + self.other_queue - self.queue_max)
                .max(0.0)
                .min(self.queue);
            self.queue -= lost;
            let delivered = sent - lost;
            let packets = (sent / PKT as f64).ceil().clamp(1.0, 200.0) as u32;
            let size = (sent / packets as f64) as u64;
            let step = rtt / packets;
            let mut t = now;
            for _ in 0..packets {
                c.on_sent(t, size);
                t += step;
            }
            let mut t = now + rtt;
            let mut to_ack = delivered;
            for _ in 0..packets {
                if to_ack >= size as f64 / 2.0 {
                    c.on_ack(t, size, false, rtt, rtt);
                    to_ack -= size as f64;
                } else {
                    c.on_congestion_event(t, false, size);
                }
                t += step;
            }
            now + rtt
        }
    }

    fn twenty_mbit(other_queue: f64) -> Bottleneck {
        Bottleneck {
            capacity: 2_500_000.0,
            base: Duration::from_millis(40),
            queue_max: 192.0 * 1024.0,
            queue: 0.0,
            other_queue,
        }
    }

    #[test]
    fn own_queue_drains_and_never_competes() {
        // Alone on a drop-tail bottleneck from slow start: the queue it builds is its own, the
        // back-offs drain it, the TCP-like mode never starts, and it runs near the capacity.
        let mut c = core(RateConfig::default());
        let mut link = twenty_mbit(0.0);
        let mut now = Instant::now();
        let start = now;
        let mut late_rates = vec![];
        while now.saturating_duration_since(start) < Duration::from_secs(30) {
            now = link.round(&mut c, now);
            assert!(
                !c.competing(),
                "competing at {:?}",
                now.saturating_duration_since(start)
            );
            if now.saturating_duration_since(start) > Duration::from_secs(10) {
                late_rates.push(c.rate());
            }
        }
        let mean = late_rates.iter().sum::<f64>() / late_rates.len() as f64;
        assert!(mean > 0.7 * link.capacity, "mean rate {mean} alone");
        assert_eq!(c.handle().competing_entries.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn standing_queue_of_another_flow_turns_tcp_like_then_back() {
        let mut c = core(RateConfig::default());
        let mut link = twenty_mbit(0.0);
        let mut now = Instant::now();
        for _ in 0..100 {
            now = link.round(&mut c, now);
        }
        let alone = c.rate();
        assert!(!c.competing());
        // A loss-based flow arrives and keeps 150 KB standing (60 ms): no back-off drains that.
        link.other_queue = 150.0 * 1024.0;
        let arrived = now;
        while !c.competing() {
            now = link.round(&mut c, now);
            assert!(
                now.saturating_duration_since(arrived) < Duration::from_secs(5),
                "not competing 5 s after the standing queue came; rate {}",
                c.rate()
            );
        }
        assert!(now.saturating_duration_since(arrived) >= COMPETE_AFTER);
        // It does not starve: it holds a share near half of what it had alone.
        for _ in 0..50 {
            now = link.round(&mut c, now);
            assert!(c.competing());
        }
        assert!(
            c.rate() >= 0.25 * alone,
            "rate {} beside the other flow, {alone} alone",
            c.rate()
        );
        // A loss event is a decrease now, once per RTT.
        let before = c.rate();
        c.on_congestion_event(now, false, PKT);
        c.on_congestion_event(now, false, PKT);
        assert!(
            (c.rate() - COMPETE_DECREASE * before).abs() < 1.0,
            "{before} -> {}",
            c.rate()
        );
        // The other flow leaves: the next drain probe sees the queue empty and the delay mode resumes.
        link.other_queue = 0.0;
        let left = now;
        while c.competing() {
            now = link.round(&mut c, now);
            assert!(
                now.saturating_duration_since(left) < PROBE_INTERVAL + Duration::from_secs(2),
                "still competing {:?} after the other flow left",
                now.saturating_duration_since(left)
            );
        }
        // Back in the delay mode, random loss on an empty queue changes nothing again.
        let mut rng = Pcg64::seed_from_u64(11);
        for _ in 0..20 {
            now = round(&mut c, now, Duration::from_millis(40), 0.0, &mut rng);
        }
        let rate = c.rate();
        for _ in 0..20 {
            now = round(&mut c, now, Duration::from_millis(40), 0.2, &mut rng);
            assert!(!c.competing() && c.rate() >= rate);
        }
    }

    #[test]
    fn factory_handle_is_shared_with_clones() {
        let f = Arc::new(MutpRateFactory {
            cfg: RateConfig {
                initial_rate: Some(1_000_000),
                ..RateConfig::default()
            },
        });
        let ctrl = f.build(Instant::now(), 1200);
        let snapshot = ctrl.clone_box();
        let h = snapshot.into_any().downcast::<MutpRate>().unwrap().handle();
        h.cap.store(500_000, Ordering::Relaxed);
        let live = ctrl.into_any().downcast::<MutpRate>().unwrap();
        assert_eq!(live.core.rate() as u64, 500_000);
    }
}

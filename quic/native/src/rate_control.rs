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

    /// Current rate, bytes/s (the cap applied).
    pub fn rate(&self) -> f64 {
        self.clamp_rate(self.rate)
    }

    /// Windowed minimum RTT (the initial RTT before any sample).
    pub fn min_rtt(&self, now: Instant) -> Duration {
        self.min_rtt
            .get(now)
            .unwrap_or_else(|| self.srtt.unwrap_or(self.cfg.initial_rtt))
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
        let rtt = self.srtt().min(min_rtt + Self::target(min_rtt));
        let w = self.rate() * rtt.as_secs_f64();
        (w as u64).max(self.cfg.min_window)
    }

    pub fn on_sent(&mut self, _now: Instant, bytes: u64) {
        self.round_sent = self.round_sent.saturating_add(bytes);
    }

    /// Acknowledged bytes with the RTT estimate after them (quinn's smoothed RTT).
    pub fn on_ack(&mut self, now: Instant, bytes: u64, app_limited: bool, srtt: Duration) {
        self.srtt = Some(srtt);
        self.min_rtt.update(now, srtt);
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
        self.round_start = Some(now);
        self.round_acked = 0;
        self.round_sent = 0;
        self.round_app_limited = false;
        if self.hold > 0 {
            self.hold -= 1;
            return;
        }
        let min_rtt = self.min_rtt(now);
        let queueing = self.srtt().saturating_sub(min_rtt);
        let current = self.rate();
        if queueing > Self::target(min_rtt) {
            // Back off to what the path delivers (never up, never below the floor).
            self.rate = self.clamp_rate(current.min(BACKOFF * delivered));
            self.slow_start = false;
            self.hold = HOLD_ROUNDS;
        } else if !app_limited {
            let gain = if self.slow_start { SLOW_START_GAIN } else { GROWTH_GAIN };
            self.rate = self.clamp_rate(current * gain);
        } else {
            self.rate = current;
        }
    }

    /// Loss: counted, never acted on; persistent congestion clamps the rate to the delivery rate.
    pub fn on_congestion_event(&mut self, now: Instant, persistent: bool, lost_bytes: u64) {
        self.handle.loss_events.fetch_add(1, Ordering::Relaxed);
        self.handle.lost_bytes.fetch_add(lost_bytes, Ordering::Relaxed);
        if persistent && self.delivery_rate > 0.0 {
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

    fn on_ack(&mut self, now: Instant, _sent: Instant, bytes: u64, app_limited: bool, rtt: &RttEstimator) {
        self.core.on_ack(now, bytes, app_limited, rtt.get());
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
                c.on_ack(t, size, false, rtt);
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
        for step in 0..20 {
            let rtt = Duration::from_millis(40 + 4 * step);
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
        // (c) Never above max(min_window, cap * (min_rtt + target)), never below min_window.
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
                let bound = (cap as f64 * (min_rtt + RateCore::target(min_rtt)).as_secs_f64()) as u64;
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

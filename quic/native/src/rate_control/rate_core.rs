//! `RateCore`: the rate logic of MutpRate (the module's doc says what it does and why): the delay
//! mode, and the TCP-like mode it turns to beside a standing queue that is not its own.

use super::min_filter::MinFilter;
use super::{
    RateConfig, RateHandle, ACK_HOLD_GAIN, BACKOFF, COMPETE_AFTER, COMPETE_AFTER_RTTS, COMPETE_DECREASE,
    COMPETE_INCREASE, COMPETE_MEMORY, COMPETE_RATE_FRACTION, EXIT_DRAINED_ROUNDS, GROWTH_GAIN, HOLD_ROUNDS,
    MAX_ACK_HOLD, MIN_ROUND, MIN_RTT_WINDOW, MIN_TARGET, PROBE_GAIN, PROBE_INTERVAL, PROBE_ROUNDS, SLOW_START_GAIN,
};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

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
    /// Average time an acknowledged packet waited for the peer's ACK beyond the smoothed RTT,
    /// seconds (`on_ack`): what the window must also cover.
    ack_hold: f64,
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
            ack_hold: 0.0,
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

    /// Average time a packet waited for the peer's ACK beyond the smoothed RTT (`on_ack`).
    pub fn ack_hold(&self) -> Duration {
        Duration::from_secs_f64(self.ack_hold)
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
        let w = self.rate() * (rtt.as_secs_f64() + self.ack_hold);
        (w as u64).max(self.cfg.min_window)
    }

    pub fn on_sent(&mut self, _now: Instant, bytes: u64) {
        self.round_sent = self.round_sent.saturating_add(bytes);
    }

    /// Acknowledged bytes with the RTT estimate after them (quinn's smoothed RTT) and the packet's
    /// own RTT sample (ack time - send time).
    pub fn on_ack(&mut self, now: Instant, bytes: u64, app_limited: bool, srtt: Duration, sample: Duration) {
        self.srtt = Some(srtt);
        // quinn's smoothed RTT leaves out the ACK delay the peer reports, and that only for the
        // packet that triggered the ACK; a peer that acknowledges every few packets (Chromium
        // decimates its ACKs) holds the earlier ones longer. Bytes stay in flight for the raw
        // sample, not the smoothed RTT: a window of rate x srtt alone sends a fraction of the rate.
        let held = sample.saturating_sub(srtt).min(MAX_ACK_HOLD).as_secs_f64();
        self.ack_hold += (held - self.ack_hold) * ACK_HOLD_GAIN;
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

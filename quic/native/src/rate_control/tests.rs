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
    // (c) Never above max(min_window, cap * (min_rtt + target + ack hold)) (cap * (srtt + ack
    // hold) when competing), never below min_window. (These acks come at the RTT: no hold.)
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
            let bound = (cap as f64 * (rtt + c.ack_hold()).as_secs_f64()) as u64;
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
fn window_covers_the_peers_ack_hold() {
    // A peer that acknowledges every 5th packet (as Chromium does) holds the first of five for
    // four packet times beyond the RTT quinn reports. Paced at 1500 packets/s over 40 ms, the
    // mean hold is 2 packet times (1.33 ms); the window must cover it, or the sender is held
    // below its rate. A hold beyond QUIC's max_ack_delay counts only up to it.
    let rtt = Duration::from_millis(40);
    let gap = Duration::from_micros(667);
    let rate = 1500.0 * PKT as f64;
    let mut c = core(RateConfig {
        initial_rate: Some(rate as u64),
        max_rate: rate as u64,
        ..RateConfig::default()
    });
    let mut now = Instant::now();
    for i in 0..2000u32 {
        let held = gap * (4 - i % 5);
        c.on_ack(now, PKT, false, rtt, rtt + held);
        now += gap;
    }
    let hold = c.ack_hold().as_secs_f64();
    assert!(
        (hold - 0.001_333).abs() < 0.000_3,
        "mean hold {hold} s, expected ~1.33 ms"
    );
    let base = rtt.min(c.min_rtt(now) + RateCore::target(c.min_rtt(now)));
    let w = c.window_at(now) as f64;
    let expected = c.rate() * (base.as_secs_f64() + hold);
    assert!((w - expected).abs() <= 1.0, "window {w}, expected {expected}");
    assert!(
        w > c.rate() * base.as_secs_f64() * 1.03,
        "the hold widened the window by >3 %"
    );

    for _ in 0..2000 {
        c.on_ack(now, PKT, false, rtt, rtt + Duration::from_millis(200));
        now += gap;
    }
    let capped = c.ack_hold();
    assert!(
        capped <= MAX_ACK_HOLD && capped > MAX_ACK_HOLD * 9 / 10,
        "hold {capped:?} not capped at {MAX_ACK_HOLD:?}"
    );
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

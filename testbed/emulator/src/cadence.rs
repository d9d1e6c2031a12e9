//! When one direction's thread wakes up, and when the packets it reads are taken to have arrived.
//!
//! A wake-up costs ~12 us of CPU on the testbed's machines (a VM's context switch), more than
//! moving a packet. Waking for each packet's arrival (to stamp it) and again for its delivery made
//! linkem cost ~40 us a packet at the testbed's 7000 packets/s. So the thread has two modes:
//!
//! - watching (sparse input): it sleeps on the input and the next delivery; an arrival is stamped
//!   when read, exactly, and a delivery leaves at most EARLY_NS before it is due (and late only
//!   by the wake-up's latency);
//! - ticking (dense input: on average a packet or more per WINDOW_NS): it wakes every WINDOW_NS,
//!   reads what came since the last look and delivers what is due within half a window either
//!   side (leaning EARLY_NS early, as when watching). The packets of one look are spread evenly
//!   over the time since the previous look (for paced traffic, their true arrival times give or
//!   take a fraction of a window): arrival estimates and deliveries are each off by less than
//!   half a window, either way, so delays stay within a window of their due value and the mean
//!   is kept.
//!
//! Ticking needs every delay to be at least a window: a packet can leave no earlier than it is read.
//! The model's departures, drops and segment changes replay in event time either way.

/// A delivery may leave this much before its due time when watching, so that the wake-up for an
/// arrival also serves a delivery due just after it.
pub const EARLY_NS: f64 = 50_000.0;
/// The ticking period (see above): at 7000 packets/s, about two packets a wake-up.
pub const WINDOW_NS: f64 = 300_000.0;
/// Over how long the arrival rate that picks the mode is counted.
const RATE_SPAN_NS: f64 = 2e6;

pub struct Cadence {
    may_tick: bool,
    ticking: bool,
    /// When the input was last looked at (read until empty, or found empty by ppoll).
    last_look_ns: f64,
    span_start_ns: f64,
    span_count: u64,
}

/// What the thread does next: sleep until `wake_ns` (None: no time-out), on the input if `watch`.
#[derive(Debug, PartialEq)]
pub struct Sleep {
    pub watch: bool,
    pub wake_ns: Option<f64>,
}

impl Cadence {
    /// `min_delay_ns`: the least fixed delay the link can have (over its schedule's segments).
    pub fn new(min_delay_ns: f64) -> Cadence {
        Cadence {
            may_tick: min_delay_ns >= WINDOW_NS,
            ticking: false,
            last_look_ns: 0.0,
            span_start_ns: 0.0,
            span_count: 0,
        }
    }

    /// After each wake-up's look at the input (`times`: the read times of the packets it read,
    /// rewritten to their estimated arrival times when ticking). Also picks the mode.
    pub fn drained(&mut self, times: &mut [f64], now: f64) {
        if self.ticking && !times.is_empty() {
            let step = (now - self.last_look_ns) / (times.len() + 1) as f64;
            for (i, t) in times.iter_mut().enumerate() {
                *t = self.last_look_ns + step * (i + 1) as f64;
            }
        }
        self.last_look_ns = now;
        self.span_count += times.len() as u64;
        let span = now - self.span_start_ns;
        if span >= RATE_SPAN_NS {
            self.ticking = self.may_tick && self.span_count as f64 * WINDOW_NS >= span;
            self.span_start_ns = now;
            self.span_count = 0;
        }
    }

    /// Packets due by this time are delivered now. Ticking leans EARLY_NS early too, as watching
    /// does: a wake-up and the kernel's path to the receiver add some tens of microseconds.
    pub fn horizon(&self, now: f64) -> f64 {
        now + EARLY_NS + if self.ticking { WINDOW_NS / 2.0 } else { 0.0 }
    }

    /// The next sleep, given the earliest time a delivery may fall due.
    pub fn sleep(&self, now: f64, next_due: Option<f64>) -> Sleep {
        if self.ticking {
            Sleep {
                watch: false,
                wake_ns: Some(now + WINDOW_NS),
            }
        } else {
            // EARLY_NS ahead, as a wake-up is late by some tens of microseconds.
            Sleep {
                watch: true,
                wake_ns: next_due.map(|d| d - EARLY_NS),
            }
        }
    }

    pub fn ticking(&self) -> bool {
        self.ticking
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Drains one packet per `gap_ns` for `n` looks; returns the cadence.
    fn fed(min_delay: f64, gap_ns: f64, n: usize) -> Cadence {
        let mut c = Cadence::new(min_delay);
        for i in 1..=n {
            c.drained(&mut [0.0], i as f64 * gap_ns);
        }
        c
    }

    #[test]
    fn ticks_only_for_dense_input_on_long_enough_delays() {
        assert!(fed(20e6, 150e3, 40).ticking());
        assert!(!fed(20e6, 600e3, 40).ticking());
        assert!(!fed(0.0, 150e3, 40).ticking());
        let mut c = fed(20e6, 150e3, 40);
        c.drained(&mut [], 20e6); // input stopped
        assert!(!c.ticking());
    }

    #[test]
    fn ticking_spreads_a_look_over_the_time_since_the_previous_one() {
        let mut c = fed(20e6, 150e3, 40);
        let last = 40.0 * 150e3;
        let mut times = [9e9, 9e9, 9e9];
        c.drained(&mut times, last + 400e3);
        assert_eq!(times, [last + 100e3, last + 200e3, last + 300e3]);
    }

    #[test]
    fn watching_keeps_read_times_and_sleeps_on_the_input() {
        let mut c = Cadence::new(20e6);
        let mut times = [5.0, 6.0];
        c.drained(&mut times, 7.0);
        assert_eq!(times, [5.0, 6.0]);
        assert_eq!(
            c.sleep(7.0, Some(9e6)),
            Sleep {
                watch: true,
                wake_ns: Some(9e6 - EARLY_NS)
            }
        );
        assert_eq!(c.horizon(0.0), EARLY_NS);
    }
}

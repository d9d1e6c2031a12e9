//! The windowed minimum of the RTT samples: the base RTT the queueing delay is measured against.

use super::{MIN_RTT_BUCKETS, MIN_RTT_WINDOW};
use std::time::{Duration, Instant};

/// Windowed minimum over `MIN_RTT_BUCKETS` buckets spanning `MIN_RTT_WINDOW`.
#[derive(Clone, Debug)]
pub(super) struct MinFilter {
    buckets: [(Option<Instant>, Duration); MIN_RTT_BUCKETS],
}

impl MinFilter {
    pub(super) fn new() -> Self {
        MinFilter {
            buckets: [(None, Duration::MAX); MIN_RTT_BUCKETS],
        }
    }

    fn bucket_len() -> Duration {
        MIN_RTT_WINDOW / MIN_RTT_BUCKETS as u32
    }

    pub(super) fn update(&mut self, now: Instant, sample: Duration) {
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

    pub(super) fn get(&self, now: Instant) -> Option<Duration> {
        self.buckets
            .iter()
            .filter(|(start, _)| matches!(start, Some(s) if now.saturating_duration_since(*s) < MIN_RTT_WINDOW))
            .map(|(_, d)| *d)
            .min()
    }
}

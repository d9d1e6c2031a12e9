//! The per-packet link model of one direction (sans-IO; times are nanoseconds since link start).
//! The TypeScript simulator (sim/src/link.ts) implements the same model; keep the two in step.
use crate::config;
use rand::{Rng, SeedableRng};
use rand_distr::StandardNormal;
use rand_pcg::Pcg64;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

/// Bytes one mahimahi delivery opportunity carries.
pub const OPPORTUNITY_BYTES: u64 = 1504;
const NS_PER_MS: f64 = 1e6;

/// Counters shared with the stats printer; the model and the scheduler update them.
#[derive(Default)]
pub struct DirStats {
    pub packets_in: AtomicU64,
    pub bytes_in: AtomicU64,
    pub packets_out: AtomicU64,
    pub bytes_out: AtomicU64,
    pub dropped_disconnected: AtomicU64,
    pub dropped_queue: AtomicU64,
    pub dropped_loss: AtomicU64,
    pub max_queue_bytes: AtomicU64,
}

impl DirStats {
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "packetsIn": self.packets_in.load(Relaxed),
            "bytesIn": self.bytes_in.load(Relaxed),
            "packetsOut": self.packets_out.load(Relaxed),
            "bytesOut": self.bytes_out.load(Relaxed),
            "dropped": {
                "disconnected": self.dropped_disconnected.load(Relaxed),
                "queue": self.dropped_queue.load(Relaxed),
                "loss": self.dropped_loss.load(Relaxed),
            },
            "maxQueueBytes": self.max_queue_bytes.load(Relaxed),
        })
    }
}

/// A mahimahi trace: opportunity k happens at (k / n) * period + opps[k % n] ms.
pub struct Trace {
    opps_ms: Vec<u64>,
    period_ms: u64,
}

impl Trace {
    pub fn parse(text: &str) -> Result<Trace, String> {
        let mut opps_ms = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() {
                continue;
            }
            let v: u64 = line
                .parse()
                .map_err(|_| format!("line {}: not a non-negative integer: {line:?}", i + 1))?;
            if let Some(&last) = opps_ms.last() {
                if v < last {
                    return Err(format!("line {}: timestamps must not decrease", i + 1));
                }
            }
            opps_ms.push(v);
        }
        let period_ms = *opps_ms.last().ok_or("trace is empty")?;
        if period_ms == 0 {
            return Err("trace's last timestamp (its period) must be > 0".into());
        }
        Ok(Trace { opps_ms, period_ms })
    }

    pub fn load(path: &str) -> Result<Trace, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("trace {path}: {e}"))?;
        Trace::parse(&text).map_err(|e| format!("trace {path}: {e}"))
    }

    fn time_ns(&self, k: u64) -> f64 {
        let n = self.opps_ms.len() as u64;
        ((k / n) * self.period_ms + self.opps_ms[(k % n) as usize]) as f64 * NS_PER_MS
    }

    /// Index of the first opportunity at or after t.
    fn first_at_or_after(&self, t_ns: f64) -> u64 {
        let n = self.opps_ms.len() as u64;
        let t_ms = t_ns.max(0.0) / NS_PER_MS;
        let cycle = (t_ms / self.period_ms as f64).floor() as u64;
        let within = t_ms - (cycle * self.period_ms) as f64;
        let i = self.opps_ms.partition_point(|&o| (o as f64) < within) as u64;
        if i < n {
            cycle * n + i
        } else {
            (cycle + 1) * n
        }
    }
}

pub enum RateM {
    Unlimited,
    Constant { bytes_per_ns: f64 },
    Trace(Arc<Trace>),
}

pub enum JitterM {
    None,
    Uniform {
        max_ns: f64,
    },
    Normal {
        sd_ns: f64,
    },
    /// (cumulative weight, mean ns, sd ns)
    Mixture {
        comps: Vec<(f64, f64, f64)>,
        total: f64,
    },
}

pub enum LossM {
    None,
    Iid(f64),
    GilbertElliott {
        p_gb: f64,
        p_bg: f64,
        loss_good: f64,
        loss_bad: f64,
    },
}

/// The parameters in force for one segment (or the base parameters).
pub struct Params {
    pub rate: RateM,
    pub delay_ns: f64,
    pub jitter: JitterM,
    pub loss: LossM,
}

fn rate_model(r: &config::Rate) -> Result<RateM, String> {
    Ok(match r {
        config::Rate::Unlimited => RateM::Unlimited,
        config::Rate::Constant { bytes_per_second } => RateM::Constant {
            bytes_per_ns: bytes_per_second / 1e9,
        },
        config::Rate::Trace { file } => RateM::Trace(Arc::new(Trace::load(file)?)),
    })
}

fn jitter_model(j: &config::Jitter) -> JitterM {
    match j {
        config::Jitter::None => JitterM::None,
        config::Jitter::Uniform { max_ms } => JitterM::Uniform {
            max_ns: max_ms * NS_PER_MS,
        },
        config::Jitter::Normal { sd_ms } => JitterM::Normal {
            sd_ns: sd_ms * NS_PER_MS,
        },
        config::Jitter::Mixture { components } => {
            let mut acc = 0.0;
            let comps = components
                .iter()
                .map(|c| {
                    acc += c.weight;
                    (acc, c.mean_ms * NS_PER_MS, c.sd_ms * NS_PER_MS)
                })
                .collect();
            JitterM::Mixture { comps, total: acc }
        }
    }
}

fn loss_model(l: &config::Loss) -> LossM {
    match l {
        config::Loss::None => LossM::None,
        config::Loss::Iid { p } => LossM::Iid(*p),
        config::Loss::GilbertElliott {
            p_good_to_bad,
            p_bad_to_good,
            loss_good,
            loss_bad,
        } => LossM::GilbertElliott {
            p_gb: *p_good_to_bad,
            p_bg: *p_bad_to_good,
            loss_good: *loss_good,
            loss_bad: *loss_bad,
        },
    }
}

struct Seg {
    start_ns: f64,
    connected: bool,
    params: Arc<Params>,
}

struct ScheduleM {
    segs: Vec<Seg>,
    total_ns: f64,
    looping: bool,
}

impl ScheduleM {
    /// Start time of global segment g (segment g % n of cycle g / n).
    fn start_of(&self, g: u64) -> f64 {
        let n = self.segs.len() as u64;
        (g / n) as f64 * self.total_ns + self.segs[(g % n) as usize].start_ns
    }

    fn seg(&self, g: u64) -> &Seg {
        &self.segs[(g % self.segs.len() as u64) as usize]
    }

    /// The global index of the segment after g, or None when g lasts forever.
    fn next(&self, g: u64) -> Option<u64> {
        if !self.looping && g + 1 >= self.segs.len() as u64 {
            None
        } else {
            Some(g + 1)
        }
    }
}

struct Queued {
    dep_ns: f64,
    params: Arc<Params>,
    data: Vec<u8>,
}

/// Why a packet did not make it through (`arrive` reports the first two; loss happens at departure).
#[allow(dead_code)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Drop {
    Disconnected,
    Queue,
    Loss,
}

pub struct DirectionModel {
    sched: Option<ScheduleM>,
    seg: u64,
    connected: bool,
    params: Arc<Params>,
    queue_limit: u64,
    rho: f64,
    rng: Pcg64,
    queue: VecDeque<Queued>,
    queued_bytes: u64,
    prev_dep_ns: f64,
    trace_k: u64,
    trace_left: u64,
    ge_bad: bool,
    prev_jitter_ns: f64,
    prev_delivery_ns: f64,
    now_ns: f64,
    min_delay_ns: f64,
    /// Packets past the rate and loss stages: (delivery time, packet), in delivery order.
    pub delay_line: VecDeque<(f64, Vec<u8>)>,
    pub stats: Arc<DirStats>,
}

impl DirectionModel {
    pub fn new(cfg: &config::Direction, seed: u64, stream: u64) -> Result<DirectionModel, String> {
        let base = Arc::new(Params {
            rate: rate_model(&cfg.rate)?,
            delay_ns: cfg.delay_ms * NS_PER_MS,
            jitter: jitter_model(&cfg.jitter),
            loss: loss_model(&cfg.loss),
        });
        let sched = match &cfg.schedule {
            None => None,
            Some(s) => {
                let mut segs = Vec::new();
                let mut start = 0.0;
                for seg in &s.segments {
                    // A segment without overrides shares the base parameters.
                    let overrides = seg.rate.is_some()
                        || seg.delay_ms.is_some()
                        || seg.jitter.is_some()
                        || seg.loss.is_some();
                    let params = if overrides {
                        Arc::new(Params {
                            rate: match &seg.rate {
                                Some(r) => rate_model(r)?,
                                None => rate_model(&cfg.rate)?,
                            },
                            delay_ns: seg.delay_ms.unwrap_or(cfg.delay_ms) * NS_PER_MS,
                            jitter: jitter_model(seg.jitter.as_ref().unwrap_or(&cfg.jitter)),
                            loss: loss_model(seg.loss.as_ref().unwrap_or(&cfg.loss)),
                        })
                    } else {
                        base.clone()
                    };
                    segs.push(Seg {
                        start_ns: start,
                        connected: seg.connected,
                        params,
                    });
                    start += seg.duration_ms * NS_PER_MS;
                }
                Some(ScheduleM {
                    segs,
                    total_ns: start,
                    looping: s.looping,
                })
            }
        };
        let min_delay_ns = match &sched {
            None => base.delay_ns,
            Some(s) => s
                .segs
                .iter()
                .map(|g| g.params.delay_ns)
                .fold(f64::INFINITY, f64::min),
        };
        let (connected, params) = match &sched {
            None => (true, base.clone()),
            Some(s) => (s.segs[0].connected, s.segs[0].params.clone()),
        };
        Ok(DirectionModel {
            sched,
            seg: 0,
            connected,
            params,
            queue_limit: cfg.queue_bytes,
            rho: cfg.jitter_correlation,
            rng: Pcg64::seed_from_u64(seed ^ stream.wrapping_mul(0x9E37_79B9_7F4A_7C15)),
            queue: VecDeque::new(),
            queued_bytes: 0,
            prev_dep_ns: 0.0,
            trace_k: 0,
            trace_left: OPPORTUNITY_BYTES,
            ge_bad: false,
            prev_jitter_ns: 0.0,
            prev_delivery_ns: 0.0,
            now_ns: 0.0,
            min_delay_ns,
            delay_line: VecDeque::new(),
            stats: Arc::new(DirStats::default()),
        })
    }

    /// The least fixed delay (jitter aside) of any segment.
    pub fn min_delay_ns(&self) -> f64 {
        self.min_delay_ns
    }

    fn next_boundary(&self) -> Option<f64> {
        let s = self.sched.as_ref()?;
        s.next(self.seg).map(|g| s.start_of(g))
    }

    /// When the model must next run so that no delivery is late by more than `early_ns` (the
    /// scheduler delivers up to that early): the queue's head cannot be delivered before it departs
    /// plus its fixed delay (0 with jitter, which may be negative), and a segment change may move
    /// departures. Departures themselves need no wake-up: `advance` replays them in order whenever
    /// it runs, so a 20 ms path costs one wake-up per packet instead of two.
    pub fn next_wake_ns(&self, early_ns: f64) -> Option<f64> {
        let head = self.queue.front().map(|q| {
            let fixed = match q.params.jitter {
                JitterM::None => q.params.delay_ns,
                _ => 0.0,
            };
            q.dep_ns.max(q.dep_ns + fixed - early_ns)
        });
        match (head, self.next_boundary()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Runs departures and segment changes up to time t, in time order.
    pub fn advance(&mut self, t: f64) {
        loop {
            let dep = self.queue.front().map(|q| q.dep_ns).filter(|&d| d <= t);
            let boundary = self.next_boundary().filter(|&b| b <= t);
            match (dep, boundary) {
                // A packet departing exactly at the boundary has departed "by then".
                (Some(d), Some(b)) if d <= b => self.depart(),
                (_, Some(b)) => self.enter_next_segment(b),
                (Some(_), None) => self.depart(),
                (None, None) => break,
            }
        }
        if t > self.now_ns {
            self.now_ns = t;
        }
    }

    fn enter_next_segment(&mut self, at: f64) {
        let s = self.sched.as_ref().expect("boundary without schedule");
        self.seg = s.next(self.seg).expect("boundary past the last segment");
        let seg = s.seg(self.seg);
        self.connected = seg.connected;
        self.params = seg.params.clone();
        if !self.connected {
            self.flush(at);
        }
    }

    /// Drops every queued packet that has not departed by `at`, freeing the capacity it had booked.
    fn flush(&mut self, at: f64) {
        let mut flushed = false;
        while let Some(q) = self.queue.back() {
            if q.dep_ns <= at {
                break;
            }
            let q = self.queue.pop_back().unwrap();
            self.queued_bytes -= q.data.len() as u64;
            self.stats.dropped_disconnected.fetch_add(1, Relaxed);
            flushed = true;
        }
        if flushed {
            self.prev_dep_ns = self.prev_dep_ns.min(at);
            if let RateM::Trace(tr) = &self.params.rate {
                self.trace_k = tr.first_at_or_after(at);
                self.trace_left = OPPORTUNITY_BYTES;
            }
        }
    }

    /// A packet of `data.len()` bytes arrives at t. Returns the drop reason if it is dropped at once.
    pub fn arrive(&mut self, t: f64, data: Vec<u8>) -> Option<Drop> {
        // A packet handed over late (thread hand-off) is taken as arriving now: time never goes back.
        let t = t.max(self.now_ns);
        self.advance(t);
        let len = data.len() as u64;
        self.stats.packets_in.fetch_add(1, Relaxed);
        self.stats.bytes_in.fetch_add(len, Relaxed);
        if !self.connected {
            self.stats.dropped_disconnected.fetch_add(1, Relaxed);
            return Some(Drop::Disconnected);
        }
        if self.queued_bytes + len > self.queue_limit {
            self.stats.dropped_queue.fetch_add(1, Relaxed);
            return Some(Drop::Queue);
        }
        let params = self.params.clone();
        let dep_ns = match &params.rate {
            RateM::Unlimited => t,
            RateM::Constant { bytes_per_ns } => {
                let d = t.max(self.prev_dep_ns) + len as f64 / bytes_per_ns;
                self.prev_dep_ns = d;
                d
            }
            RateM::Trace(tr) => self.serve_trace(tr, t, len),
        };
        self.queued_bytes += len;
        // A packet departing at once (unlimited rate, idle link) never waited in the queue.
        if dep_ns > t {
            self.stats
                .max_queue_bytes
                .fetch_max(self.queued_bytes, Relaxed);
        }
        self.queue.push_back(Queued {
            dep_ns,
            params,
            data,
        });
        None
    }

    /// Books `len` bytes on the trace's opportunities; returns the time its last byte is served.
    fn serve_trace(&mut self, tr: &Trace, t: f64, len: u64) -> f64 {
        // Opportunities before t found the queue empty: they are wasted.
        if tr.time_ns(self.trace_k) < t {
            self.trace_k = tr.first_at_or_after(t);
            self.trace_left = OPPORTUNITY_BYTES;
        }
        let mut need = len;
        loop {
            if need <= self.trace_left {
                self.trace_left -= need;
                let dep = tr.time_ns(self.trace_k);
                if self.trace_left == 0 {
                    self.trace_k += 1;
                    self.trace_left = OPPORTUNITY_BYTES;
                }
                return dep;
            }
            need -= self.trace_left;
            self.trace_k += 1;
            self.trace_left = OPPORTUNITY_BYTES;
        }
    }

    fn lost(&mut self, loss: &LossM) -> bool {
        match loss {
            LossM::None => false,
            LossM::Iid(p) => self.rng.gen::<f64>() < *p,
            LossM::GilbertElliott {
                p_gb,
                p_bg,
                loss_good,
                loss_bad,
            } => {
                let flip = if self.ge_bad { *p_bg } else { *p_gb };
                if self.rng.gen::<f64>() < flip {
                    self.ge_bad = !self.ge_bad;
                }
                let p = if self.ge_bad { *loss_bad } else { *loss_good };
                self.rng.gen::<f64>() < p
            }
        }
    }

    fn fresh_jitter(&mut self, j: &JitterM) -> f64 {
        match j {
            JitterM::None => 0.0,
            JitterM::Uniform { max_ns } => self.rng.gen::<f64>() * max_ns,
            JitterM::Normal { sd_ns } => self.rng.sample::<f64, _>(StandardNormal) * sd_ns,
            JitterM::Mixture { comps, total } => {
                let u = self.rng.gen::<f64>() * total;
                let i = comps.partition_point(|c| c.0 <= u).min(comps.len() - 1);
                let (_, mean, sd) = comps[i];
                mean + self.rng.sample::<f64, _>(StandardNormal) * sd
            }
        }
    }

    fn depart(&mut self) {
        let q = self.queue.pop_front().expect("depart with empty queue");
        self.queued_bytes -= q.data.len() as u64;
        if self.lost(&q.params.loss) {
            self.stats.dropped_loss.fetch_add(1, Relaxed);
            return;
        }
        let jitter = match q.params.jitter {
            JitterM::None => 0.0,
            ref j => {
                let fresh = self.fresh_jitter(j);
                let s = self.rho * self.prev_jitter_ns + (1.0 - self.rho) * fresh;
                self.prev_jitter_ns = s;
                s
            }
        };
        let delay = (q.params.delay_ns + jitter).max(0.0);
        let deliver = (q.dep_ns + delay).max(self.prev_delivery_ns);
        self.prev_delivery_ns = deliver;
        self.delay_line.push_back((deliver, q.data));
    }
}

#[cfg(test)]
mod tests;

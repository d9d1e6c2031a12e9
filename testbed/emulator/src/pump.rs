//! One direction's event loop: one thread reads its input TUN, runs the model and writes due
//! packets to the output TUN, sleeping in `ppoll` in between; `cadence` decides until when.
//!
//! The former reader + scheduler threads took three thread switches per packet (the read, the
//! channel hand-off, the delivery timer); here one wake-up reads and delivers whatever is ready.
use crate::cadence::Cadence;
use crate::model::DirectionModel;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Instant;

/// Packets read per look before due deliveries are written (a burst must not delay them).
const READ_BATCH: usize = 32;
const MAX_PACKET: usize = 65536;
/// After a read error other than "nothing to read" the input is left alone this long.
const ERROR_BACKOFF_NS: f64 = 10e6;

fn ns_since(start: Instant) -> f64 {
    start.elapsed().as_nanos() as f64
}

/// Spare packet buffers, so that a packet costs no allocation once the pool has warmed up.
#[derive(Default)]
struct Pool(Vec<Vec<u8>>);

impl Pool {
    fn copy_of(&mut self, bytes: &[u8]) -> Vec<u8> {
        let mut v = self.0.pop().unwrap_or_default();
        v.clear();
        v.extend_from_slice(bytes);
        v
    }

    fn give_back(&mut self, v: Vec<u8>) {
        // Bounded: a burst's worth of buffers is enough to keep.
        if self.0.len() < 4096 {
            self.0.push(v);
        }
    }
}

enum Read {
    /// The input is empty now.
    Empty,
    /// The batch is full: more may be waiting.
    More,
    Failed,
}

pub struct Pump {
    model: DirectionModel,
    cadence: Cadence,
    input: Arc<OwnedFd>,
    output: Arc<OwnedFd>,
    start: Instant,
    buf: Vec<u8>,
    pool: Pool,
    /// One look's packets and their read times, before they enter the model.
    got: Vec<Vec<u8>>,
    times: Vec<f64>,
}

impl Pump {
    pub fn new(
        model: DirectionModel,
        input: Arc<OwnedFd>,
        output: Arc<OwnedFd>,
        start: Instant,
    ) -> Pump {
        Pump {
            cadence: Cadence::new(model.min_delay_ns()),
            model,
            input,
            output,
            start,
            buf: vec![0; MAX_PACKET],
            pool: Pool::default(),
            got: Vec::with_capacity(READ_BATCH),
            times: Vec::with_capacity(READ_BATCH),
        }
    }

    pub fn run(mut self) -> ! {
        // Time-outs fire when asked (the default 50 us slack would blur the cadence).
        unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0) };
        let mut readable = true;
        let mut input_ok_at = 0.0;
        loop {
            let mut more = false;
            let look = readable || self.cadence.ticking();
            if look && ns_since(self.start) >= input_ok_at {
                match self.read_batch() {
                    Read::Empty => {}
                    Read::More => more = true,
                    Read::Failed => input_ok_at = ns_since(self.start) + ERROR_BACKOFF_NS,
                }
            }
            let now = ns_since(self.start);
            self.cadence.drained(&mut self.times, now);
            for (data, t) in self.got.drain(..).zip(self.times.drain(..)) {
                self.model.arrive(t, data);
            }
            self.model.advance(now);
            self.deliver(self.cadence.horizon(now));
            if more {
                continue;
            }
            let sleep = self.cadence.sleep(now, self.next_due());
            let watch = sleep.watch && now >= input_ok_at;
            let mut wake = sleep.wake_ns;
            if now < input_ok_at {
                wake = Some(wake.map_or(input_ok_at, |w| w.min(input_ok_at)));
            }
            readable = self.wait(watch, wake.map(|w| w - ns_since(self.start)));
        }
    }

    /// Reads up to READ_BATCH packets into `got`, with their read times in `times`.
    fn read_batch(&mut self) -> Read {
        for _ in 0..READ_BATCH {
            let fd = self.input.as_raw_fd();
            let n = unsafe { libc::read(fd, self.buf.as_mut_ptr().cast(), self.buf.len()) };
            if n < 0 {
                let err = std::io::Error::last_os_error();
                match err.kind() {
                    std::io::ErrorKind::WouldBlock => return Read::Empty,
                    std::io::ErrorKind::Interrupted => continue,
                    _ => {
                        eprintln!("linkem: TUN read: {err}");
                        return Read::Failed;
                    }
                }
            }
            self.times.push(ns_since(self.start));
            self.got.push(self.pool.copy_of(&self.buf[..n as usize]));
        }
        Read::More
    }

    /// Writes every packet due by `until`.
    fn deliver(&mut self, until: f64) {
        let stats = &self.model.stats;
        while self.model.delay_line.front().is_some_and(|d| d.0 <= until) {
            let (_, data) = self.model.delay_line.pop_front().unwrap();
            // A failed write (device down, no buffer) is lost like on a real link; not counted as out.
            let fd = self.output.as_raw_fd();
            let n = unsafe { libc::write(fd, data.as_ptr().cast(), data.len()) };
            if n == data.len() as isize {
                stats.packets_out.fetch_add(1, Relaxed);
                stats.bytes_out.fetch_add(data.len() as u64, Relaxed);
            }
            self.pool.give_back(data);
        }
    }

    /// The earliest time a delivery may fall due (the model's next event that matters, or the
    /// delay line's head), or None when nothing is in flight.
    fn next_due(&self) -> Option<f64> {
        let line = self.model.delay_line.front().map(|d| d.0);
        match (self.model.next_wake_ns(0.0), line) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Sleeps until the input is readable (if watched) or `timeout_ns` has passed (None: no
    /// timeout). Returns whether the input may be readable.
    fn wait(&self, watch_input: bool, timeout_ns: Option<f64>) -> bool {
        if timeout_ns.is_some_and(|t| t <= 0.0) {
            return watch_input;
        }
        let ts = timeout_ns.map(|t| {
            let t = t as i64;
            libc::timespec {
                tv_sec: t / 1_000_000_000,
                tv_nsec: t % 1_000_000_000,
            }
        });
        let mut pfd = libc::pollfd {
            // A negative fd is ignored by poll: only the timeout counts.
            fd: if watch_input {
                self.input.as_raw_fd()
            } else {
                -1
            },
            events: libc::POLLIN,
            revents: 0,
        };
        let tsp = ts
            .as_ref()
            .map_or(std::ptr::null(), |t| t as *const libc::timespec);
        let r = unsafe { libc::ppoll(&mut pfd, 1, tsp, std::ptr::null()) };
        // On EINTR or an error state, trying a read is how to find out.
        watch_input && (r != 0)
    }
}

//! linkem: a user-space link emulator between two TUN devices in one network namespace.
//! Packets read from clientTun go through the `up` model and are written to serverTun; packets
//! read from serverTun go through `down` and are written to clientTun.
mod config;
mod model;
mod tun;

use model::DirectionModel;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender, TryRecvError};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How early a packet may leave the delay line. The scheduler sleeps (timer slack 1 ns: a futex
/// timeout fires within a few tens of microseconds) and never spins: it wakes this much before a
/// delivery is due and writes every packet due within this margin. Spinning until each due time
/// (50 us before it) cost a core's tenth at 1000 packets/s, and at the testbed's 7000 packets/s
/// (six proxies at their caps) about a third of one of the machine's two cores, which the
/// proxies and the client then lacked. Model events (departures, schedule segments) still run at
/// or after their time, so rates and queues are exact; deliveries are within +-50 us of due.
const EARLY_NS: f64 = 50_000.0;
const MAX_PACKET: usize = 65536;

type Arrival = (f64, Vec<u8>);

fn usage() -> ! {
    eprintln!("usage: linkem --config <file.json> [--no-pdeathsig]");
    std::process::exit(2)
}

fn fail(msg: &str) -> ! {
    eprintln!("linkem: {msg}");
    std::process::exit(2)
}

fn ns_since(start: Instant) -> f64 {
    start.elapsed().as_nanos() as f64
}

fn set_timer_slack_1ns() {
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0) };
}

/// Reads packets from one TUN, stamping each with its read time.
fn reader(fd: Arc<OwnedFd>, tx: Sender<Arrival>, start: Instant) {
    let mut buf = vec![0u8; MAX_PACKET];
    loop {
        let n = unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
        if n < 0 {
            let err = std::io::Error::last_os_error();
            if err.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            eprintln!("linkem: TUN read: {err}");
            std::thread::sleep(Duration::from_millis(10));
            continue;
        }
        let t = ns_since(start);
        if tx.send((t, buf[..n as usize].to_vec())).is_err() {
            return;
        }
    }
}

/// Runs one direction: feeds arrivals to the model and writes packets out at their delivery times.
fn scheduler(mut m: DirectionModel, rx: Receiver<Arrival>, out: Arc<OwnedFd>, start: Instant) {
    set_timer_slack_1ns();
    let stats = m.stats.clone();
    loop {
        loop {
            match rx.try_recv() {
                Ok((t, data)) => {
                    m.arrive(t, data);
                }
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => return,
            }
        }
        let now = ns_since(start);
        m.advance(now);
        while m.delay_line.front().is_some_and(|d| d.0 <= now + EARLY_NS) {
            let (_, data) = m.delay_line.pop_front().unwrap();
            // A failed write (device down, no buffer) is lost like on a real link; not counted as out.
            let n = unsafe { libc::write(out.as_raw_fd(), data.as_ptr().cast(), data.len()) };
            if n == data.len() as isize {
                stats
                    .packets_out
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                stats
                    .bytes_out
                    .fetch_add(data.len() as u64, std::sync::atomic::Ordering::Relaxed);
            }
        }
        let next = match (
            m.next_wake_ns(EARLY_NS),
            m.delay_line.front().map(|d| d.0 - EARLY_NS),
        ) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let Some(next) = next else {
            // Nothing due: block until a packet comes (no CPU while idle).
            match rx.recv() {
                Ok((t, data)) => {
                    m.arrive(t, data);
                }
                Err(_) => return,
            }
            continue;
        };
        let wait = next - ns_since(start);
        if wait > 0.0 {
            match rx.recv_timeout(Duration::from_nanos(wait as u64)) {
                Ok((t, data)) => {
                    m.arrive(t, data);
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return,
            }
        }
    }
}

fn stats_json(up: &model::DirStats, down: &model::DirStats) -> String {
    serde_json::json!({ "up": up.to_json(), "down": down.to_json() }).to_string()
}

fn write_stats_file(path: &str, json: &str) {
    let tmp = format!("{path}.tmp");
    if std::fs::write(&tmp, json)
        .and_then(|_| std::fs::rename(&tmp, path))
        .is_err()
    {
        eprintln!("linkem: cannot write stats file {path}");
    }
}

fn main() {
    let mut config_path = None;
    let mut pdeathsig = true;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--config" => config_path = Some(args.next().unwrap_or_else(|| usage())),
            "--no-pdeathsig" => pdeathsig = false,
            _ => usage(),
        }
    }
    let config_path = config_path.unwrap_or_else(|| usage());
    let text = std::fs::read_to_string(&config_path)
        .unwrap_or_else(|e| fail(&format!("{config_path}: {e}")));
    let cfg = config::Config::parse(&text).unwrap_or_else(|e| fail(&format!("{config_path}: {e}")));
    let up =
        DirectionModel::new(&cfg.up, cfg.seed, 1).unwrap_or_else(|e| fail(&format!("up: {e}")));
    let down =
        DirectionModel::new(&cfg.down, cfg.seed, 2).unwrap_or_else(|e| fail(&format!("down: {e}")));

    if pdeathsig {
        let parent = unsafe { libc::getppid() };
        unsafe {
            libc::prctl(
                libc::PR_SET_PDEATHSIG,
                libc::SIGTERM as libc::c_ulong,
                0,
                0,
                0,
            )
        };
        if unsafe { libc::getppid() } != parent {
            fail("parent exited during start-up");
        }
    }
    // Block the stop signals in every thread; the main thread takes them with sigtimedwait.
    let mut sigs: libc::sigset_t = unsafe { std::mem::zeroed() };
    unsafe {
        libc::sigemptyset(&mut sigs);
        libc::sigaddset(&mut sigs, libc::SIGTERM);
        libc::sigaddset(&mut sigs, libc::SIGINT);
        libc::pthread_sigmask(libc::SIG_BLOCK, &sigs, std::ptr::null_mut());
    }

    let client = Arc::new(tun::open(&cfg.client_tun).unwrap_or_else(|e| fail(&e)));
    let server = Arc::new(tun::open(&cfg.server_tun).unwrap_or_else(|e| fail(&e)));
    let (up_stats, down_stats) = (up.stats.clone(), down.stats.clone());

    let start = Instant::now();
    let (up_tx, up_rx) = mpsc::channel();
    let (down_tx, down_rx) = mpsc::channel();
    {
        let (c, s) = (client.clone(), server.clone());
        std::thread::spawn(move || reader(c, up_tx, start));
        std::thread::spawn(move || reader(s, down_tx, start));
    }
    {
        let (c, s) = (client.clone(), server.clone());
        std::thread::spawn(move || scheduler(up, up_rx, s, start));
        std::thread::spawn(move || scheduler(down, down_rx, c, start));
    }
    println!("{{\"ready\":true}}");
    use std::io::Write;
    let _ = std::io::stdout().flush();

    loop {
        let timeout = libc::timespec {
            tv_sec: 1,
            tv_nsec: 0,
        };
        let sig = unsafe { libc::sigtimedwait(&sigs, std::ptr::null_mut(), &timeout) };
        let json = stats_json(&up_stats, &down_stats);
        if sig == libc::SIGTERM || sig == libc::SIGINT {
            if let Some(p) = &cfg.stats_file {
                write_stats_file(p, &json);
            }
            println!("{json}");
            let _ = std::io::stdout().flush();
            std::process::exit(0);
        }
        if let Some(p) = &cfg.stats_file {
            write_stats_file(p, &json);
        }
    }
}

//! linkem-probe: paced UDP sender and measuring receiver for validating linkem.
//! Each datagram carries its sequence number and a CLOCK_MONOTONIC send time; namespaces share the
//! kernel's monotonic clock, so the receiver measures one-way delay directly.
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::time::Duration;

/// IPv4 + UDP headers: the emulator counts IP packet bytes.
const IP_UDP_OVERHEAD: u64 = 28;
const HEADER: usize = 16;

fn mono_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn fail(msg: &str) -> ! {
    eprintln!("linkem-probe: {msg}");
    eprintln!(
        "usage: linkem-probe send --to <ip:port> --rate-bps N --size B --count C [--duration-ms D]\n       \
         linkem-probe recv --bind <ip:port> --expect C --timeout-ms T [--idle-ms I] [--arrivals]\n\
         (--rate-bps counts IP bits: payload + 28 bytes per datagram; 0 = as fast as possible)"
    );
    std::process::exit(2)
}

struct Args(Vec<String>);

impl Args {
    fn get(&self, name: &str) -> Option<&str> {
        self.0.iter().position(|a| a == name).map(|i| {
            self.0
                .get(i + 1)
                .map(|s| s.as_str())
                .unwrap_or_else(|| fail(&format!("{name} needs a value")))
        })
    }
    fn num(&self, name: &str) -> Option<u64> {
        self.get(name).map(|v| {
            v.parse()
                .unwrap_or_else(|_| fail(&format!("{name}: not a number: {v}")))
        })
    }
    fn need(&self, name: &str) -> u64 {
        self.num(name)
            .unwrap_or_else(|| fail(&format!("missing {name}")))
    }
    fn addr(&self, name: &str) -> SocketAddr {
        let v = self
            .get(name)
            .unwrap_or_else(|| fail(&format!("missing {name}")));
        v.parse()
            .unwrap_or_else(|_| fail(&format!("{name}: not ip:port: {v}")))
    }
    fn flag(&self, name: &str) -> bool {
        self.0.iter().any(|a| a == name)
    }
}

fn set_buffer(sock: &UdpSocket, opt: libc::c_int, bytes: libc::c_int) {
    // SO_*BUFFORCE ignores the sysctl caps (we run as root); fall back silently otherwise.
    unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            opt,
            (&bytes as *const libc::c_int).cast(),
            4,
        );
    }
}

fn wait_until(t: u64) {
    loop {
        let now = mono_ns();
        if now >= t {
            return;
        }
        let left = t - now;
        if left > 200_000 {
            std::thread::sleep(Duration::from_nanos(left - 150_000));
        } else {
            std::hint::spin_loop();
        }
    }
}

fn send(a: &Args) {
    let to = a.addr("--to");
    let rate_bps = a.need("--rate-bps");
    let size = a.need("--size") as usize;
    let count = a.need("--count");
    let duration_ns = a.num("--duration-ms").map(|d| d * 1_000_000);
    if size < HEADER {
        fail(&format!("--size must be >= {HEADER}"));
    }
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0) };
    let sock = UdpSocket::bind(if to.is_ipv4() { "0.0.0.0:0" } else { "[::]:0" })
        .unwrap_or_else(|e| fail(&format!("bind: {e}")));
    set_buffer(&sock, libc::SO_SNDBUFFORCE, 4 << 20);
    let interval = if rate_bps == 0 {
        0.0
    } else {
        (size as u64 + IP_UDP_OVERHEAD) as f64 * 8e9 / rate_bps as f64
    };
    let mut buf = vec![0u8; size];
    let start = mono_ns();
    let (mut sent, mut errors) = (0u64, 0u64);
    for seq in 0..count {
        let due = start + (seq as f64 * interval) as u64;
        // Both the schedule and the clock: a blast (no pacing) has every due time at the start.
        if duration_ns.is_some_and(|d| due - start >= d || mono_ns() - start >= d) {
            break;
        }
        wait_until(due);
        buf[..8].copy_from_slice(&seq.to_le_bytes());
        buf[8..16].copy_from_slice(&mono_ns().to_le_bytes());
        match sock.send_to(&buf, to) {
            Ok(_) => sent += 1,
            Err(_) => errors += 1,
        }
    }
    let elapsed_ms = (mono_ns() - start) as f64 / 1e6;
    println!(
        "{}",
        serde_json::json!({ "sent": sent, "errors": errors, "durationMs": elapsed_ms })
    );
}

fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let pos = q * (sorted.len() - 1) as f64;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo as f64)
}

struct Arrival {
    seq: u64,
    sent_ns: u64,
    recv_ns: u64,
    len: u64,
}

fn recv(a: &Args) {
    let bind = a.addr("--bind");
    let expect = a.need("--expect");
    let timeout_ns = a.need("--timeout-ms") * 1_000_000;
    let idle_ns = a.num("--idle-ms").unwrap_or(2000) * 1_000_000;
    let sock = UdpSocket::bind(bind).unwrap_or_else(|e| fail(&format!("bind {bind}: {e}")));
    set_buffer(&sock, libc::SO_RCVBUFFORCE, 16 << 20);
    sock.set_read_timeout(Some(Duration::from_millis(20)))
        .unwrap();
    // Tells a waiting harness that the socket is bound.
    eprintln!("listening");
    let start = mono_ns();
    let mut seen = vec![false; expect as usize];
    let mut arrivals: Vec<Arrival> = Vec::with_capacity(expect as usize);
    let mut buf = vec![0u8; 65536];
    let mut unique = 0u64;
    loop {
        let now = mono_ns();
        if unique >= expect || now - start >= timeout_ns {
            break;
        }
        if let Some(last) = arrivals.last() {
            if now - last.recv_ns >= idle_ns {
                break;
            }
        }
        let Ok(n) = sock.recv(&mut buf) else { continue };
        let recv_ns = mono_ns();
        if n < HEADER {
            continue;
        }
        let seq = u64::from_le_bytes(buf[..8].try_into().unwrap());
        let sent_ns = u64::from_le_bytes(buf[8..16].try_into().unwrap());
        if let Some(s) = seen.get_mut(seq as usize) {
            if !*s {
                *s = true;
                unique += 1;
            }
        }
        arrivals.push(Arrival {
            seq,
            sent_ns,
            recv_ns,
            len: n as u64,
        });
    }
    println!(
        "{}",
        summarise(&arrivals, &seen, expect, a.flag("--arrivals"))
    );
}

fn summarise(
    arr: &[Arrival],
    seen: &[bool],
    expect: u64,
    with_arrivals: bool,
) -> serde_json::Value {
    let received = seen.iter().filter(|&&s| s).count() as u64;
    let mut owd: Vec<f64> = arr
        .iter()
        .map(|x| (x.recv_ns as f64 - x.sent_ns as f64) / 1e6)
        .collect();
    owd.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let n = owd.len().max(1) as f64;
    let mean = owd.iter().sum::<f64>() / n;
    let sd = (owd.iter().map(|d| (d - mean).powi(2)).sum::<f64>() / n).sqrt();
    // Steady part: from the first arrival after the first 5 % to the last arrival.
    let steady = &arr[(arr.len() as f64 * 0.05) as usize..];
    let rate = if steady.len() >= 2 {
        let bytes: u64 = steady[1..].iter().map(|x| x.len + IP_UDP_OVERHEAD).sum();
        bytes as f64 / ((steady[steady.len() - 1].recv_ns - steady[0].recv_ns) as f64 / 1e9)
    } else {
        0.0
    };
    let mut max_seq = None;
    let mut reordered = 0u64;
    for x in arr {
        if max_seq.is_some_and(|m| x.seq < m) {
            reordered += 1;
        }
        max_seq = max_seq.max(Some(x.seq));
    }
    let lost = expect - received;
    let bursts = seen
        .iter()
        .enumerate()
        .filter(|&(i, &s)| !s && (i == 0 || seen[i - 1]))
        .count() as u64;
    let mut out = serde_json::json!({
        "expected": expect,
        "received": received,
        "lostFraction": lost as f64 / expect.max(1) as f64,
        "lossBursts": bursts,
        "meanLossBurst": if bursts > 0 { lost as f64 / bursts as f64 } else { 0.0 },
        "owdMedianMs": quantile(&owd, 0.5),
        "owdP10Ms": quantile(&owd, 0.1),
        "owdP90Ms": quantile(&owd, 0.9),
        "owdMeanMs": mean,
        "owdSdMs": sd,
        "owdMinMs": owd.first().copied().unwrap_or(f64::NAN),
        "owdMaxMs": owd.last().copied().unwrap_or(f64::NAN),
        "deliveredBytesPerSec": rate,
        "reordered": reordered,
    });
    if with_arrivals {
        out["arrivalsMonoMs"] = arr
            .iter()
            .map(|x| x.recv_ns as f64 / 1e6)
            .collect::<Vec<_>>()
            .into();
    }
    out
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mode = args.first().cloned().unwrap_or_default();
    let a = Args(args);
    match mode.as_str() {
        "send" => send(&a),
        "recv" => recv(&a),
        _ => fail("first argument must be send or recv"),
    }
}

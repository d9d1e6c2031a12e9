//! linkem: a user-space link emulator between two TUN devices in one network namespace.
//! Packets read from clientTun go through the `up` model and are written to serverTun; packets
//! read from serverTun go through `down` and are written to clientTun.
mod cadence;
mod config;
mod model;
mod pump;
mod tun;

use model::DirectionModel;
use pump::Pump;
use std::sync::Arc;
use std::time::Instant;

fn usage() -> ! {
    eprintln!("usage: linkem --config <file.json> [--no-pdeathsig]");
    std::process::exit(2)
}

fn fail(msg: &str) -> ! {
    eprintln!("linkem: {msg}");
    std::process::exit(2)
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
    // One thread per direction (see pump.rs); the two share the devices, each reading one.
    {
        let (c, s) = (client.clone(), server.clone());
        std::thread::spawn(move || Pump::new(up, c, s, start).run());
    }
    std::thread::spawn(move || Pump::new(down, server, client, start).run());
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

use super::*;

fn dir(json: &str) -> DirectionModel {
    let d: config::Direction = serde_json::from_str(json).unwrap();
    DirectionModel::new(&d, 7, 0).unwrap()
}

#[test]
fn constant_rate_serialises_fifo() {
    let mut m = dir(r#"{"rate":{"kind":"constant","bytesPerSecond":1000000},"delayMs":10}"#);
    for _ in 0..3 {
        assert_eq!(m.arrive(0.0, vec![0; 1000]), None);
    }
    m.advance(1e9);
    let times: Vec<f64> = m.delay_line.iter().map(|d| d.0).collect();
    assert_eq!(times, vec![11e6, 12e6, 13e6]);
}

#[test]
fn drop_tail_counts_queued_bytes() {
    let mut m =
        dir(r#"{"rate":{"kind":"constant","bytesPerSecond":1000},"delayMs":0,"queueBytes":2500}"#);
    assert_eq!(m.arrive(0.0, vec![0; 1000]), None);
    assert_eq!(m.arrive(0.0, vec![0; 1000]), None);
    assert_eq!(m.arrive(0.0, vec![0; 1000]), Some(Drop::Queue));
    // the first departs at 1 s, freeing room
    assert_eq!(m.arrive(1e9, vec![0; 1000]), None);
}

#[test]
fn trace_packets_span_opportunities() {
    let tr = Trace::parse("1\n").unwrap();
    assert_eq!(tr.first_at_or_after(0.0), 0);
    assert_eq!(tr.time_ns(0), 1e6);
    assert_eq!(tr.first_at_or_after(1.5e6), 1);
    let tr = Trace::parse("2\n2\n5\n").unwrap();
    assert_eq!(tr.time_ns(3), 7e6);
    assert_eq!(tr.first_at_or_after(5.5e6), 3);
}

#[test]
fn ge_loss_matches_stationary_rate_and_burst_length() {
    let mut m = dir(r#"{"rate":{"kind":"unlimited"},"delayMs":0,
               "loss":{"kind":"gilbertElliott","pGoodToBad":0.01,"pBadToGood":0.25,"lossGood":0,"lossBad":1}}"#);
    let n = 400_000;
    let mut got = Vec::with_capacity(n);
    for i in 0..n {
        let before = m.delay_line.len();
        m.arrive(i as f64, vec![0; 10]);
        m.advance(i as f64);
        got.push(m.delay_line.len() == before);
        m.delay_line.clear();
    }
    let lost = got.iter().filter(|&&l| l).count() as f64;
    let bursts = got.windows(2).filter(|w| w[1] && !w[0]).count() as f64;
    let rate = lost / n as f64;
    assert!((rate - 0.01 / 0.26).abs() < 0.004, "loss {rate}");
    assert!((lost / bursts - 4.0).abs() < 0.4, "burst {}", lost / bursts);
}

#[test]
fn schedule_drops_and_flushes() {
    let mut m = dir(
        r#"{"rate":{"kind":"constant","bytesPerSecond":1000},"delayMs":0,
               "schedule":{"loop":true,"segments":[{"durationMs":1000,"connected":true},{"durationMs":1000,"connected":false}]}}"#,
    );
    assert_eq!(m.arrive(0.0, vec![0; 600]), None); // departs at 0.6 s
    assert_eq!(m.arrive(0.1e9, vec![0; 600]), None); // would depart at 1.2 s: flushed at 1 s
    assert_eq!(m.arrive(1.5e9, vec![0; 10]), Some(Drop::Disconnected));
    assert_eq!(m.arrive(2.5e9, vec![0; 10]), None);
    m.advance(3e9);
    assert_eq!(m.delay_line.len(), 2);
    assert_eq!(m.stats.dropped_disconnected.load(Relaxed), 2);
}

#[test]
fn min_delay_is_over_all_segments() {
    let m = dir(r#"{"rate":{"kind":"unlimited"},"delayMs":20,
               "schedule":{"segments":[{"durationMs":10,"connected":true},{"durationMs":10,"connected":true,"delayMs":5}]}}"#);
    assert_eq!(m.min_delay_ns(), 5e6);
    assert_eq!(
        dir(r#"{"rate":{"kind":"unlimited"},"delayMs":20}"#).min_delay_ns(),
        20e6
    );
}

#[test]
fn jitter_never_reorders() {
    let mut m =
        dir(r#"{"rate":{"kind":"unlimited"},"delayMs":5,"jitter":{"kind":"normal","sdMs":10}}"#);
    for i in 0..1000 {
        m.arrive(i as f64 * 1e5, vec![0; 10]);
    }
    m.advance(1e12);
    let t: Vec<f64> = m.delay_line.iter().map(|d| d.0).collect();
    assert!(t.windows(2).all(|w| w[0] <= w[1]));
    assert!(t.iter().enumerate().all(|(i, &d)| d >= i as f64 * 1e5));
}

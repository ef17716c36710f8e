//! The encode path against its physical floor.
//!
//! kprod: records handed to the real `Producer` (`send`), batched, sequenced, sealed with
//! their CRC, wrapped into Produce request frames (`poll_output`), and acknowledged
//! (`handle_read` of the answers, which the bench builds outside the timed region). Floor: copying the same
//! value bytes once into a buffer and computing CRC-32C over them, the least any producer must
//! do. Both run in the same process, alternating, and the ratio of their throughputs is
//! printed. Run with `cargo bench -p kprod-core --bench encode`; under `cargo test` it runs
//! one small round as a smoke test.
//!
//! Instruction counts (stable on a loaded machine, unlike wall-clock): with
//! `KPROD_BENCH_CALLGRIND=kprod` (or `=floor`) and `KPROD_BENCH_VALUE=<bytes>` the binary
//! runs one warm-up round and then one measured round of `KPROD_BENCH_RECORDS` (default
//! 20,000) records through only that side, in `measured_kprod` (or `measured_floor`). Run
//! it under `valgrind --tool=callgrind --collect-atstart=no
//! --toggle-collect='*measured_kprod' --toggle-collect='*untimed'` (the bench's own broker
//! work inside the measured round runs in `untimed`, which toggles collection off again), or
//! with `--toggle-collect='*measured_floor'` for the floor; the ratio of the two totals
//! (same records, same bytes) is the floor's share. `scripts/encode-callgrind.sh` does both.

#[path = "support/mod.rs"]
mod support;

use std::time::{Duration, Instant};

use bytes::BytesMut;
use support::{floor, records, Rig};

/// Records handed to the producer between two drains: four full batches of `batch_size` at
/// `value_size` (a batch's 61-byte header, and each record its value and about 10 bytes of
/// framing), as a busy producer hands its batches over full. (Until 2026-12-05 this was 64
/// records at every size: four batches at 1 KiB, but less than half of one at 100 B, so
/// every 100 B batch left with 64 records instead of about 148, paying its costs over fewer
/// records than in steady state.)
fn window(batch_size: usize, value_size: usize) -> usize {
    4 * (batch_size.saturating_sub(61) / (value_size + 10)).max(1)
}

fn main() {
    if let Ok(side) = std::env::var("KPROD_BENCH_CALLGRIND") {
        return callgrind(&side);
    }
    let full = std::env::args().any(|a| a == "--bench");
    let (n, rounds) = if full { (20_000, 15) } else { (200, 1) };
    println!(
        "encode path vs copy+CRC-32C floor ({n} records per round, {rounds} rounds, best round)"
    );
    println!(
        "{:>8} {:>14} {:>12} {:>14} {:>12} {:>8}",
        "value", "kprod rec/s", "kprod MB/s", "floor rec/s", "floor MB/s", "ratio"
    );
    for value_size in [100usize, 1024] {
        // Kafka's default batch.size.
        let batch_size = env("KPROD_BENCH_BATCH", 16 * 1024);
        let mut rig = Rig::new(batch_size);
        let window = window(batch_size, value_size);
        let mut buf = BytesMut::with_capacity(n * value_size);
        let (mut best_k, mut best_f) = (Duration::MAX, Duration::MAX);
        for _ in 0..rounds {
            let batch = records(n, value_size);
            let same = records(n, value_size);
            let (spent, sent) = rig.run(batch, window);
            best_k = best_k.min(spent);
            assert!(sent > n * value_size, "requests must carry every value");
            if std::env::var_os("KPROD_BENCH_ONLY_KPROD").is_some() {
                continue;
            }
            let t = Instant::now();
            let crc = floor(same, &mut buf);
            best_f = best_f.min(t.elapsed());
            std::hint::black_box(crc);
        }
        let per_s = |d: Duration| n as f64 / d.as_secs_f64();
        let mb_s = |d: Duration| (n * value_size) as f64 / d.as_secs_f64() / 1e6;
        println!(
            "{:>7}B {:>14.0} {:>12.1} {:>14.0} {:>12.1} {:>7.1}%",
            value_size,
            per_s(best_k),
            mb_s(best_k),
            per_s(best_f),
            mb_s(best_f),
            100.0 * best_f.as_secs_f64() / best_k.as_secs_f64()
        );
        assert_eq!(
            rig.producer.pending_records(),
            0,
            "every record acknowledged"
        );
    }
}

/// One measured round of one side, for callgrind (see the module documentation).
/// The number in environment variable `k`, else `d`.
fn env(k: &str, d: usize) -> usize {
    std::env::var(k)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(d)
}

fn callgrind(side: &str) {
    let n = env("KPROD_BENCH_RECORDS", 20_000);
    let value_size = env("KPROD_BENCH_VALUE", 100);
    let batch_size = env("KPROD_BENCH_BATCH", 16 * 1024);
    let mut rig = Rig::new(batch_size);
    let window = window(batch_size, value_size);
    let mut buf = BytesMut::with_capacity(n * value_size);
    match side {
        "kprod" => {
            rig.run(records(n, value_size), window);
            let batch = records(n, value_size);
            let sent = measured_kprod(&mut rig, batch, window);
            assert!(sent > n * value_size, "requests must carry every value");
            assert_eq!(
                rig.producer.pending_records(),
                0,
                "every record acknowledged"
            );
        }
        "floor" => {
            std::hint::black_box(floor(records(n, value_size), &mut buf));
            let crc = measured_floor(records(n, value_size), &mut buf);
            std::hint::black_box(crc);
        }
        _ => panic!("KPROD_BENCH_CALLGRIND is kprod or floor"),
    }
    println!("{side}: {n} records of {value_size} B");
}

#[inline(never)]
fn measured_floor(records: Vec<support::Record>, buf: &mut BytesMut) -> u32 {
    floor(records, buf)
}

/// [`Rig::run`]'s loop, with the bench's own work (assembling frames, answering them) in
/// [`untimed`].
#[inline(never)]
fn measured_kprod(rig: &mut Rig, records: Vec<support::Record>, window: usize) -> usize {
    let conn = rig.conn.expect("connected");
    let mut bytes = 0;
    let mut records = records.into_iter().peekable();
    while records.peek().is_some() || rig.producer.pending_records() > 0 {
        for r in records.by_ref().take(window) {
            rig.producer.send(rig.now, r).unwrap();
        }
        rig.producer.flush(rig.now);
        bytes += rig.drain_collect();
        let mut bufs = untimed(rig);
        assert!(
            !bufs.is_empty() || records.peek().is_none(),
            "producer stalled"
        );
        for buf in &mut bufs {
            rig.producer.handle_read(rig.now, conn, buf);
            bytes += rig.drain_collect();
        }
        untimed_drop(bufs);
    }
    bytes
}

/// The broker's answers to every frame sent so far, as fresh read buffers.
#[inline(never)]
fn untimed(rig: &mut Rig) -> Vec<BytesMut> {
    let frames = rig.take_frames();
    let answers: Vec<_> = frames
        .iter()
        .map(|f| support::respond(f, &mut rig.next_offset))
        .collect();
    answers.iter().map(|a| rig.received(a)).collect()
}

#[inline(never)]
fn untimed_drop(bufs: Vec<BytesMut>) {
    drop(bufs);
}

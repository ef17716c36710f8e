//! The encode path against its physical floor.
//!
//! kprod: records handed to the real `Producer` (`send`), batched, sequenced, sealed with
//! their CRC, wrapped into Produce request frames (`poll_output`), and acknowledged
//! (`handle_read` of the answers, which the bench builds outside the timed region). Floor: copying the same
//! value bytes once into a buffer and computing CRC-32C over them, the least any producer must
//! do. Both run in the same process, alternating, and the ratio of their throughputs is
//! printed. Run with `cargo bench -p kprod-core --bench encode`; under `cargo test` it runs
//! one small round as a smoke test.

#[path = "support/mod.rs"]
mod support;

use std::time::{Duration, Instant};

use bytes::BytesMut;
use support::{floor, records, Rig};

/// Records handed to the producer between two drains: about four default-size batches.
const WINDOW: usize = 64;

fn main() {
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
        let mut rig = Rig::new(
            std::env::var("KPROD_BENCH_BATCH")
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(16 * 1024),
        );
        let mut buf = BytesMut::with_capacity(n * value_size);
        let (mut best_k, mut best_f) = (Duration::MAX, Duration::MAX);
        for _ in 0..rounds {
            let batch = records(n, value_size);
            let same = records(n, value_size);
            let (spent, sent) = rig.run(batch, WINDOW);
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

//! Heap allocations per record on the encode path, in steady state.
//!
//! A counting global allocator (`stats_alloc`, a wrapper over the system allocator) counts
//! every allocation made while records go through the real `Producer`: `send`, batching,
//! sequencing, sealing, Produce request framing, and the acknowledgements. The records
//! themselves are built before counting starts (they are the application's allocations).
//! Run with `cargo bench -p kprod-core --bench allocs`; under `cargo test` it runs one small
//! round as a smoke test.

#[path = "support/mod.rs"]
mod support;

use std::alloc::System;

use stats_alloc::{StatsAlloc, INSTRUMENTED_SYSTEM};
use support::{records, Rig};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

const WINDOW: usize = 64;

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let n = if full { 100_000 } else { 2_000 };
    println!("allocations on the encode path, steady state ({n} records after a warm-up round)");
    println!(
        "{:>8} {:>10} {:>14} {:>14} {:>12}",
        "value", "batches", "allocations", "per record", "per batch"
    );
    for value_size in [100usize, 1024] {
        let mut rig = Rig::new(16 * 1024);
        // Warm-up: let every buffer and queue reach its steady size.
        rig.run(records(n, value_size), WINDOW);
        let batch = records(n, value_size);
        let acked_before = rig.batches_acked;
        rig.chunks.reserve(4 * n);
        let (_, bytes, allocations) = rig.run_metered(batch, WINDOW, || {
            let s = GLOBAL.stats();
            s.allocations + s.reallocations
        });
        assert!(bytes > n * value_size, "every value went out");
        let batches = (rig.batches_acked - acked_before).max(1);
        println!(
            "{:>7}B {:>10} {:>14} {:>14.3} {:>12.1}",
            value_size,
            batches,
            allocations,
            allocations as f64 / n as f64,
            allocations as f64 / batches as f64,
        );
    }
}

//! The e2e bench's franz-go client (`tests/go/franz-bench`, `scripts/install-franz-bench.sh`)
//! against a real Tansu: it speaks the bench protocol, and every record it reports
//! acknowledged is in the log once, in send order, as read back by the independent reader. The
//! bench's comparison with franz-go means something only if this holds.

use std::time::Duration;

use kprod_tests::franz;
use kprod_tests::javaref::{BenchPlan, Flags};
use kprod_tests::reader::read_topic;
use kprod_tests::Tansu;

#[test]
fn franz_bench_delivers_every_record_once_in_order_on_tansu() {
    const TOPIC: &str = "franz-bench";
    const RECORDS: u64 = 4_000;
    const PARTITIONS: i32 = 4;
    let tansu = Tansu::start();
    tansu.create_topic(TOPIC, PARTITIONS as u32);
    let plan = BenchPlan {
        size: 100,
        partitions: PARTITIONS,
        keyless: false,
        producer: Flags {
            linger_ms: Some(5),
            batch_size: Some(16_384),
            ..Flags::default()
        },
    };
    let bootstrap = tansu.addr().to_string();
    let mut bench = franz::start_bench(&bootstrap, &plan, Some("3.9"));
    bench.begin(TOPIC, RECORDS, Duration::from_secs(90));
    let run = bench
        .end(Duration::from_secs(120))
        .unwrap_or_else(|e| panic!("franz-bench's BENCH line: {e}"));
    run.check().unwrap_or_else(|e| panic!("franz-bench: {e}"));
    assert_eq!(run.records, RECORDS, "records sent");
    assert!(run.seconds > 0.0, "a timed window: {run:?}");
    assert!(run.cpu_seconds > 0.0, "CPU measured over it: {run:?}");
    let finished = bench.finish(Duration::from_secs(30));
    assert!(
        finished.status.success(),
        "{}",
        finished.describe("franz-bench")
    );

    let log = read_topic(&bootstrap, TOPIC, PARTITIONS, Duration::from_secs(60))
        .unwrap_or_else(|e| panic!("the independent reader failed: {e}"));
    for (&p, records) in &log {
        // Partition 0 starts with the warm-up record (its value is the filler alone).
        let skip = usize::from(p == 0);
        let counters: Vec<u64> = records[skip..]
            .iter()
            .map(|r| {
                let v = r.value.as_deref().expect("a value");
                assert_eq!(
                    v.len(),
                    100,
                    "partition {p} offset {}: value size",
                    r.offset
                );
                u64::from_be_bytes(v[..8].try_into().expect("8 bytes"))
            })
            .collect();
        let expected: Vec<u64> = (p as u64..RECORDS).step_by(PARTITIONS as usize).collect();
        assert_eq!(
            counters, expected,
            "partition {p}: every record once, in send order"
        );
    }
}

//! Reproductions of kprod-core bugs found by the fault scenarios and the fuzzer of issue 6,
//! kept as regression tests: each asserts the correct behaviour (each failed until its bug
//! was fixed). They drive the real `Producer` against the broker model with
//! `kprod_tests::fuzz::Harness`, in virtual time, deterministically.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Duration;

use kprod_core::protocol::metadata::MetadataRequest;
use kprod_core::protocol::produce::ProduceRequest;
use kprod_core::protocol::{api_key, decode_response, encode_response};
use kprod_core::{ProducerConfig, Record, RecordId};
use kprod_model::broker::{BrokerMode, Cluster};
use kprod_tests::fuzz::{Harness, Options, Outcome, Req, Rng};

fn harness(partitions: i32, cfg: ProducerConfig) -> Harness {
    let mut c = Cluster::new(BrokerMode::Lenient, &["b1:1", "b2:2"]);
    c.create_topic("t0", partitions, 1);
    let options = Options {
        avoid_known_bugs: false,
    };
    Harness::new(c, cfg, Rng::new(1), options)
}

fn config() -> ProducerConfig {
    ProducerConfig {
        bootstrap_servers: vec!["unused:1".into()],
        linger: Duration::from_millis(1),
        ..Default::default()
    }
}

/// Rounds of faithful traffic, each followed by `rewrite` of the queued responses, at one
/// instant of virtual time.
fn rounds(h: &mut Harness, n: usize, mut rewrite: impl FnMut(&Req, bytes::Bytes) -> bytes::Bytes) {
    for _ in 0..n {
        h.connect_and_process();
        h.rewrite_responses(&mut rewrite);
        h.deliver_all();
    }
}

/// Runs faithfully, jumping the clock to the producer's deadlines, until `id` resolved or
/// `limit` of virtual time passed.
fn run_until(h: &mut Harness, id: RecordId, limit: Duration) -> Option<Outcome> {
    let end = h.now + limit;
    while h.now < end {
        if let Some(o) = h.outcomes.get(&id) {
            return Some(*o);
        }
        if !h.settle_round() {
            h.jump();
        }
    }
    h.outcomes.get(&id).copied()
}

/// Bug 1 (liveness). A partition's leader becomes unreachable (connects refused) and the
/// leadership moves to another broker. kprod never asks for fresh metadata because of failed
/// connects: it retries the dead leader until metadata.max.age.ms (5 min by default), so with
/// the default delivery.timeout.ms (2 min) the records fail with DeliveryTimeout instead of
/// going to the new leader. Also seen against librdkafka's mock cluster
/// (`faults_mock::leader_down_and_moved`). The Java client requests a metadata update on every
/// failed connect or disconnect (`NetworkClient` → `handleServerDisconnect`).
#[test]
fn an_unreachable_leader_makes_the_producer_refresh_metadata() {
    let mut h = harness(1, config());
    let first = h.send(Record::new("t0", "first")).expect("accepted");
    assert!(matches!(
        run_until(&mut h, first, Duration::from_secs(5)),
        Some(Outcome::Delivered(0, Some(0)))
    ));
    // Node 1 goes away and node 2 takes over the partition.
    h.refuse.insert(1);
    for c in h.conns() {
        h.disconnect(c);
    }
    h.cluster.move_leader("t0", 0, 2);
    let second = h.send(Record::new("t0", "second")).expect("accepted");
    let outcome = run_until(&mut h, second, Duration::from_secs(150));
    assert_eq!(
        outcome,
        Some(Outcome::Delivered(0, Some(1))),
        "delivered to the new leader within delivery.timeout.ms"
    );
}

/// Bug 2 (request storm, low severity). A Metadata response without errors that leaves out a
/// partition below the highest one it lists (a malformed response: Kafka lists every
/// partition) leaves that partition without a leader. `on_metadata` sees nothing incomplete,
/// so it sets no retry time, and `connect_to_leaders` then finds a partition with records and
/// no leader and asks for metadata again at once: one Metadata request per response, back to
/// back, without `retry.backoff.ms`, until the records time out. Found by the fuzzer
/// (`metadata_storms` in its report: hostile runs only).
#[test]
fn metadata_leaving_a_partition_without_leader_is_retried_with_backoff() {
    let mut h = harness(
        4,
        ProducerConfig {
            retry_backoff: Duration::from_millis(100),
            ..config()
        },
    );
    h.send(Record::new("t0", "waits").with_partition(2))
        .expect("accepted");
    rounds(&mut h, 50, |req, frame| {
        if req.api_key != api_key::METADATA {
            return frame;
        }
        let (_, mut m) =
            decode_response::<MetadataRequest>(req.version, frame.slice(4..)).expect("decodes");
        for t in &mut m.topics {
            t.partitions.retain(|p| p.partition_index != 2);
        }
        encode_response::<MetadataRequest>(&m, req.version, req.correlation_id)
    });
    assert!(
        h.max_metadata_per_backoff <= 2,
        "{} Metadata requests within one retry.backoff.ms (no time passed)",
        h.max_metadata_per_backoff
    );
}

fn rss_kib() -> u64 {
    // A measurement is required: 0 would make the memory bound pass without measuring.
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|n| n.parse().ok())
        .expect("VmRSS in /proc/self/status")
}

/// Rewrites queued Metadata responses so that partition 2 of every topic claims `index`.
fn claim_partition_index(index: i32) -> impl FnMut(&Req, bytes::Bytes) -> bytes::Bytes {
    move |req, frame| {
        if req.api_key != api_key::METADATA {
            return frame;
        }
        let (_, mut m) =
            decode_response::<MetadataRequest>(req.version, frame.slice(4..)).expect("decodes");
        for p in m.topics.iter_mut().flat_map(|t| &mut t.partitions) {
            if p.partition_index == 2 {
                p.partition_index = index;
            }
        }
        encode_response::<MetadataRequest>(&m, req.version, req.correlation_id)
    }
}

/// Bug 3 (memory). `on_metadata` grows a topic's partition list to the largest
/// `partition_index + 1` a Metadata response claims. One response claiming partition
/// 1,000,000 costs about 120 MB; one bit flip in the top byte of a partition index
/// (`0x40000000`) asks for about 130 GB and aborts the process. A partition index beyond
/// what the topic can have should be refused (or the response treated as corrupt).
#[test]
fn a_huge_partition_index_in_metadata_does_not_allocate() {
    let mut h = harness(3, config());
    h.send(Record::new("t0", "v").with_partition(0))
        .expect("accepted");
    let before = rss_kib();
    rounds(&mut h, 5, claim_partition_index(1_000_000));
    let grown_mib = rss_kib().saturating_sub(before) / 1024;
    assert!(
        grown_mib < 32,
        "one Metadata response grew the process by {grown_mib} MiB"
    );
}

/// Bug 3, second face: `partition_index + 1` overflows for `i32::MAX` (a panic in debug
/// builds; in release builds it wraps and the partition is ignored).
#[test]
fn partition_index_i32_max_in_metadata_does_not_panic() {
    let mut h = harness(3, config());
    h.send(Record::new("t0", "v").with_partition(0))
        .expect("accepted");
    let r = catch_unwind(AssertUnwindSafe(|| {
        rounds(&mut h, 5, claim_partition_index(i32::MAX));
    }));
    assert!(r.is_ok(), "the producer panicked on a Metadata response");
}

/// Bug 4 (arithmetic overflow). A Produce response acknowledging a 3-record batch at base
/// offset `i64::MAX - 1`: `ack_batch` computes `base + count - 1` and `base + k` unchecked,
/// which panics in debug builds ("attempt to add with overflow", producer/outcomes.rs `ack_batch`)
/// and reports wrapped, negative offsets in release builds. Such a response is corrupt; it
/// should be refused like an undecodable one, or at least not crash the producer.
#[test]
fn an_acknowledgement_at_the_top_of_the_offset_range_does_not_panic() {
    let mut h = harness(1, config());
    let ids: Vec<RecordId> = (0..3)
        .map(|i| {
            h.send(Record::new("t0", format!("v{i}")).with_partition(0))
                .expect("accepted")
        })
        .collect();
    h.advance(Duration::from_millis(5));
    let r = catch_unwind(AssertUnwindSafe(|| {
        for _ in 0..10 {
            h.connect_and_process();
            h.rewrite_responses(|req, frame| {
                if req.api_key != api_key::PRODUCE {
                    return frame;
                }
                let (_, mut resp) =
                    decode_response::<ProduceRequest>(req.version, frame.slice(4..))
                        .expect("decodes");
                for p in resp
                    .responses
                    .iter_mut()
                    .flat_map(|t| &mut t.partition_responses)
                {
                    p.base_offset = i64::MAX - 1;
                }
                encode_response::<ProduceRequest>(&resp, req.version, req.correlation_id)
            });
            h.deliver_all();
            h.advance(Duration::from_millis(5));
        }
    }));
    assert!(r.is_ok(), "the producer panicked on a Produce response");
    // The corrupt answers are not believed (no outcome from them, or one with a real
    // offset); answered faithfully again, every record is delivered at its true offset.
    for (i, id) in ids.into_iter().enumerate() {
        if let Some(Outcome::Delivered(_, Some(o))) = h.outcomes.get(&id) {
            assert!(*o >= 0, "record {id:?} reported at offset {o}");
        }
        let o = run_until(&mut h, id, Duration::from_secs(30));
        assert_eq!(
            o,
            Some(Outcome::Delivered(0, Some(i as i64))),
            "record {id:?}"
        );
    }
}

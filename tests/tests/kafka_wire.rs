//! kprod-core's codec against Apache Kafka 4.4.0 on the raw wire: what the real broker answers
//! where idempotence lives. Each finding is asserted, and printed, and the differences from
//! Tansu and from the broker model are written down in the README ("Apache Kafka's answers").
//!
//! Needs `scripts/install-kafka.sh` and Java 17+. One single-node cluster per test.

use std::time::{Duration, Instant};

use kprod_core::protocol::init_producer_id::InitProducerIdResponse;
use kprod_core::protocol::produce::PartitionProduceResponse;
use kprod_core::protocol::{api_key, ErrorCode};
use kprod_tests::{
    numbered_batch as batch, produce_request, Kafka, KafkaOptions, WireClient, WireVersions,
};

const TOPIC: &str = "kprod-wire";

/// Negotiated versions.
/// kprod's newest versions against Kafka's advertised ranges (printed for the record).
fn negotiate_versions(c: &mut WireClient) -> WireVersions {
    let v = c.negotiate();
    println!(
        "Kafka advertises Produce {:?}, Metadata {:?}, InitProducerId {:?}, ApiVersions {:?}",
        v.range(api_key::PRODUCE),
        v.range(api_key::METADATA),
        v.range(api_key::INIT_PRODUCER_ID),
        v.range(api_key::API_VERSIONS)
    );
    assert_eq!(
        (v.produce, v.metadata, v.init_producer_id),
        (12, 12, 5),
        "negotiated Produce, Metadata, InitProducerId: kprod's newest of each"
    );
    v
}

fn code(p: &PartitionProduceResponse) -> ErrorCode {
    ErrorCode::from_i16(p.error_code)
}

fn init_pid(c: &mut WireClient, v: &WireVersions, pid: i64, epoch: i16) -> InitProducerIdResponse {
    c.init_producer_id(v.init_producer_id, pid, epoch)
}

fn connect(kafka: &Kafka) -> (WireClient, WireVersions) {
    let mut c = WireClient::connect(kafka.node_addr(0)).expect("connect to Kafka");
    let v = negotiate_versions(&mut c);
    (c, v)
}

/// Duplicates, gaps, the 5-batch window and the KIP-360 bump.
#[test]
fn idempotence_rules_of_apache_kafka() {
    let started = Instant::now();
    let kafka = Kafka::start(1);
    let ready = started.elapsed();
    kafka.create_topic(TOPIC, 2, 1, None);
    let (mut c, v) = connect(&kafka);

    let r = init_pid(&mut c, &v, -1, -1);
    assert_eq!(ErrorCode::from_i16(r.error_code), ErrorCode::None, "{r:?}");
    assert!(r.producer_id >= 0, "{r:?}");
    assert_eq!(r.producer_epoch, 0, "{r:?}");
    let (pid, epoch) = (r.producer_id, r.producer_epoch);

    // Sequence 0..2 at offset 0.
    let first = produce_request(TOPIC, 0, batch(pid, epoch, 0, 3));
    let (frame, corr) = c.encode(&first, v.produce);
    let p = c.produce_frame(TOPIC, &frame, corr, v.produce, 0);
    assert_eq!((code(&p), p.base_offset), (ErrorCode::None, 0), "{p:?}");

    // The exact resend: NONE with the ORIGINAL offset (Tansu answers 46 with -1).
    let p = c.produce_frame(TOPIC, &frame, corr, v.produce, 0);
    assert_eq!((code(&p), p.base_offset), (ErrorCode::None, 0), "{p:?}");
    println!("in-window duplicate: {p:?}");

    // A gap (expected 3, sent 5): 45 OUT_OF_ORDER_SEQUENCE_NUMBER, nothing appended.
    let p = c.produce(TOPIC, v.produce, 0, batch(pid, epoch, 5, 2));
    assert_eq!(code(&p), ErrorCode::OutOfOrderSequenceNumber, "{p:?}");
    println!("sequence gap: {p:?}");

    // Six more batches in order (3..8): offsets follow; the dedup window holds the last 5.
    let mut frames = Vec::new();
    for k in 0..6 {
        let seq = 3 + k;
        let (frame, corr) = c.encode(
            &produce_request(TOPIC, 0, batch(pid, epoch, seq, 1)),
            v.produce,
        );
        let p = c.produce_frame(TOPIC, &frame, corr, v.produce, 0);
        assert_eq!(
            (code(&p), p.base_offset),
            (ErrorCode::None, i64::from(seq)),
            "{p:?}"
        );
        frames.push((frame, corr, seq));
    }
    // The last five batches are each answered NONE with their own offsets.
    for (frame, corr, seq) in &frames[1..] {
        let p = c.produce_frame(TOPIC, frame, *corr, v.produce, 0);
        assert_eq!(
            (code(&p), p.base_offset),
            (ErrorCode::None, i64::from(*seq)),
            "duplicate of seq {seq} inside the window: {p:?}"
        );
    }
    // The sixth-newest fell out of the window: OUT_OF_ORDER_SEQUENCE_NUMBER, not a duplicate.
    let (frame, corr, seq) = &frames[0];
    let p = c.produce_frame(TOPIC, frame, *corr, v.produce, 0);
    assert_eq!(
        code(&p),
        ErrorCode::OutOfOrderSequenceNumber,
        "duplicate of seq {seq} outside the 5-batch window: {p:?}"
    );
    println!("duplicate outside the window: {p:?}");
    // And so is the very first batch.
    let p = c.produce(TOPIC, v.produce, 0, batch(pid, epoch, 0, 3));
    assert_eq!(code(&p), ErrorCode::OutOfOrderSequenceNumber, "{p:?}");

    // KIP-360 for an idempotent producer is a CLIENT-side bump: the next epoch, sequences
    // from 0, on a partition written under the old epoch. Kafka accepts it (Tansu answers
    // 90 PRODUCER_FENCED).
    let bumped = epoch + 1;
    let p = c.produce(TOPIC, v.produce, 0, batch(pid, bumped, 0, 2));
    assert_eq!((code(&p), p.base_offset), (ErrorCode::None, 9), "{p:?}");
    println!("client-side bump to epoch {bumped}: {p:?}");
    // A new epoch on a known producer must start at 0.
    let p = c.produce(TOPIC, v.produce, 0, batch(pid, bumped + 1, 4, 1));
    assert_eq!(code(&p), ErrorCode::OutOfOrderSequenceNumber, "{p:?}");
    // The old epoch is fenced.
    let p = c.produce(TOPIC, v.produce, 0, batch(pid, epoch, 9, 1));
    println!("old epoch after the bump: {p:?}");
    assert_eq!(code(&p), ErrorCode::InvalidProducerEpoch, "{p:?}");
    // InitProducerId with (pid, epoch) but no transactional id is not a bump on Kafka: it
    // hands out a fresh producer id at epoch 0 (the bump through InitProducerId is for
    // transactional producers).
    let r = init_pid(&mut c, &v, pid, bumped);
    println!("InitProducerId(pid, epoch) without transactional id: {r:?}");
    assert_eq!(ErrorCode::from_i16(r.error_code), ErrorCode::None, "{r:?}");
    assert_ne!(r.producer_id, pid, "{r:?}");
    assert_eq!(r.producer_epoch, 0, "{r:?}");

    // A producer id the broker holds no state for, first sequence not 0: Kafka 4.4 accepts
    // it (no known epoch = no sequence check; it never answers UNKNOWN_PRODUCER_ID).
    let p = c.produce(TOPIC, v.produce, 1, batch(pid + 1000, 0, 7, 1));
    println!("unknown producer id, sequence 7: {p:?}");
    assert_eq!((code(&p), p.base_offset), (ErrorCode::None, 0), "{p:?}");

    println!(
        "idempotence_rules_of_apache_kafka: broker ready after {ready:.2?}, test took {:.2?}",
        started.elapsed()
    );
}

/// Producer state expiry (`producer.id.expiration.ms`): once the broker has forgotten an idle
/// producer, what does it answer to the producer's next batch? This is KAFKA-15591's ground.
#[test]
fn producer_state_expiry_of_apache_kafka() {
    let kafka = Kafka::start_with(
        KafkaOptions::new(1)
            .set("producer.id.expiration.ms", 1500)
            .set("producer.id.expiration.check.interval.ms", 200),
    );
    kafka.create_topic(TOPIC, 1, 1, None);
    let (mut c, v) = connect(&kafka);
    let r = init_pid(&mut c, &v, -1, -1);
    let (pid, epoch) = (r.producer_id, r.producer_epoch);
    let p = c.produce(TOPIC, v.produce, 0, batch(pid, epoch, 0, 2));
    assert_eq!((code(&p), p.base_offset), (ErrorCode::None, 0), "{p:?}");
    // Kafka times the expiry from the last batch it appended (its timestamp, set when it is
    // built below; a duplicate does not refresh it): the idle time starts before it.
    let idle = Instant::now();
    let p = c.produce(TOPIC, v.produce, 0, batch(pid, epoch, 2, 1));
    assert_eq!((code(&p), p.base_offset), (ErrorCode::None, 2), "{p:?}");

    // The last batch again, at once: a duplicate, answered with its offset.
    let p = c.produce(TOPIC, v.produce, 0, batch(pid, epoch, 2, 1));
    assert_eq!((code(&p), p.base_offset), (ErrorCode::None, 2), "{p:?}");

    // Idle past the expiry; the broker drops the state on its next check. Poll: resend the
    // last batch until it is no longer answered as a duplicate (the state is gone then).
    let deadline = idle + Duration::from_secs(30);
    let after = loop {
        std::thread::sleep(Duration::from_millis(100));
        let p = c.produce(TOPIC, v.produce, 0, batch(pid, epoch, 2, 1));
        if !(code(&p) == ErrorCode::None && p.base_offset == 2) {
            break p;
        }
        assert!(
            Instant::now() < deadline,
            "Kafka kept producer {pid}'s state for 30 s despite producer.id.expiration.ms=1500"
        );
    };
    println!(
        "after {:.2?} idle, the resend of seq 2: {after:?}",
        idle.elapsed()
    );
    // Written down: once it has forgotten a producer, Kafka accepts ANY sequence from it (no
    // epoch known = no check), so the retry of an already written batch is appended a second
    // time. This is the broker model's "Lenient" mode, and why kprod never retries a batch
    // across an idle period longer than the broker's expiry.
    assert!(
        idle.elapsed() >= Duration::from_millis(1000),
        "the state went before the expiry time"
    );
    assert_eq!(
        (code(&after), after.base_offset),
        (ErrorCode::None, 3),
        "an expired producer's old sequence is appended again: {after:?}"
    );
    // The state restarted from that batch: the next sequence follows it.
    let p = c.produce(TOPIC, v.produce, 0, batch(pid, epoch, 3, 1));
    assert_eq!((code(&p), p.base_offset), (ErrorCode::None, 4), "{p:?}");
}

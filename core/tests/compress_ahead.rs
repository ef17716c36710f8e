//! Compression ahead of the seal (`Producer::set_compress_ahead`): a driver compresses closed
//! batches away from the producer, and what goes on the wire does not change.

#![cfg(feature = "gzip")]

mod harness;

use bytes::Bytes;
use harness::{deliveries, support::respond, Harness, TOPIC};
use kprod_core::{Compression, CompressionType, Record};

const BATCH: usize = 2_048;

fn gzip(ahead: bool) -> Harness {
    gzip_within(ahead, kprod_core::ProducerConfig::default().buffer_memory)
}

/// Gzip, batches of [`BATCH`], lingering; `memory` of `buffer.memory`. Not connected yet.
fn gzip_harness(ahead: bool, memory: usize) -> Harness {
    let mut h = Harness::new(|c| {
        c.batch_size = BATCH;
        c.buffer_memory = memory;
        c.max_request_size = memory.min(c.max_request_size);
        c.linger = std::time::Duration::from_secs(60);
        c.compression = Compression::new(CompressionType::Gzip);
    });
    h.p.set_compress_ahead(ahead);
    h
}

/// [`gzip_harness`], ready (metadata and a producer id, one record delivered).
fn gzip_within(ahead: bool, memory: usize) -> Harness {
    let mut h = gzip_harness(ahead, memory);
    // Ready: metadata and a producer id, and one record delivered.
    h.p.send(h.now, record(0)).unwrap();
    h.p.flush(h.now);
    let f = h.answer_until_produce(&[]).expect("the first Produce");
    let a = respond(&f, &mut h.next_offset);
    h.feed(a);
    assert_eq!(deliveries(&h.events).len(), 1);
    h
}

/// Text-like records, so that gzip has something to do.
fn record(i: usize) -> Record {
    let value = format!(
        "{{\"id\":{i},\"user\":\"user-{}\",\"event\":\"click\"}}",
        i % 37
    );
    Record::new(TOPIC, value)
        .with_key(format!("k{i}"))
        .with_partition(0)
}

/// Every Produce request until nothing is left, each answered healthily.
fn produce_all(h: &mut Harness) -> Vec<Bytes> {
    h.p.flush(h.now);
    let mut frames = Vec::new();
    while let Some(f) = h.answer_until_produce(&[]) {
        let a = respond(&f, &mut h.next_offset);
        frames.push(f);
        h.feed(a);
    }
    frames
}

/// The same records through a producer whose closed batches were compressed ahead and
/// through one that compressed every batch at its seal: the same Produce requests, byte for
/// byte, and the same deliveries.
#[test]
fn batches_compressed_ahead_go_out_as_sealed_ones() {
    let (mut plain, mut ahead) = (gzip(false), gzip(true));
    for h in [&mut plain, &mut ahead] {
        for i in 1..400 {
            h.p.send(h.now, record(i)).unwrap();
        }
    }
    assert!(plain.p.poll_compression().is_none(), "off: nothing listed");
    let mut tasks = Vec::new();
    while let Some(t) = ahead.p.poll_compression() {
        assert!(!t.is_empty());
        tasks.push(t);
    }
    assert!(tasks.len() >= 5, "closed batches: {} tasks", tasks.len());
    for t in tasks.clone() {
        assert!(ahead.p.take_compressed(t.run()), "kept for its seal");
    }
    // Handed back twice: the batch holds its compressed records already.
    assert!(!ahead.p.take_compressed(tasks[0].clone().run()));
    let (a, b) = (produce_all(&mut plain), produce_all(&mut ahead));
    assert!(a.len() > tasks.len(), "{} requests", a.len());
    assert_eq!(a, b, "the same requests on the wire");
    assert_eq!(deliveries(&plain.events), deliveries(&ahead.events));
    assert_eq!(deliveries(&ahead.events).len(), 400);
    assert_eq!(plain.p.metrics().batches_compressed_ahead, 0);
    assert_eq!(
        ahead.p.metrics().batches_compressed_ahead,
        tasks.len() as u64
    );
}

/// A result handed back after its batch was sealed (it went out meanwhile) is not kept, and
/// the batch went out compressed by its seal all the same.
#[test]
fn a_result_for_a_batch_sealed_meanwhile_is_dropped() {
    let mut h = gzip(true);
    for i in 1..60 {
        h.p.send(h.now, record(i)).unwrap();
    }
    let task = h.p.poll_compression().expect("a closed batch");
    let frames = produce_all(&mut h);
    assert!(!frames.is_empty());
    assert!(!h.p.take_compressed(task.run()), "sealed already");
    assert_eq!(h.p.metrics().batches_compressed_ahead, 0);
    assert_eq!(deliveries(&h.events).len(), 60);
}

/// What is compressed ahead and not yet sealed stays under an eighth of `buffer.memory`:
/// past it no task is handed out; once those batches are sealed, more are.
#[test]
fn compression_ahead_holds_at_most_an_eighth_of_buffer_memory() {
    const MEMORY: usize = 64 * 1024;
    let mut h = gzip_within(true, MEMORY);
    let mut sent = 1;
    while sent < 300 && h.p.send(h.now, record(sent)).is_ok() {
        sent += 1;
    }
    let mut raw = 0;
    let mut taken = 0;
    while let Some(t) = h.p.poll_compression() {
        raw += t.len();
        taken += 1;
        assert!(h.p.take_compressed(t.run()));
    }
    assert!(taken >= 2, "{taken} tasks");
    assert!(
        (MEMORY / 8..MEMORY / 8 + BATCH).contains(&raw),
        "{raw} B compressed ahead in {taken} tasks"
    );
    // Sealed (sent and acknowledged), they count no more: the rest are handed out.
    let frames = produce_all(&mut h);
    assert!(!frames.is_empty());
    assert_eq!(deliveries(&h.events).len(), sent);
    for i in 0..200 {
        h.p.send(h.now, record(sent + i)).unwrap();
    }
    assert!(h.p.poll_compression().is_some(), "the budget was released");
}

/// Metadata for [`TOPIC`] with two partitions: 0 led by the harness's broker, 1 without a
/// leader (LEADER_NOT_AVAILABLE), so that partition 1's batches cannot be sent.
fn two_partitions_one_leaderless(frame: &[u8]) -> Bytes {
    use kprod_core::protocol::metadata::MetadataPartition;
    let (_, version, corr) = harness::api_of(frame);
    let partition = |i: i32, leader: i32, error_code: i16| MetadataPartition {
        error_code,
        partition_index: i,
        leader_id: leader,
        leader_epoch: 0,
        replica_nodes: vec![1],
        isr_nodes: vec![1],
        offline_replicas: vec![],
    };
    let partitions = vec![partition(0, 1, 0), partition(1, -1, 5)];
    harness::support::metadata_answer(version, corr, &[1], partitions)
}

/// Every request answered (Metadata with [`two_partitions_one_leaderless`]) until nothing is
/// left; returns the Produce requests.
fn answer_leaderless(h: &mut Harness) -> usize {
    let mut produced = 0;
    h.drain();
    while let Some(f) = h.next_frame() {
        let a = match harness::api_of(&f).0 {
            kprod_core::protocol::api_key::METADATA => two_partitions_one_leaderless(&f),
            key => {
                produced += usize::from(key == kprod_core::protocol::api_key::PRODUCE);
                respond(&f, &mut h.next_offset)
            }
        };
        h.feed(a);
    }
    produced
}

/// Gzip with `memory` of `buffer.memory`, partition 1 without a leader: one record delivered
/// to partition 0, then `records` to partition 1, compressed ahead as far as they are handed
/// out. Returns the raw bytes compressed ahead for partition 1.
fn stuck_on_partition_1(memory: usize, records: usize) -> (Harness, usize) {
    let mut h = gzip_harness(true, memory);
    h.p.send(h.now, record(0)).unwrap();
    h.p.flush(h.now);
    assert_eq!(
        answer_leaderless(&mut h),
        1,
        "the first record, to partition 0"
    );
    for i in 1..=records {
        h.p.send(h.now, record(i).with_partition(1)).unwrap();
    }
    let mut stuck = 0;
    while let Some(t) = h.p.poll_compression() {
        stuck += t.len();
        assert!(h.p.take_compressed(t.run()));
    }
    (h, stuck)
}

/// A batch compressed ahead whose partition cannot send (no leader) keeps its count, but
/// no other's: batches of the other partition, compressed ahead and sealed, are released
/// even behind it, and compression ahead goes on past the budget that their total would
/// have used up. (Before, the count was released from the front only, and the first
/// leaderless batch held every later one's.)
#[test]
fn a_batch_that_cannot_be_sent_holds_back_no_other() {
    const MEMORY: usize = 128 * 1024;
    // Partition 1 (no leader): two full batches and an open one, compressed ahead.
    let (mut h, stuck) = stuck_on_partition_1(MEMORY, 39);
    assert!(stuck > 0);
    // Partition 0: several budgets' worth of batches, each compressed ahead and sent.
    let mut raw = 0;
    let mut n = 40;
    while raw < 4 * MEMORY / 8 {
        for _ in 0..40 {
            h.p.send(h.now, record(n)).unwrap();
            n += 1;
        }
        let tasks: Vec<_> = std::iter::from_fn(|| h.p.poll_compression()).collect();
        assert!(
            !tasks.is_empty(),
            "compression ahead stopped after {raw} B of sealed batches"
        );
        for t in tasks {
            raw += t.len();
            assert!(h.p.take_compressed(t.run()));
        }
        answer_leaderless(&mut h);
    }
    assert!(h.p.metrics().batches_compressed_ahead > 10);
}

/// A fairness review (2026-12-07): batches of a leader that cannot take them (here none: the
/// partition has no leader) stay compressed ahead until they are sent or expire. Once they
/// held the whole budget, every other leader's batches went back to compression at the seal,
/// inside the drain, under the lock the application's threads take. The budget is now shared
/// by the leaders whose batches are held: the stuck one keeps its part, the others get theirs.
#[test]
fn a_leader_that_cannot_take_its_batches_leaves_the_others_their_part() {
    const MEMORY: usize = 128 * 1024;
    // Partition 1 (no leader): more than the whole budget's worth of batches.
    let (mut h, stuck) = stuck_on_partition_1(MEMORY, 399);
    assert!(
        stuck >= MEMORY / 8,
        "{stuck} B of partition 1 compressed ahead"
    );
    // Partition 0: its batches are still compressed ahead, and go.
    let before = h.p.metrics().batches_compressed_ahead;
    for i in 400..500 {
        h.p.send(h.now, record(i)).unwrap();
    }
    let tasks: Vec<_> = std::iter::from_fn(|| h.p.poll_compression()).collect();
    assert!(
        tasks.len() >= 2,
        "{} of partition 0's batches compressed ahead",
        tasks.len()
    );
    // Within twice the budget in all (and a batch more per leader).
    let raw: usize = stuck + tasks.iter().map(|t| t.len()).sum::<usize>();
    assert!(
        raw <= 2 * (MEMORY / 8) + 2 * BATCH,
        "{raw} B held compressed ahead"
    );
    for t in tasks {
        assert!(h.p.take_compressed(t.run()));
    }
    assert!(h.p.metrics().batches_compressed_ahead >= before + 2);
    assert!(answer_leaderless(&mut h) > 0, "partition 0's batches sent");
}

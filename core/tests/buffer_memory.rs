//! `buffer.memory` bounds the memory the producer holds, not only the bytes of its records: a
//! batch is charged the buffers it holds from the moment it opens (as Java's `BufferPool`
//! charges `batch.size`), so batches holding a few small records each (sparse partitions, a
//! slow broker) are refused room before they hold many times `buffer.memory` in memory.

mod harness;

use bytes::Bytes;
use harness::{api_of, Harness, TOPIC};
use kprod_core::protocol::api_key;
use kprod_core::{Event, Record, SendError};

const BATCH: usize = 16 * 1024;
const MEMORY: usize = 64 * 1024;

fn small(i: usize) -> Record {
    Record::new(TOPIC, format!("record {i}")).with_partition(0)
}

/// Ready (metadata and identity answered), the broker holding every Produce unanswered, one
/// small record per batch: each record is sent on its own before the next is offered.
fn sparse_batches() -> (Harness, Vec<Bytes>, Option<Record>) {
    let mut h = Harness::new(|c| {
        c.batch_size = BATCH;
        c.buffer_memory = MEMORY;
        c.max_request_size = MEMORY;
        c.max_in_flight = 5;
    });
    // The first batch is acknowledged (a partition's first batch goes alone).
    h.p.send(h.now, small(0)).unwrap();
    let first = h.answer_until_produce(&[]).expect("the first Produce");
    let a = harness::support::respond(&first, &mut h.next_offset);
    h.feed(a);
    assert_eq!(h.p.buffered_bytes(), 0);
    let mut held = Vec::new();
    let mut refused = None;
    for i in 1..10 {
        match h.p.send(h.now, small(i)) {
            Ok(_) => {}
            Err(SendError::QueueFull(r)) => {
                refused = Some(r);
                break;
            }
            Err(e) => panic!("record {i}: {e}"),
        }
        h.drain();
        while let Some(f) = h.next_frame() {
            assert_eq!(api_of(&f).0, api_key::PRODUCE);
            held.push(f);
        }
    }
    (h, held, refused)
}

#[test]
fn a_batch_is_charged_what_it_holds_not_only_its_records() {
    let (mut h, held, refused) = sparse_batches();
    // Records 1 to 4 in four batches of one ~20-byte record each: about 100 bytes of
    // records, but each batch holds a 16 KiB buffer, so record 5 is refused and handed back.
    assert_eq!(held.len(), 4, "one Produce per record until memory is used");
    let refused = refused.expect("a fifth small record is refused for lack of memory");
    assert_eq!(refused.value.as_deref(), Some(&b"record 5"[..]));
    let charged = h.p.buffered_bytes();
    assert!(
        charged > 3 * BATCH && charged <= MEMORY + BATCH + 1024,
        "4 batches charged their buffers: {charged} B"
    );
    // Once they are acknowledged the charge is released entirely, and records are taken again.
    for f in held {
        let a = harness::support::respond(&f, &mut h.next_offset);
        h.feed(a);
    }
    let delivered = h
        .events
        .iter()
        .filter(|e| matches!(e, Event::Delivered { .. }))
        .count();
    assert_eq!(delivered, 5);
    assert_eq!(h.p.buffered_bytes(), 0);
    assert!(h.p.send(h.now, refused).is_ok());
}

#[test]
fn records_sharing_a_batch_are_charged_little_beyond_their_bytes() {
    // 100 records of 100 B into one partition with nothing answered: they share batches, and
    // the charge is the batches' buffers (about what the records take), not 100 buffers.
    let mut h = Harness::new(|c| {
        c.batch_size = BATCH;
        c.buffer_memory = MEMORY;
        c.max_request_size = MEMORY;
        c.linger = std::time::Duration::from_secs(60);
    });
    for i in 0..100 {
        h.p.send(
            h.now,
            Record::new(TOPIC, vec![b'v'; 100]).with_key(format!("{i}")),
        )
        .unwrap();
    }
    // Metadata and the identity answered: the records leave the metadata queue for a batch.
    assert!(h.answer_until_produce(&[]).is_none(), "lingering");
    let charged = h.p.buffered_bytes();
    assert!(
        (100 * 100..BATCH + 4096).contains(&charged),
        "one batch's buffers: {charged} B"
    );
}

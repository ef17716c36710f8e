//! `Producer::wake_generation`: unchanged by a `send` exactly when the drain would do nothing
//! more than before (the record joined an open batch with room), changed otherwise.

mod harness;

use std::time::Duration;

use harness::{Harness, TOPIC};
use kprod_core::{Output, Record};

fn record(i: usize) -> Record {
    Record::new(TOPIC, format!("{i:0100}")).with_partition(0)
}

/// The deadline the drain ends with, after carrying out every output.
fn settle(h: &mut Harness) -> Option<std::time::Instant> {
    h.answer_all();
    match h.p.poll_output() {
        Output::Wait { until } => until,
        other => panic!("settled, yet {other:?}"),
    }
}

#[test]
fn only_a_send_that_gives_the_drain_work_changes_the_wake_generation() {
    let mut h = Harness::new(|c| {
        c.linger = Duration::from_millis(50);
        c.batch_size = 4096;
    });
    // A new topic: metadata is needed.
    let g = h.p.wake_generation();
    h.p.send(h.now, record(0)).unwrap();
    assert_ne!(h.p.wake_generation(), g, "a new topic");
    // The driver drains: it connects and asks for the versions; the first record's wait
    // for metadata has its deadline.
    h.drain();
    let waiting = match h.p.poll_output() {
        Output::Wait { until } => until,
        other => panic!("drained, yet {other:?}"),
    };
    // A second record waiting behind the first gives the drain nothing new to do (before
    // 2026-12-07 it changed the generation: a wake-up per record while metadata was awaited).
    let g = h.p.wake_generation();
    h.p.send(h.now, record(1)).unwrap();
    assert_eq!(h.p.wake_generation(), g, "a record waiting behind another");
    match h.p.poll_output() {
        Output::Wait { until } => assert_eq!(until, waiting),
        other => panic!("the generation did not change, yet the drain gave {other:?}"),
    }

    // Metadata known: both records sit in an open batch of partition 0, lingering.
    let deadline = settle(&mut h);
    assert!(deadline.is_some(), "the linger deadline");
    let mut appended = 0;
    let mut i = 2;
    loop {
        let g = h.p.wake_generation();
        h.p.send(h.now, record(i)).unwrap();
        i += 1;
        if h.p.wake_generation() != g {
            break;
        }
        appended += 1;
        // Nothing more to do than before, until the same deadline.
        match h.p.poll_output() {
            Output::Wait { until } => assert_eq!(until, deadline),
            other => panic!("the generation did not change, yet the drain gave {other:?}"),
        }
        assert!(i < 1_000, "the batch never filled");
    }
    assert!(appended > 10, "records joined the open batch: {appended}");
    // The batch filled (or the record opened the next one): a Produce request goes out now,
    // without waiting for the linger deadline.
    h.drain();
    let produce = h.answer_until_produce(&[]);
    assert!(produce.is_some(), "the full batch was sent at once");
}

//! `Event::Failed` hands the record back, on every route a record can fail by: waiting for
//! metadata, in an open (unsealed) batch, in a sealed batch, compressed, after a split, and
//! on the fatal path (a fatal broker error and the driver's `abort`). The real `Producer`
//! driven by hand with a minimal in-process responder.

mod harness;

use std::time::Duration;

use bytes::Bytes;
use harness::{produce_error, Harness, TOPIC};
use kprod_core::protocol::ErrorCode;
use kprod_core::{
    Compression, CompressionType, DeliveryError, Event, FatalError, Persistence, Record, RecordId,
};

impl Harness {
    /// `(id, error, persisted, record)` of every `Failed` event, in order.
    fn failures(&self) -> Vec<(RecordId, DeliveryError, Persistence, Record)> {
        self.events
            .iter()
            .filter_map(|e| match e {
                Event::Failed {
                    id,
                    error,
                    persisted,
                    record,
                    ..
                } => Some((
                    *id,
                    error.clone(),
                    *persisted,
                    *record.clone().expect("the record is handed back"),
                )),
                _ => None,
            })
            .collect()
    }
}

/// Record `i`: a key (or none), a value, headers (one with a null value) and a timestamp
/// that goes back once, so that negative timestamp deltas come back too.
fn record(i: usize) -> Record {
    let mut r = Record::new(TOPIC, format!("value {i} {}", "v".repeat(40)))
        .with_timestamp(1_700_000_000_000 + (i as i64 % 3) * 7 - 5)
        .with_header("trace", Some(Bytes::from(format!("t{i}"))))
        .with_header("empty", None);
    if i & 1 == 0 {
        r = r.with_key(format!("key-{i}"));
    }
    r
}

/// What a record in a partition's batch comes back as: as sent, with its partition.
fn assigned(mut r: Record) -> Record {
    r.partition = Some(0);
    r
}

fn send_all(h: &mut Harness, n: usize) -> Vec<RecordId> {
    (0..n)
        .map(|i| h.p.send(h.now, record(i)).expect("accepted"))
        .collect()
}

/// Every record comes back once, in id order, equal to what was sent (as `expect` maps it).
fn assert_returned(h: &Harness, ids: &[RecordId], expect: impl Fn(Record) -> Record) {
    let failures = h.failures();
    assert_eq!(failures.len(), ids.len(), "{:?}", h.events);
    for (i, (id, _, _, r)) in failures.iter().enumerate() {
        assert_eq!(*id, ids[i]);
        assert_eq!(*r, expect(record(i)), "record {i}");
    }
}

#[test]
fn records_waiting_for_metadata_come_back_as_sent() {
    let mut h = Harness::new(|c| {
        c.delivery_timeout = Duration::from_secs(2);
        c.request_timeout = Duration::from_secs(1);
    });
    let ids = send_all(&mut h, 3);
    h.drain(); // nothing is ever answered
    h.now += Duration::from_secs(3);
    h.p.handle_timeout(h.now);
    h.drain();
    // Never assigned a partition: the record comes back exactly as the application sent it.
    // No broker ever answered (the connection never got past ApiVersions): the network
    // held it back.
    assert_returned(&h, &ids, |r| r);
    for (_, e, p, _) in h.failures() {
        assert_eq!(
            (e, p),
            (
                DeliveryError::DeliveryTimeout {
                    last_error: Some(ErrorCode::NetworkException)
                },
                Persistence::NotPersisted
            )
        );
    }
}

/// Probe finding: a record waiting for metadata failed `DeliveryTimeout { last_error: None }`
/// whether no broker could be reached at all or a reachable one never placed it, so a wrong
/// bootstrap address looked like any slow cluster. When every connect failed, it is now
/// NETWORK_EXCEPTION.
#[test]
fn a_record_that_never_reached_a_broker_times_out_with_a_network_error() {
    let mut h = Harness::new(|c| {
        c.delivery_timeout = Duration::from_secs(2);
        c.request_timeout = Duration::from_secs(1);
    });
    let id = h.p.send(h.now, record(0)).expect("accepted");
    // Every connect fails, for 3 s.
    for _ in 0..300 {
        loop {
            match h.p.poll_output() {
                kprod_core::Output::Connect { conn, .. } => h.p.handle_connect_failed(h.now, conn),
                kprod_core::Output::Wait { .. } => break,
                kprod_core::Output::Event(e) => h.events.push(e),
                other => panic!("{other:?}"),
            }
        }
        h.now += Duration::from_millis(10);
        h.p.handle_timeout(h.now);
    }
    let failures = h.failures();
    assert_eq!(failures.len(), 1, "{:?}", h.events);
    assert_eq!(failures[0].0, id);
    assert_eq!(
        (&failures[0].1, failures[0].2),
        (
            &DeliveryError::DeliveryTimeout {
                last_error: Some(ErrorCode::NetworkException)
            },
            Persistence::NotPersisted
        )
    );
}

#[test]
fn a_record_for_a_partition_that_does_not_exist_comes_back() {
    let mut h = Harness::new(|_| {});
    let sent = record(0).with_partition(9);
    let id = h.p.send(h.now, sent.clone()).unwrap();
    h.answer_until_produce(&[]);
    assert_eq!(
        h.failures(),
        vec![(
            id,
            DeliveryError::UnknownPartition { count: 1 },
            Persistence::NotPersisted,
            sent
        )]
    );
}

#[test]
fn records_in_an_open_batch_come_back_when_the_driver_aborts() {
    // A batch is sealed at its first transmission, after linger.ms.
    let mut h = Harness::new(|c| c.linger = Duration::from_secs(10));
    let ids = send_all(&mut h, 5);
    let produce = h.answer_until_produce(&[]);
    assert!(produce.is_none(), "lingering");
    assert_eq!(h.p.pending_records(), 5);
    h.events.clear();
    h.p.abort(h.now, "certificate rejected");
    h.drain();
    assert_eq!(
        h.events.first(),
        Some(&Event::Fatal(FatalError::Aborted {
            reason: "certificate rejected".into()
        }))
    );
    assert_returned(&h, &ids, assigned);
    for (_, e, p, _) in h.failures() {
        assert!(matches!(
            e,
            DeliveryError::Fatal(FatalError::Aborted { .. })
        ));
        assert_eq!(p, Persistence::NotPersisted, "never sent");
    }
    assert_eq!(h.p.pending_records(), 0);
    assert_eq!(h.p.buffered_bytes(), 0);
}

/// A sealed batch refused by the broker: its records are decoded from the batch's bytes, with
/// every codec compiled in (none, and gzip, snappy, lz4, zstd with their features).
#[test]
fn records_of_a_sealed_batch_come_back_with_every_codec() {
    let mut tried = 0;
    for codec in CompressionType::ALL {
        if !codec.is_available() {
            continue;
        }
        tried += 1;
        let mut h = Harness::new(|c| c.compression = Compression::new(codec));
        let ids = send_all(&mut h, 20);
        let f = h.answer_until_produce(&[]).expect("a Produce request");
        h.feed(produce_error(&f, ErrorCode::InvalidRecord));
        assert_returned(&h, &ids, assigned);
        for (_, e, p, _) in h.failures() {
            assert_eq!(
                (e, p),
                (
                    DeliveryError::Broker(ErrorCode::InvalidRecord),
                    Persistence::NotPersisted
                ),
                "{codec}"
            );
        }
        assert_eq!(h.p.buffered_bytes(), 0, "{codec}");
    }
    assert!(tried >= 1);
}

/// MESSAGE_TOO_LARGE splits the batch in two re-encoded (and re-compressed) halves; when the
/// halves fail, their records still come back as sent.
#[test]
fn records_come_back_after_a_split() {
    for codec in [CompressionType::None, CompressionType::Zstd] {
        if !codec.is_available() {
            continue;
        }
        let mut h = Harness::new(|c| c.compression = Compression::new(codec));
        let ids = send_all(&mut h, 8);
        let f = h.answer_until_produce(&[]).expect("a Produce request");
        h.feed(produce_error(&f, ErrorCode::MessageTooLarge));
        assert!(h.failures().is_empty(), "split, not failed: {:?}", h.events);
        let mut halves = 0;
        while let Some(f) = h.answer_until_produce(&[]) {
            halves += 1;
            h.feed(produce_error(&f, ErrorCode::InvalidRecord));
        }
        assert_eq!(halves, 2, "{codec}");
        assert_returned(&h, &ids, assigned);
    }
}

/// Probe finding: a record whose batch is compressed comes back even when it is larger than
/// the cap on decompressing a peer's batch (64 MiB). A batch opened by one record takes it
/// whatever its size (up to `max.request.size`), and its records were decoded back under that
/// cap, so such a record failed without being handed back (and debug builds panicked).
#[test]
fn a_compressed_record_larger_than_the_decompression_cap_comes_back() {
    use kprod_core::protocol::record_batch::MAX_DECOMPRESSED_LEN;
    for codec in [CompressionType::Zstd, CompressionType::Lz4] {
        if !codec.is_available() {
            continue;
        }
        for answer in [ErrorCode::InvalidRecord, ErrorCode::MessageTooLarge] {
            let mut h = Harness::new(|c| {
                c.compression = Compression::new(codec);
                c.max_request_size = 100 << 20;
                c.buffer_memory = 100 << 20;
            });
            let big = Record::new(TOPIC, vec![7u8; MAX_DECOMPRESSED_LEN + 1000]);
            let id = h.p.send(h.now, big.clone()).expect("accepted");
            let f = h.answer_until_produce(&[]).expect("a Produce request");
            assert!(f.len() < 16 << 20, "{codec}: sent compressed");
            h.feed(produce_error(&f, answer));
            let failures = h.failures();
            assert_eq!(failures.len(), 1, "{codec} {answer:?}: {:?}", h.events);
            let (fid, error, persisted, record) = &failures[0];
            assert_eq!(*fid, id);
            assert_eq!(
                (error, *persisted),
                (&DeliveryError::Broker(answer), Persistence::NotPersisted),
                "{codec}"
            );
            assert!(
                *record == assigned(big),
                "{codec} {answer:?}: the record as sent"
            );
        }
    }
}

/// A fatal broker error fails the batch in flight (decoded from its sealed bytes) and the
/// records still in an open batch behind it (decoded from the builder).
#[test]
fn records_come_back_on_the_fatal_path() {
    let mut h = Harness::new(|c| c.max_in_flight = 1);
    let first = send_all(&mut h, 3);
    let f = h.answer_until_produce(&[]).expect("a Produce request");
    // More records while the first batch is in flight: a second batch, not sent yet.
    let more: Vec<RecordId> = (3..6)
        .map(|i| h.p.send(h.now, record(i)).unwrap())
        .collect();
    h.drain();
    assert!(h.next_frame().is_none(), "one batch in flight at a time");
    h.feed(produce_error(&f, ErrorCode::ClusterAuthorizationFailed));
    let ids: Vec<RecordId> = first.into_iter().chain(more).collect();
    assert_returned(&h, &ids, assigned);
    let failures = h.failures();
    assert!(failures
        .iter()
        .all(|(_, e, _, _)| matches!(e, DeliveryError::Fatal(_))));
    assert_eq!(
        failures.iter().map(|f| f.2).collect::<Vec<_>>(),
        [
            vec![Persistence::NotPersisted; 3], // refused for good
            vec![Persistence::NotPersisted; 3], // never sent
        ]
        .concat()
    );
}

/// The driver's `abort` with a batch in flight: its records may be in the log, and come back.
#[test]
fn an_abort_with_a_batch_in_flight_returns_its_records_possibly_persisted() {
    let mut h = Harness::new(|_| {});
    let ids = send_all(&mut h, 4);
    h.answer_until_produce(&[]).expect("a Produce request");
    h.p.abort(h.now, "gone");
    h.drain();
    assert_returned(&h, &ids, assigned);
    assert!(h
        .failures()
        .iter()
        .all(|f| f.2 == Persistence::PossiblyPersisted));
    // Later records are refused and handed back too.
    let refused = h.p.send(h.now, record(9)).unwrap_err();
    assert_eq!(refused.record(), &record(9));
}

/// A broker refusing a batch for some of its records (Produce v8+, KIP-467: a keyless record
/// on a compacted topic) names them by their index in the batch and adds a message: each
/// failed record carries it, the named ones marked so with their own message, the others
/// marked refused for them (they may be sent again as they are). Records of a later batch
/// refused without a word carry no detail. (Probe finding: the broker's words were checked
/// and dropped.)
#[test]
fn a_refusal_naming_invalid_records_tells_each_record_whether_it_was_named() {
    use kprod_core::protocol::produce::{BatchIndexAndErrorMessage, ProduceRequest};
    use kprod_core::protocol::{api_key, decode_response, encode_response};
    use kprod_core::BrokerDetail;

    let mut h = Harness::new(|c| c.max_in_flight = 1);
    let ids = send_all(&mut h, 3);
    let f = h.answer_until_produce(&[]).expect("a Produce request");
    let (_, version, corr) = harness::api_of(&f);
    assert!(version >= 8, "record errors need Produce v8+");
    let (_, mut resp) = decode_response::<ProduceRequest>(
        version,
        produce_error(&f, ErrorCode::InvalidRecord).slice(4..),
    )
    .unwrap();
    let p = &mut resp.responses[0].partition_responses[0];
    p.error_message = Some("One or more records have been rejected".into());
    p.record_errors = vec![BatchIndexAndErrorMessage {
        batch_index: 1,
        batch_index_error_message: Some("Compacted topic cannot accept message without key".into()),
    }];
    h.feed(encode_response::<ProduceRequest>(&resp, version, corr));
    let details: Vec<_> = (h.events.iter())
        .filter_map(|e| match e {
            Event::Failed {
                id, error, detail, ..
            } => Some((*id, error.clone(), detail.clone())),
            _ => None,
        })
        .collect();
    let message = Some("One or more records have been rejected".into());
    let innocent = BrokerDetail {
        message: message.clone(),
        named: Some(false),
        record_message: None,
    };
    let named = BrokerDetail {
        message,
        named: Some(true),
        record_message: Some("Compacted topic cannot accept message without key".into()),
    };
    let refused = DeliveryError::Broker(ErrorCode::InvalidRecord);
    assert_eq!(
        details,
        [
            (ids[0], refused.clone(), Some(Box::new(innocent.clone()))),
            (ids[1], refused.clone(), Some(Box::new(named.clone()))),
            (ids[2], refused.clone(), Some(Box::new(innocent))),
        ]
    );
    assert!(named.is_named_invalid());
    assert_eq!(
        named.to_string(),
        "One or more records have been rejected; this record was named invalid: Compacted \
         topic cannot accept message without key"
    );
    // A refusal without words: no detail.
    h.events.clear();
    h.p.send(h.now, record(3)).unwrap();
    h.drain();
    let mut refused_plainly = false;
    while let Some(f) = h.next_frame() {
        if harness::api_of(&f).0 == api_key::PRODUCE {
            h.feed(produce_error(&f, ErrorCode::InvalidRecord));
            refused_plainly = true;
        } else {
            let a = harness::respond(&f, &mut h.next_offset);
            h.feed(a);
        }
    }
    assert!(refused_plainly);
    let plain: Vec<_> = (h.events.iter())
        .filter_map(|e| match e {
            Event::Failed { detail, .. } => Some(detail.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(plain, [None]);
}

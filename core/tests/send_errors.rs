//! What a refused record's `SendError` says (review findings): which rule an invalid topic
//! name breaks, an invalid partition as a number (not Rust's `Some(-1)`), and a record too
//! large for `max.request.size` with its size as the producer counts it.

mod harness;

use bytes::Bytes;
use harness::{Harness, TOPIC};
use kprod_core::protocol::record_batch::{RecordBatchBuilder, HEADER_LEN};
use kprod_core::{is_valid_topic_name, Record, SendError};

#[test]
fn an_invalid_topic_name_says_which_rule_it_breaks() {
    let mut h = Harness::new(|_| {});
    let long = "t".repeat(250);
    // 250 bytes in 249 characters: the character is named, not the length.
    let accented = format!("{}é", "t".repeat(248));
    for (name, why) in [
        ("", "a topic name cannot be empty"),
        (".", r#""." and ".." are not allowed as topic names"#),
        ("..", r#""." and ".." are not allowed as topic names"#),
        (
            "with space",
            "' ' is not allowed (only ASCII letters, digits, '.', '_' and '-')",
        ),
        ("a/b", "'/' is not allowed"),
        ("tab\t", r"'\t' is not allowed"),
        ("ünï", "'ü' is not allowed"),
        (&accented, "'é' is not allowed"),
        (&long, "250 characters, longer than the 249 allowed"),
    ] {
        assert!(!is_valid_topic_name(name), "{name:?}");
        let e = h.p.send(h.now, Record::new(name, "v")).unwrap_err();
        assert!(matches!(e, SendError::InvalidTopic(_)), "{e:?}");
        let message = e.to_string();
        let prefix = format!("invalid topic name {name:?}: ");
        assert!(message.starts_with(&prefix), "{message}");
        assert!(message[prefix.len()..].starts_with(why), "{message}");
    }
    // The longest legal name, and every allowed character, are taken.
    for name in ["t".repeat(249), "a.B_c-9".to_owned()] {
        assert!(is_valid_topic_name(&name));
        h.p.send(h.now, Record::new(name, "v")).unwrap();
    }
}

#[test]
fn an_invalid_partition_is_printed_as_a_number() {
    let mut h = Harness::new(|_| {});
    let e =
        h.p.send(h.now, Record::new("big1", "v").with_partition(-1))
            .unwrap_err();
    assert!(
        matches!(
            e,
            SendError::InvalidPartition {
                partitions: None,
                ..
            }
        ),
        "{e:?}"
    );
    assert_eq!(
        e.to_string(),
        r#"invalid partition -1 for topic "big1": a partition must be ≥ 0"#
    );
    // Beyond the partition count once metadata gave it (the responder's topic has one).
    h.p.send(h.now, Record::new(TOPIC, "v")).unwrap();
    h.answer_all();
    let e =
        h.p.send(h.now, Record::new(TOPIC, "v").with_partition(1))
            .unwrap_err();
    assert!(matches!(e, SendError::InvalidPartition { .. }), "{e:?}");
    assert_eq!(
        e.to_string(),
        format!(
            "invalid partition 1 for topic {TOPIC:?}: the topic has 1 partition (numbered from 0)"
        )
    );
    assert!(
        matches!(
            e,
            SendError::InvalidPartition {
                partitions: Some(1),
                ..
            }
        ),
        "{e:?}"
    );
}

/// The size of the batch holding `record` alone, built by the codec (not by the message's
/// own arithmetic).
fn batch_alone(record: &Record) -> usize {
    let mut b = RecordBatchBuilder::with_capacity(0);
    b.push(
        record.timestamp,
        record.key.as_deref(),
        record.value.as_deref(),
        &record.headers,
    );
    b.seal(-1, -1, -1).len()
}

/// The refusal gives the record's encoded size and what its batch counts against
/// `max.request.size`; the first size refused is the first whose count passes the limit.
#[test]
fn a_record_too_large_gives_its_size() {
    const MAX: usize = 1024;
    let mut h = Harness::new(|c| c.max_request_size = MAX);
    let record = |n: usize| {
        Record::new(TOPIC, Bytes::from(vec![b'x'; n]))
            .with_key("k")
            .with_header("h", Some(Bytes::from_static(b"hv")))
    };
    let mut refused = None;
    for n in 900..MAX {
        match h.p.send(h.now, record(n)) {
            Ok(_) => {}
            Err(e @ SendError::TooLarge { .. }) => {
                refused = Some((n, e));
                break;
            }
            Err(e) => panic!("{n}: {e}"),
        }
    }
    let (n, e) = refused.expect("a record below 1024 bytes of value is refused");
    let alone = batch_alone(&record(n));
    let encoded = alone - HEADER_LEN;
    assert_eq!(
        e.to_string(),
        format!(
            "record of {encoded} bytes is too large: a batch of its own counts {} bytes, above \
             max.request.size={MAX}",
            alone + 10
        )
    );
    assert!(
        matches!(e, SendError::TooLarge { max_request_size: MAX, record: ref back } if *back == record(n)),
        "{e:?}"
    );
    // The count the message gives is the one the limit applies to: the record just below
    // was taken, and its count was within the limit.
    assert!(alone + 10 > MAX, "{alone}");
    assert!(batch_alone(&record(n - 1)) + 10 <= MAX);
}

/// Review finding (2026-12-06): an error carrying a record handed back printed the whole
/// record under `{:?}` (an `unwrap` on a refused send of a 1 MB value put a megabyte, and
/// whatever the value held, into the panic message). At most 64 bytes of the key and of the
/// value are shown now, with their lengths.
#[test]
fn a_refused_records_debug_shows_a_bounded_part_of_its_value() {
    let big = Record::new(TOPIC, vec![b'v'; 1_000_000])
        .with_key(vec![b'k'; 100])
        .with_header("trace", Some(Bytes::from(vec![b'h'; 500_000])));
    let shown = format!("{:?}", SendError::QueueFull(big));
    assert!(shown.len() < 1_000, "{} bytes shown", shown.len());
    for cut in [
        "(1000000 bytes)",
        "(100 bytes)",
        "(500000 bytes)",
        "\"trace\"",
    ] {
        assert!(shown.contains(cut), "{cut} in {shown}");
    }
    let small = format!("{:?}", Record::new(TOPIC, "tiny value"));
    assert!(small.contains(r#"b"tiny value""#), "{small}");
}

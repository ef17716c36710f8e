//! kprod-tokio's examples (`io-tokio/examples/`), run as processes against a Tansu broker this
//! test starts (it fails, not skips, if Tansu cannot start: `scripts/install-tansu.sh`): each
//! must exit with status 0 and print what it promises, and the independent reader
//! (librdkafka's consumer) must find every record it sent, once. The binaries are the
//! examples' own sources, built by this crate (`[[bin]] example-*` in tests/Cargo.toml).

use std::collections::BTreeMap;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use kprod_tests::reader::{read_topic, ReadRecord};
use kprod_tests::{free_port, Tansu};

const READ_TIMEOUT: Duration = Duration::from_secs(60);

fn run(binary: &str, args: &[&str]) -> Output {
    let out = Command::new(binary)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {binary}: {e}"));
    println!(
        "{binary} {args:?}: {}\nstdout:\n{}stderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Every record in the topic as `key/value` (or `value` without a key), checked to be there
/// once, sorted.
fn values(log: &BTreeMap<i32, Vec<ReadRecord>>) -> Vec<String> {
    fn text(b: &Option<Vec<u8>>) -> Option<std::borrow::Cow<'_, str>> {
        b.as_deref().map(String::from_utf8_lossy)
    }
    let mut values: Vec<String> = log
        .values()
        .flatten()
        .map(|r| match text(&r.key) {
            Some(k) => format!("{k}/{}", text(&r.value).expect("a value")),
            None => text(&r.value).expect("a value").into_owned(),
        })
        .collect();
    values.sort();
    let before = values.len();
    values.dedup();
    assert_eq!(values.len(), before, "no record is duplicated");
    values
}

#[test]
fn the_examples_run_against_tansu() {
    let tansu = Tansu::start();
    let bootstrap = tansu.addr().to_string();

    // Quick start: 1 + 100 records, all acknowledged.
    tansu.create_topic("quickstart", 1);
    let out = run(
        env!("CARGO_BIN_EXE_example-quickstart"),
        &[&bootstrap, "quickstart"],
    );
    assert!(
        out.status.success(),
        "quickstart exited with {}",
        out.status
    );
    let text = stdout(&out);
    assert!(
        text.starts_with("delivered to quickstart-0 at offset Some(0)\n"),
        "{text}"
    );
    assert!(text.contains("100 more records delivered"), "{text}");
    let log = read_topic(&bootstrap, "quickstart", 1, READ_TIMEOUT).unwrap();
    let mut expected: Vec<String> = (0..100).map(|i| format!("record {i}")).collect();
    expected.push("hello from kprod".to_owned());
    expected.sort();
    assert_eq!(values(&log), expected);
    let offsets: Vec<i64> = log[&0].iter().map(|r| r.offset).collect();
    assert_eq!(offsets, (0..101).collect::<Vec<i64>>());

    // Keyed ordering over 4 partitions: the example checks order per key itself; the reader
    // confirms each key's events are on one partition, in send order.
    tansu.create_topic("orders", 4);
    let out = run(
        env!("CARGO_BIN_EXE_example-keyed-ordering"),
        &[&bootstrap, "orders"],
    );
    assert!(
        out.status.success(),
        "keyed_ordering exited with {}",
        out.status
    );
    assert!(
        stdout(&out).contains("every key on one partition, in send order"),
        "{}",
        stdout(&out)
    );
    let log = read_topic(&bootstrap, "orders", 4, READ_TIMEOUT).unwrap();
    assert_eq!(values(&log).len(), 100);
    let mut per_key: BTreeMap<Vec<u8>, (i32, Vec<String>)> = BTreeMap::new();
    for (p, records) in &log {
        for r in records {
            let (partition, events) = per_key
                .entry(r.key.clone().expect("keyed"))
                .or_insert((*p, Vec::new()));
            assert_eq!(partition, p, "a key on two partitions");
            events.push(String::from_utf8(r.value.clone().unwrap()).unwrap());
        }
    }
    assert_eq!(per_key.len(), 5);
    for (_, events) in per_key.values() {
        let expected: Vec<String> = (0..20).map(|e| format!("event {e}")).collect();
        assert_eq!(events, &expected, "send order per key");
    }

    // Graceful shutdown after 300 records: flushed, accounted for, closed.
    tansu.create_topic("events", 2);
    let out = run(
        env!("CARGO_BIN_EXE_example-graceful-shutdown"),
        &[&bootstrap, "events", "300"],
    );
    assert!(
        out.status.success(),
        "graceful_shutdown exited with {}",
        out.status
    );
    assert!(
        stdout(&out).contains("sent 300, delivered 300, failed 0"),
        "{}",
        stdout(&out)
    );
    let log = read_topic(&bootstrap, "events", 2, READ_TIMEOUT).unwrap();
    assert_eq!(values(&log).len(), 300);

    // Handling PossiblyPersisted: against Tansu every payment is delivered ...
    tansu.create_topic("payments", 2);
    let out = run(
        env!("CARGO_BIN_EXE_example-possibly-persisted"),
        &[&bootstrap, "payments"],
    );
    assert!(
        out.status.success(),
        "possibly_persisted exited with {}",
        out.status
    );
    let text = stdout(&out);
    for i in 0..3 {
        assert!(
            text.contains(&format!("payment-{i}: delivered at payments-")),
            "{text}"
        );
    }
    assert!(text.contains("ids to reconcile: []"), "{text}");
    let log = read_topic(&bootstrap, "payments", 2, READ_TIMEOUT).unwrap();
    assert_eq!(values(&log).len(), 3);
}

/// ... and against a port nobody listens on, each fails not persisted (no connection ever
/// opened, so nothing can be in a log; the network is what held it back), is sent once more,
/// and is given up truthfully.
#[test]
fn the_possibly_persisted_example_takes_the_not_persisted_path_without_a_broker() {
    let nowhere = format!("127.0.0.1:{}", free_port());
    let out = run(
        env!("CARGO_BIN_EXE_example-possibly-persisted"),
        &[&nowhere, "payments"],
    );
    assert!(out.status.success(), "exited with {}", out.status);
    let text = stdout(&out);
    for i in 0..3 {
        assert!(
            text.contains(&format!("payment-{i}: not persisted (")),
            "{text}"
        );
        assert!(
            text.contains(&format!(
                "payment-{i}: not persisted again (delivery failed (NotPersisted) to \
                 payments: timed out (delivery.timeout.ms, or max.block.ms waiting for \
                 metadata) (last error: NETWORK_EXCEPTION (13))), \
                 giving up: it is not in the log"
            )),
            "{text}"
        );
    }
    assert!(text.contains("ids to reconcile: []"), "{text}");
}

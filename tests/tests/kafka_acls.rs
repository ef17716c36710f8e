//! kprod-tokio against Apache Kafka 4.4.0 with ACLs (`StandardAuthorizer`, nothing allowed
//! without an ACL; the PLAINTEXT listener's `ANONYMOUS` is a super user, for the brokers, the
//! admin tool and the independent reader): a producer deployed before its ACLs.
//!
//! Needs `scripts/install-kafka.sh` and Java 17+; the broker is started here and the test
//! fails if it cannot start.

use std::time::{Duration, Instant};

use kprod_core::{DeliveryError as CoreError, Persistence, Record};
use kprod_tests::e2e::{close, runtime};
use kprod_tests::kafka::SaslListener;
use kprod_tests::reader::read_topic;
use kprod_tests::{Kafka, KafkaOptions};
use kprod_tokio::{ErrorCode, ErrorKind, ProducerHandle};

const USER: &str = "alice";
const PASSWORD: &str = "alice-secret";
/// How long a record may take to resolve.
const RESOLVE: Duration = Duration::from_secs(60);

/// One Kafka 4.4.0 node with `StandardAuthorizer`, nothing allowed without an ACL, and a
/// SASL/PLAIN listener for alice.
fn kafka_with_acls() -> Kafka {
    Kafka::start_with(
        KafkaOptions::new(1)
            .set(
                "authorizer.class.name",
                "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            )
            .set("allow.everyone.if.no.acl.found", "false")
            .set("super.users", "User:ANONYMOUS")
            .sasl(SaslListener {
                name: "SASLPLAIN".into(),
                tls: None,
                users: vec![(USER.into(), PASSWORD.into())],
                max_reauth_ms: None,
            }),
    )
}

/// Properties for alice over SASL/PLAIN at `bootstrap` (a 30 s delivery timeout, a 10 s
/// request timeout), with `extra`.
fn alice<'a>(bootstrap: &'a str, extra: &[(&'a str, &'a str)]) -> Vec<(&'a str, &'a str)> {
    let mut props = vec![
        ("bootstrap.servers", bootstrap),
        ("security.protocol", "SASL_PLAINTEXT"),
        ("sasl.mechanism", "PLAIN"),
        ("sasl.username", USER),
        ("sasl.password", PASSWORD),
        ("delivery.timeout.ms", "30000"),
        ("request.timeout.ms", "10000"),
    ];
    props.extend_from_slice(extra);
    props
}

/// What the independent reader finds in partition 0 of `topic`: each record's index (the
/// six digits after its value's first character) and offset, in log order.
fn indexes_in_log(kafka: &Kafka, topic: &str) -> Vec<(usize, i64)> {
    let log = read_topic(&kafka.bootstrap(), topic, 1, RESOLVE).expect("read back");
    log[&0]
        .iter()
        .map(|r| {
            let v = std::str::from_utf8(r.value.as_deref().expect("a value")).expect("utf-8");
            (v[1..7].parse().expect("an index"), r.offset)
        })
        .collect()
}

/// Probe finding: a producer whose principal may not write idempotently (no IdempotentWrite
/// on the cluster, no Write on any topic, only Describe on its topic) has its InitProducerId
/// refused CLUSTER_AUTHORIZATION_FAILED. kprod stopped for good (every record refused, also
/// after the ACL was granted); the Java client (since KAFKA-13668) fails the waiting records
/// and asks again. Now kprod does too: each record sent before the grant fails with
/// CLUSTER_AUTHORIZATION_FAILED, not persisted, handed back, the producer never fatal; once
/// Write is granted on the topic the records are delivered, and the reader finds exactly
/// the delivered ones, once, in send order.
#[test]
fn a_producer_refused_a_producer_id_delivers_once_write_is_granted() {
    let kafka = kafka_with_acls();
    let topic = "kprod-acl-late";
    kafka.create_topic(topic, 1, 1, None);
    let principal = format!("User:{USER}");
    let grant = |operation: &str| {
        kafka.acl(&[
            "--add",
            "--allow-principal",
            &principal,
            "--operation",
            operation,
            "--topic",
            topic,
        ])
    };
    // alice may see the topic (its metadata answers), not write to it.
    grant("Describe");
    let bootstrap = kafka.listener_bootstrap("SASLPLAIN");
    let props = alice(&bootstrap, &[("linger.ms", "0")]);
    let value = |i: usize| format!("r{i:06}");
    let refused = |i: usize, e: &kprod_tokio::DeliveryError| {
        assert_eq!(
            e.kind,
            ErrorKind::Failed(CoreError::Broker(ErrorCode::ClusterAuthorizationFailed)),
            "record {i}: {e}"
        );
        assert_eq!(e.persisted, Persistence::NotPersisted, "record {i}");
        let back = e.record().expect("the record is handed back");
        assert_eq!(back.value.as_deref(), Some(value(i).as_bytes()));
    };
    let rt = runtime();
    let (delivered, failed_before, failed_after) = rt.block_on(async {
        let p = ProducerHandle::from_properties(&props).expect("valid properties");
        let send = |i: usize| {
            let record = Record::new(topic, value(i)).with_partition(0);
            let p = &p;
            async move {
                let f = p.enqueue(record).await.expect("accepted");
                tokio::time::timeout(RESOLVE, f)
                    .await
                    .unwrap_or_else(|_| panic!("record {i} unresolved after {RESOLVE:?}"))
            }
        };
        // Before the grant: each record fails with the refusal; the producer goes on.
        let mut i = 0;
        while i < 5 {
            let e = send(i).await.expect_err("refused before the grant");
            refused(i, &e);
            assert_eq!(p.fatal(), None, "the producer is not stopped");
            i += 1;
        }
        let failed_before = i;
        grant("Write");
        // The grant takes effect within moments: until then records keep failing alike.
        let granted = Instant::now();
        let mut delivered = Vec::new();
        let mut failed_after = 0;
        while delivered.is_empty() {
            assert!(
                granted.elapsed() < Duration::from_secs(60),
                "nothing delivered 60 s after the grant"
            );
            match send(i).await {
                Ok(d) => delivered.push((i, d.offset.expect("an offset"))),
                Err(e) => {
                    refused(i, &e);
                    failed_after += 1;
                }
            }
            i += 1;
        }
        // Then every record is delivered, in order.
        let mut futures = Vec::new();
        for k in i..i + 200 {
            let record = Record::new(topic, value(k)).with_partition(0);
            futures.push((k, p.enqueue(record).await.expect("accepted")));
        }
        for (k, f) in futures {
            let d = tokio::time::timeout(RESOLVE, f)
                .await
                .expect("resolved")
                .unwrap_or_else(|e| panic!("record {k} failed after the grant: {e}"));
            delivered.push((k, d.offset.expect("an offset")));
        }
        assert_eq!(p.fatal(), None);
        close(p).await;
        (delivered, failed_before, failed_after)
    });
    println!(
        "{failed_before} refused before the grant, {failed_after} between the grant and its \
         effect, {} delivered",
        delivered.len()
    );
    let found = indexes_in_log(&kafka, topic);
    assert_eq!(
        found, delivered,
        "the log holds exactly the delivered records, at their offsets, in send order"
    );
}

/// Review finding (recovery without restart, a seventh session of 2026-12-07): Write on one
/// topic revoked while the producer writes it and another, Describe kept (so metadata stays
/// clean). Kafka refuses each Produce to it TOPIC_AUTHORIZATION_FAILED. Each refused batch
/// leaves a gap, and the bumps after gaps are paced (about one a second), so before the fix
/// the partition sent one batch a bump and a burst of records waited behind them until their
/// delivery timeout. Now the refusal fails the partition's unsent batches with it: every
/// record of a burst to the revoked topic fails TOPIC_AUTHORIZATION_FAILED, not persisted,
/// none by its delivery timeout; the other topic's are all delivered; once Write is granted
/// again its records are delivered; and the reader finds exactly the delivered records of
/// each topic, once, in send order, at their offsets.
#[test]
fn write_revoked_on_a_topic_fails_its_records_and_not_the_others() {
    let kafka = kafka_with_acls();
    let (a, b) = ("kprod-acl-kept", "kprod-acl-revoked");
    let principal = format!("User:{USER}");
    let acl = |op: &str, operation: &str, topic: &str| {
        kafka.acl(&[
            op,
            "--allow-principal",
            &principal,
            "--operation",
            operation,
            "--topic",
            topic,
        ]);
    };
    for topic in [a, b] {
        kafka.create_topic(topic, 1, 1, None);
        acl("--add", "Describe", topic);
        acl("--add", "Write", topic);
    }
    let bootstrap = kafka.listener_bootstrap("SASLPLAIN");
    // Small batches: a burst is many of them.
    let props = alice(&bootstrap, &[("linger.ms", "5"), ("batch.size", "1024")]);
    let value = |topic: &str, i: usize| format!("{}{i:06}-{}", &topic[9..10], "x".repeat(90));
    let rt = runtime();
    type Outcomes = Vec<(usize, Result<i64, kprod_tokio::DeliveryError>)>;
    let (kept, revoked, rounds) = rt.block_on(async {
        let p = ProducerHandle::from_properties(&props).expect("valid properties");
        let mut next = [0usize; 2];
        // A burst of `n` records to each topic, all enqueued before any is awaited.
        let mut burst = async |p: &ProducerHandle, n: usize| -> [Outcomes; 2] {
            let mut futures: [Vec<_>; 2] = [Vec::new(), Vec::new()];
            for _ in 0..n {
                for (t, topic) in [a, b].into_iter().enumerate() {
                    let i = next[t];
                    next[t] += 1;
                    let record = Record::new(topic, value(topic, i)).with_partition(0);
                    futures[t].push((i, p.enqueue(record).await.expect("accepted")));
                }
            }
            let mut out: [Outcomes; 2] = [Vec::new(), Vec::new()];
            for (t, fs) in futures.into_iter().enumerate() {
                for (i, f) in fs {
                    let r = tokio::time::timeout(RESOLVE, f)
                        .await
                        .unwrap_or_else(|_| panic!("record {i} unresolved after {RESOLVE:?}"));
                    out[t].push((i, r.map(|d| d.offset.expect("an offset"))));
                }
            }
            out
        };
        let mut kept: Outcomes = Vec::new();
        let mut revoked: Outcomes = Vec::new();
        let [x, y] = burst(&p, 50).await;
        assert!(
            x.iter().chain(&y).all(|o| o.1.is_ok()),
            "all written before"
        );
        kept.extend(x);
        revoked.extend(y);
        acl("--remove", "Write", b);
        // Bursts of 500 to each until the revocation has taken effect and one burst is
        // refused whole.
        let mut rounds = 0;
        loop {
            rounds += 1;
            assert!(rounds <= 20, "the revocation never took effect");
            let [x, y] = burst(&p, 500).await;
            let whole = y.iter().all(|o| o.1.is_err());
            kept.extend(x);
            revoked.extend(y);
            if whole {
                break;
            }
        }
        acl("--add", "Write", b);
        let granted = Instant::now();
        loop {
            assert!(
                granted.elapsed() < Duration::from_secs(60),
                "nothing delivered 60 s after the grant"
            );
            let [x, y] = burst(&p, 20).await;
            let written = y.iter().any(|o| o.1.is_ok());
            kept.extend(x);
            revoked.extend(y);
            if written {
                break;
            }
        }
        let [x, y] = burst(&p, 200).await;
        assert!(y.iter().all(|o| o.1.is_ok()), "all written after the grant");
        kept.extend(x);
        revoked.extend(y);
        assert_eq!(p.fatal(), None);
        close(p).await;
        (kept, revoked, rounds)
    });
    let failed: Vec<&kprod_tokio::DeliveryError> =
        revoked.iter().filter_map(|o| o.1.as_ref().err()).collect();
    println!(
        "{} of {} records to the revoked topic refused ({rounds} bursts until the revocation \
         took effect); {} to the other, all delivered",
        failed.len(),
        revoked.len(),
        kept.len()
    );
    assert!(
        kept.iter().all(|o| o.1.is_ok()),
        "the other topic's records delivered"
    );
    assert!(failed.len() >= 500);
    for e in &failed {
        assert_eq!(
            e.kind,
            ErrorKind::Failed(CoreError::Broker(ErrorCode::TopicAuthorizationFailed)),
            "{e}"
        );
        assert_eq!(e.persisted, Persistence::NotPersisted, "{e}");
        assert!(e.record().is_some(), "the record is handed back");
    }
    for (topic, outcomes) in [(a, &kept), (b, &revoked)] {
        let delivered: Vec<(usize, i64)> = (outcomes.iter())
            .filter_map(|(i, r)| r.as_ref().ok().map(|o| (*i, *o)))
            .collect();
        let found = indexes_in_log(&kafka, topic);
        assert_eq!(
            found, delivered,
            "{topic}: the log holds exactly the delivered records, at their offsets, in send order"
        );
    }
}

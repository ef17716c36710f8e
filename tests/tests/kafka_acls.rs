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
    let kafka = Kafka::start_with(
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
    );
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
    let props = [
        ("bootstrap.servers", bootstrap.as_str()),
        ("security.protocol", "SASL_PLAINTEXT"),
        ("sasl.mechanism", "PLAIN"),
        ("sasl.username", USER),
        ("sasl.password", PASSWORD),
        ("linger.ms", "0"),
        ("delivery.timeout.ms", "30000"),
        ("request.timeout.ms", "10000"),
    ];
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
    let log = read_topic(&kafka.bootstrap(), topic, 1, RESOLVE).expect("read back");
    let found: Vec<(usize, i64)> = log[&0]
        .iter()
        .map(|r| {
            let v = std::str::from_utf8(r.value.as_deref().expect("a value")).expect("utf-8");
            (v[1..].parse().expect("an index"), r.offset)
        })
        .collect();
    assert_eq!(
        found, delivered,
        "the log holds exactly the delivered records, at their offsets, in send order"
    );
}

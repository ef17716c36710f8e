//! Bad input from the application gets a clear error, with the record handed back, and
//! nothing else is affected: kprod (through kprod-tokio) against a real Tansu broker, with
//! good records in flight around every bad one. The log is read back with the independent
//! reader and checked with [`Ledger::check`].
//!
//! Covered: a record larger than max.request.size, invalid topic names, invalid partitions,
//! a negative timestamp, an unknown topic with auto-creation off (fails after max.block.ms), flush and close with
//! nothing to send (also with an unreachable broker), a send after and during close, and
//! configuration values out of range (`ProducerConfig::validate`, `ProducerHandle::connect`,
//! `kprod_tokio::config_from_properties`).
//!
//! Needs the Tansu binary (`scripts/install-tansu.sh`, or `KPROD_TANSU=/path/to/tansu`).

use std::time::{Duration, Instant};

use bytes::Bytes;
use kprod_core::protocol::metadata::{MetadataRequest, MetadataRequestTopic};
use kprod_core::protocol::ErrorCode;
use kprod_core::{DeliveryError as CoreError, Persistence, ProducerConfig, Record, SendError};
use kprod_tests::ledger::{read_log, Ledger};
use kprod_tests::proxy::{Proxy, Refusal};
use kprod_tests::reader::ReadRecord;
use kprod_tests::{free_port, Tansu, WireClient};
use kprod_tokio::{
    config_from_properties, DeliveryError, ErrorKind, ProducerHandle, PropertyError, StartError,
};

const TOPIC_PARTITIONS: i32 = 2;
const RESOLVE: Duration = Duration::from_secs(20);

fn start(topic: &str) -> Tansu {
    tokio::task::block_in_place(|| {
        let t = Tansu::start();
        t.create_topic(topic, TOPIC_PARTITIONS as u32);
        t
    })
}

fn config(tansu: &Tansu) -> ProducerConfig {
    ProducerConfig {
        bootstrap_servers: vec![tansu.addr().to_string()],
        linger: Duration::from_millis(2),
        batch_size: 512,
        request_timeout: Duration::from_secs(2),
        delivery_timeout: Duration::from_secs(15),
        retry_backoff: Duration::from_millis(10),
        reconnect_backoff: Duration::from_millis(10),
        allow_auto_topic_creation: false,
        ..Default::default()
    }
}

/// The refusal's `SendError`, checking that the failure says not persisted.
fn refusal(r: Result<impl std::fmt::Debug, DeliveryError>) -> SendError {
    match r {
        Err(DeliveryError {
            kind: ErrorKind::Refused(e),
            persisted,
            ..
        }) => {
            assert_eq!(persisted, Persistence::NotPersisted);
            *e
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
}

/// A record with every field set, so that "handed back" can be checked field by field.
fn full_record(topic: &str, partition: Option<i32>, value: Bytes) -> Record {
    Record {
        topic: topic.into(),
        partition,
        key: Some(Bytes::from_static(b"the-key")),
        value: Some(value),
        headers: Vec::new(),
        timestamp: 1_700_000_000_123,
    }
    .with_header("h", Some(Bytes::from_static(b"v")))
}

/// A record larger than max.request.size is refused with `TooLarge` and handed back whole;
/// the records enqueued before and after it are delivered, in order, and it is not in the log.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn record_larger_than_max_request_size() {
    let topic = "bad-too-large";
    let tansu = start(topic);
    let cfg = ProducerConfig {
        max_request_size: 4096,
        ..config(&tansu)
    };
    let p = ProducerHandle::connect(cfg).expect("config");
    let mut l = Ledger::new(topic, TOPIC_PARTITIONS);
    l.enqueue_n(&p, 20).await;
    for (partition, size) in [(Some(0), 5000), (None, 4096), (Some(1), 1 << 20)] {
        let big = full_record(topic, partition, Bytes::from(vec![b'x'; size]));
        let e = refusal(p.enqueue(big.clone()).await);
        assert!(matches!(e, SendError::TooLarge { .. }), "{e:?}");
        assert!(e.to_string().contains("max.request.size"), "{e}");
        assert_eq!(e.into_record(), big, "handed back unchanged");
    }
    // Just below the limit is accepted (and taken out of the log before the ledger's check).
    let fits = full_record(topic, Some(0), Bytes::from(vec![b'y'; 3700]));
    let fut = p.enqueue(fits).await.expect("a record that fits");
    l.enqueue_n(&p, 20).await;
    let fits_delivery = tokio::time::timeout(RESOLVE, fut)
        .await
        .expect("resolved")
        .expect("delivered");
    l.resolve(RESOLVE).await;
    p.close().await;
    let mut log = read_log(&tansu.addr().to_string(), topic, TOPIC_PARTITIONS).await;
    let is = |r: &ReadRecord, b: u8| {
        r.value
            .as_ref()
            .is_some_and(|v| v.len() > 1000 && v[0] == b)
    };
    assert!(
        !log.values().flatten().any(|r| is(r, b'x')),
        "no refused record in the log"
    );
    let fits_at: Vec<(i32, i64)> = log
        .iter()
        .flat_map(|(p, rs)| rs.iter().filter(|r| is(r, b'y')).map(|r| (*p, r.offset)))
        .collect();
    assert_eq!(
        fits_at,
        vec![(0, fits_delivery.offset.expect("an offset"))],
        "the record that fits, once, at its offset"
    );
    for records in log.values_mut() {
        records.retain(|r| !is(r, b'y'));
    }
    let s = l.check(&log);
    assert_eq!(s.delivered, 40, "{s:?}");
}

/// Invalid topic names and partitions are refused at once with the record handed back; the
/// good records around them are delivered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_topic_names_and_partitions() {
    let topic = "bad-topic-names";
    let tansu = start(topic);
    let p = ProducerHandle::connect(config(&tansu)).expect("config");
    let mut l = Ledger::new(topic, TOPIC_PARTITIONS);
    l.enqueue_n(&p, 10).await;
    let long = "t".repeat(250);
    for name in [
        "",
        ".",
        "..",
        "with space",
        "a/b",
        "tab\t",
        "ünï",
        long.as_str(),
    ] {
        let r = full_record(name, None, Bytes::from_static(b"bad"));
        let e = refusal(p.enqueue(r.clone()).await);
        assert!(matches!(e, SendError::InvalidTopic(_)), "{name:?}: {e:?}");
        assert!(e.to_string().contains("invalid topic name"), "{e}");
        assert_eq!(e.into_record(), r);
        l.enqueue(&p, 1).await;
    }
    // A negative partition is refused before anything is known about the topic.
    let r = full_record(topic, Some(-1), Bytes::from_static(b"bad"));
    let e = refusal(p.enqueue(r.clone()).await);
    assert!(matches!(e, SendError::InvalidPartition { .. }), "{e:?}");
    assert_eq!(e.into_record(), r);
    // Once metadata is known, a partition beyond the count is refused too.
    l.resolve(RESOLVE).await;
    let r = full_record(topic, Some(TOPIC_PARTITIONS), Bytes::from_static(b"bad"));
    let e = refusal(p.enqueue(r.clone()).await);
    assert!(matches!(e, SendError::InvalidPartition { .. }), "{e:?}");
    assert!(e.to_string().contains("invalid partition"), "{e}");
    assert_eq!(e.into_record(), r);
    // A negative timestamp is refused (as the Java client does), the record handed back.
    let r = full_record(topic, Some(0), Bytes::from_static(b"bad")).with_timestamp(-5);
    let e = refusal(p.enqueue(r.clone()).await);
    assert!(matches!(e, SendError::InvalidTimestamp(_)), "{e:?}");
    assert!(e.to_string().contains("invalid timestamp -5"), "{e}");
    assert_eq!(e.into_record(), r);
    l.enqueue_n(&p, 10).await;
    l.resolve(RESOLVE).await;
    p.close().await;
    let s = l.read_and_check(&tansu.addr().to_string()).await;
    assert_eq!(s.delivered, 28, "{s:?}");
}

/// A partition beyond the count of a topic whose metadata is not known yet is accepted, then
/// fails `UnknownPartition`, not persisted, once metadata arrives; the good records of the
/// same topic, sent before and after it, are delivered. (The broker is reached through the
/// fault proxy, which refuses connections until the records are accepted, so that no
/// metadata can arrive first.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partition_beyond_the_count_before_metadata() {
    let topic = "bad-partition-late";
    let proxy = Proxy::bind().await.expect("proxy");
    proxy.refuse(Refusal::Closed);
    let port = proxy.port();
    let tansu = tokio::task::block_in_place(|| {
        let t = Tansu::start_advertising(port);
        t.create_topic(topic, TOPIC_PARTITIONS as u32);
        t
    });
    proxy.set_upstream(tansu.addr());
    let p = ProducerHandle::connect(ProducerConfig {
        bootstrap_servers: vec![proxy.bootstrap()],
        ..config(&tansu)
    })
    .expect("config");
    let mut l = Ledger::new(topic, TOPIC_PARTITIONS);
    l.enqueue_n(&p, 5).await;
    let bad = p
        .enqueue(full_record(topic, Some(7), Bytes::from_static(b"bad")))
        .await
        .expect("accepted before metadata");
    l.enqueue_n(&p, 5).await;
    proxy.accept().await;
    let e = tokio::time::timeout(RESOLVE, bad)
        .await
        .expect("resolved")
        .expect_err("fails");
    assert_eq!(
        e.kind,
        ErrorKind::Failed(CoreError::UnknownPartition {
            count: TOPIC_PARTITIONS as usize
        })
    );
    assert_eq!(e.persisted, Persistence::NotPersisted);
    l.resolve(RESOLVE).await;
    p.close().await;
    let s = l.read_and_check(&tansu.addr().to_string()).await;
    assert_eq!(s.delivered, 10, "{s:?}");
}

/// With auto-creation off, records for a topic that does not exist wait up to max.block.ms,
/// then fail `UnknownTopic` (not persisted); the topic is not created, and records for an
/// existing topic, sent before, between and after, are delivered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_topic_with_auto_create_off() {
    let topic = "bad-unknown-topic";
    let missing = "does-not-exist";
    let tansu = start(topic);
    let max_block = Duration::from_millis(400);
    let cfg = ProducerConfig {
        max_block,
        ..config(&tansu)
    };
    let p = ProducerHandle::connect(cfg).expect("config");
    let mut l = Ledger::new(topic, TOPIC_PARTITIONS);
    l.enqueue_n(&p, 10).await;
    let start = Instant::now();
    let mut lost = Vec::new();
    for k in 0..5 {
        lost.push(
            p.enqueue(Record::new(missing, format!("lost {k}")))
                .await
                .expect("accepted: the topic may yet appear"),
        );
        l.enqueue(&p, k % TOPIC_PARTITIONS).await;
    }
    for fut in lost {
        let e = tokio::time::timeout(RESOLVE, fut)
            .await
            .expect("resolved")
            .expect_err("fails");
        assert_eq!(
            e.kind,
            ErrorKind::Failed(CoreError::UnknownTopic(ErrorCode::UnknownTopicOrPartition))
        );
        assert_eq!(e.persisted, Persistence::NotPersisted);
        assert!(e.to_string().contains("topic unavailable"), "{e}");
    }
    let took = start.elapsed();
    assert!(took >= max_block, "waited max.block.ms: {took:?}");
    assert!(took < max_block + Duration::from_secs(5), "{took:?}");
    l.enqueue_n(&p, 10).await;
    l.resolve(RESOLVE).await;
    p.close().await;
    let s = l.read_and_check(&tansu.addr().to_string()).await;
    assert_eq!(s.delivered, 25, "{s:?}");
    // The topic was not created.
    let addr = tansu.addr();
    let code = tokio::task::block_in_place(|| {
        let mut c = WireClient::connect(addr).expect("connect");
        let md = c
            .call(
                &MetadataRequest {
                    topics: Some(vec![MetadataRequestTopic {
                        topic_id: [0; 16],
                        name: Some(missing.into()),
                    }]),
                    allow_auto_topic_creation: false,
                    include_cluster_authorized_operations: false,
                    include_topic_authorized_operations: false,
                },
                12,
            )
            .expect("Metadata");
        md.topics[0].error_code
    });
    assert_eq!(code, ErrorCode::UnknownTopicOrPartition.as_i16());
}

/// flush() and close() with nothing to send complete at once, with a reachable broker and
/// with none at all; an empty flush between real records disturbs nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn empty_flush_and_close() {
    let topic = "bad-empty";
    let tansu = start(topic);
    let bound = Duration::from_secs(5);
    // No broker listens here.
    let nowhere = ProducerHandle::connect(ProducerConfig {
        bootstrap_servers: vec![format!("127.0.0.1:{}", free_port())],
        ..config(&tansu)
    })
    .expect("config");
    tokio::time::timeout(bound, nowhere.flush())
        .await
        .expect("empty flush returns without a broker");
    tokio::time::timeout(bound, nowhere.close())
        .await
        .expect("empty close returns without a broker");
    let r = Record::new(topic, "after close");
    let e = refusal(nowhere.enqueue(r.clone()).await);
    assert!(matches!(e, SendError::Closed(_)), "{e:?}");

    let p = ProducerHandle::connect(config(&tansu)).expect("config");
    tokio::time::timeout(bound, p.flush())
        .await
        .expect("empty flush");
    let mut l = Ledger::new(topic, TOPIC_PARTITIONS);
    l.enqueue_n(&p, 30).await;
    tokio::time::timeout(bound, p.flush()).await.expect("flush");
    // Every record enqueued before the flush has resolved.
    l.resolve(Duration::from_millis(1)).await;
    tokio::time::timeout(bound, p.flush())
        .await
        .expect("empty flush after records");
    l.enqueue_n(&p, 30).await;
    tokio::time::timeout(bound, p.close()).await.expect("close");
    l.resolve(Duration::from_millis(1)).await;
    // close() twice, and flush() after close, return at once.
    tokio::time::timeout(bound, p.close())
        .await
        .expect("second close");
    tokio::time::timeout(bound, p.flush())
        .await
        .expect("flush after close");
    let s = l.read_and_check(&tansu.addr().to_string()).await;
    assert_eq!(s.delivered, 60, "{s:?}");
}

/// A send after close() returned, and a send queued behind a close() still in progress, are
/// refused with `Closed` and the record handed back; everything enqueued before close() is
/// delivered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_after_close() {
    let topic = "bad-after-close";
    let tansu = start(topic);
    let p = ProducerHandle::connect(config(&tansu)).expect("config");
    let mut l = Ledger::new(topic, TOPIC_PARTITIONS);
    l.enqueue_n(&p, 40).await;
    let during = full_record(topic, Some(0), Bytes::from_static(b"during close"));
    // join! polls close() first, so its command is queued before the send's.
    let ((), refused_during) = tokio::join!(p.close(), p.enqueue(during.clone()));
    let e = refusal(refused_during);
    assert!(matches!(e, SendError::Closed(_)), "{e:?}");
    assert!(e.to_string().contains("closed"), "{e}");
    assert_eq!(e.into_record(), during);
    l.resolve(Duration::from_millis(1)).await;
    let after = full_record(topic, None, Bytes::from_static(b"after close"));
    let e = refusal(p.send(after.clone()).await);
    assert!(matches!(e, SendError::Closed(_)), "{e:?}");
    assert_eq!(e.into_record(), after);
    let s = l.read_and_check(&tansu.addr().to_string()).await;
    assert_eq!(s.delivered, 40, "{s:?}");
}

/// Out-of-range settings are refused by `validate`, by `ProducerHandle::connect` and by
/// `config_from_properties`, each naming the setting; a producer already running is not
/// affected.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn configuration_out_of_range() {
    let topic = "bad-config";
    let tansu = start(topic);
    let good = config(&tansu);
    let p = ProducerHandle::connect(good.clone()).expect("config");
    let mut l = Ledger::new(topic, TOPIC_PARTITIONS);
    l.enqueue_n(&p, 30).await;

    let ms = Duration::from_millis;
    let cases: Vec<(&str, ProducerConfig)> = vec![
        (
            "bootstrap.servers",
            ProducerConfig {
                bootstrap_servers: vec![],
                ..good.clone()
            },
        ),
        (
            "bootstrap.servers",
            ProducerConfig {
                bootstrap_servers: vec!["127.0.0.1:99999".into()],
                ..good.clone()
            },
        ),
        // Idempotence needs acks=all (acks 0 and 1 go with enable.idempotence=false).
        (
            "acks",
            ProducerConfig {
                acks: 0,
                ..good.clone()
            },
        ),
        (
            "acks",
            ProducerConfig {
                acks: 1,
                ..good.clone()
            },
        ),
        (
            "max.in.flight.requests.per.connection",
            ProducerConfig {
                max_in_flight: 0,
                ..good.clone()
            },
        ),
        (
            "max.in.flight.requests.per.connection",
            ProducerConfig {
                max_in_flight: 6,
                ..good.clone()
            },
        ),
        (
            "batch.size",
            ProducerConfig {
                batch_size: 0,
                ..good.clone()
            },
        ),
        (
            "batch.size",
            ProducerConfig {
                batch_size: usize::MAX,
                ..good.clone()
            },
        ),
        (
            "max.request.size",
            ProducerConfig {
                max_request_size: 100,
                ..good.clone()
            },
        ),
        (
            "max.request.size",
            ProducerConfig {
                max_request_size: i32::MAX as usize + 1,
                buffer_memory: usize::MAX,
                ..good.clone()
            },
        ),
        (
            "buffer.memory",
            ProducerConfig {
                buffer_memory: 0,
                ..good.clone()
            },
        ),
        (
            "request.timeout.ms",
            ProducerConfig {
                request_timeout: Duration::ZERO,
                ..good.clone()
            },
        ),
        (
            "delivery.timeout.ms",
            ProducerConfig {
                delivery_timeout: ms(100),
                linger: ms(50),
                request_timeout: ms(100),
                ..good.clone()
            },
        ),
        (
            "receive.message.max.bytes",
            ProducerConfig {
                max_frame_size: 100,
                ..good.clone()
            },
        ),
        (
            "max.epoch",
            ProducerConfig {
                max_epoch: 0,
                ..good.clone()
            },
        ),
        (
            "max.sequence",
            ProducerConfig {
                max_sequence: -5,
                ..good.clone()
            },
        ),
        (
            "client.id",
            ProducerConfig {
                client_id: Some("c".repeat(40_000)),
                ..good.clone()
            },
        ),
        (
            "client.software.name",
            ProducerConfig {
                client_software_name: "-kprod".into(),
                ..good.clone()
            },
        ),
        (
            "client.software.version",
            ProducerConfig {
                client_software_version: String::new(),
                ..good.clone()
            },
        ),
        (
            "metadata.max.idle.ms",
            ProducerConfig {
                metadata_max_idle: Some(Duration::ZERO),
                ..good.clone()
            },
        ),
    ];
    for (setting, cfg) in cases {
        let e = cfg.validate().expect_err(setting);
        assert_eq!(e.setting, setting, "{e}");
        assert!(e.to_string().contains(setting), "{e}");
        match ProducerHandle::connect(cfg) {
            Err(StartError::Config(e)) => assert_eq!(e.setting, setting),
            other => panic!("{setting}: {other:?}"),
        }
    }

    let bootstrap = good.bootstrap_servers[0].clone();
    // (A setting given twice with different values is a conflict of its own: the bad
    // bootstrap servers go alone.)
    let props = |extra: (&'static str, &'static str)| -> Result<ProducerConfig, PropertyError> {
        if extra.0 == "bootstrap.servers" {
            return config_from_properties(&[extra]);
        }
        config_from_properties(&[("bootstrap.servers", bootstrap.as_str()), extra])
    };
    for (name, value, setting) in [
        (
            "max.in.flight.requests.per.connection",
            "6",
            "max.in.flight.requests.per.connection",
        ),
        (
            "max.in.flight.requests.per.connection",
            "0",
            "max.in.flight.requests.per.connection",
        ),
        // (0 is the Java client's "no batching": taken, as one record per batch.)
        ("batch.size", "2147483648", "batch.size"),
        ("max.request.size", "10", "max.request.size"),
        ("request.timeout.ms", "0", "request.timeout.ms"),
        ("delivery.timeout.ms", "1", "delivery.timeout.ms"),
        ("bootstrap.servers", " , ", "bootstrap.servers"),
        ("bootstrap.servers", "nohost", "bootstrap.servers"),
    ] {
        match props((name, value)) {
            Err(PropertyError::Config(e)) => assert_eq!(e.setting, setting, "{name}={value}"),
            other => panic!("{name}={value}: {other:?}"),
        }
    }
    for (name, value) in [
        ("linger.ms", "-1"),
        ("linger.ms", "soon"),
        ("batch.size", "99999999999999999999999"),
        ("max.in.flight.requests.per.connection", "-1"),
        ("acks", "2"),
        ("enable.idempotence", "yes"),
        ("request.timeout.ms", "1.5"),
    ] {
        match props((name, value)) {
            Err(e @ PropertyError::Invalid { .. }) => {
                assert!(e.to_string().contains(name), "{e}");
                assert!(e.to_string().contains(value), "{e}");
            }
            other => panic!("{name}={value}: {other:?}"),
        }
    }
    // acks 0 and 1 turn idempotence off unless it is asked for: then they conflict.
    for acks in ["0", "1"] {
        match config_from_properties(&[
            ("bootstrap.servers", bootstrap.as_str()),
            ("enable.idempotence", "true"),
            ("acks", acks),
        ]) {
            Err(PropertyError::Config(e)) => assert_eq!(e.setting, "acks", "acks={acks}"),
            other => panic!("acks={acks} with idempotence: {other:?}"),
        }
    }
    // What the Java client takes is taken (a review of 2026-12-05): a retry backoff above
    // its maximum (a constant backoff), a maximum request above the buffer.
    ProducerConfig {
        retry_backoff: ms(200),
        retry_backoff_max: ms(100),
        buffer_memory: 1000,
        max_request_size: 2000,
        ..good.clone()
    }
    .validate()
    .expect("taken, as the Java client takes them");
    props(("retry.backoff.max.ms", "1")).expect("a constant backoff of retry.backoff.ms");
    match props(("linger", "10")) {
        Err(PropertyError::Unknown(n)) => assert_eq!(n, "linger"),
        other => panic!("{other:?}"),
    }

    l.enqueue_n(&p, 30).await;
    l.resolve(RESOLVE).await;
    p.close().await;
    let s = l.read_and_check(&tansu.addr().to_string()).await;
    assert_eq!(s.delivered, 60, "{s:?}");
}

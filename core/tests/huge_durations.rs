//! `Duration::MAX` in any duration setting never panics the producer: validation adds
//! durations saturating, and the producer caps each at `ProducerConfig::MAX_DURATION`
//! ("effectively never"), so every deadline it computes fits an `Instant`.

#[path = "../benches/support/mod.rs"]
mod support;

use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use kprod_core::{ConfigError, Event, Output, Producer, ProducerConfig, Record};
use support::{respond, TOPIC};

fn base() -> ProducerConfig {
    ProducerConfig {
        bootstrap_servers: vec!["bench:9092".into()],
        ..ProducerConfig::default()
    }
}

/// Every duration setting, set to `Duration::MAX` (with what it needs to stay valid).
fn each_at_max() -> Vec<(&'static str, ProducerConfig)> {
    let max = Duration::MAX;
    let never = |mut c: ProducerConfig| {
        c.delivery_timeout = max; // the only way linger/request timeout may be huge
        c
    };
    vec![
        (
            "linger",
            never(ProducerConfig {
                linger: max,
                ..base()
            }),
        ),
        (
            "request_timeout",
            never(ProducerConfig {
                request_timeout: max,
                ..base()
            }),
        ),
        (
            "connect_timeout",
            ProducerConfig {
                connect_timeout: max,
                ..base()
            },
        ),
        (
            "delivery_timeout",
            ProducerConfig {
                delivery_timeout: max,
                ..base()
            },
        ),
        (
            "retry_backoff",
            ProducerConfig {
                retry_backoff: max,
                retry_backoff_max: max,
                ..base()
            },
        ),
        (
            "retry_backoff_max",
            ProducerConfig {
                retry_backoff_max: max,
                ..base()
            },
        ),
        (
            "reconnect_backoff",
            ProducerConfig {
                reconnect_backoff: max,
                ..base()
            },
        ),
        (
            "metadata_max_age",
            ProducerConfig {
                metadata_max_age: max,
                ..base()
            },
        ),
        (
            "max_block",
            ProducerConfig {
                max_block: max,
                ..base()
            },
        ),
        (
            "producer_id_expiration",
            ProducerConfig {
                producer_id_expiration: Some(max),
                ..base()
            },
        ),
        (
            "all of them",
            ProducerConfig {
                linger: max,
                request_timeout: max,
                connect_timeout: max,
                delivery_timeout: max,
                retry_backoff: max,
                retry_backoff_max: max,
                reconnect_backoff: max,
                metadata_max_age: max,
                max_block: max,
                producer_id_expiration: Some(max),
                ..base()
            },
        ),
    ]
}

/// Where huge durations break a rule, validation says so instead of panicking.
#[test]
fn huge_durations_that_break_a_rule_are_config_errors() {
    for cfg in [
        ProducerConfig {
            request_timeout: Duration::MAX,
            ..base()
        },
        ProducerConfig {
            linger: Duration::MAX,
            ..base()
        },
        ProducerConfig {
            linger: Duration::MAX,
            request_timeout: Duration::MAX,
            ..base()
        },
    ] {
        let e: ConfigError = Producer::new(cfg.clone(), Instant::now()).unwrap_err();
        assert_eq!(e.setting, "delivery.timeout.ms", "{cfg:?}");
        assert_eq!(cfg.validate(), Err(e));
    }
    // A retry backoff above its maximum is a constant backoff of that value (as before
    // Kafka 3.7), capped like every duration.
    let p = Producer::new(
        ProducerConfig {
            retry_backoff: Duration::MAX,
            ..base()
        },
        Instant::now(),
    )
    .unwrap();
    assert_eq!(p.config().retry_backoff, ProducerConfig::MAX_DURATION);
    assert_eq!(p.config().retry_backoff_max, ProducerConfig::MAX_DURATION);
}

/// With each duration at `Duration::MAX`, the producer is built (the value in use capped at
/// `MAX_DURATION`), delivers a record, and survives time jumping to its far deadlines.
#[test]
fn a_producer_with_each_duration_at_max_works_and_never_panics() {
    for (what, cfg) in each_at_max() {
        let now = Instant::now();
        let mut p = Producer::new(cfg, now).unwrap_or_else(|e| panic!("{what}: {e}"));
        let c = p.config();
        for d in [
            c.linger,
            c.request_timeout,
            c.connect_timeout,
            c.delivery_timeout,
            c.retry_backoff,
            c.retry_backoff_max,
            c.reconnect_backoff,
            c.metadata_max_age,
            c.max_block,
            c.producer_state_expiry(),
        ] {
            assert!(d <= ProducerConfig::MAX_DURATION, "{what}: {d:?}");
        }
        let id = p.send(now, Record::new(TOPIC, "x")).unwrap();
        p.flush(now); // a huge linger.ms waits for the flush
        let mut conn = None;
        let mut wire = BytesMut::new();
        let mut next_offset = 0;
        let mut delivered = false;
        let mut last_wait = None;
        for _ in 0..100 {
            let until = loop {
                match p.poll_output() {
                    Output::Connect { conn: c, .. } => {
                        conn = Some(c);
                        wire.clear();
                        p.handle_connected(now, c);
                    }
                    Output::Transmit { bytes, .. } => wire.extend_from_slice(&bytes),
                    Output::Event(Event::Delivered(d)) if d.ids.contains(&id) => delivered = true,
                    Output::Event(Event::Failed { .. }) => panic!("{what}: failed"),
                    Output::Wait { until } => break until,
                    _ => {}
                }
            };
            last_wait = until;
            if wire.len() < 4 {
                break;
            }
            let len = 4 + i32::from_be_bytes(wire[..4].try_into().unwrap()) as usize;
            let frame: Bytes = wire.split_to(len).freeze();
            let mut answer = BytesMut::from(&respond(&frame, &mut next_offset)[..]);
            p.handle_read(now, conn.unwrap(), &mut answer);
        }
        assert!(delivered, "{what}");
        // The far deadlines (metadata refresh, at most MAX_DURATION away) fit an Instant;
        // jumping to them is harmless.
        if let Some(t) = last_wait {
            assert!(t <= now + ProducerConfig::MAX_DURATION, "{what}");
            p.handle_timeout(t);
            while !matches!(p.poll_output(), Output::Wait { .. }) {}
        }
        let later = now + ProducerConfig::MAX_DURATION;
        p.handle_timeout(later);
        while !matches!(p.poll_output(), Output::Wait { .. }) {}
        p.send(later, Record::new(TOPIC, "y")).unwrap();
        while !matches!(p.poll_output(), Output::Wait { .. }) {}
    }
}

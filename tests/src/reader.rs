//! The independent reader: librdkafka's consumer (through the `rdkafka` crate) reads back what
//! kprod wrote, without using any kprod code, and the verdict compares it with what kprod
//! reported.
//!
//! It reads every partition from the beginning until librdkafka reports the end of each
//! partition (`enable.partition.eof`, driven by Fetch's high watermark: Tansu's ListOffsets
//! answer is not the log end, see shared/design/peers.md).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::Message;
use rdkafka::{Offset, TopicPartitionList};

/// One record as read back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadRecord {
    /// Offset in the partition.
    pub offset: i64,
    /// Key.
    pub key: Option<Vec<u8>>,
    /// Value.
    pub value: Option<Vec<u8>>,
}

/// Reads all of `topic`'s `partitions` from `brokers` until each partition reports its end,
/// grouped by partition in offset order. Fails after `timeout`.
pub fn read_topic(
    brokers: &str,
    topic: &str,
    partitions: i32,
    timeout: Duration,
) -> Result<BTreeMap<i32, Vec<ReadRecord>>, String> {
    let mut out: BTreeMap<i32, Vec<ReadRecord>> =
        (0..partitions).map(|p| (p, Vec::new())).collect();
    for r in read_topic_full(brokers, topic, partitions, timeout)? {
        if let Some(v) = out.get_mut(&r.partition) {
            v.push(ReadRecord {
                offset: r.offset,
                key: r.key,
                value: r.value,
            });
        }
    }
    Ok(out)
}

/// One record as read back, with everything a record carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FullRecord {
    /// Partition.
    pub partition: i32,
    /// Offset in the partition.
    pub offset: i64,
    /// Create timestamp (ms), if the record has one.
    pub timestamp: Option<i64>,
    /// Key.
    pub key: Option<Vec<u8>>,
    /// Value.
    pub value: Option<Vec<u8>>,
    /// Headers in order: name and nullable value.
    pub headers: Vec<(String, Option<Vec<u8>>)>,
}

/// Reads all of `topic`'s `partitions` from the beginning with librdkafka's consumer (which
/// decompresses gzip, snappy, lz4 and zstd batches itself) until each partition reports its
/// end, keeping timestamps and headers. Fails after `timeout`.
pub fn read_topic_full(
    brokers: &str,
    topic: &str,
    partitions: i32,
    timeout: Duration,
) -> Result<Vec<FullRecord>, String> {
    use rdkafka::message::Headers;
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .set("group.id", "kprod-verifier")
        .set("enable.auto.commit", "false")
        .set("enable.partition.eof", "true")
        .set("auto.offset.reset", "earliest")
        .set("isolation.level", "read_uncommitted")
        .set("check.crcs", "true")
        .create()
        .map_err(|e| format!("cannot create the rdkafka consumer: {e}"))?;
    let mut tpl = TopicPartitionList::new();
    for p in 0..partitions {
        tpl.add_partition_offset(topic, p, Offset::Beginning)
            .map_err(|e| e.to_string())?;
    }
    consumer.assign(&tpl).map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    let mut at_end = vec![false; partitions as usize];
    let deadline = Instant::now() + timeout;
    while at_end.iter().any(|e| !e) {
        if Instant::now() > deadline {
            return Err(format!(
                "reader timed out after {timeout:?}; partitions at end: {at_end:?}; read {}",
                out.len()
            ));
        }
        match consumer.poll(Duration::from_millis(200)) {
            None => {}
            Some(Ok(m)) => {
                let p = m.partition();
                let headers = m
                    .headers()
                    .map(|hs| {
                        hs.iter()
                            .map(|h| (h.key.to_owned(), h.value.map(<[u8]>::to_vec)))
                            .collect()
                    })
                    .unwrap_or_default();
                out.push(FullRecord {
                    partition: p,
                    offset: m.offset(),
                    timestamp: m.timestamp().to_millis(),
                    key: m.key().map(<[u8]>::to_vec),
                    value: m.payload().map(<[u8]>::to_vec),
                    headers,
                });
                if let Some(e) = at_end.get_mut(p as usize) {
                    *e = false;
                }
            }
            Some(Err(KafkaError::PartitionEOF(p))) => {
                if let Some(e) = at_end.get_mut(p as usize) {
                    *e = true;
                }
            }
            Some(Err(e)) => return Err(format!("reader error: {e}")),
        }
    }
    Ok(out)
}

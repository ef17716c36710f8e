//! Golden byte vectors, written out one field per line from the protocol specification
//! (<https://kafka.apache.org/protocol.html>, `DefaultRecordBatch.java`, `DefaultRecord.java`).
//! Our encoder must produce exactly these bytes and our decoder must read them back.
//!
//! The CRC-32C values were computed once, independently of the crate (a bitwise Castagnoli
//! CRC over the bytes from `attributes` to the end of the batch), and hardcoded; the encoder
//! tests below check them against what `crc32c` computes.
//!
//! Varints in records are zigzag-encoded: length 11 is `0x16`, -1 (null) is `0x01`.
//! Compact lengths in flexible messages are `length + 1` (0 is null).

use bytes::{Bytes, BytesMut};
use kprod_core::protocol::init_producer_id::{InitProducerIdRequest, InitProducerIdResponse};
use kprod_core::protocol::metadata::{
    MetadataBroker, MetadataPartition, MetadataRequest, MetadataResponse, MetadataTopic,
};
use kprod_core::protocol::produce::{
    PartitionProduceData, PartitionProduceResponse, ProduceRequest, ProduceResponse,
    TopicProduceData, TopicProduceResponse,
};
use kprod_core::protocol::record_batch::{
    BatchHeader, Header, Record, RecordBatch, RecordBatchBuilder,
};
use kprod_core::protocol::{
    decode_response, encode_request, encode_response, FrameDecoder, Message, Reader, RequestHeader,
    ResponseHeader,
};

/// 2023-11-14T22:13:20Z in milliseconds: 0x0000_018b_cfe5_6800.
const TS: i64 = 1_700_000_000_000;

// ---------------------------------------------------------------------------------------------
// (a) Produce request v9: a whole frame with one topic, one partition and one batch.
// ---------------------------------------------------------------------------------------------

#[rustfmt::skip]
const PRODUCE_V9_FRAME: &[u8] = &[
    0x00, 0x00, 0x00, 0x71,                                 // frame size: 113 bytes follow
    // request header v2
    0x00, 0x00,                                             // request_api_key: 0 (Produce)
    0x00, 0x09,                                             // request_api_version: 9
    0x00, 0x00, 0x00, 0x07,                                 // correlation_id: 7
    0x00, 0x05, b'k', b'p', b'r', b'o', b'd',               // client_id: "kprod" (classic i16 length, even in v2)
    0x00,                                                   // header tagged fields: none
    // ProduceRequest v9 body
    0x00,                                                   // transactional_id: null
    0xff, 0xff,                                             // acks: -1
    0x00, 0x00, 0x75, 0x30,                                 // timeout_ms: 30000
    0x02,                                                   // topic_data: 1 topic
    0x07, b'e', b'v', b'e', b'n', b't', b's',               // topic_data[0].name: "events"
    0x02,                                                   // topic_data[0].partition_data: 1 partition
    0x00, 0x00, 0x00, 0x00,                                 // partition_data[0].index: 0
    0x4a,                                                   // partition_data[0].records: 73 bytes
    // the record batch
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,         // base_offset: 0
    0x00, 0x00, 0x00, 0x3d,                                 // batch_length: 61
    0xff, 0xff, 0xff, 0xff,                                 // partition_leader_epoch: -1
    0x02,                                                   // magic: 2
    0xa8, 0x8e, 0x49, 0xd7,                                 // crc: CRC-32C of attributes..end
    0x00, 0x00,                                             // attributes: none
    0x00, 0x00, 0x00, 0x00,                                 // last_offset_delta: 0
    0x00, 0x00, 0x01, 0x8b, 0xcf, 0xe5, 0x68, 0x00,         // base_timestamp: TS
    0x00, 0x00, 0x01, 0x8b, 0xcf, 0xe5, 0x68, 0x00,         // max_timestamp: TS
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x10, 0x92,         // producer_id: 4242
    0x00, 0x03,                                             // producer_epoch: 3
    0x00, 0x00, 0x00, 0x00,                                 // base_sequence: 0
    0x00, 0x00, 0x00, 0x01,                                 // records_count: 1
    0x16,                                                   // record[0].length: 11
    0x00,                                                   // record[0].attributes: 0
    0x00,                                                   // record[0].timestamp_delta: 0
    0x00,                                                   // record[0].offset_delta: 0
    0x01,                                                   // record[0].key: null
    0x0a, b'h', b'e', b'l', b'l', b'o',                     // record[0].value: "hello"
    0x00,                                                   // record[0].headers: 0
    // end of the record batch
    0x00,                                                   // partition_data[0] tagged fields: none
    0x00,                                                   // topic_data[0] tagged fields: none
    0x00,                                                   // body tagged fields: none
];

/// The batch inside [`PRODUCE_V9_FRAME`].
const PRODUCE_V9_BATCH: std::ops::Range<usize> = 41..114;

fn produce_v9_batch() -> RecordBatch {
    RecordBatch {
        base_offset: 0,
        partition_leader_epoch: -1,
        attributes: 0,
        last_offset_delta: 0,
        base_timestamp: TS,
        max_timestamp: TS,
        producer_id: 4242,
        producer_epoch: 3,
        base_sequence: 0,
        records: vec![Record {
            attributes: 0,
            timestamp_delta: 0,
            offset_delta: 0,
            key: None,
            value: Some(Bytes::from_static(b"hello")),
            headers: vec![],
        }],
    }
}

fn produce_v9_request(records: Bytes) -> ProduceRequest {
    ProduceRequest {
        transactional_id: None,
        acks: -1,
        timeout_ms: 30_000,
        topic_data: vec![TopicProduceData {
            name: "events".into(),
            partition_data: vec![PartitionProduceData {
                index: 0,
                records: Some(records),
            }],
        }],
    }
}

#[test]
fn produce_v9_frame_is_encoded_exactly() {
    let mut b = RecordBatchBuilder::with_capacity(0);
    b.push(TS, None, Some(b"hello"), &[]);
    let batch = b.seal(4242, 3, 0);
    assert_eq!(&batch[..], &PRODUCE_V9_FRAME[PRODUCE_V9_BATCH]);
    assert_eq!(produce_v9_batch().encode(), batch);

    let frame = encode_request(&produce_v9_request(batch), 9, 7, Some("kprod"));
    assert_eq!(&frame[..], PRODUCE_V9_FRAME);
}

#[test]
fn produce_v9_frame_decodes_to_the_expected_fields() {
    let mut buf = BytesMut::from(PRODUCE_V9_FRAME);
    let frame = FrameDecoder::default().decode(&mut buf).unwrap().unwrap();
    assert!(buf.is_empty());
    assert_eq!(frame.len(), 0x71);

    let mut r = Reader::new(frame);
    let header = RequestHeader::decode(2, &mut r).unwrap();
    assert_eq!(header.api_key, 0);
    assert_eq!(header.api_version, 9);
    assert_eq!(header.correlation_id, 7);
    assert_eq!(header.client_id.as_deref(), Some("kprod"));

    let body = ProduceRequest::decode(9, &mut r).unwrap();
    r.expect_end().unwrap();
    assert_eq!(body.transactional_id, None);
    assert_eq!(body.acks, -1);
    assert_eq!(body.timeout_ms, 30_000);
    assert_eq!(body.topic_data.len(), 1);
    assert_eq!(body.topic_data[0].name, "events");
    assert_eq!(body.topic_data[0].partition_data.len(), 1);
    let p = &body.topic_data[0].partition_data[0];
    assert_eq!(p.index, 0);
    let records = p.records.clone().unwrap();
    assert_eq!(&records[..], &PRODUCE_V9_FRAME[PRODUCE_V9_BATCH]);
    assert_eq!(body, produce_v9_request(records.clone()));

    let batches = RecordBatch::decode_all(records).unwrap();
    assert_eq!(batches, vec![produce_v9_batch()]);
}

// ---------------------------------------------------------------------------------------------
// (b) A record batch with two records: one with a key and a header, one with a null value.
// ---------------------------------------------------------------------------------------------

#[rustfmt::skip]
const TWO_RECORD_BATCH: &[u8] = &[
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,         // base_offset: 0
    0x00, 0x00, 0x00, 0x49,                                 // batch_length: 73
    0xff, 0xff, 0xff, 0xff,                                 // partition_leader_epoch: -1
    0x02,                                                   // magic: 2
    0xb4, 0xea, 0xbc, 0x10,                                 // crc: CRC-32C of attributes..end
    0x00, 0x00,                                             // attributes: none
    0x00, 0x00, 0x00, 0x01,                                 // last_offset_delta: 1
    0x00, 0x00, 0x01, 0x8b, 0xcf, 0xe5, 0x68, 0x00,         // base_timestamp: TS
    0x00, 0x00, 0x01, 0x8b, 0xcf, 0xe5, 0x68, 0x05,         // max_timestamp: TS + 5
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x10, 0x92,         // producer_id: 4242
    0x00, 0x03,                                             // producer_epoch: 3
    0x00, 0x00, 0x00, 0x11,                                 // base_sequence: 17
    0x00, 0x00, 0x00, 0x02,                                 // records_count: 2
    0x1c,                                                   // record[0].length: 14
    0x00,                                                   // record[0].attributes: 0
    0x00,                                                   // record[0].timestamp_delta: 0
    0x00,                                                   // record[0].offset_delta: 0
    0x04, b'k', b'1',                                       // record[0].key: "k1"
    0x04, b'v', b'1',                                       // record[0].value: "v1"
    0x02,                                                   // record[0].headers: 1
    0x02, b'h',                                             // record[0].headers[0].key: "h"
    0x02, b'x',                                             // record[0].headers[0].value: "x"
    0x10,                                                   // record[1].length: 8
    0x00,                                                   // record[1].attributes: 0
    0x0a,                                                   // record[1].timestamp_delta: 5
    0x02,                                                   // record[1].offset_delta: 1
    0x04, b'k', b'2',                                       // record[1].key: "k2"
    0x01,                                                   // record[1].value: null
    0x00,                                                   // record[1].headers: 0
];

fn two_record_headers() -> Vec<Header> {
    vec![Header {
        key: "h".into(),
        value: Some(Bytes::from_static(b"x")),
    }]
}

fn two_record_batch() -> RecordBatch {
    RecordBatch {
        base_offset: 0,
        partition_leader_epoch: -1,
        attributes: 0,
        last_offset_delta: 1,
        base_timestamp: TS,
        max_timestamp: TS + 5,
        producer_id: 4242,
        producer_epoch: 3,
        base_sequence: 17,
        records: vec![
            Record {
                attributes: 0,
                timestamp_delta: 0,
                offset_delta: 0,
                key: Some(Bytes::from_static(b"k1")),
                value: Some(Bytes::from_static(b"v1")),
                headers: two_record_headers(),
            },
            Record {
                attributes: 0,
                timestamp_delta: 5,
                offset_delta: 1,
                key: Some(Bytes::from_static(b"k2")),
                value: None,
                headers: vec![],
            },
        ],
    }
}

#[test]
fn two_record_batch_is_encoded_exactly() {
    let mut b = RecordBatchBuilder::with_capacity(0);
    b.push(TS, Some(b"k1"), Some(b"v1"), &two_record_headers());
    b.push(TS + 5, Some(b"k2"), None, &[]);
    assert_eq!(b.size(), TWO_RECORD_BATCH.len(), "size before sealing");
    assert_eq!(&b.seal(4242, 3, 17)[..], TWO_RECORD_BATCH);
    assert_eq!(&two_record_batch().encode()[..], TWO_RECORD_BATCH);
}

#[test]
fn two_record_batch_decodes_to_the_expected_fields() {
    let batches = RecordBatch::decode_all(Bytes::from_static(TWO_RECORD_BATCH)).unwrap();
    assert_eq!(batches.len(), 1);
    let d = &batches[0];
    let e = two_record_batch();
    assert_eq!(d.base_offset, e.base_offset);
    assert_eq!(d.partition_leader_epoch, e.partition_leader_epoch);
    assert_eq!(d.attributes, e.attributes);
    assert_eq!(d.last_offset_delta, e.last_offset_delta);
    assert_eq!(d.base_timestamp, e.base_timestamp);
    assert_eq!(d.max_timestamp, e.max_timestamp);
    assert_eq!(d.producer_id, e.producer_id);
    assert_eq!(d.producer_epoch, e.producer_epoch);
    assert_eq!(d.base_sequence, e.base_sequence);
    assert_eq!(d.records, e.records);
    assert_eq!(d, &e);

    let h = BatchHeader::peek(TWO_RECORD_BATCH).unwrap();
    assert_eq!(
        (
            h.producer_id,
            h.producer_epoch,
            h.base_sequence,
            h.records_count,
            h.last_offset_delta
        ),
        (4242, 3, 17, 2, 1)
    );
}

#[test]
fn the_golden_crcs_are_crc32c_of_attributes_to_end() {
    for (batch, crc) in [
        (TWO_RECORD_BATCH, 0xb4ea_bc10_u32),
        (&PRODUCE_V9_FRAME[PRODUCE_V9_BATCH], 0xa88e_49d7),
    ] {
        assert_eq!(crc32c::crc32c(&batch[21..]), crc);
        assert_eq!(batch[17..21], crc.to_be_bytes());
    }
}

#[test]
fn crc32c_check_value() {
    // The standard check value of CRC-32C (Castagnoli) over "123456789".
    assert_eq!(crc32c::crc32c(b"123456789"), 0xE306_9283);
}

// ---------------------------------------------------------------------------------------------
// (c) Metadata response v12: a whole frame with one broker and one topic with two partitions.
// ---------------------------------------------------------------------------------------------

#[rustfmt::skip]
const METADATA_V12_RESPONSE_FRAME: &[u8] = &[
    0x00, 0x00, 0x00, 0x81,                                 // frame size: 129 bytes follow
    // response header v1
    0x00, 0x00, 0x00, 0x07,                                 // correlation_id: 7
    0x00,                                                   // header tagged fields: none
    // MetadataResponse v12 body
    0x00, 0x00, 0x00, 0x00,                                 // throttle_time_ms: 0
    0x02,                                                   // brokers: 1
    0x00, 0x00, 0x00, 0x01,                                 // brokers[0].node_id: 1
    0x09, b'b', b'r', b'o', b'k', b'e', b'r', b'-', b'1',   // brokers[0].host: "broker-1"
    0x00, 0x00, 0x23, 0x84,                                 // brokers[0].port: 9092
    0x00,                                                   // brokers[0].rack: null
    0x00,                                                   // brokers[0] tagged fields: none
    0x0a, b'c', b'l', b'u', b's', b't', b'e', b'r', b'-', b'A', // cluster_id: "cluster-A"
    0x00, 0x00, 0x00, 0x01,                                 // controller_id: 1
    0x02,                                                   // topics: 1
    0x00, 0x00,                                             // topics[0].error_code: 0
    0x07, b'e', b'v', b'e', b'n', b't', b's',               // topics[0].name: "events"
    0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08,
    0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f, 0x10,         // topics[0].topic_id: 01020304-0506-0708-090a-0b0c0d0e0f10
    0x00,                                                   // topics[0].is_internal: false
    0x03,                                                   // topics[0].partitions: 2
    0x00, 0x00,                                             // partitions[0].error_code: 0
    0x00, 0x00, 0x00, 0x00,                                 // partitions[0].partition_index: 0
    0x00, 0x00, 0x00, 0x01,                                 // partitions[0].leader_id: 1
    0x00, 0x00, 0x00, 0x05,                                 // partitions[0].leader_epoch: 5
    0x02, 0x00, 0x00, 0x00, 0x01,                           // partitions[0].replica_nodes: [1]
    0x02, 0x00, 0x00, 0x00, 0x01,                           // partitions[0].isr_nodes: [1]
    0x01,                                                   // partitions[0].offline_replicas: []
    0x00,                                                   // partitions[0] tagged fields: none
    0x00, 0x05,                                             // partitions[1].error_code: 5 (LEADER_NOT_AVAILABLE)
    0x00, 0x00, 0x00, 0x01,                                 // partitions[1].partition_index: 1
    0xff, 0xff, 0xff, 0xff,                                 // partitions[1].leader_id: -1
    0x00, 0x00, 0x00, 0x05,                                 // partitions[1].leader_epoch: 5
    0x02, 0x00, 0x00, 0x00, 0x01,                           // partitions[1].replica_nodes: [1]
    0x01,                                                   // partitions[1].isr_nodes: []
    0x02, 0x00, 0x00, 0x00, 0x01,                           // partitions[1].offline_replicas: [1]
    0x00,                                                   // partitions[1] tagged fields: none
    0x80, 0x00, 0x00, 0x00,                                 // topics[0].topic_authorized_operations: i32::MIN (not requested)
    0x00,                                                   // topics[0] tagged fields: none
    0x00,                                                   // body tagged fields: none (no cluster_authorized_operations since v11)
];

fn metadata_v12_response() -> MetadataResponse {
    MetadataResponse {
        throttle_time_ms: 0,
        brokers: vec![MetadataBroker {
            node_id: 1,
            host: "broker-1".into(),
            port: 9092,
            rack: None,
        }],
        cluster_id: Some("cluster-A".into()),
        controller_id: 1,
        topics: vec![MetadataTopic {
            error_code: 0,
            name: Some("events".into()),
            topic_id: [
                0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e,
                0x0f, 0x10,
            ],
            is_internal: false,
            partitions: vec![
                MetadataPartition {
                    error_code: 0,
                    partition_index: 0,
                    leader_id: 1,
                    leader_epoch: 5,
                    replica_nodes: vec![1],
                    isr_nodes: vec![1],
                    offline_replicas: vec![],
                },
                MetadataPartition {
                    error_code: 5,
                    partition_index: 1,
                    leader_id: -1,
                    leader_epoch: 5,
                    replica_nodes: vec![1],
                    isr_nodes: vec![],
                    offline_replicas: vec![1],
                },
            ],
            topic_authorized_operations: i32::MIN,
        }],
        // Not on the wire since v11; the decoder gives the JSON default.
        cluster_authorized_operations: i32::MIN,
    }
}

#[test]
fn metadata_v12_response_frame_is_encoded_exactly() {
    let frame = encode_response::<MetadataRequest>(&metadata_v12_response(), 12, 7);
    assert_eq!(&frame[..], METADATA_V12_RESPONSE_FRAME);
}

#[test]
fn metadata_v12_response_frame_decodes_to_the_expected_fields() {
    let mut buf = BytesMut::from(METADATA_V12_RESPONSE_FRAME);
    let frame = FrameDecoder::default().decode(&mut buf).unwrap().unwrap();
    assert!(buf.is_empty());
    assert_eq!(ResponseHeader::peek_correlation_id(&frame), Ok(7));

    let (header, d) = decode_response::<MetadataRequest>(12, frame).unwrap();
    assert_eq!(header, ResponseHeader { correlation_id: 7 });
    let e = metadata_v12_response();
    assert_eq!(d.throttle_time_ms, e.throttle_time_ms);
    assert_eq!(d.brokers, e.brokers);
    assert_eq!(d.cluster_id, e.cluster_id);
    assert_eq!(d.controller_id, e.controller_id);
    assert_eq!(d.topics.len(), 1);
    let (dt, et) = (&d.topics[0], &e.topics[0]);
    assert_eq!(dt.error_code, et.error_code);
    assert_eq!(dt.name, et.name);
    assert_eq!(dt.topic_id, et.topic_id);
    assert_eq!(dt.is_internal, et.is_internal);
    assert_eq!(dt.partitions, et.partitions);
    assert_eq!(
        dt.topic_authorized_operations,
        et.topic_authorized_operations
    );
    assert_eq!(
        d.cluster_authorized_operations,
        e.cluster_authorized_operations
    );
    assert_eq!(d, e);

    // The body alone, through `decode_exact`.
    let body = Bytes::from_static(&METADATA_V12_RESPONSE_FRAME[9..]);
    assert_eq!(MetadataResponse::decode_exact(12, body), Ok(e));
}

// ---------------------------------------------------------------------------------------------
// (d) Produce request v3: the frame of (a) in the non-flexible encoding (Kafka 0.11, and what
//     kprod speaks to a broker capped at Produce v3..v8).
// ---------------------------------------------------------------------------------------------

#[rustfmt::skip]
const PRODUCE_V3_FRAME_HEAD: &[u8] = &[
    0x00, 0x00, 0x00, 0x78,                                 // frame size: 120 bytes follow
    // request header v1
    0x00, 0x00,                                             // request_api_key: 0 (Produce)
    0x00, 0x03,                                             // request_api_version: 3
    0x00, 0x00, 0x00, 0x07,                                 // correlation_id: 7
    0x00, 0x05, b'k', b'p', b'r', b'o', b'd',               // client_id: "kprod"
    // ProduceRequest v3 body
    0xff, 0xff,                                             // transactional_id: null (i16 -1)
    0xff, 0xff,                                             // acks: -1
    0x00, 0x00, 0x75, 0x30,                                 // timeout_ms: 30000
    0x00, 0x00, 0x00, 0x01,                                 // topic_data: 1 topic (i32 count)
    0x00, 0x06, b'e', b'v', b'e', b'n', b't', b's',         // topic_data[0].name: "events" (i16 length)
    0x00, 0x00, 0x00, 0x01,                                 // topic_data[0].partition_data: 1 partition
    0x00, 0x00, 0x00, 0x00,                                 // partition_data[0].index: 0
    0x00, 0x00, 0x00, 0x49,                                 // partition_data[0].records: 73 bytes (i32 length)
    // ...followed by the 73-byte record batch of (a), and nothing else: no tagged fields
];

#[test]
fn produce_v3_frame_is_encoded_exactly_and_decodes() {
    let batch = Bytes::copy_from_slice(&PRODUCE_V9_FRAME[PRODUCE_V9_BATCH]);
    let golden: Vec<u8> = [PRODUCE_V3_FRAME_HEAD, &batch[..]].concat();
    let frame = encode_request(&produce_v9_request(batch.clone()), 3, 7, Some("kprod"));
    assert_eq!(&frame[..], &golden[..]);
    // The chunked encoding (what the producer writes) is the same frame.
    let chunks = produce_v9_request(batch.clone()).encode_chunks(3, 7, Some("kprod"));
    assert_eq!(chunks.concat(), golden);

    let mut buf = BytesMut::from(&golden[..]);
    let frame = FrameDecoder::default().decode(&mut buf).unwrap().unwrap();
    let mut r = Reader::new(frame);
    let header = RequestHeader::decode(1, &mut r).unwrap();
    assert_eq!((header.api_key, header.api_version), (0, 3));
    let body = ProduceRequest::decode(3, &mut r).unwrap();
    r.expect_end().unwrap();
    assert_eq!(body, produce_v9_request(batch));
}

// ---------------------------------------------------------------------------------------------
// (e) Produce responses v8, v5 and v3: the non-flexible shapes, one partition acknowledged at
//     offset 42.
// ---------------------------------------------------------------------------------------------

#[rustfmt::skip]
const PRODUCE_V8_RESPONSE_FRAME: &[u8] = &[
    0x00, 0x00, 0x00, 0x3c,                                 // frame size: 60 bytes follow
    // response header v0
    0x00, 0x00, 0x00, 0x07,                                 // correlation_id: 7
    // ProduceResponse v8 body
    0x00, 0x00, 0x00, 0x01,                                 // responses: 1 topic
    0x00, 0x06, b'e', b'v', b'e', b'n', b't', b's',         // responses[0].name: "events"
    0x00, 0x00, 0x00, 0x01,                                 // responses[0].partition_responses: 1
    0x00, 0x00, 0x00, 0x00,                                 // index: 0
    0x00, 0x00,                                             // error_code: 0
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x2a,         // base_offset: 42
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,         // log_append_time_ms: -1 (CreateTime)
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,         // log_start_offset: 0 (v5+)
    0x00, 0x00, 0x00, 0x00,                                 // record_errors: none (v8+)
    0xff, 0xff,                                             // error_message: null (v8+)
    0x00, 0x00, 0x00, 0x00,                                 // throttle_time_ms: 0 (last, outside the array)
];

fn produce_response(log_start_offset: i64) -> ProduceResponse {
    ProduceResponse {
        responses: vec![TopicProduceResponse {
            name: "events".into(),
            partition_responses: vec![PartitionProduceResponse {
                index: 0,
                error_code: 0,
                base_offset: 42,
                log_append_time_ms: -1,
                log_start_offset,
                record_errors: vec![],
                error_message: None,
                current_leader: None,
            }],
        }],
        throttle_time_ms: 0,
        node_endpoints: vec![],
    }
}

#[test]
fn produce_v3_to_v8_responses_are_encoded_exactly_and_decode() {
    let v8 = PRODUCE_V8_RESPONSE_FRAME;
    // v5..v7 end the partition after log_start_offset; v3..v4 after log_append_time_ms.
    let v5: Vec<u8> = [&[0x00, 0x00, 0x00, 0x36][..], &v8[4..54], &v8[60..]].concat();
    let v3: Vec<u8> = [&[0x00, 0x00, 0x00, 0x2e][..], &v8[4..46], &v8[60..]].concat();
    for (version, golden, lso) in [
        (8, v8.to_vec(), 0),
        (7, v5.clone(), 0),
        (5, v5, 0),
        (4, v3.clone(), -1),
        (3, v3, -1),
    ] {
        let frame = encode_response::<ProduceRequest>(&produce_response(lso), version, 7);
        assert_eq!(&frame[..], &golden[..], "v{version}");
        let mut buf = BytesMut::from(&golden[..]);
        let f = FrameDecoder::default().decode(&mut buf).unwrap().unwrap();
        let (h, body) = decode_response::<ProduceRequest>(version, f).unwrap();
        assert_eq!(h.correlation_id, 7);
        // Below v5 there is no log_start_offset: decoded as -1 (unknown), which the producer
        // never takes for a benign state loss.
        assert_eq!(body, produce_response(lso), "v{version}");
    }
}

// ---------------------------------------------------------------------------------------------
// (f) Metadata response v1 (the oldest kprod speaks: no cluster id, throttle time, leader
//     epoch, offline replicas or authorized operations).
// ---------------------------------------------------------------------------------------------

#[rustfmt::skip]
const METADATA_V1_RESPONSE_FRAME: &[u8] = &[
    0x00, 0x00, 0x00, 0x4d,                                 // frame size: 77 bytes follow
    // response header v0
    0x00, 0x00, 0x00, 0x07,                                 // correlation_id: 7
    // MetadataResponse v1 body
    0x00, 0x00, 0x00, 0x01,                                 // brokers: 1
    0x00, 0x00, 0x00, 0x01,                                 // brokers[0].node_id: 1
    0x00, 0x08, b'b', b'r', b'o', b'k', b'e', b'r', b'-', b'1', // brokers[0].host: "broker-1"
    0x00, 0x00, 0x23, 0x84,                                 // brokers[0].port: 9092
    0xff, 0xff,                                             // brokers[0].rack: null
    0x00, 0x00, 0x00, 0x01,                                 // controller_id: 1
    0x00, 0x00, 0x00, 0x01,                                 // topics: 1
    0x00, 0x00,                                             // topics[0].error_code: 0
    0x00, 0x06, b'e', b'v', b'e', b'n', b't', b's',         // topics[0].name: "events"
    0x00,                                                   // topics[0].is_internal: false
    0x00, 0x00, 0x00, 0x01,                                 // topics[0].partitions: 1
    0x00, 0x00,                                             // partitions[0].error_code: 0
    0x00, 0x00, 0x00, 0x00,                                 // partitions[0].partition_index: 0
    0x00, 0x00, 0x00, 0x01,                                 // partitions[0].leader_id: 1
    0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01,         // partitions[0].replica_nodes: [1]
    0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01,         // partitions[0].isr_nodes: [1]
];

#[test]
fn metadata_v1_response_frame_is_encoded_exactly_and_decodes() {
    let mut e = metadata_v12_response();
    e.cluster_id = None;
    e.topics[0].topic_id = [0; 16];
    e.topics[0].partitions.truncate(1);
    // Fields absent at v1 decode to the JSON defaults.
    e.topics[0].partitions[0].leader_epoch = -1;
    let frame = encode_response::<MetadataRequest>(&e, 1, 7);
    assert_eq!(&frame[..], METADATA_V1_RESPONSE_FRAME);
    let mut buf = BytesMut::from(METADATA_V1_RESPONSE_FRAME);
    let f = FrameDecoder::default().decode(&mut buf).unwrap().unwrap();
    let (_, d) = decode_response::<MetadataRequest>(1, f).unwrap();
    assert_eq!(d, e);

    // The request: a nullable i32-count topic list, no allow_auto_topic_creation before v4.
    let req = MetadataRequest {
        topics: Some(vec![kprod_core::protocol::metadata::MetadataRequestTopic {
            topic_id: [0; 16],
            name: Some("events".into()),
        }]),
        allow_auto_topic_creation: true,
        include_cluster_authorized_operations: false,
        include_topic_authorized_operations: false,
    };
    let frame = encode_request(&req, 1, 7, None);
    #[rustfmt::skip]
    let golden: &[u8] = &[
        0x00, 0x00, 0x00, 0x16,                             // frame size: 22 bytes follow
        0x00, 0x03, 0x00, 0x01,                             // Metadata v1
        0x00, 0x00, 0x00, 0x07,                             // correlation_id: 7
        0xff, 0xff,                                         // client_id: null
        0x00, 0x00, 0x00, 0x01,                             // topics: 1
        0x00, 0x06, b'e', b'v', b'e', b'n', b't', b's',     // topics[0].name: "events"
    ];
    assert_eq!(&frame[..], golden);
    let frame = encode_request(
        &MetadataRequest {
            allow_auto_topic_creation: false,
            ..req
        },
        4,
        7,
        None,
    );
    assert_eq!(&frame[6..8], &[0x00, 0x04], "Metadata v4");
    assert_eq!(
        frame.last(),
        Some(&0x00),
        "v4 ends with allow_auto_topic_creation"
    );
}

// ---------------------------------------------------------------------------------------------
// (g) InitProducerId v0 (Kafka 0.11-2.3: non-flexible, no producer id/epoch in the request).
// ---------------------------------------------------------------------------------------------

#[rustfmt::skip]
const INIT_PRODUCER_ID_V0_FRAME: &[u8] = &[
    0x00, 0x00, 0x00, 0x15,                                 // frame size: 21 bytes follow
    0x00, 0x16,                                             // request_api_key: 22 (InitProducerId)
    0x00, 0x00,                                             // request_api_version: 0
    0x00, 0x00, 0x00, 0x07,                                 // correlation_id: 7
    0x00, 0x05, b'k', b'p', b'r', b'o', b'd',               // client_id: "kprod"
    0xff, 0xff,                                             // transactional_id: null (i16 -1)
    0x7f, 0xff, 0xff, 0xff,                                 // transaction_timeout_ms: i32::MAX
];

#[rustfmt::skip]
const INIT_PRODUCER_ID_V0_RESPONSE_FRAME: &[u8] = &[
    0x00, 0x00, 0x00, 0x14,                                 // frame size: 20 bytes follow
    0x00, 0x00, 0x00, 0x07,                                 // correlation_id: 7 (header v0)
    0x00, 0x00, 0x00, 0x00,                                 // throttle_time_ms: 0
    0x00, 0x00,                                             // error_code: 0
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x10, 0x92,         // producer_id: 4242
    0x00, 0x00,                                             // producer_epoch: 0
];

#[test]
fn init_producer_id_v0_and_v1_frames_are_encoded_exactly_and_decode() {
    let resp = InitProducerIdResponse {
        throttle_time_ms: 0,
        error_code: 0,
        producer_id: 4242,
        producer_epoch: 0,
    };
    for version in [0, 1] {
        let frame = encode_request(&InitProducerIdRequest::default(), version, 7, Some("kprod"));
        let mut golden = INIT_PRODUCER_ID_V0_FRAME.to_vec();
        golden[7] = version as u8;
        assert_eq!(&frame[..], &golden[..], "v{version}");
        let mut r = Reader::new(Bytes::from(golden[4..].to_vec()));
        RequestHeader::decode(1, &mut r).unwrap();
        assert_eq!(
            InitProducerIdRequest::decode(version, &mut r).unwrap(),
            InitProducerIdRequest::default()
        );
        r.expect_end().unwrap();

        let frame = encode_response::<InitProducerIdRequest>(&resp, version, 7);
        assert_eq!(&frame[..], INIT_PRODUCER_ID_V0_RESPONSE_FRAME, "v{version}");
        let f = Bytes::from_static(&INIT_PRODUCER_ID_V0_RESPONSE_FRAME[4..]);
        let (_, d) = decode_response::<InitProducerIdRequest>(version, f).unwrap();
        assert_eq!(d, resp);
    }
}

//! kprod-core's codec against a real Tansu 0.6.0 broker, over a plain blocking TcpStream.
//!
//! Needs the Tansu binary (`scripts/install-tansu.sh`, or `KPROD_TANSU=/path/to/tansu`).
//! Each test starts its own broker with in-memory storage on a free port.
//!
//! Where Tansu differs from Apache Kafka (see shared/design/peers.md beside the repository), these tests assert
//! what Tansu actually does, and say so.

use std::io::ErrorKind;
use std::time::Instant;

use bytes::BytesMut;
use kprod_core::protocol::api_versions::{ApiVersionsRequest, ApiVersionsResponse};
use kprod_core::protocol::init_producer_id::InitProducerIdRequest;
use kprod_core::protocol::metadata::{MetadataRequest, MetadataRequestTopic};
use kprod_core::protocol::produce::PartitionProduceResponse;
use kprod_core::protocol::{
    api_key, decode_response, ErrorCode, Message, RequestHeader, VersionRange,
};
use kprod_tests::{
    encode_raw_request, numbered_batch as batch, produce_request, Tansu, WireClient, WireError,
    WireVersions, TANSU_NODE_ID,
};

const TOPIC: &str = "kprod-wire";
const PARTITIONS: u32 = 3;

/// kprod's newest versions against Tansu's advertised ranges (as recorded in peers.md).
fn negotiate_versions(c: &mut WireClient) -> WireVersions {
    let v = c.negotiate();
    assert_eq!(v.range(api_key::PRODUCE), VersionRange::new(0, 11));
    assert_eq!(v.range(api_key::METADATA), VersionRange::new(0, 12));
    assert_eq!(v.range(api_key::INIT_PRODUCER_ID), VersionRange::new(0, 5));
    assert_eq!(v.range(api_key::API_VERSIONS), VersionRange::new(0, 4));
    assert_eq!(
        (v.produce, v.metadata, v.init_producer_id),
        (11, 12, 5),
        "negotiated Produce, Metadata, InitProducerId"
    );
    v
}

fn code(p: &PartitionProduceResponse) -> ErrorCode {
    ErrorCode::from_i16(p.error_code)
}

#[test]
fn idempotent_produce_against_tansu() {
    let started = Instant::now();
    let tansu = Tansu::start();
    let ready = started.elapsed();
    let mut c = WireClient::connect(tansu.addr()).expect("connect to Tansu");
    let v = negotiate_versions(&mut c);

    // Metadata for a topic made with the CLI.
    tansu.create_topic(TOPIC, PARTITIONS);
    let md = c
        .call(
            &MetadataRequest {
                topics: Some(vec![MetadataRequestTopic {
                    topic_id: [0; 16],
                    name: Some(TOPIC.into()),
                }]),
                allow_auto_topic_creation: false,
                include_cluster_authorized_operations: false,
                include_topic_authorized_operations: false,
            },
            v.metadata,
        )
        .expect("Metadata");
    assert_eq!(md.controller_id, TANSU_NODE_ID);
    assert_eq!(md.brokers.len(), 1, "{md:?}");
    let b = &md.brokers[0];
    assert_eq!(
        (b.node_id, b.host.as_str(), b.port),
        (TANSU_NODE_ID, "127.0.0.1", i32::from(tansu.port()))
    );
    assert_eq!(md.topics.len(), 1, "{md:?}");
    let t = &md.topics[0];
    assert_eq!(t.error_code, 0, "{t:?}");
    assert_eq!(t.name.as_deref(), Some(TOPIC));
    assert_ne!(t.topic_id, [0; 16], "Metadata v10+ carries the topic id");
    let mut indexes: Vec<i32> = t.partitions.iter().map(|p| p.partition_index).collect();
    indexes.sort_unstable();
    assert_eq!(indexes, (0..PARTITIONS as i32).collect::<Vec<_>>());
    for p in &t.partitions {
        assert_eq!((p.error_code, p.leader_id), (0, TANSU_NODE_ID), "{p:?}");
    }

    // A fresh producer id: InitProducerId v3+ with -1/-1 and no transactional id.
    assert!(v.init_producer_id >= 3);
    let pid = c
        .call(&InitProducerIdRequest::default(), v.init_producer_id)
        .expect("InitProducerId");
    assert_eq!(pid.error_code, 0, "{pid:?}");
    assert!(pid.producer_id >= 0, "{pid:?}");
    assert_eq!(pid.producer_epoch, 0, "{pid:?}");
    let (id, epoch) = (pid.producer_id, pid.producer_epoch);

    // Sequence 0: appended at offset 0.
    let first = produce_request(TOPIC, 0, batch(id, epoch, 0, 3));
    let (frame, corr) = c.encode(&first, v.produce);
    let p = c.produce_frame(TOPIC, &frame, corr, v.produce, 0);
    assert_eq!((code(&p), p.base_offset), (ErrorCode::None, 0), "{p:?}");
    let mut appended = 3;

    // The very same bytes again (same frame, same correlation id): Tansu answers 46
    // DUPLICATE_SEQUENCE_NUMBER where Kafka answers success with the original offset.
    let p = c.produce_frame(TOPIC, &frame, corr, v.produce, 0);
    assert_eq!(code(&p), ErrorCode::DuplicateSequenceNumber, "{p:?}");
    println!("exact resend: {p:?}");

    // A sequence below the expected one that matches no batch: 46 as well.
    let p = c.produce(TOPIC, v.produce, 0, batch(id, epoch, 1, 1));
    assert_eq!(code(&p), ErrorCode::DuplicateSequenceNumber, "{p:?}");
    println!("sequence below expected: {p:?}");

    // A gap (expected 3, sent 5): 45 OUT_OF_ORDER_SEQUENCE_NUMBER.
    let p = c.produce(TOPIC, v.produce, 0, batch(id, epoch, appended + 2, 2));
    assert_eq!(code(&p), ErrorCode::OutOfOrderSequenceNumber, "{p:?}");
    println!("sequence gap: {p:?}");

    // The next batch in order lands right after the first: nothing else was appended.
    let p = c.produce(TOPIC, v.produce, 0, batch(id, epoch, appended, 2));
    assert_eq!(
        (code(&p), p.base_offset),
        (ErrorCode::None, i64::from(appended)),
        "{p:?}"
    );
    appended += 2;
    let p = c.produce(TOPIC, v.produce, 0, batch(id, epoch, appended, 1));
    assert_eq!(
        (code(&p), p.base_offset),
        (ErrorCode::None, i64::from(appended)),
        "{p:?}"
    );

    println!(
        "idempotent_produce_against_tansu: broker ready after {ready:.2?}, test took {:.2?}",
        started.elapsed()
    );
}

/// ApiVersions at an unsupported version. Apache Kafka (since 2.4, KIP-511) answers with a
/// v0 body carrying 35 UNSUPPORTED_VERSION and its own ApiVersions range, so that the client
/// can retry. Tansu 0.6.0 does not: it parses the body as a v3+ body whatever the version;
/// with an empty body it fails and closes the connection without answering, and with a
/// v3-shaped body it answers error 0 with its usual flexible (v3/v4) body and full list.
#[test]
fn api_versions_at_an_unsupported_version() {
    let started = Instant::now();
    let tansu = Tansu::start();
    let software = ApiVersionsRequest {
        client_software_name: "kprod".into(),
        client_software_version: env!("CARGO_PKG_VERSION").into(),
    };
    let mut c = WireClient::connect(tansu.addr()).expect("connect to Tansu");
    let normal = c.call(&software, 3).expect("ApiVersions v3");
    assert_eq!(normal.error_code, 0);

    let header = |c: &mut WireClient, version: i16| RequestHeader {
        api_key: api_key::API_VERSIONS,
        api_version: version,
        correlation_id: c.next_correlation_id(),
        client_id: c.client_id().map(str::to_owned),
    };

    // v127, flexible (v2) request header, empty body: no response, the connection is closed.
    let mut c = WireClient::connect(tansu.addr()).expect("connect to Tansu");
    let h = header(&mut c, 127);
    c.send_frame(&encode_raw_request(&h, 2, &[]))
        .expect("send ApiVersions v127");
    match c.read_frame() {
        Err(WireError::Io(e))
            if matches!(
                e.kind(),
                ErrorKind::UnexpectedEof
                    | ErrorKind::ConnectionReset
                    | ErrorKind::ConnectionAborted
            ) =>
        {
            println!("ApiVersions v127, empty body: connection closed ({e})");
        }
        Ok(frame) => {
            let decoded = decode_response::<ApiVersionsRequest>(0, frame.clone());
            panic!(
                "Tansu now answers ApiVersions v127 with an empty body: {:02x?} = {decoded:?}",
                &frame[..]
            );
        }
        Err(e) => panic!("ApiVersions v127, empty body: {e}"),
    }

    // v5 (one above Tansu's maximum, 4) and v127 with a v3-shaped body: error 0, and the
    // body is the flexible one, not v0.
    let mut body = BytesMut::new();
    software.encode(3, &mut body);
    for version in [5, 127] {
        let mut c = WireClient::connect(tansu.addr()).expect("connect to Tansu");
        let h = header(&mut c, version);
        c.send_frame(&encode_raw_request(&h, 2, &body))
            .expect("send ApiVersions");
        let frame = c.read_frame().expect("a response");
        assert!(
            decode_response::<ApiVersionsRequest>(0, frame.clone()).is_err(),
            "not a v0 body"
        );
        let (rh, resp) = decode_response::<ApiVersionsRequest>(3, frame)
            .unwrap_or_else(|e| panic!("ApiVersions v{version}: not a v3 body either: {e}"));
        assert_eq!(rh.correlation_id, h.correlation_id);
        assert_eq!(
            ErrorCode::from_i16(resp.error_code),
            ErrorCode::None,
            "Tansu does not answer UNSUPPORTED_VERSION"
        );
        assert_eq!(
            resp.range_of(api_key::API_VERSIONS),
            Some(VersionRange::new(0, 4))
        );
        assert_eq!(resp, normal, "the same answer as to a v3 request");
        println!(
            "ApiVersions v{version}, v3-shaped body: error {}, {} api keys, as to v3",
            resp.error_code,
            resp.api_keys.len()
        );
    }

    // The broker is still up and the fallback a Kafka client would make works.
    let mut c = WireClient::connect(tansu.addr()).expect("connect to Tansu");
    let (h0, fallback): (_, ApiVersionsResponse) = {
        let h = header(&mut c, 0);
        c.send_frame(&encode_raw_request(&h, 1, &[]))
            .expect("send ApiVersions v0");
        let frame = c.read_frame().expect("ApiVersions v0 response");
        let (rh, resp) =
            decode_response::<ApiVersionsRequest>(0, frame).expect("a v0 ApiVersions response");
        ((h.correlation_id, rh.correlation_id), resp)
    };
    assert_eq!(h0.0, h0.1);
    assert_eq!(fallback.error_code, 0);
    assert_eq!(fallback.api_keys, normal.api_keys);
    println!(
        "api_versions_at_an_unsupported_version: took {:.2?}",
        started.elapsed()
    );
}

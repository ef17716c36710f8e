//! A broker that metadata names under a host that cannot be a TLS server name
//! (`kafka.0x1f`: rustls refuses a last label that reads as a number) is a connect that
//! fails, for that broker only. Before (a review probe), the driver took it for a
//! configuration error and stopped the whole producer, the healthy brokers' partitions with
//! it. A bootstrap server named so is still refused at once, as configuration.
#![cfg(feature = "tls")]

use std::io;
use std::sync::{Arc, Mutex};

use bytes::BytesMut;
use kprod_core::Record;
use kprod_model::broker::{split_frames, BrokerMode, Cluster};
use kprod_tokio::{
    config_from_properties, Connector, ProducerHandle, PropertyError, TlsConnector, TlsOptions,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};

/// A self-signed CA (public certificate only), so that a `TlsConnector` can be built
/// without the system's store; no connection here gets as far as a handshake.
const TEST_CA: &str = "-----BEGIN CERTIFICATE-----
MIIBhzCCAS2gAwIBAgIUCrmtVfbfxmyhvfXODgB8x3fvIYcwCgYIKoZIzj0EAwIw
GDEWMBQGA1UEAwwNa3Byb2QgdGVzdCBDQTAgFw0yNjEyMDMxOTM0NTZaGA8yMTI2
MTEwOTE5MzQ1NlowGDEWMBQGA1UEAwwNa3Byb2QgdGVzdCBDQTBZMBMGByqGSM49
AgEGCCqGSM49AwEHA0IABL+SwhUbpK80J9pT2CnJSVFhQ8+vuB1otZA/Kqer8bfV
Xfrg5Jm5z24ssmAJ6kqSBQ+PTXfeT0B9W+z7ls8NesKjUzBRMB0GA1UdDgQWBBQd
N5N5pGNiE86GSWqsXnTHD10WnDAfBgNVHSMEGDAWgBQdN5N5pGNiE86GSWqsXnTH
D10WnDAPBgNVHRMBAf8EBTADAQH/MAoGCCqGSM49BAMCA0gAMEUCIEI3PtJT1J+L
sreIwIqiqhSh95AQgOIVWCZLp16woYUuAiEAlczHUQkC8qSUbqpVcfeQHYly9WCJ
nOFo+r+1cGoA3mE=
-----END CERTIFICATE-----
";

/// `b1:9092` is an in-memory broker of the fake cluster; any other address goes through a
/// real `TlsConnector`, whose verdict (and `fatal_reason`) is what is under test.
#[derive(Clone)]
struct Mixed {
    cluster: Arc<Mutex<Cluster>>,
    tls: TlsConnector,
}

async fn serve(cluster: Arc<Mutex<Cluster>>, mut stream: DuplexStream, node: i32) {
    let mut buf = BytesMut::new();
    while let Ok(1..) = stream.read_buf(&mut buf).await {
        for frame in split_frames(&mut buf) {
            let Some(r) = cluster.lock().unwrap().handle(node, frame) else {
                return;
            };
            if stream.write_all(&r).await.is_err() {
                return;
            }
        }
    }
}

impl Connector for Mixed {
    type Stream = DuplexStream;
    async fn connect(&self, addr: &str) -> io::Result<DuplexStream> {
        if addr != "b1:9092" {
            self.tls.connect(addr).await?;
            return Err(io::Error::other("only b1 is served here"));
        }
        let (client, server) = tokio::io::duplex(64 * 1024);
        tokio::spawn(serve(self.cluster.clone(), server, 1));
        Ok(client)
    }
    fn fatal_reason(&self, error: &io::Error) -> Option<String> {
        self.tls.fatal_reason(error)
    }
}

/// The test CA in a file of its own per call: the tests of this file run in parallel in one
/// process, and with one file per process one test could read it while another rewrote it
/// (empty: "holds no PEM certificate", seen once in CI).
fn ca_file() -> std::path::PathBuf {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let name = format!("kprod-test-ca-{}-{n}.pem", std::process::id());
    let path = std::env::temp_dir().join(name);
    std::fs::write(&path, TEST_CA).unwrap();
    path
}

#[tokio::test(start_paused = true)]
async fn a_broker_named_with_no_tls_server_name_fails_only_its_own_connects() {
    let mut cluster = Cluster::new(BrokerMode::Lenient, &["b1:9092", "kafka.0x1f:9093"]);
    cluster.create_topic("t", 2, 1);
    cluster.move_leader("t", 1, 2);
    let tls = TlsConnector::new(&TlsOptions {
        ca_location: Some(ca_file()),
        ..TlsOptions::default()
    })
    .unwrap();
    let connector = Mixed {
        cluster: Arc::new(Mutex::new(cluster)),
        tls,
    };
    let cfg = config_from_properties(&[
        ("bootstrap.servers", "b1:9092"),
        ("linger.ms", "0"),
        ("delivery.timeout.ms", "3000"),
        ("request.timeout.ms", "2000"),
    ])
    .unwrap();
    let h = ProducerHandle::with_connector(cfg, connector).unwrap();
    h.send(Record::new("t", "p0").with_partition(0))
        .await
        .expect("partition 0, on the healthy broker");
    // Partition 1's leader cannot be reached: its record waits, then times out.
    let p1 = (h.enqueue(Record::new("t", "p1").with_partition(1)).await).unwrap();
    let e = p1.await.expect_err("partition 1's broker is never reached");
    assert!(
        e.to_string().contains("timed out") || e.to_string().contains("timeout"),
        "{e}"
    );
    assert!(h.fatal().is_none(), "the producer stopped: {:?}", h.fatal());
    h.send(Record::new("t", "p0 again").with_partition(0))
        .await
        .expect("partition 0 still takes records");
    h.close().await;
}

#[tokio::test]
async fn a_bootstrap_server_with_no_tls_server_name_is_refused_at_start() {
    let ca = ca_file();
    let props = [
        ("bootstrap.servers", "kafka.0x1f:9093"),
        ("security.protocol", "SSL"),
        ("ssl.ca.location", ca.to_str().unwrap()),
    ];
    let Err(e) = ProducerHandle::from_properties(&props) else {
        panic!("started");
    };
    assert!(matches!(e, PropertyError::Invalid { .. }), "{e:?}");
    assert!(e.to_string().contains("bootstrap.servers"), "{e}");
}

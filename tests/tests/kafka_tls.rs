//! kprod-tokio over TLS against Apache Kafka 4.4.0: one node with three TLS listeners for
//! clients (PEM certificates generated here with rcgen; replication stays on PLAINTEXT):
//!
//! - `SSL`: the broker's certificate (signed by the test CA, valid for 127.0.0.1 only), no
//!   client certificate asked for;
//! - `MTLS`: the same certificate, `ssl.client.auth=required`, client certificates signed by
//!   the test CA;
//! - `EXPIRED`: a certificate from the test CA that expired in 2021.
//!
//! The happy path is a seed-like run over mutual TLS, read back by the independent reader
//! (librdkafka's consumer) over the node's PLAINTEXT listener: the `rdkafka` crate would need
//! its `ssl` feature, which builds librdkafka against OpenSSL's development headers, and
//! nothing in this project installs those; the log a consumer reads is the same whatever
//! listener it reads through.
//!
//! Every misconfiguration (wrong CA, expired certificate, host name mismatch, a missing or
//! foreign client certificate) must fail the records at once with a clear
//! `ErrorKind::Connection` naming the cause, `NotPersisted` (nothing was ever sent), after one
//! connection attempt, well before `delivery.timeout.ms`; records sent afterwards are refused
//! with the same error.
//!
//! Needs `scripts/install-kafka.sh` and Java 17+; the broker is started here and the test
//! fails if it cannot start.

use std::collections::BTreeMap;
use std::future::Future;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kprod_core::{Persistence, Record};
use kprod_tests::e2e::{assert_complete, close, print_seed_figures, runtime};
use kprod_tests::kafka::SslListener;
use kprod_tests::reader::read_topic;
use kprod_tests::seed::{fresh_run_id, run_seed, SeedPlan, Source, Verdict};
use kprod_tests::{temp_dir, Kafka, KafkaOptions};
use kprod_tokio::{
    ClientConfig, Connector, DeliveryError, ErrorKind, ProducerHandle, Security, TlsConnector,
};
use rcgen::{
    date_time_ymd, BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose,
};

/// How long a misconfigured producer may take to fail its records: one connect and one
/// handshake, far below the delivery timeout it is given.
const FAIL_FAST: Duration = Duration::from_secs(15);
/// The delivery timeout of the misconfigured producers: reaching it would mean retrying.
const DELIVERY_TIMEOUT_MS: &str = "90000";
/// Bound on everything a producer does in this test.
const BOUND: Duration = Duration::from_secs(120);

/// A certificate authority.
struct Ca {
    params: CertificateParams,
    key: KeyPair,
    pem: String,
}

impl Ca {
    fn new(name: &str) -> Self {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        params.distinguished_name.push(DnType::CommonName, name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let key = KeyPair::generate().expect("CA key");
        let pem = params.self_signed(&key).expect("self-sign the CA").pem();
        Self { params, key, pem }
    }

    /// A leaf certificate for `names` (IP addresses or DNS names) and its PKCS#8 key.
    fn issue(
        &self,
        cn: &str,
        names: &[&str],
        usage: ExtendedKeyUsagePurpose,
        expired: bool,
    ) -> (String, String) {
        let names: Vec<String> = names.iter().map(|s| (*s).to_owned()).collect();
        let mut params = CertificateParams::new(names).expect("leaf params");
        params.distinguished_name.push(DnType::CommonName, cn);
        params.extended_key_usages = vec![usage];
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        if expired {
            params.not_before = date_time_ymd(2020, 1, 1);
            params.not_after = date_time_ymd(2021, 1, 1);
        }
        let key = KeyPair::generate().expect("leaf key");
        let issuer = Issuer::from_params(&self.params, &self.key);
        let cert = params.signed_by(&key, &issuer).expect("sign the leaf");
        (cert.pem(), key.serialize_pem())
    }
}

/// Every certificate of the test, and the client-side files.
struct Pki {
    dir: PathBuf,
    ca: Ca,
    server: (String, String),
    expired: (String, String),
    /// The test CA's certificate (what clients trust).
    ca_file: PathBuf,
    /// Another CA's certificate (the wrong CA).
    other_ca_file: PathBuf,
    client_cert: PathBuf,
    client_key: PathBuf,
    /// A client certificate from the other CA, which the broker does not trust.
    foreign_cert: PathBuf,
    foreign_key: PathBuf,
}

impl Pki {
    fn new() -> Self {
        let dir = temp_dir("kprod-tls");
        let ca = Ca::new("kprod test CA");
        let other = Ca::new("some other CA");
        let server = ca.issue(
            "kafka",
            &["127.0.0.1"],
            ExtendedKeyUsagePurpose::ServerAuth,
            false,
        );
        let expired = ca.issue(
            "kafka-expired",
            &["127.0.0.1"],
            ExtendedKeyUsagePurpose::ServerAuth,
            true,
        );
        let client = ca.issue(
            "kprod-client",
            &["kprod-client"],
            ExtendedKeyUsagePurpose::ClientAuth,
            false,
        );
        let foreign = other.issue(
            "kprod-client",
            &["kprod-client"],
            ExtendedKeyUsagePurpose::ClientAuth,
            false,
        );
        let write = |name: &str, text: &str| -> PathBuf {
            let p = dir.join(name);
            std::fs::write(&p, text).unwrap_or_else(|e| panic!("write {}: {e}", p.display()));
            p
        };
        Self {
            ca_file: write("ca.pem", &ca.pem),
            other_ca_file: write("other-ca.pem", &other.pem),
            client_cert: write("client.pem", &client.0),
            client_key: write("client.key", &client.1),
            foreign_cert: write("foreign.pem", &foreign.0),
            foreign_key: write("foreign.key", &foreign.1),
            dir,
            ca,
            server,
            expired,
        }
    }

    fn listener(&self, name: &str, (chain, key): &(String, String), mtls: bool) -> SslListener {
        SslListener {
            name: name.to_owned(),
            certificate_chain: chain.clone(),
            private_key: key.clone(),
            client_ca: mtls.then(|| self.ca.pem.clone()),
        }
    }
}

impl Drop for Pki {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn path(p: &Path) -> &str {
    p.to_str().expect("UTF-8 temp path")
}

/// [`TlsConnector`] counting its connection attempts.
#[derive(Clone)]
struct Counting {
    inner: TlsConnector,
    connects: Arc<AtomicUsize>,
}

impl Connector for Counting {
    type Stream = <TlsConnector as Connector>::Stream;

    fn connect(&self, addr: &str) -> impl Future<Output = io::Result<Self::Stream>> + Send {
        self.connects.fetch_add(1, Ordering::SeqCst);
        self.inner.connect(addr)
    }

    fn fatal_reason(&self, error: &io::Error) -> Option<String> {
        self.inner.fatal_reason(error)
    }
}

/// A producer from properties, over a counting [`TlsConnector`].
fn tls_producer(props: &[(&str, &str)]) -> (ProducerHandle, Arc<AtomicUsize>) {
    let config = ClientConfig::from_properties(props).expect("valid properties");
    let Security::Ssl(tls) = &config.security else {
        panic!("expected security.protocol=SSL: {config:?}");
    };
    let inner = TlsConnector::new(tls).expect("usable TLS files");
    let connects = Arc::new(AtomicUsize::new(0));
    let connector = Counting {
        inner,
        connects: connects.clone(),
    };
    let producer =
        ProducerHandle::with_connector(config.producer, connector).expect("valid producer config");
    (producer, connects)
}

/// Sends `n` records to a misconfigured listener and checks that each fails at once with a
/// connection error whose text contains every one of `expect`, after one connection attempt,
/// and that a record sent afterwards is refused with the same error.
fn assert_fails_fast(what: &str, props: &[(&str, &str)], topic: &str, expect: &[&str]) {
    let mut all: Vec<(&str, &str)> = vec![
        ("client.id", "kprod-tls"),
        ("enable.idempotence", "true"),
        ("acks", "all"),
        ("request.timeout.ms", "10000"),
        ("delivery.timeout.ms", DELIVERY_TIMEOUT_MS),
        ("security.protocol", "SSL"),
    ];
    all.extend_from_slice(props);
    let started = Instant::now();
    let (outcomes, later, connects) =
        runtime().block_on(async {
            let (producer, connects) = tls_producer(&all);
            let mut futures = Vec::new();
            for i in 0..20 {
                let record = Record::new(topic, format!("{what} {i}")).with_partition(0);
                futures.push(
                    producer
                        .enqueue(record)
                        .await
                        .expect("accepted before the failure is known"),
                );
            }
            let mut outcomes = Vec::new();
            for f in futures {
                outcomes.push(tokio::time::timeout(BOUND, f).await.unwrap_or_else(|_| {
                    panic!("{what}: a record did not resolve within {BOUND:?}")
                }));
            }
            let later = tokio::time::timeout(BOUND, producer.send(Record::new(topic, "later")))
                .await
                .unwrap_or_else(|_| panic!("{what}: a later send did not resolve"));
            close(producer).await;
            (outcomes, later, connects.load(Ordering::SeqCst))
        });
    let elapsed = started.elapsed();
    println!(
        "{what}: {} records failed in {elapsed:.2?} after {connects} connect(s)",
        outcomes.len()
    );
    let errors: Vec<DeliveryError> = outcomes
        .into_iter()
        .map(|o| o.expect_err("no record may be delivered"))
        .collect();
    let first = errors[0].clone();
    println!("{what}: {first}");
    let ErrorKind::Connection(conn) = &first.kind else {
        panic!("{what}: expected a connection error, got {first:?}");
    };
    for e in expect {
        assert!(
            conn.reason.contains(e),
            "{what}: the error should mention {e:?}: {first}"
        );
    }
    for e in &errors {
        assert_eq!(
            (&e.kind, e.persisted),
            (&first.kind, first.persisted),
            "{what}: every record fails with the same error"
        );
        assert!(e.record().is_some(), "{what}: the record is handed back");
        assert_eq!(
            e.persisted,
            Persistence::NotPersisted,
            "{what}: nothing was sent, so nothing can be in the log"
        );
    }
    let later = later.expect_err("a record sent after the failure is refused");
    assert_eq!(
        later.kind, first.kind,
        "{what}: later records fail with the same error"
    );
    assert_eq!(later.persisted, Persistence::NotPersisted);
    assert_eq!(connects, 1, "{what}: a configuration error is not retried");
    assert!(
        elapsed < FAIL_FAST,
        "{what}: took {elapsed:.2?}; the records must fail at once, not at the delivery timeout"
    );
}

/// A seed-like run (1,000 ticks every 1 ms and two overlapping bursts of 2,000, 3 partitions)
/// over mutual TLS, read back over PLAINTEXT.
fn mtls_seed_run(kafka: &Kafka, pki: &Pki) {
    const PARTITIONS: i32 = 3;
    let topic = "kprod-tls-seed";
    kafka.create_topic(topic, PARTITIONS, 1, None);
    let plan = SeedPlan {
        source: Source {
            topic: topic.to_owned(),
            partitions: PARTITIONS,
            run: fresh_run_id(),
            record_size: 100,
        },
        ticks: 1_000,
        period: Duration::from_millis(1),
        bursts: 2,
        burst_size: 2_000,
        resolve_timeout: BOUND,
    };
    let bootstrap = kafka.ssl_bootstrap("MTLS");
    let report = runtime().block_on(async {
        let producer = ProducerHandle::from_properties(&[
            ("bootstrap.servers", &bootstrap),
            ("client.id", "kprod-tls"),
            ("enable.idempotence", "true"),
            ("acks", "all"),
            ("security.protocol", "SSL"),
            ("ssl.ca.location", path(&pki.ca_file)),
            ("ssl.certificate.location", path(&pki.client_cert)),
            ("ssl.key.location", path(&pki.client_key)),
        ])
        .expect("valid TLS properties");
        let report = run_seed(&producer, &plan).await;
        close(producer).await;
        report
    });
    let log = read_topic(&kafka.bootstrap(), topic, PARTITIONS, BOUND)
        .unwrap_or_else(|e| panic!("the independent reader failed: {e}"));
    let v = Verdict::compute(plan.source.run, PARTITIONS, &report.sent, &log);
    println!("seed-like run over mutual TLS ({bootstrap}), read back over PLAINTEXT:");
    print_seed_figures(&report);
    println!("{v}");
    assert_eq!(report.sent.len(), 5_000);
    assert_complete(&v);
    assert_eq!(
        v.acknowledged_without_offset, 0,
        "on Apache Kafka every acknowledgement carries its offset\n{v}"
    );
}

/// Sends `n` records labelled `label` one at a time, each within [`BOUND`]; their offsets.
async fn send_offsets(producer: &ProducerHandle, topic: &str, label: &str, n: usize) -> Vec<i64> {
    let mut offsets = Vec::with_capacity(n);
    for i in 0..n {
        let d = tokio::time::timeout(
            BOUND,
            producer.send(Record::new(topic, format!("{label} {i}"))),
        )
        .await
        .expect("bounded send")
        .unwrap_or_else(|e| panic!("{label}: {e}"));
        offsets.push(d.offset.expect("Kafka returns offsets"));
    }
    offsets
}

/// Server-authenticated TLS without a client certificate; then the same listener reached as
/// `localhost`, which its certificate (127.0.0.1 only) does not name, with hostname
/// verification off: the chain is still verified and records are delivered.
fn server_tls_and_no_hostname_check(kafka: &Kafka, pki: &Pki) {
    let topic = "kprod-tls-plain";
    kafka.create_topic(topic, 1, 1, None);
    let by_ip = kafka.ssl_bootstrap("SSL");
    let by_name = format!("localhost:{}", kafka.ssl_port(0, "SSL"));
    let delivered = runtime().block_on(async {
        let mut delivered = BTreeMap::new();
        for (bootstrap, algorithm) in [(&by_ip, "https"), (&by_name, "")] {
            let producer = ProducerHandle::from_properties(&[
                ("bootstrap.servers", bootstrap),
                ("security.protocol", "SSL"),
                ("ssl.ca.location", path(&pki.ca_file)),
                ("ssl.endpoint.identification.algorithm", algorithm),
            ])
            .expect("valid TLS properties");
            let label = format!("{bootstrap} (algorithm {algorithm:?})");
            let offsets = send_offsets(&producer, topic, &label, 50).await;
            close(producer).await;
            delivered.insert(bootstrap.clone(), offsets);
        }
        delivered
    });
    let offsets: Vec<i64> = delivered.values().flatten().copied().collect();
    assert_eq!(offsets, (0..100).collect::<Vec<i64>>(), "{delivered:?}");
    let log = read_topic(&kafka.bootstrap(), topic, 1, BOUND).expect("read back");
    assert_eq!(log[&0].len(), 100, "every record in the log once");
    println!(
        "server-only TLS: 50 records by IP with hostname verification, 50 by localhost without"
    );
}

/// A Java client's TLS properties: PEM trust and key stores (`ssl.truststore.type=PEM`,
/// `ssl.keystore.type=PEM`, the key store one file holding the key and the chain) and the
/// TLS versions (`ssl.enabled.protocols`, `ssl.protocol`), over mutual TLS; then the versions
/// against a listener that speaks TLS 1.3 only: the defaults and `TLSv1.3` reach it,
/// `ssl.protocol=TLSv1.2` does not (checked by `assert_fails_fast` in `kafka_tls`).
fn java_style_stores_and_versions(kafka: &Kafka, pki: &Pki) {
    let topic = "kprod-tls-java";
    kafka.create_topic(topic, 1, 1, None);
    let keystore = pki.dir.join("client-keystore.pem");
    let key = std::fs::read_to_string(&pki.client_key).expect("client key");
    let chain = std::fs::read_to_string(&pki.client_cert).expect("client certificate");
    std::fs::write(&keystore, format!("{key}{chain}")).expect("write the PEM key store");
    let mtls = kafka.ssl_bootstrap("MTLS");
    let tls13 = kafka.ssl_bootstrap("TLS13");
    let java = [
        ("security.protocol", "SSL"),
        ("ssl.truststore.type", "PEM"),
        ("ssl.truststore.location", path(&pki.ca_file)),
        ("ssl.keystore.type", "PEM"),
        ("ssl.keystore.location", path(&keystore)),
        ("ssl.keymanager.algorithm", "SunX509"),
        ("ssl.trustmanager.algorithm", "PKIX"),
        ("ssl.cipher.suites", ""),
    ];
    let runs: [(&str, &[(&str, &str)]); 4] = [
        (&mtls, &[("ssl.enabled.protocols", "TLSv1.2")]),
        (&mtls, &[("ssl.protocol", "TLSv1.3")]),
        (&tls13, &[]),
        (&tls13, &[("ssl.enabled.protocols", "TLSv1.3")]),
    ];
    let offsets = runtime().block_on(async {
        let mut offsets = Vec::new();
        for (bootstrap, versions) in runs {
            let mut props = vec![("bootstrap.servers", bootstrap)];
            props.extend_from_slice(&java);
            props.extend_from_slice(versions);
            let producer = ProducerHandle::from_properties(&props).expect("valid properties");
            let label = format!("{bootstrap} {versions:?}");
            offsets.extend(send_offsets(&producer, topic, &label, 10).await);
            close(producer).await;
        }
        offsets
    });
    assert_eq!(offsets, (0..40).collect::<Vec<i64>>());
    let log = read_topic(&kafka.bootstrap(), topic, 1, BOUND).expect("read back");
    assert_eq!(log[&0].len(), 40, "every record in the log once");
    println!("Java-style PEM stores over mTLS with TLS 1.2 and 1.3; a TLS 1.3-only listener");
}

#[test]
fn kafka_tls() {
    let pki = Pki::new();
    let opts = KafkaOptions::new(1)
        .ssl(pki.listener("SSL", &pki.server, false))
        .ssl(pki.listener("MTLS", &pki.server, true))
        .ssl(pki.listener("EXPIRED", &pki.expired, false))
        .ssl(pki.listener("TLS13", &pki.server, false))
        .set("listener.name.tls13.ssl.enabled.protocols", "TLSv1.3");
    let kafka = Kafka::start_with(opts);
    let topic = "kprod-tls-errors";
    kafka.create_topic(topic, 1, 1, None);
    let ssl = kafka.ssl_bootstrap("SSL");
    let mtls = kafka.ssl_bootstrap("MTLS");
    let expired = kafka.ssl_bootstrap("EXPIRED");
    let localhost = format!("localhost:{}", kafka.ssl_port(0, "SSL"));
    let ca = path(&pki.ca_file);

    mtls_seed_run(&kafka, &pki);
    server_tls_and_no_hostname_check(&kafka, &pki);
    java_style_stores_and_versions(&kafka, &pki);
    assert_fails_fast(
        "TLS 1.2 only, against a TLS 1.3-only listener",
        &[
            ("bootstrap.servers", &kafka.ssl_bootstrap("TLS13")),
            ("ssl.ca.location", ca),
            ("ssl.protocol", "TLSv1.2"),
        ],
        topic,
        &["refused the handshake"],
    );
    // Java's `ssl.enabled.protocols` binds as well (the runs above that set it would pass
    // were it ignored).
    assert_fails_fast(
        "TLS 1.2 enabled only, against a TLS 1.3-only listener",
        &[
            ("bootstrap.servers", &kafka.ssl_bootstrap("TLS13")),
            ("ssl.ca.location", ca),
            ("ssl.enabled.protocols", "TLSv1.2"),
        ],
        topic,
        &["refused the handshake"],
    );

    assert_fails_fast(
        "wrong CA",
        &[
            ("bootstrap.servers", &ssl),
            ("ssl.ca.location", path(&pki.other_ca_file)),
        ],
        topic,
        &["not signed by a trusted CA", "ssl.ca.location"],
    );
    assert_fails_fast(
        "expired certificate",
        &[("bootstrap.servers", &expired), ("ssl.ca.location", ca)],
        topic,
        &["expired"],
    );
    assert_fails_fast(
        "host name mismatch",
        &[("bootstrap.servers", &localhost), ("ssl.ca.location", ca)],
        topic,
        &[
            "not valid for the host name",
            "ssl.endpoint.identification.algorithm",
        ],
    );
    assert_fails_fast(
        "mTLS required, no client certificate",
        &[("bootstrap.servers", &mtls), ("ssl.ca.location", ca)],
        topic,
        &["refused", "no client certificate"],
    );
    assert_fails_fast(
        "mTLS required, certificate from an untrusted CA",
        &[
            ("bootstrap.servers", &mtls),
            ("ssl.ca.location", ca),
            ("ssl.certificate.location", path(&pki.foreign_cert)),
            ("ssl.key.location", path(&pki.foreign_key)),
        ],
        topic,
        &["refused", "foreign.pem"],
    );
    // Nothing from the failed producers reached the log.
    let log = read_topic(&kafka.bootstrap(), topic, 1, BOUND).expect("read back");
    assert!(log[&0].is_empty(), "{} records in the log", log[&0].len());
}

/// Key material never shows in `Debug`, and unusable files are refused naming the property.
#[test]
fn tls_configuration_errors_and_debug() {
    let pki = Pki::new();
    let props = |extra: &[(&'static str, &str)]| {
        let mut p: Vec<(&str, &str)> = vec![
            ("bootstrap.servers", "127.0.0.1:1"),
            ("security.protocol", "SSL"),
            ("ssl.ca.location", path(&pki.ca_file)),
            ("ssl.certificate.location", path(&pki.client_cert)),
            ("ssl.key.location", path(&pki.client_key)),
        ];
        // An entry of `extra` replaces the one of the same name (a setting is given once).
        p.retain(|(name, _)| !extra.iter().any(|(e, _)| e == name));
        p.extend_from_slice(extra);
        ClientConfig::from_properties(&p)
    };
    let config = props(&[]).expect("valid");
    let Security::Ssl(tls) = &config.security else {
        panic!("SSL expected")
    };
    let connector = TlsConnector::new(tls).expect("usable files");
    let key = std::fs::read_to_string(&pki.client_key).expect("key file");
    let debug = format!("{connector:?} {config:?}");
    for line in key.lines().filter(|l| !l.starts_with("-----")) {
        assert!(!debug.contains(line), "key material in Debug: {debug}");
    }
    assert!(debug.contains("client.key"), "{debug}");

    let missing = pki.dir.join("missing.pem");
    for (name, value, expect) in [
        ("ssl.ca.location", path(&missing), "cannot read"),
        (
            "ssl.ca.location",
            path(&pki.client_key),
            "no PEM certificate",
        ),
        (
            "ssl.key.location",
            path(&pki.client_cert),
            "no unencrypted PEM private key",
        ),
        (
            "ssl.key.location",
            path(&pki.foreign_key),
            "unusable with the certificate",
        ),
    ] {
        let config = props(&[(name, value)]).expect("parses");
        let Security::Ssl(tls) = &config.security else {
            panic!("SSL expected")
        };
        let e = TlsConnector::new(tls).expect_err("unusable file");
        let text = e.to_string();
        assert!(
            text.starts_with(name) && text.contains(expect),
            "{name}={value}: {text}"
        );
    }
}

//! kprod-tokio with SASL against Apache Kafka 4.4.0: one node with three SASL listeners for
//! clients (replication and the independent reader stay on PLAINTEXT):
//!
//! - `SASLPLAIN`: `SASL_PLAINTEXT`;
//! - `SASLSSL`: `SASL_SSL` with a certificate from a test CA (rcgen);
//! - `REAUTH`: `SASL_PLAINTEXT` with `connections.max.reauth.ms=3000`.
//!
//! Each enables PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 and OAUTHBEARER (Kafka's unsecured
//! validator, fed unsigned JWS tokens by the test's token provider); user `alice` exists as a
//! PLAIN user and as a SCRAM user of both hashes (created when storage is formatted).
//!
//! Checked: every mechanism delivers a seed-like run of 2,000 records, read back by the
//! independent reader (librdkafka's consumer over PLAINTEXT): each acknowledged record present
//! once, in order, at its offset; SASL_SSL with SCRAM-SHA-512 likewise; a wrong password (PLAIN,
//! SCRAM) and an expired token fail every record at once with an authentication error,
//! `NotPersisted`, after a single connection attempt; on the `REAUTH` listener a paced run of
//! 10 s re-authenticates every connection several times without losing or duplicating a
//! record; and no password shows in `Debug` output or in any log event of the whole run.
//!
//! Needs `scripts/install-kafka.sh` and Java 17+; the broker is started here and the test
//! fails if it cannot start.

use std::future::Future;
use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use kprod_core::{DeliveryError as CoreError, FatalError, Persistence, Record};
use kprod_tests::e2e::{assert_complete, close, print_seed_figures, runtime};
use kprod_tests::kafka::SaslListener;
use kprod_tests::reader::read_topic;
use kprod_tests::seed::{fresh_run_id, run_seed, SeedPlan, SeedReport, Source, Verdict};
use kprod_tests::{Kafka, KafkaOptions};
use kprod_tokio::{
    ClientConfig, Connector, ErrorKind, ProducerHandle, Security, TcpConnector, TlsConnector,
    TokenProvider,
};
use rcgen::{CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair};

const USER: &str = "alice";
const PASSWORD: &str = "alice-Secret-7f3e";
const WRONG_PASSWORD: &str = "not-alices-Secret-9d1c";
/// Bound on everything a producer does in this test.
const BOUND: Duration = Duration::from_secs(120);
/// How long a misconfigured producer may take to fail its records.
const FAIL_FAST: Duration = Duration::from_secs(15);
const REAUTH_MS: u64 = 3000;

/// Every log event of the test binary, as text, and the number of "re-authenticated" events.
mod capture {
    use std::fmt::Debug;
    use std::sync::{Arc, Mutex};

    use tracing::field::{Field, Visit};
    use tracing::span::{Attributes, Id, Record};
    use tracing::{Event, Metadata, Subscriber};

    #[derive(Default)]
    pub struct Log {
        pub text: String,
        pub reauthentications: usize,
    }

    struct Capture(Arc<Mutex<Log>>);

    struct Line<'a>(&'a mut String, &'a mut bool);

    impl Visit for Line<'_> {
        fn record_debug(&mut self, field: &Field, value: &dyn Debug) {
            let v = format!("{value:?}");
            if field.name() == "message" && v == "re-authenticated" {
                *self.1 = true;
            }
            self.0.push_str(&format!(" {}={v}", field.name()));
        }
    }

    impl Subscriber for Capture {
        fn enabled(&self, _: &Metadata<'_>) -> bool {
            true
        }
        fn new_span(&self, _: &Attributes<'_>) -> Id {
            Id::from_u64(1)
        }
        fn record(&self, _: &Id, _: &Record<'_>) {}
        fn record_follows_from(&self, _: &Id, _: &Id) {}
        fn event(&self, event: &Event<'_>) {
            let mut line = format!(
                "{} {}:",
                event.metadata().level(),
                event.metadata().target()
            );
            let mut reauth = false;
            event.record(&mut Line(&mut line, &mut reauth));
            let mut log = self.0.lock().unwrap();
            log.text.push_str(&line);
            log.text.push('\n');
            log.reauthentications += usize::from(reauth);
        }
        fn enter(&self, _: &Id) {}
        fn exit(&self, _: &Id) {}
    }

    /// Installs the capture as the global subscriber.
    pub fn install() -> Arc<Mutex<Log>> {
        let log = Arc::new(Mutex::new(Log::default()));
        tracing::subscriber::set_global_default(Capture(log.clone()))
            .expect("no other subscriber in this test binary");
        log
    }
}

/// Base64url without padding (JWS compact serialization).
fn b64url(data: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::new();
    for chunk in data.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..=chunk.len() {
            out.push(A[(n >> (18 - 6 * i)) as usize & 63] as char);
        }
    }
    out
}

/// An unsecured JWS (`alg: none`) for `sub`, valid from now for `valid_for_s` seconds
/// (negative: already expired), as Kafka's unsecured validator accepts.
fn unsecured_jws(sub: &str, valid_for_s: i64) -> String {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let header = b64url(br#"{"alg":"none"}"#);
    let claims = format!(
        r#"{{"sub":"{sub}","iat":{},"exp":{}}}"#,
        now.min(now + valid_for_s - 60),
        now + valid_for_s
    );
    format!("{header}.{}.", b64url(claims.as_bytes()))
}

/// A token provider handing out fresh tokens and counting its calls.
fn token_provider(valid_for_s: i64, calls: Arc<AtomicUsize>) -> impl TokenProvider {
    move || {
        calls.fetch_add(1, Ordering::SeqCst);
        Ok::<_, String>(unsecured_jws(USER, valid_for_s))
    }
}

/// TCP or TLS, counting connection attempts.
#[derive(Clone)]
enum Transport {
    Tcp,
    Tls(TlsConnector),
}

#[derive(Clone)]
struct Counting {
    inner: Transport,
    connects: Arc<AtomicUsize>,
}

type Stream = Box<dyn StreamLike>;
trait StreamLike: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send {}
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send> StreamLike for T {}

impl Connector for Counting {
    type Stream = Stream;

    fn connect(&self, addr: &str) -> impl Future<Output = io::Result<Stream>> + Send {
        self.connects.fetch_add(1, Ordering::SeqCst);
        let inner = self.inner.clone();
        let addr = addr.to_owned();
        async move {
            Ok(match inner {
                Transport::Tcp => Box::new(TcpConnector::default().connect(&addr).await?) as Stream,
                Transport::Tls(t) => Box::new(t.connect(&addr).await?) as Stream,
            })
        }
    }

    fn fatal_reason(&self, error: &io::Error) -> Option<String> {
        match &self.inner {
            Transport::Tcp => None,
            Transport::Tls(t) => t.fatal_reason(error),
        }
    }
}

/// A producer from properties (and a token provider for OAUTHBEARER), counting connects.
fn producer(
    props: &[(&str, &str)],
    provider: Option<Arc<dyn TokenProvider>>,
) -> (ProducerHandle, Arc<AtomicUsize>) {
    let config = ClientConfig::from_properties(props).expect("valid properties");
    let debug = format!("{config:?}");
    assert!(
        !debug.contains(PASSWORD) && !debug.contains(WRONG_PASSWORD),
        "a password in the configuration's Debug output: {debug}"
    );
    let inner = match &config.security {
        Security::Plaintext => Transport::Tcp,
        Security::Ssl(tls) => Transport::Tls(TlsConnector::new(tls).expect("usable TLS files")),
        other => panic!("unexpected security {other:?}"),
    };
    let connects = Arc::new(AtomicUsize::new(0));
    let connector = Counting {
        inner,
        connects: connects.clone(),
    };
    let p = ProducerHandle::with_connector_and_token_provider(config.producer, connector, provider)
        .expect("valid producer config");
    (p, connects)
}

fn sasl_props<'a>(
    bootstrap: &'a str,
    protocol: &'a str,
    mechanism: &'a str,
    password: &'a str,
) -> Vec<(&'a str, &'a str)> {
    vec![
        ("bootstrap.servers", bootstrap),
        ("client.id", "kprod-sasl"),
        ("enable.idempotence", "true"),
        ("acks", "all"),
        ("security.protocol", protocol),
        ("sasl.mechanism", mechanism),
        ("sasl.username", USER),
        ("sasl.password", password),
    ]
}

fn plan(topic: &str, partitions: i32, ticks: u64, period: Duration, burst: u64) -> SeedPlan {
    SeedPlan {
        source: Source {
            topic: topic.to_owned(),
            partitions,
            run: fresh_run_id(),
            record_size: 100,
        },
        ticks,
        period,
        bursts: u32::from(burst > 0),
        burst_size: burst,
        resolve_timeout: BOUND,
    }
}

/// Reads the topic back over PLAINTEXT and checks every record of `report`.
fn verify(kafka: &Kafka, plan: &SeedPlan, report: &SeedReport, what: &str) {
    let log = read_topic(
        &kafka.bootstrap(),
        &plan.source.topic,
        plan.source.partitions,
        BOUND,
    )
    .unwrap_or_else(|e| panic!("{what}: the independent reader failed: {e}"));
    let v = Verdict::compute(plan.source.run, plan.source.partitions, &report.sent, &log);
    println!("{what}:");
    print_seed_figures(report);
    println!("{v}");
    assert_complete(&v);
    assert_eq!(v.acknowledged_without_offset, 0, "{what}\n{v}");
}

/// 500 ticks every 1 ms and a burst of 1,500 over 3 partitions with `mechanism`; with `jaas`,
/// the credentials come as a Java client's `sasl.jaas.config` line instead of
/// `sasl.username`/`sasl.password`.
fn mechanism_run(kafka: &Kafka, listener: &str, protocol: &str, mechanism: &str, jaas: bool) {
    let topic = format!(
        "kprod-sasl-{}-{}{}",
        listener.to_ascii_lowercase(),
        mechanism.to_ascii_lowercase(),
        if jaas { "-jaas" } else { "" }
    );
    kafka.create_topic(&topic, 3, 1, None);
    let plan = plan(&topic, 3, 500, Duration::from_millis(1), 1_500);
    let bootstrap = kafka.listener_bootstrap(listener);
    let calls = Arc::new(AtomicUsize::new(0));
    let provider: Option<Arc<dyn TokenProvider>> = (mechanism == "OAUTHBEARER")
        .then(|| Arc::new(token_provider(3600, calls.clone())) as Arc<dyn TokenProvider>);
    let mut props = sasl_props(&bootstrap, protocol, mechanism, PASSWORD);
    let module = if mechanism == "PLAIN" {
        "org.apache.kafka.common.security.plain.PlainLoginModule"
    } else {
        "org.apache.kafka.common.security.scram.ScramLoginModule"
    };
    let jaas_line = format!("{module} required username=\"{USER}\" password=\"{PASSWORD}\";");
    if mechanism == "OAUTHBEARER" {
        // KIP-342 SASL extensions ride along with the token (Kafka's unsecured validator
        // accepts any): a malformed initial response would be refused the handshake.
        props.push((
            "sasl.oauthbearer.extensions",
            "logicalCluster=lkc-kprod,traceId=x1",
        ));
    }
    if jaas {
        props.retain(|(k, _)| !matches!(*k, "sasl.username" | "sasl.password"));
        props.push(("sasl.jaas.config", &jaas_line));
    }
    let ca = kafka.dir().join("sasl-ca.pem");
    let ca = ca.to_str().unwrap().to_owned();
    if protocol == "SASL_SSL" {
        props.push(("ssl.ca.location", &ca));
    }
    let report = runtime().block_on(async {
        let (p, _) = producer(&props, provider);
        let report = run_seed(&p, &plan).await;
        close(p).await;
        report
    });
    assert_eq!(report.sent.len(), 2_000);
    verify(
        kafka,
        &plan,
        &report,
        &format!("{mechanism} over {protocol} ({bootstrap})"),
    );
    if mechanism == "OAUTHBEARER" {
        assert!(
            calls.load(Ordering::SeqCst) >= 1,
            "the token provider was used"
        );
    }
}

/// Bad credentials: every record fails at once with the authentication error, not
/// persisted, after one connection attempt; a later record is refused.
fn assert_auth_fails(
    what: &str,
    props: &[(&str, &str)],
    provider: Option<Arc<dyn TokenProvider>>,
    topic: &str,
    expect: &str,
) {
    let mut all = props.to_vec();
    all.push(("delivery.timeout.ms", "90000"));
    all.push(("request.timeout.ms", "10000"));
    let started = Instant::now();
    let (outcomes, later, connects) = runtime().block_on(async {
        let (p, connects) = producer(&all, provider);
        // The failure may be quick enough to beat the enqueues: a record offered after it
        // is refused with the same fatal error, which counts as its outcome.
        let mut futures = Vec::new();
        let mut outcomes = Vec::new();
        for i in 0..20 {
            let r = Record::new(topic, format!("{what} {i}")).with_partition(0);
            match p.enqueue(r).await {
                Ok(f) => futures.push(f),
                Err(e) => outcomes.push(Err(e)),
            }
        }
        let refused = outcomes.len();
        for f in futures {
            outcomes.insert(
                outcomes.len() - refused,
                tokio::time::timeout(BOUND, f).await.expect("resolves"),
            );
        }
        let later = tokio::time::timeout(BOUND, p.send(Record::new(topic, "later")))
            .await
            .expect("resolves");
        close(p).await;
        (outcomes, later, connects.load(Ordering::SeqCst))
    });
    let elapsed = started.elapsed();
    let first = outcomes[0].clone().expect_err("no record may be delivered");
    println!("{what}: 20 records failed in {elapsed:.2?} after {connects} connect(s): {first}");
    let ErrorKind::Failed(CoreError::Fatal(FatalError::Authentication { reason, .. })) =
        &first.kind
    else {
        panic!("{what}: expected an authentication error, got {first:?}");
    };
    assert!(reason.contains(expect), "{what}: {reason}");
    for o in &outcomes {
        let e = o.clone().expect_err("no record may be delivered");
        assert_eq!(
            (&e.kind, e.persisted),
            (&first.kind, first.persisted),
            "{what}: every record fails with the same error"
        );
        assert!(e.record().is_some(), "{what}: the record is handed back");
        assert_eq!(e.persisted, Persistence::NotPersisted, "{what}");
    }
    assert!(later.is_err(), "{what}: a later record is refused");
    assert_eq!(
        connects, 1,
        "{what}: authentication failures are not retried"
    );
    assert!(elapsed < FAIL_FAST, "{what}: took {elapsed:.2?}");
}

/// A paced run on the `REAUTH` listener (sessions of 3 s): 2,000 records over 10 s, each
/// connection re-authenticating several times, every record once in the log.
fn reauthentication_run(kafka: &Kafka, mechanism: &str, log: &Arc<Mutex<capture::Log>>) {
    let topic = format!("kprod-sasl-reauth-{}", mechanism.to_ascii_lowercase());
    kafka.create_topic(&topic, 2, 1, None);
    let plan = plan(&topic, 2, 2_000, Duration::from_millis(5), 0);
    let bootstrap = kafka.listener_bootstrap("REAUTH");
    let props = sasl_props(&bootstrap, "SASL_PLAINTEXT", mechanism, PASSWORD);
    let calls = Arc::new(AtomicUsize::new(0));
    let provider: Option<Arc<dyn TokenProvider>> = (mechanism == "OAUTHBEARER")
        .then(|| Arc::new(token_provider(3600, calls.clone())) as Arc<dyn TokenProvider>);
    let before = log.lock().unwrap().reauthentications;
    let (report, connects) = runtime().block_on(async {
        let (p, connects) = producer(&props, provider);
        let report = run_seed(&p, &plan).await;
        close(p).await;
        (report, connects.load(Ordering::SeqCst))
    });
    let reauths = log.lock().unwrap().reauthentications - before;
    println!(
        "{mechanism}: {reauths} re-authentications over {:.1?} with {REAUTH_MS} ms sessions, {connects} connection(s)",
        report.elapsed
    );
    assert_eq!(report.sent.len(), 2_000);
    verify(
        kafka,
        &plan,
        &report,
        &format!("{mechanism} with re-authentication"),
    );
    // The leader's connection lives through the whole run (> 9 s): at least two renewals.
    assert!(
        reauths >= 2,
        "{mechanism}: only {reauths} re-authentications in {:?}",
        report.elapsed
    );
    if mechanism == "OAUTHBEARER" {
        assert!(
            calls.load(Ordering::SeqCst) > reauths,
            "a fresh token for every exchange"
        );
    }
}

/// The broker's certificate for 127.0.0.1 and the CA that signed it.
fn certificates() -> (String, String, String) {
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.distinguished_name
        .push(DnType::CommonName, "kprod sasl CA");
    ca.is_ca = IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca.key_usages = vec![
        rcgen::KeyUsagePurpose::KeyCertSign,
        rcgen::KeyUsagePurpose::DigitalSignature,
    ];
    let ca_key = KeyPair::generate().unwrap();
    let ca_pem = ca.self_signed(&ca_key).unwrap().pem();
    let mut leaf = CertificateParams::new(vec!["127.0.0.1".to_owned()]).unwrap();
    leaf.distinguished_name.push(DnType::CommonName, "kafka");
    leaf.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let key = KeyPair::generate().unwrap();
    let issuer = rcgen::Issuer::from_params(&ca, &ca_key);
    let cert = leaf.signed_by(&key, &issuer).unwrap();
    (cert.pem(), key.serialize_pem(), ca_pem)
}

#[test]
fn kafka_sasl() {
    let log = capture::install();
    let (chain, key, ca) = certificates();
    let users = vec![(USER.to_owned(), PASSWORD.to_owned())];
    let listener = |name: &str, tls: bool, max_reauth_ms: Option<u64>| SaslListener {
        name: name.to_owned(),
        tls: tls.then(|| (chain.clone(), key.clone())),
        users: users.clone(),
        max_reauth_ms,
    };
    let opts = KafkaOptions::new(1)
        .sasl(listener("SASLPLAIN", false, None))
        .sasl(listener("SASLSSL", true, None))
        .sasl(listener("REAUTH", false, Some(REAUTH_MS)));
    let kafka = Kafka::start_with(opts);
    std::fs::write(kafka.dir().join("sasl-ca.pem"), &ca).expect("write the CA");

    for mechanism in SaslListener::MECHANISMS {
        mechanism_run(&kafka, "SASLPLAIN", "SASL_PLAINTEXT", mechanism, false);
    }
    mechanism_run(&kafka, "SASLSSL", "SASL_SSL", "SCRAM-SHA-512", false);
    mechanism_run(&kafka, "SASLSSL", "SASL_SSL", "PLAIN", false);
    // A Java client's configuration, credentials in sasl.jaas.config.
    mechanism_run(&kafka, "SASLPLAIN", "SASL_PLAINTEXT", "SCRAM-SHA-256", true);
    mechanism_run(&kafka, "SASLSSL", "SASL_SSL", "PLAIN", true);

    let topic = "kprod-sasl-errors";
    kafka.create_topic(topic, 1, 1, None);
    let bootstrap = kafka.listener_bootstrap("SASLPLAIN");
    for mechanism in ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] {
        assert_auth_fails(
            &format!("{mechanism}, wrong password"),
            &sasl_props(&bootstrap, "SASL_PLAINTEXT", mechanism, WRONG_PASSWORD),
            None,
            topic,
            "SASL_AUTHENTICATION_FAILED",
        );
    }
    let calls = Arc::new(AtomicUsize::new(0));
    assert_auth_fails(
        "OAUTHBEARER, expired token",
        &sasl_props(&bootstrap, "SASL_PLAINTEXT", "OAUTHBEARER", ""),
        Some(Arc::new(token_provider(-600, calls))),
        topic,
        "invalid_token",
    );
    let failing: Arc<dyn TokenProvider> =
        Arc::new(|| Err::<String, _>("the identity provider is down".to_owned()));
    assert_auth_fails(
        "OAUTHBEARER, token provider failing",
        &sasl_props(&bootstrap, "SASL_PLAINTEXT", "OAUTHBEARER", ""),
        Some(failing),
        topic,
        "the identity provider is down",
    );
    let log_now = read_topic(&kafka.bootstrap(), topic, 1, BOUND).expect("read back");
    assert!(log_now[&0].is_empty(), "a failed producer wrote records");

    reauthentication_run(&kafka, "SCRAM-SHA-256", &log);
    reauthentication_run(&kafka, "OAUTHBEARER", &log);

    let log = log.lock().unwrap();
    assert!(
        log.text.contains("authenticated"),
        "the capture saw the producers' events"
    );
    for secret in [PASSWORD, WRONG_PASSWORD] {
        assert!(
            !log.text.contains(secret),
            "a password in the log output:\n{}",
            log.text
        );
    }
}

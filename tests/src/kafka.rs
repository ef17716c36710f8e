//! Apache Kafka in the test suite: a KRaft cluster of 1 or 3 nodes in child JVMs, or, for the
//! releases before KRaft ([`KAFKA_2_4_VERSION`], [`KAFKA_2_VERSION`], [`KAFKA_0_11_VERSION`]),
//! brokers beside one ZooKeeper server in a JVM of its own.
//!
//! Install Kafka with `scripts/install-kafka.sh` (Maven Central → `~/.cache/kprod/kafka-<v>/libs`);
//! `KPROD_KAFKA` may point at another install folder. Java 17+ must be on the `PATH`.
//!
//! Layout: every node runs `process.roles=broker,controller` (combined mode) and all nodes
//! form the controller quorum (`controller.quorum.voters`, static), so a 3-node cluster keeps
//! a controller majority with one node down. Each node listens on two ephemeral 127.0.0.1 ports
//! (clients, controller) and keeps its log under a temporary directory that is removed on drop
//! (kept and printed when the test panics). Heaps are 512 MiB per node with the serial GC so
//! that three nodes and the tests fit a 2-core machine. Broker session timeouts are shortened
//! (3 s) so that a killed or stopped broker is fenced, and its leaderships moved, within
//! seconds rather than Kafka's default 9 s.
//!
//! Each JVM runs under a tiny `bash` watchdog that holds a pipe from the test process: when the
//! test process exits for any reason (even `abort`), the pipe closes and the watchdog kills the
//! JVM, so no broker outlives its test binary. The watchdog exits with the JVM, so a broker that
//! exits on its own (refusing to start, say) is seen at once rather than as a silent node.
//!
//! Nothing is skipped: a missing Java or install, a node that does not start, a topic that does
//! not get leaders, each panics with a message saying why and where the logs are.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

use kprod_core::protocol::metadata::{MetadataRequest, MetadataRequestTopic, MetadataResponse};
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::{Offset, TopicPartitionList};

use crate::{free_port, temp_dir, WireClient};

/// The Apache Kafka version `scripts/install-kafka.sh` installs.
pub const KAFKA_VERSION: &str = "4.4.0";

/// The older Apache Kafka `scripts/install-kafka.sh kafka-3` installs: the last 3.x release,
/// which still serves the protocol versions KIP-896 removed in 4.0.
pub const KAFKA_3_VERSION: &str = "3.9.1";

/// Apache Kafka 2.3.1 (`scripts/install-kafka.sh kafka-2`), run with ZooKeeper: without
/// KIP-360 (InitProducerId v1 at most), and the last release line whose broker forgets a
/// producer once its last batch falls below the log start (KAFKA-7190, fixed in 2.4).
pub const KAFKA_2_VERSION: &str = "2.3.1";

/// Apache Kafka 2.4.1 (`scripts/install-kafka.sh kafka-2.4`), run with ZooKeeper: still
/// without KIP-360 (InitProducerId v2 at most), and of the first release line (2.4.0) whose
/// broker keeps a producer whose last batch falls below the log start (KAFKA-7190's fix).
pub const KAFKA_2_4_VERSION: &str = "2.4.1";

/// Apache Kafka 0.11.0.3 (`scripts/install-kafka.sh kafka-0.11`), run with ZooKeeper: the
/// first release with idempotence (Produce v3, Metadata v4, InitProducerId v0; a producer's
/// last batch per partition is the whole deduplication window).
pub const KAFKA_0_11_VERSION: &str = "0.11.0.3";

/// Whether Apache Kafka `version` runs with ZooKeeper here (every release before 3.0; the
/// suite runs 2.4.1, 2.3.1 and 0.11.0.3 so).
fn zookeeper_mode(version: &str) -> bool {
    ["0.", "1.", "2."].iter().any(|p| version.starts_with(p))
}

/// The folder under `scripts/` whose pom installs Apache Kafka `version`.
fn pom_dir(version: &str) -> &'static str {
    match version {
        KAFKA_3_VERSION => "kafka-3",
        KAFKA_2_VERSION => "kafka-2",
        KAFKA_2_4_VERSION => "kafka-2.4",
        KAFKA_0_11_VERSION => "kafka-0.11",
        _ => "kafka",
    }
}

/// How long a node may take to join the cluster.
const READY_TIMEOUT: Duration = Duration::from_secs(90);
/// How long a topic may take to get a leader for every partition.
const TOPIC_TIMEOUT: Duration = Duration::from_secs(60);
/// Pause between two probes of the cluster's state.
const PROBE_PAUSE: Duration = Duration::from_millis(50);

/// Options of a cluster.
#[derive(Debug, Clone)]
pub struct KafkaOptions {
    /// Number of nodes (each a broker and a controller).
    pub brokers: usize,
    /// Per node, the port to advertise to clients instead of the node's own (to put a fault
    /// proxy in front of it); `None` advertises the node's own port. With it, each node gets
    /// a second listener, `CLIENT`, on its own port ([`Kafka::client_addr`]) advertised as the
    /// given port, while brokers replicate over the `PLAINTEXT` listener (advertised as is),
    /// so faults hit the client's connections only; [`Kafka::bootstrap`] stays unproxied.
    pub advertised_ports: Option<Vec<u16>>,
    /// Extra `server.properties` lines, `key=value`, for every node.
    pub extra: Vec<(String, String)>,
    /// Extra TLS listeners for clients on every node ([`Self::ssl`]).
    pub ssl: Vec<SslListener>,
    /// Extra SASL listeners for clients on every node ([`Self::sasl`]).
    pub sasl: Vec<SaslListener>,
    /// The Apache Kafka version to run: [`KAFKA_VERSION`] (default), [`KAFKA_3_VERSION`], or
    /// with ZooKeeper [`KAFKA_2_4_VERSION`], [`KAFKA_2_VERSION`] or [`KAFKA_0_11_VERSION`] (no
    /// TLS or SASL listeners there).
    pub version: &'static str,
    /// Run each node's JVM as `kafka-server-start.sh` does (1 GiB heap, G1, both JIT
    /// compilers: [`SHIPPED_JVM_FLAGS`]) instead of the suite's lean settings
    /// ([`TEST_JVM_FLAGS`]: 512 MiB, serial GC, C1 only, which start and warm up faster on a
    /// small machine). For benchmarks that should meet the broker as users run it.
    pub shipped_jvm: bool,
}

/// The suite's JVM settings for a node: quick to start and to warm up on two cores.
pub const TEST_JVM_FLAGS: &[&str] = &[
    "-Xms512m",
    "-Xmx512m",
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
];

/// The JVM settings Apache Kafka's `kafka-server-start.sh` and `kafka-run-class.sh` give a
/// broker by default (`KAFKA_HEAP_OPTS` and `KAFKA_JVM_PERFORMANCE_OPTS`).
pub const SHIPPED_JVM_FLAGS: &[&str] = &[
    "-Xms1G",
    "-Xmx1G",
    "-server",
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35",
    "-XX:+ExplicitGCInvokesConcurrent",
];

/// A SASL listener for clients (`SASL_PLAINTEXT`, or `SASL_SSL` with `tls`), on its own
/// ephemeral 127.0.0.1 port per node, advertised as is ([`Kafka::listener_bootstrap`]);
/// brokers keep replicating over PLAINTEXT. It enables `PLAIN`, `SCRAM-SHA-256`,
/// `SCRAM-SHA-512` and `OAUTHBEARER`: every user of [`Self::users`] is a PLAIN user (in the
/// listener's `PlainLoginModule` JAAS line) and a SCRAM user of both hashes (created in the
/// KRaft metadata when storage is formatted, `StorageTool format --add-scram`); OAUTHBEARER
/// uses Kafka's unsecured validator, which accepts any unsigned (`alg: none`) JWS with `sub`
/// and `exp` claims.
#[derive(Clone)]
pub struct SaslListener {
    /// Listener name, upper case; must not clash with any other listener's.
    pub name: String,
    /// `Some((PEM certificate chain, PKCS#8 PEM key))`: `SASL_SSL` with that certificate;
    /// `None`: `SASL_PLAINTEXT`.
    pub tls: Option<(String, String)>,
    /// `(user name, password)` pairs.
    pub users: Vec<(String, String)>,
    /// `connections.max.reauth.ms` for this listener: the session lifetime announced to
    /// clients, after which the broker closes a connection that did not re-authenticate.
    pub max_reauth_ms: Option<u64>,
}

impl std::fmt::Debug for SaslListener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SaslListener")
            .field("name", &self.name)
            .field("tls", &self.tls.is_some())
            .field(
                "users",
                &self.users.iter().map(|u| &u.0).collect::<Vec<_>>(),
            )
            .field("max_reauth_ms", &self.max_reauth_ms)
            .finish()
    }
}

impl SaslListener {
    /// The mechanisms every SASL listener enables.
    pub const MECHANISMS: [&'static str; 4] =
        ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"];

    fn protocol(&self) -> &'static str {
        if self.tls.is_some() {
            "SASL_SSL"
        } else {
            "SASL_PLAINTEXT"
        }
    }

    /// The `server.properties` lines of this listener.
    fn properties(&self) -> String {
        let lower = self.name.to_ascii_lowercase();
        let prefix = format!("listener.name.{lower}.");
        let plain_users: String = self
            .users
            .iter()
            .map(|(u, p)| format!(" user_{u}=\"{p}\""))
            .collect();
        let mut lines = vec![
            (
                "sasl.enabled.mechanisms".to_owned(),
                Self::MECHANISMS.join(","),
            ),
            (
                "plain.sasl.jaas.config".to_owned(),
                format!(
                    "org.apache.kafka.common.security.plain.PlainLoginModule required{plain_users};"
                ),
            ),
            (
                "oauthbearer.sasl.jaas.config".to_owned(),
                "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required \
                 unsecuredLoginStringClaim_sub=\"admin\";"
                    .to_owned(),
            ),
        ];
        for m in ["scram-sha-256", "scram-sha-512"] {
            lines.push((
                format!("{m}.sasl.jaas.config"),
                "org.apache.kafka.common.security.scram.ScramLoginModule required;".to_owned(),
            ));
        }
        if let Some(ms) = self.max_reauth_ms {
            lines.push(("connections.max.reauth.ms".to_owned(), ms.to_string()));
        }
        let mut out: String = lines
            .into_iter()
            .map(|(k, v)| format!("{prefix}{k}={}\n", java_escape(&v)))
            .collect();
        if let Some((chain, key)) = &self.tls {
            let tls = SslListener {
                name: self.name.clone(),
                certificate_chain: chain.clone(),
                private_key: key.clone(),
                client_ca: None,
            };
            out.push_str(&tls.properties());
        }
        out
    }

    /// `StorageTool format` arguments creating the SCRAM users.
    fn scram_args(&self) -> Vec<String> {
        let mut args = Vec::new();
        for (u, p) in &self.users {
            for m in ["SCRAM-SHA-256", "SCRAM-SHA-512"] {
                args.push("--add-scram".to_owned());
                args.push(format!("{m}=[name={u},password={p}]"));
            }
        }
        args
    }
}

/// A TLS listener for clients, with PEM certificates given inline (`ssl.keystore.type=PEM`,
/// `ssl.truststore.type=PEM`). Each node gets it on its own ephemeral 127.0.0.1 port,
/// advertised as is ([`Kafka::ssl_bootstrap`]); brokers keep replicating over PLAINTEXT.
#[derive(Clone)]
pub struct SslListener {
    /// Listener name, upper case (`SSL`, `MTLS`, …); must not be `PLAINTEXT`, `CLIENT` or
    /// `CONTROLLER`.
    pub name: String,
    /// The certificate chain every node presents, PEM, leaf first.
    pub certificate_chain: String,
    /// The leaf's private key, unencrypted PKCS#8 PEM.
    pub private_key: String,
    /// `Some(PEM CA certificates)`: clients must present a certificate signed by one of them
    /// (`ssl.client.auth=required`); `None`: no client certificate is asked for.
    pub client_ca: Option<String>,
}

impl std::fmt::Debug for SslListener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SslListener")
            .field("name", &self.name)
            .field("client_auth", &self.client_ca.is_some())
            .finish_non_exhaustive()
    }
}

impl SslListener {
    /// The `server.properties` lines of this listener (values escaped for Java properties).
    fn properties(&self) -> String {
        let prefix = format!("listener.name.{}.", self.name.to_ascii_lowercase());
        let mut lines = vec![
            ("ssl.keystore.type", "PEM".to_owned()),
            (
                "ssl.keystore.certificate.chain",
                self.certificate_chain.clone(),
            ),
            ("ssl.keystore.key", self.private_key.clone()),
        ];
        if let Some(ca) = &self.client_ca {
            lines.push(("ssl.client.auth", "required".to_owned()));
            lines.push(("ssl.truststore.type", "PEM".to_owned()));
            lines.push(("ssl.truststore.certificates", ca.clone()));
        }
        lines
            .into_iter()
            .map(|(k, v)| format!("{prefix}{k}={}\n", java_escape(&v)))
            .collect()
    }
}

/// A value for a Java properties file on one line: backslashes and line breaks escaped.
fn java_escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('\r', "")
        .replace('\n', "\\n")
}

impl KafkaOptions {
    /// `brokers` nodes, no proxy, default settings.
    pub fn new(brokers: usize) -> Self {
        Self {
            brokers,
            advertised_ports: None,
            extra: Vec::new(),
            ssl: Vec::new(),
            sasl: Vec::new(),
            version: KAFKA_VERSION,
            shipped_jvm: false,
        }
    }

    /// Runs the nodes with [`SHIPPED_JVM_FLAGS`] (see [`Self::shipped_jvm`]).
    pub fn shipped_jvm(mut self) -> Self {
        self.shipped_jvm = true;
        self
    }

    /// Runs Apache Kafka `version` (installed by `scripts/install-kafka.sh`, or
    /// `scripts/install-kafka.sh kafka-3` for [`KAFKA_3_VERSION`], `kafka-2.4` for
    /// [`KAFKA_2_4_VERSION`], `kafka-2` for [`KAFKA_2_VERSION`], `kafka-0.11` for
    /// [`KAFKA_0_11_VERSION`]).
    pub fn version(mut self, version: &'static str) -> Self {
        self.version = version;
        self
    }

    /// Adds a SASL listener for clients on every node (see [`SaslListener`]).
    pub fn sasl(mut self, listener: SaslListener) -> Self {
        self.sasl.push(listener);
        self
    }

    /// Adds a TLS listener for clients on every node (see [`SslListener`]).
    pub fn ssl(mut self, listener: SslListener) -> Self {
        self.ssl.push(listener);
        self
    }

    /// Adds a `server.properties` setting for every node.
    pub fn set(mut self, key: &str, value: impl ToString) -> Self {
        self.extra.push((key.to_owned(), value.to_string()));
        self
    }

    /// Advertises `ports[i]` for node `i` (see [`Self::advertised_ports`]).
    pub fn advertise(mut self, ports: Vec<u16>) -> Self {
        self.advertised_ports = Some(ports);
        self
    }
}

/// One running JVM and its watchdog.
#[derive(Debug)]
struct Jvm {
    watchdog: Child,
    /// Held open: closing it makes the watchdog kill the JVM.
    lifeline: Option<ChildStdin>,
    pid: u32,
}

impl Jvm {
    fn kill(mut self) {
        // Not a JVM that already exited on its own (its pid may be reused by now).
        if let Ok(None) = self.watchdog.try_wait() {
            signal("KILL", self.pid);
        }
        drop(self.lifeline.take());
        let _ = self.watchdog.wait();
    }
}

/// One node of the cluster.
#[derive(Debug)]
struct Node {
    id: i32,
    port: u16,
    /// The `CLIENT` listener's own port, when a proxy is advertised.
    client_port: Option<u16>,
    /// The port of each of [`KafkaOptions::ssl`]'s and [`KafkaOptions::sasl`]'s listeners,
    /// by name.
    ssl_ports: Vec<(String, u16)>,
    controller_port: u16,
    config: PathBuf,
    log: PathBuf,
    jvm: Option<Jvm>,
}

/// The ZooKeeper server of a cluster of a release before KRaft.
#[derive(Debug)]
struct ZooKeeper {
    port: u16,
    config: PathBuf,
    log: PathBuf,
    jvm: Option<Jvm>,
}

/// A running Apache Kafka cluster (KRaft, or ZooKeeper before 3.0).
#[derive(Debug)]
pub struct Kafka {
    version: &'static str,
    /// The nodes' JVM settings: [`TEST_JVM_FLAGS`] or [`SHIPPED_JVM_FLAGS`].
    jvm_flags: &'static [&'static str],
    install: PathBuf,
    dir: PathBuf,
    nodes: Vec<Node>,
    /// `--add-scram` arguments for `StorageTool format`.
    scram: Vec<String>,
    /// The ZooKeeper server, for a release before KRaft.
    zookeeper: Option<ZooKeeper>,
}

impl Kafka {
    /// The install folder: `$KPROD_KAFKA`, else `${KPROD_CACHE:-$HOME/.cache/kprod}/kafka-4.4.0`.
    ///
    /// # Panics
    /// If it holds no Kafka jars, or `java` cannot run.
    pub fn install_dir() -> PathBuf {
        Self::install_dir_of(KAFKA_VERSION)
    }

    /// The install folder of Apache Kafka `version`:
    /// `${KPROD_CACHE:-$HOME/.cache/kprod}/kafka-<version>` (`$KPROD_KAFKA` overrides the
    /// folder of [`KAFKA_VERSION`] only).
    ///
    /// # Panics
    /// If it holds no Kafka jars, or `java` cannot run.
    pub fn install_dir_of(version: &str) -> PathBuf {
        let dir = match std::env::var_os("KPROD_KAFKA") {
            Some(p) if version == KAFKA_VERSION => PathBuf::from(p),
            _ => crate::cache_dir().join(format!("kafka-{version}")),
        };
        let scala = if zookeeper_mode(version) {
            "2.12"
        } else {
            "2.13"
        };
        let jar = dir
            .join("libs")
            .join(format!("kafka_{scala}-{version}.jar"));
        let script = match pom_dir(version) {
            "kafka" => "scripts/install-kafka.sh".to_owned(),
            other => format!("scripts/install-kafka.sh {other}"),
        };
        assert!(
            jar.is_file(),
            "Apache Kafka {version} not installed: {} is missing; run {script}",
            jar.display()
        );
        let java = Command::new("java").arg("-version").output();
        assert!(
            matches!(&java, Ok(o) if o.status.success()),
            "cannot run `java -version` ({java:?}); Apache Kafka needs Java 17+ on the PATH"
        );
        dir
    }

    /// Starts `brokers` nodes (1 or 3 in this suite) with default settings and waits until
    /// every broker is registered and unfenced.
    ///
    /// # Panics
    /// As [`Self::start_with`].
    pub fn start(brokers: usize) -> Self {
        Self::start_with(KafkaOptions::new(brokers))
    }

    /// Starts a cluster as `opts` says and waits until every broker is in the metadata.
    ///
    /// # Panics
    /// If Kafka is not installed, storage cannot be formatted, or a node does not join within
    /// 90 s (the message carries the tail of its log).
    pub fn start_with(opts: KafkaOptions) -> Self {
        assert!(opts.brokers >= 1, "a cluster needs at least one node");
        let zk = zookeeper_mode(opts.version);
        assert!(
            !zk || (opts.ssl.is_empty() && opts.sasl.is_empty()),
            "the suite runs Kafka {} without TLS or SASL listeners",
            opts.version
        );
        let install = Self::install_dir_of(opts.version);
        let dir = temp_dir("kafka");
        let zookeeper = zk.then(|| {
            let zk_dir = dir.join("zookeeper");
            std::fs::create_dir_all(&zk_dir).expect("create the ZooKeeper dir");
            let port = free_port();
            let config = zk_dir.join("zookeeper.properties");
            // A short tick, so that a session (a killed broker's registration) can expire
            // within the 3 s the brokers ask for, as a KRaft broker is fenced here.
            write_file(
                &config,
                &format!(
                    "dataDir={}\nclientPort={port}\nclientPortAddress=127.0.0.1\n\
                     tickTime=500\nmaxClientCnxns=0\nadmin.enableServer=false\n",
                    zk_dir.join("data").display()
                ),
            );
            ZooKeeper {
                port,
                config,
                log: zk_dir.join("zookeeper.log"),
                jvm: None,
            }
        });
        let ports: Vec<(u16, u16)> = (0..opts.brokers)
            .map(|_| (free_port(), free_port()))
            .collect();
        let client_ports: Vec<Option<u16>> = (0..opts.brokers)
            .map(|_| opts.advertised_ports.as_ref().map(|_| free_port()))
            .collect();
        let voters = ports
            .iter()
            .enumerate()
            .map(|(i, (_, c))| format!("{}@127.0.0.1:{c}", i + 1))
            .collect::<Vec<_>>()
            .join(",");
        if zk {
            write_file(&dir.join("log4j.properties"), LOG4J_1);
        } else {
            write_file(&dir.join("log4j2.properties"), LOG4J);
        }
        let replication = opts.brokers.min(3);
        let mut nodes = Vec::new();
        for (i, &(port, controller_port)) in ports.iter().enumerate() {
            let id = i as i32 + 1;
            let node_dir = dir.join(format!("node-{id}"));
            std::fs::create_dir_all(&node_dir).expect("create node dir");
            // With a proxy in front, clients use the CLIENT listener (advertised as the proxy)
            // and brokers keep replicating over PLAINTEXT (advertised as is).
            let (client_listener, client_advertised) =
                match (client_ports[i], &opts.advertised_ports) {
                    (Some(own), Some(adv)) => (
                        format!(",CLIENT://127.0.0.1:{own}"),
                        format!(",CLIENT://127.0.0.1:{}", adv[i]),
                    ),
                    _ => (String::new(), String::new()),
                };
            let ssl_ports: Vec<(String, u16)> = opts
                .ssl
                .iter()
                .map(|l| (l.name.clone(), free_port()))
                .chain(opts.sasl.iter().map(|l| (l.name.clone(), free_port())))
                .collect();
            let ssl_listeners: String = ssl_ports
                .iter()
                .map(|(name, p)| format!(",{name}://127.0.0.1:{p}"))
                .collect();
            let ssl_protocols: String = opts
                .ssl
                .iter()
                .map(|l| format!(",{}:SSL", l.name))
                .chain(
                    opts.sasl
                        .iter()
                        .map(|l| format!(",{}:{}", l.name, l.protocol())),
                )
                .collect();
            // Per mode: the node's identity, its listeners and how it finds the cluster.
            let mut props = if let Some(z) = &zookeeper {
                format!(
                    "broker.id={id}\n\
                     zookeeper.connect=127.0.0.1:{}\n\
                     zookeeper.session.timeout.ms=3000\n\
                     zookeeper.connection.timeout.ms=30000\n\
                     listeners=PLAINTEXT://127.0.0.1:{port}{client_listener}\n\
                     advertised.listeners=PLAINTEXT://127.0.0.1:{port}{client_advertised}\n\
                     listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CLIENT:PLAINTEXT\n",
                    z.port
                )
            } else {
                format!(
                    "process.roles=broker,controller\n\
                     node.id={id}\n\
                     controller.quorum.voters={voters}\n\
                     listeners=PLAINTEXT://127.0.0.1:{port}{client_listener}{ssl_listeners},CONTROLLER://127.0.0.1:{controller_port}\n\
                     advertised.listeners=PLAINTEXT://127.0.0.1:{port}{client_advertised}{ssl_listeners}\n\
                     controller.listener.names=CONTROLLER\n\
                     listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CLIENT:PLAINTEXT,CONTROLLER:PLAINTEXT{ssl_protocols}\n\
                     broker.heartbeat.interval.ms=500\n\
                     broker.session.timeout.ms=3000\n\
                     controller.quorum.election.timeout.ms=1000\n\
                     controller.quorum.fetch.timeout.ms=2000\n"
                )
            };
            // Both modes.
            props.push_str(&format!(
                "inter.broker.listener.name=PLAINTEXT\n\
                 log.dirs={}\n\
                 num.partitions=1\n\
                 default.replication.factor={replication}\n\
                 auto.create.topics.enable=false\n\
                 offsets.topic.replication.factor={replication}\n\
                 offsets.topic.num.partitions=3\n\
                 transaction.state.log.replication.factor={replication}\n\
                 transaction.state.log.min.isr=1\n\
                 group.initial.rebalance.delay.ms=0\n\
                 replica.lag.time.max.ms=5000\n\
                 replica.socket.timeout.ms=5000\n\
                 replica.fetch.wait.max.ms=200\n\
                 controlled.shutdown.enable=true\n\
                 num.network.threads=2\n\
                 num.io.threads=2\n\
                 num.replica.fetchers=1\n\
                 background.threads=2\n\
                 log.cleaner.enable=false\n",
                node_dir.join("data").display()
            ));
            for l in &opts.ssl {
                props.push_str(&l.properties());
            }
            for l in &opts.sasl {
                props.push_str(&l.properties());
            }
            for (k, v) in &opts.extra {
                props.push_str(&format!("{k}={v}\n"));
            }
            let config = node_dir.join("server.properties");
            write_file(&config, &props);
            nodes.push(Node {
                id,
                port,
                client_port: client_ports[i],
                ssl_ports,
                controller_port,
                config,
                log: node_dir.join("kafka.log"),
                jvm: None,
            });
        }
        let mut kafka = Self {
            version: opts.version,
            jvm_flags: if opts.shipped_jvm {
                SHIPPED_JVM_FLAGS
            } else {
                TEST_JVM_FLAGS
            },
            install,
            dir,
            nodes,
            scram: opts
                .sasl
                .iter()
                .flat_map(SaslListener::scram_args)
                .collect(),
            zookeeper,
        };
        if kafka.zookeeper.is_some() {
            kafka.start_zookeeper();
        } else {
            let cluster_id = "kprodTestCluster00000A";
            for i in 0..kafka.nodes.len() {
                kafka.format(i, cluster_id);
            }
        }
        for i in 0..kafka.nodes.len() {
            kafka.spawn(i);
        }
        kafka.wait_brokers(&(0..kafka.nodes.len()).collect::<Vec<_>>());
        kafka
    }

    /// The Apache Kafka version running.
    pub fn version(&self) -> &'static str {
        self.version
    }

    /// The nodes' JVM settings ([`KafkaOptions::shipped_jvm`]).
    pub fn jvm_flags(&self) -> &'static [&'static str] {
        self.jvm_flags
    }

    /// Panics, naming `what`, on a release before KRaft: the tools the suite runs
    /// (`org.apache.kafka.tools.*`) and the controller listener are 3.x and later.
    fn assert_kraft(&self, what: &str) {
        assert!(
            self.zookeeper.is_none(),
            "{what} is not supported on Kafka {} (ZooKeeper) in this harness",
            self.version
        );
    }

    fn classpath(&self) -> String {
        format!("{}/libs/*", self.install.display())
    }

    /// Runs one of Kafka's command-line tools (`class`, with `args`) in a short-lived JVM and
    /// asserts it succeeded; `what` names the step in the failure message.
    fn run_tool<S: AsRef<std::ffi::OsStr>>(
        &self,
        what: &str,
        class: &str,
        args: impl IntoIterator<Item = S>,
    ) -> String {
        let out = Command::new("java")
            .args([
                "-Xmx256m",
                "-XX:+UseSerialGC",
                "-XX:TieredStopAtLevel=1",
                "-cp",
            ])
            .arg(self.classpath())
            .arg(self.log4j_flag())
            .arg(class)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("run java {class}: {e}"));
        assert!(
            out.status.success(),
            "{what} failed with {}:\nstdout: {}\nstderr: {}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Moves the replicas of `topic`'s partitions to `assignment` (partition → replica node
    /// ids, the first the preferred leader) with Kafka's `ReassignPartitionsCommand`, as
    /// `kafka-reassign-partitions.sh --execute` runs it, and waits until `--verify` reports
    /// every partition done.
    ///
    /// # Panics
    /// If a command fails or the reassignment is not done within 60 s.
    pub fn reassign(&self, topic: &str, assignment: &BTreeMap<i32, Vec<i32>>) {
        self.assert_kraft("partition reassignment");
        let partitions: Vec<String> = (assignment.iter())
            .map(|(p, replicas)| {
                format!(r#"{{"topic":"{topic}","partition":{p},"replicas":{replicas:?}}}"#)
            })
            .collect();
        let json = format!(r#"{{"version":1,"partitions":[{}]}}"#, partitions.join(","));
        let file = self.dir.join(format!("reassign-{topic}.json"));
        std::fs::write(&file, json).expect("write the reassignment file");
        let bootstrap = self.bootstrap();
        let class = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand";
        let args = |action: &'static str| {
            let file = file.as_os_str().to_owned();
            [
                "--bootstrap-server".into(),
                bootstrap.clone().into(),
                "--reassignment-json-file".into(),
                file,
                action.into(),
            ]
            .into_iter()
            .collect::<Vec<std::ffi::OsString>>()
        };
        self.run_tool("partition reassignment", class, args("--execute"));
        let deadline = Instant::now() + TOPIC_TIMEOUT;
        loop {
            let out = self.run_tool("reassignment check", class, args("--verify"));
            if !out.contains("in progress") {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "reassignment of {topic} not done within {TOPIC_TIMEOUT:?}: {out}"
            );
            std::thread::sleep(PROBE_PAUSE);
        }
    }

    /// Makes every partition's preferred replica its leader (Kafka's
    /// `LeaderElectionCommand --election-type PREFERRED`).
    ///
    /// # Panics
    /// If the command fails.
    pub fn elect_preferred_leaders(&self) {
        self.assert_kraft("preferred leader election");
        let bootstrap = self.bootstrap();
        self.run_tool(
            "preferred leader election",
            "org.apache.kafka.tools.LeaderElectionCommand",
            [
                "--bootstrap-server",
                bootstrap.as_str(),
                "--election-type",
                "PREFERRED",
                "--all-topic-partitions",
            ],
        );
    }

    /// Adds or removes ACLs with Kafka's `AclCommand` (`kafka-acls.sh`), `args` as that tool
    /// takes them (`--add --allow-principal User:alice --operation Write --topic t`), over the
    /// PLAINTEXT listener; the broker needs an authorizer for them to matter.
    ///
    /// # Panics
    /// If the command fails.
    pub fn acl(&self, args: &[&str]) {
        self.assert_kraft("kafka-acls");
        let bootstrap = self.bootstrap();
        let mut all = vec!["--bootstrap-server", bootstrap.as_str()];
        all.extend_from_slice(args);
        all.push("--force");
        self.run_tool(
            &format!("kafka-acls {args:?}"),
            "org.apache.kafka.tools.AclCommand",
            all,
        );
    }

    /// Sets a produce quota of `bytes_per_second` for client id `client_id` (Kafka's
    /// `ConfigCommand`, as `kafka-configs.sh --alter --entity-type clients` runs it).
    ///
    /// # Panics
    /// If the command fails.
    pub fn set_producer_quota(&self, client_id: &str, bytes_per_second: u64) {
        self.assert_kraft("a producer quota");
        let rate = format!("producer_byte_rate={bytes_per_second}");
        let bootstrap = self.bootstrap();
        self.run_tool(
            "setting the quota",
            "org.apache.kafka.tools.ConfigCommand",
            [
                "--bootstrap-server",
                &bootstrap,
                "--alter",
                "--add-config",
                &rate,
                "--entity-type",
                "clients",
                "--entity-name",
                client_id,
            ],
        );
    }

    fn format(&self, i: usize, cluster_id: &str) {
        let node = &self.nodes[i];
        let mut args: Vec<std::ffi::OsString> = ["format", "-t", cluster_id, "-c"]
            .into_iter()
            .map(Into::into)
            .collect();
        args.push(node.config.clone().into());
        args.extend(self.scram.iter().map(Into::into));
        self.run_tool(
            &format!("formatting node {}", node.id),
            "kafka.tools.StorageTool",
            args,
        );
    }

    /// The JVM flag naming the log configuration: log4j 2 for KRaft releases, log4j 1
    /// (reload4j) before.
    fn log4j_flag(&self) -> String {
        if self.zookeeper.is_some() {
            format!(
                "-Dlog4j.configuration=file:{}",
                self.dir.join("log4j.properties").display()
            )
        } else {
            format!(
                "-Dlog4j2.configurationFile={}",
                self.dir.join("log4j2.properties").display()
            )
        }
    }

    /// Starts `class` with `args` in a JVM under a watchdog, its output appended to `log`.
    fn spawn_jvm(&self, flags: &[&str], class: &str, args: &[&Path], log: &Path) -> Jvm {
        let out = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .unwrap_or_else(|e| panic!("cannot open {}: {e}", log.display()));
        // The watchdog: starts the JVM and prints its pid. A guard waits for the watchdog's
        // stdin to close (the test process ended or dropped it) and kills the JVM. The
        // watchdog itself waits for the JVM and exits with its status, so that `try_wait`
        // sees a JVM that exited on its own (a broker refusing to start). The guard's stdin
        // is named: a background job's would be /dev/null.
        let mut watchdog = Command::new("bash")
            .arg("-c")
            .arg(r#""$@" </dev/null & pid=$!; echo "$pid"; { cat >/dev/null; kill -9 "$pid" 2>/dev/null; } <&0 & guard=$!; wait "$pid" 2>/dev/null; status=$?; kill "$guard" 2>/dev/null; exit "$status""#)
            .arg("kafka-watchdog")
            .arg("java")
            .args(flags)
            .arg("-Djava.awt.headless=true")
            .arg(self.log4j_flag())
            .arg("-cp")
            .arg(self.classpath())
            .arg(class)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(out)
            .spawn()
            .expect("spawn bash for the Kafka watchdog");
        let mut line = String::new();
        BufReader::new(watchdog.stdout.take().expect("watchdog stdout"))
            .read_line(&mut line)
            .expect("read the JVM's pid");
        let pid: u32 = line
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("watchdog printed {line:?} instead of a pid"));
        Jvm {
            lifeline: watchdog.stdin.take(),
            watchdog,
            pid,
        }
    }

    fn spawn(&mut self, i: usize) {
        let node = &self.nodes[i];
        assert!(node.jvm.is_none(), "node {} is already running", node.id);
        let jvm = self.spawn_jvm(self.jvm_flags, "kafka.Kafka", &[&node.config], &node.log);
        self.nodes[i].jvm = Some(jvm);
    }

    /// Starts node index `i` with ZooKeeper. A node SIGKILLed moments before leaves its
    /// registration (an ephemeral node of its old session) until ZooKeeper expires that
    /// session, and a broker that finds it refuses to start (2.3: NodeExists; 0.11: "already
    /// registered"): it is started again until it registers, or fails otherwise, within
    /// [`READY_TIMEOUT`]. Registered means its log says `started`: the broker opens its port
    /// before it registers, so an open port proves nothing.
    fn spawn_registered(&mut self, i: usize) {
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            let from = std::fs::metadata(&self.nodes[i].log).map_or(0, |m| m.len());
            self.spawn(i);
            let since_spawn = |log: &Path| {
                let all = std::fs::read(log).unwrap_or_default();
                String::from_utf8_lossy(all.get(from as usize..).unwrap_or_default()).into_owned()
            };
            // Until the broker has registered (its log says so) or exits.
            let exited = loop {
                let jvm = self.nodes[i].jvm.as_mut().expect("just spawned");
                if let Ok(Some(status)) = jvm.watchdog.try_wait() {
                    break Some(status);
                }
                if since_spawn(&self.nodes[i].log).contains("started (kafka.server.KafkaServer)")
                    || Instant::now() > deadline
                {
                    break None;
                }
                std::thread::sleep(PROBE_PAUSE);
            };
            let Some(status) = exited else {
                assert!(
                    since_spawn(&self.nodes[i].log).contains("started (kafka.server.KafkaServer)"),
                    "Kafka node {} did not register within {READY_TIMEOUT:?} of its restart; \
                     log {}:\n{}",
                    self.nodes[i].id,
                    self.nodes[i].log.display(),
                    self.log_tail(i, 40)
                );
                return;
            };
            self.nodes[i].jvm = None;
            let new = since_spawn(&self.nodes[i].log);
            assert!(
                (new.contains("NodeExists") || new.contains("already registered"))
                    && Instant::now() < deadline,
                "Kafka node {} exited ({status}) when restarted; log {}:\n{}",
                self.nodes[i].id,
                self.nodes[i].log.display(),
                self.log_tail(i, 40)
            );
        }
    }

    /// Starts the ZooKeeper server and waits until it takes connections.
    fn start_zookeeper(&mut self) {
        let z = self.zookeeper.as_ref().expect("a ZooKeeper cluster");
        let flags = ["-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"];
        let class = "org.apache.zookeeper.server.ZooKeeperServerMain";
        let jvm = self.spawn_jvm(&flags, class, &[&z.config], &z.log);
        let z = self.zookeeper.as_mut().expect("a ZooKeeper cluster");
        let jvm = z.jvm.insert(jvm);
        let deadline = Instant::now() + READY_TIMEOUT;
        while !port_open(z.port) {
            if let Ok(Some(status)) = jvm.watchdog.try_wait() {
                panic!(
                    "ZooKeeper exited ({status}); log {}:\n{}",
                    z.log.display(),
                    tail(&z.log, 40)
                );
            }
            assert!(
                Instant::now() < deadline,
                "ZooKeeper did not listen on {} within {READY_TIMEOUT:?}; log {}:\n{}",
                z.port,
                z.log.display(),
                tail(&z.log, 40)
            );
            std::thread::sleep(PROBE_PAUSE);
        }
    }

    /// Waits until every node in `live` is a registered, unfenced broker (listed in Metadata
    /// as seen from each of them).
    fn wait_brokers(&mut self, live: &[usize]) {
        let deadline = Instant::now() + READY_TIMEOUT;
        let want: Vec<i32> = live.iter().map(|&i| self.nodes[i].id).collect();
        for &i in live {
            loop {
                self.assert_running(i);
                if let Some(meta) = self.metadata_from(i, None) {
                    let mut have: Vec<i32> = meta.brokers.iter().map(|b| b.node_id).collect();
                    have.sort_unstable();
                    if want.iter().all(|w| have.contains(w)) {
                        break;
                    }
                }
                if Instant::now() > deadline {
                    panic!(
                        "Kafka node {} did not see brokers {want:?} within {READY_TIMEOUT:?}; log {}:\n{}",
                        self.nodes[i].id,
                        self.nodes[i].log.display(),
                        self.log_tail(i, 40)
                    );
                }
                std::thread::sleep(PROBE_PAUSE);
            }
        }
    }

    fn assert_running(&mut self, i: usize) {
        let node = &mut self.nodes[i];
        if let Some(jvm) = &mut node.jvm {
            if let Ok(Some(status)) = jvm.watchdog.try_wait() {
                let id = node.id;
                let log = node.log.display().to_string();
                panic!(
                    "Kafka node {id} exited ({status}); log {log}:\n{}",
                    self.log_tail(i, 60)
                );
            }
        }
    }

    /// Metadata as node `i` answers it (all topics when `topic` is `None`), or `None` if it
    /// cannot be asked right now.
    fn metadata_from(&self, i: usize, topic: Option<&str>) -> Option<MetadataResponse> {
        let mut c = WireClient::connect(self.node_addr(i)).ok()?;
        c.stream()
            .set_read_timeout(Some(Duration::from_secs(2)))
            .ok()?;
        let req = MetadataRequest {
            topics: topic.map(|t| {
                vec![MetadataRequestTopic {
                    topic_id: [0; 16],
                    name: Some(t.to_owned()),
                }]
            }),
            allow_auto_topic_creation: false,
            include_cluster_authorized_operations: false,
            include_topic_authorized_operations: false,
        };
        c.call(&req, self.metadata_version()).ok()
    }

    /// The Metadata version the harness asks this release with: 12, or the release's
    /// highest before 2.8 (Kafka 2.4: 9, 2.3: 8, 0.11: 4).
    fn metadata_version(&self) -> i16 {
        match self.version {
            KAFKA_2_VERSION => 8,
            KAFKA_2_4_VERSION => 9,
            KAFKA_0_11_VERSION => 4,
            v => {
                assert!(
                    !zookeeper_mode(v),
                    "no Metadata version known for Kafka {v}"
                );
                12
            }
        }
    }

    /// Metadata for `topic` from any running node.
    pub fn metadata(&self, topic: &str) -> Option<MetadataResponse> {
        (0..self.nodes.len())
            .filter(|&i| self.nodes[i].jvm.is_some())
            .find_map(|i| self.metadata_from(i, Some(topic)))
    }

    /// A producer for fault tests on this cluster: every node bootstrapped, `client_id`,
    /// `linger.ms` 2, a 2 s request timeout, retry and reconnect backoffs of 20 ms (retries
    /// up to 500 ms apart), and no topic auto-creation; the caller sets `batch.size` and the
    /// timeouts its faults need.
    pub fn fault_config(&self, client_id: &str) -> kprod_core::ProducerConfig {
        kprod_core::ProducerConfig {
            bootstrap_servers: self.bootstrap().split(',').map(str::to_owned).collect(),
            client_id: Some(client_id.into()),
            linger: Duration::from_millis(2),
            request_timeout: Duration::from_secs(2),
            retry_backoff: Duration::from_millis(20),
            retry_backoff_max: Duration::from_millis(500),
            reconnect_backoff: Duration::from_millis(20),
            allow_auto_topic_creation: false,
            ..kprod_core::ProducerConfig::default()
        }
    }

    /// `127.0.0.1:p1,127.0.0.1:p2,…` over every node (running or not).
    pub fn bootstrap(&self) -> String {
        self.nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// `127.0.0.1:p1,…` over every node's TLS listener `name` ([`KafkaOptions::ssl`]).
    ///
    /// # Panics
    /// If there is no such listener.
    pub fn ssl_bootstrap(&self, name: &str) -> String {
        (0..self.nodes.len())
            .map(|i| format!("127.0.0.1:{}", self.ssl_port(i, name)))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// `127.0.0.1:p1,…` over every node's SASL (or TLS) listener `name`
    /// ([`KafkaOptions::sasl`]).
    ///
    /// # Panics
    /// If there is no such listener.
    pub fn listener_bootstrap(&self, name: &str) -> String {
        self.ssl_bootstrap(name)
    }

    /// The port of node index `i`'s TLS (or SASL) listener `name`.
    ///
    /// # Panics
    /// If there is no such listener.
    pub fn ssl_port(&self, i: usize, name: &str) -> u16 {
        self.nodes[i]
            .ssl_ports
            .iter()
            .find(|(n, _)| n == name)
            .map(|&(_, p)| p)
            .unwrap_or_else(|| panic!("node {} has no TLS listener {name}", self.nodes[i].id))
    }

    /// The client address of node index `i` (0-based; node id `i + 1`).
    pub fn node_addr(&self, i: usize) -> SocketAddr {
        SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::LOCALHOST, self.nodes[i].port))
    }

    /// Where a fault proxy in front of node index `i` forwards to: the `CLIENT` listener's own
    /// address when [`KafkaOptions::advertise`] was used, else the node's address.
    pub fn client_addr(&self, i: usize) -> SocketAddr {
        let port = self.nodes[i].client_port.unwrap_or(self.nodes[i].port);
        SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::LOCALHOST, port))
    }

    /// The client port of every node, in node order.
    pub fn ports(&self) -> Vec<u16> {
        self.nodes.iter().map(|n| n.port).collect()
    }

    /// The node index (0-based) of node id `id`.
    pub fn index_of(&self, id: i32) -> usize {
        self.nodes
            .iter()
            .position(|n| n.id == id)
            .unwrap_or_else(|| panic!("no node with id {id}"))
    }

    /// Number of nodes.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Never true: a cluster has at least one node.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// Creates `topic` with `partitions` partitions, replication factor `replication` and, if
    /// given, `min.insync.replicas`, then waits until every partition has a leader and a full
    /// ISR.
    ///
    /// # Panics
    /// If the admin request fails or the partitions do not get leaders within 60 s.
    pub fn create_topic(
        &self,
        topic: &str,
        partitions: i32,
        replication: i32,
        min_insync: Option<i32>,
    ) {
        let min = min_insync.map(|m| m.to_string());
        let configs: Vec<(&str, &str)> = (min.as_deref())
            .map(|m| ("min.insync.replicas", m))
            .into_iter()
            .collect();
        self.create_topic_with(topic, partitions, replication, &configs);
    }

    /// [`Kafka::create_topic`] with the topic-level `configs` (name, value) given.
    ///
    /// # Panics
    /// If the admin request fails or the partitions do not get leaders within 60 s.
    pub fn create_topic_with(
        &self,
        topic: &str,
        partitions: i32,
        replication: i32,
        configs: &[(&str, &str)],
    ) {
        let name = topic.to_owned();
        let configs: Vec<(String, String)> = (configs.iter())
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        let result = with_admin(&self.bootstrap(), move |admin, opts| async move {
            let mut new = NewTopic::new(&name, partitions, TopicReplication::Fixed(replication));
            for (k, v) in &configs {
                new = new.set(k, v);
            }
            let results = admin
                .create_topics([&new], &opts)
                .await
                .map_err(|e| format!("CreateTopics: {e}"))?;
            for r in results {
                r.map_err(|(t, e)| format!("CreateTopics {t}: {e}"))?;
            }
            Ok(())
        });
        if let Err(e) = result {
            panic!("creating topic {topic}: {e}");
        }
        self.wait_topic(topic, partitions, replication as usize);
    }

    /// Deletes the records of partitions `0..partitions` of `topic` up to their high
    /// watermarks (DeleteRecords, as `kafka-delete-records.sh` and Kafka Streams' purge of
    /// its repartition topics do) and returns each partition's new log start.
    ///
    /// # Panics
    /// If the admin request fails for any partition.
    pub fn delete_records(&self, topic: &str, partitions: i32) -> BTreeMap<i32, i64> {
        let name = topic.to_owned();
        with_admin(&self.bootstrap(), move |admin, opts| async move {
            let mut list = TopicPartitionList::new();
            for p in 0..partitions {
                list.add_partition_offset(&name, p, Offset::End)
                    .map_err(|e| e.to_string())?;
            }
            let result = admin
                .delete_records(&list, &opts)
                .await
                .map_err(|e| format!("DeleteRecords: {e}"))?;
            let mut starts = BTreeMap::new();
            for e in result.elements() {
                let at = format!("DeleteRecords {name}-{}", e.partition());
                e.error().map_err(|err| format!("{at}: {err}"))?;
                match e.offset() {
                    Offset::Offset(o) => starts.insert(e.partition(), o),
                    other => return Err(format!("{at}: {other:?}")),
                };
            }
            Ok(starts)
        })
        .unwrap_or_else(|e| panic!("deleting records of {topic}: {e}"))
    }

    /// Deletes `topic` and waits until no node's metadata lists it.
    ///
    /// # Panics
    /// If the admin request fails or the topic is still listed after 60 s.
    pub fn delete_topic(&self, topic: &str) {
        let name = topic.to_owned();
        let result = with_admin(&self.bootstrap(), move |admin, opts| async move {
            let results = admin
                .delete_topics(&[&name], &opts)
                .await
                .map_err(|e| format!("DeleteTopics: {e}"))?;
            for r in results {
                r.map_err(|(t, e)| format!("DeleteTopics {t}: {e}"))?;
            }
            Ok(())
        });
        if let Err(e) = result {
            panic!("deleting topic {topic}: {e}");
        }
        let deadline = Instant::now() + TOPIC_TIMEOUT;
        loop {
            let gone = (0..self.nodes.len())
                .filter(|&i| self.nodes[i].jvm.is_some())
                .all(|i| {
                    self.metadata_from(i, Some(topic)).is_some_and(|m| {
                        m.topics
                            .iter()
                            .all(|t| t.name.as_deref() != Some(topic) || t.error_code != 0)
                    })
                });
            if gone {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "topic {topic} still listed {TOPIC_TIMEOUT:?} after its deletion"
            );
            std::thread::sleep(PROBE_PAUSE);
        }
    }

    /// Waits until `topic` has `partitions` partitions, each with a leader and `isr` in-sync
    /// replicas.
    pub fn wait_topic(&self, topic: &str, partitions: i32, isr: usize) {
        let deadline = Instant::now() + TOPIC_TIMEOUT;
        loop {
            if let Some(meta) = self.metadata(topic) {
                if let Some(t) = meta
                    .topics
                    .iter()
                    .find(|t| t.name.as_deref() == Some(topic))
                {
                    let ready = t.error_code == 0
                        && t.partitions.len() == partitions as usize
                        && t.partitions
                            .iter()
                            .all(|p| p.leader_id >= 0 && p.isr_nodes.len() >= isr);
                    if ready {
                        return;
                    }
                }
            }
            assert!(
                Instant::now() < deadline,
                "topic {topic} did not get {partitions} led partitions with ISR {isr} within {TOPIC_TIMEOUT:?}: {:?}",
                self.metadata(topic)
            );
            std::thread::sleep(PROBE_PAUSE);
        }
    }

    /// Leader node id of every partition of `topic`, as the cluster sees it now.
    pub fn leaders(&self, topic: &str) -> BTreeMap<i32, i32> {
        let meta = self
            .metadata(topic)
            .unwrap_or_else(|| panic!("no running node answers Metadata for {topic}"));
        meta.topics
            .iter()
            .filter(|t| t.name.as_deref() == Some(topic))
            .flat_map(|t| {
                t.partitions
                    .iter()
                    .map(|p| (p.partition_index, p.leader_id))
            })
            .collect()
    }

    /// Leader node id of one partition.
    pub fn leader(&self, topic: &str, partition: i32) -> i32 {
        self.leaders(topic)
            .get(&partition)
            .copied()
            .unwrap_or_else(|| panic!("{topic}/{partition} not in metadata"))
    }

    /// The leader and the ISR's size of `topic`/`partition`, as a running node answers now;
    /// `None` if no node answers (electing, collecting garbage) or the partition is not
    /// listed.
    pub fn leader_and_isr(&self, topic: &str, partition: i32) -> Option<(i32, usize)> {
        let meta = self.metadata(topic)?;
        meta.topics
            .iter()
            .filter(|t| t.name.as_deref() == Some(topic))
            .flat_map(|t| t.partitions.iter())
            .find(|p| p.partition_index == partition)
            .map(|p| (p.leader_id, p.isr_nodes.len()))
    }

    /// Waits until `topic`/`partition` is led by a running node other than `not`.
    pub fn wait_leader_moved(&self, topic: &str, partition: i32, not: i32) -> i32 {
        let deadline = Instant::now() + TOPIC_TIMEOUT;
        loop {
            // A node that does not answer this probe is asked again, as a leaderless
            // partition is.
            if let Some((l, _)) = self.leader_and_isr(topic, partition) {
                if l >= 0 && l != not {
                    return l;
                }
            }
            assert!(
                Instant::now() < deadline,
                "{topic}/{partition} still led by {not} (or leaderless, or no node answered) \
                 after {TOPIC_TIMEOUT:?}"
            );
            std::thread::sleep(PROBE_PAUSE);
        }
    }

    /// Waits until `topic`/`partition`'s ISR has fewer than `n` replicas (a replica fell out).
    pub fn wait_isr_below(&self, topic: &str, partition: i32, n: usize) {
        let deadline = Instant::now() + TOPIC_TIMEOUT;
        loop {
            let isr = self.leader_and_isr(topic, partition).map(|(_, isr)| isr);
            if isr.is_some_and(|l| l < n) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{topic}/{partition}'s ISR still has {isr:?} replicas after {TOPIC_TIMEOUT:?}"
            );
            std::thread::sleep(PROBE_PAUSE);
        }
    }

    /// The JVM pid of node id `id`, if it runs.
    pub fn pid(&self, id: i32) -> Option<u32> {
        self.nodes[self.index_of(id)].jvm.as_ref().map(|j| j.pid)
    }

    /// SIGKILLs node `id` (no controlled shutdown: its leaderships move once it is fenced).
    pub fn kill(&mut self, id: i32) {
        let i = self.index_of(id);
        if let Some(jvm) = self.nodes[i].jvm.take() {
            jvm.kill();
        }
    }

    /// Stops node `id` with SIGTERM (a controlled shutdown: leaderships move first) and waits
    /// for it to exit.
    ///
    /// # Panics
    /// If it does not exit within 60 s.
    pub fn stop(&mut self, id: i32) {
        let i = self.index_of(id);
        let Some(mut jvm) = self.nodes[i].jvm.take() else {
            return;
        };
        signal("TERM", jvm.pid);
        let deadline = Instant::now() + Duration::from_secs(60);
        while process_alive(jvm.pid) {
            if Instant::now() > deadline {
                jvm.kill();
                panic!("Kafka node {id} did not stop within 60 s of SIGTERM");
            }
            std::thread::sleep(PROBE_PAUSE);
        }
        drop(jvm.lifeline.take());
        let _ = jvm.watchdog.wait();
    }

    /// SIGSTOPs node `id`: it keeps its sockets but answers nothing.
    pub fn pause(&self, id: i32) {
        let pid = self
            .pid(id)
            .unwrap_or_else(|| panic!("node {id} is not running"));
        signal("STOP", pid);
    }

    /// SIGCONTs node `id` after [`Self::pause`].
    pub fn resume(&self, id: i32) {
        let pid = self
            .pid(id)
            .unwrap_or_else(|| panic!("node {id} is not running"));
        signal("CONT", pid);
    }

    /// Starts node `id` again (after [`Self::kill`] or [`Self::stop`]) with its old log and
    /// waits until it is back in the cluster.
    pub fn restart(&mut self, id: i32) {
        let i = self.index_of(id);
        if self.zookeeper.is_some() {
            self.spawn_registered(i);
        } else {
            self.spawn(i);
        }
        let live: Vec<usize> = (0..self.nodes.len())
            .filter(|&j| self.nodes[j].jvm.is_some())
            .collect();
        self.wait_brokers(&live);
    }

    /// The last `lines` lines of node index `i`'s log.
    pub fn log_tail(&self, i: usize, lines: usize) -> String {
        tail(&self.nodes[i].log, lines)
    }

    /// The controller port of node index `i` (for tests that need to reach the quorum).
    pub fn controller_port(&self, i: usize) -> u16 {
        self.assert_kraft("a controller port");
        self.nodes[i].controller_port
    }

    /// The temporary directory holding every node's configuration, data and log.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

impl Drop for Kafka {
    fn drop(&mut self) {
        for node in &mut self.nodes {
            if let Some(mut jvm) = node.jvm.take() {
                if let Ok(None) = jvm.watchdog.try_wait() {
                    signal("CONT", jvm.pid);
                }
                jvm.kill();
            }
        }
        if let Some(jvm) = self.zookeeper.as_mut().and_then(|z| z.jvm.take()) {
            jvm.kill();
        }
        if std::thread::panicking() {
            eprintln!("Kafka logs kept under {}", self.dir.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// Runs `op` with librdkafka's admin client for `bootstrap` and admin options with a 30 s
/// operation timeout. The client is async: it runs on a thread and a runtime of its own, so
/// that this works from inside or outside a tokio runtime.
fn with_admin<T, F, Fut>(bootstrap: &str, op: F) -> Result<T, String>
where
    T: Send + 'static,
    F: FnOnce(AdminClient<DefaultClientContext>, AdminOptions) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = Result<T, String>>,
{
    let bootstrap = bootstrap.to_owned();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| e.to_string())?;
        rt.block_on(async move {
            let admin: AdminClient<DefaultClientContext> = rdkafka::config::ClientConfig::new()
                .set("bootstrap.servers", &bootstrap)
                .create()
                .map_err(|e| format!("admin client: {e}"))?;
            let opts = AdminOptions::new().operation_timeout(Some(Duration::from_secs(30)));
            op(admin, opts).await
        })
    })
    .join()
    .expect("admin thread panicked")
}

/// Sends `sig` to `pid` through bash's builtin `kill` (a machine without procps has no
/// `kill` binary, and the signal was then silently not sent; the watchdog uses the builtin
/// too). A process already gone is not an error.
fn signal(sig: &str, pid: u32) {
    let _ = Command::new("bash")
        .arg("-c")
        .arg(format!("kill -{sig} {pid}"))
        .stderr(Stdio::null())
        .status();
}

fn process_alive(pid: u32) -> bool {
    // A zombie is not alive: read the state from /proc.
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

fn write_file(path: &Path, text: &str) {
    std::fs::File::create(path)
        .and_then(|mut f| f.write_all(text.as_bytes()))
        .unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
}

fn tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read(path)
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_else(|e| format!("(cannot read {}: {e})", path.display()));
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// Is anything listening on 127.0.0.1:`port`?
pub fn port_open(port: u16) -> bool {
    TcpStream::connect_timeout(
        &SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::LOCALHOST, port)),
        Duration::from_millis(200),
    )
    .is_ok()
}

/// Broker and ZooKeeper logging before KRaft (log4j 1, reload4j): as [`LOG4J`].
const LOG4J_1: &str = "\
log4j.rootLogger=WARN, stderr
log4j.appender.stderr=org.apache.log4j.ConsoleAppender
log4j.appender.stderr.Target=System.err
log4j.appender.stderr.layout=org.apache.log4j.PatternLayout
log4j.appender.stderr.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.kafka.server.KafkaServer=INFO
";

/// Broker logging: warnings and errors only, to stderr (the node's log file).
const LOG4J: &str = "\
status = error
appender.stderr.type = Console
appender.stderr.name = STDERR
appender.stderr.target = SYSTEM_ERR
appender.stderr.layout.type = PatternLayout
appender.stderr.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = warn
rootLogger.appenderRef.stderr.ref = STDERR
logger.kafka.name = kafka.server.KafkaServer
logger.kafka.level = info
logger.controller.name = org.apache.kafka.controller
logger.controller.level = warn
";

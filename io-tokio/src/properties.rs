//! `ProducerConfig` and the connection's security settings from Java-client property names.

use std::collections::btree_map::Entry;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use crate::sasl::SaslProps;
use crate::security_extras::SecurityExtras;

use kprod_core::{CompressionType, ConfigError, GapPolicy, Partitioner, ProducerConfig};

use crate::{AddressFamily, SocketOptions};

/// Why a property list could not become a [`ProducerConfig`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum PropertyError {
    /// The property name is not one kprod understands.
    Unknown(String),
    /// The value could not be parsed.
    Invalid {
        /// Property name.
        property: String,
        /// The value given.
        value: String,
        /// What was expected.
        expected: &'static str,
    },
    /// The values parsed but the configuration does not validate.
    Config(ConfigError),
    /// One setting given twice with different values, under one name (`linger.ms=5` and
    /// `linger.ms=10`) or under an alias (`linger.ms` and librdkafka's
    /// `queue.buffering.max.ms`): kprod does not pick one. Values that say the same
    /// (`acks=all` and `request.required.acks=-1`) may be repeated.
    Conflict {
        /// The first property given for the setting: its name and value (`(hidden)` for a
        /// secret, such as a password).
        first: (String, String),
        /// The later property that disagrees with it: its name and value.
        second: (String, String),
    },
    /// The property is understood but the value asks for something kprod does not do yet.
    Unsupported {
        /// Property name.
        property: String,
        /// The value given.
        value: String,
        /// Why, and what is supported instead.
        reason: &'static str,
    },
    /// A file named by a property (a certificate, a key) cannot be used.
    File {
        /// Property name.
        property: String,
        /// The path given.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// A `ProducerHandle::from_*` constructor was called outside a tokio runtime (see
    /// [`crate::StartError::NoRuntime`]).
    NoRuntime,
    /// The runtime lacks the named driver (see [`crate::StartError::DriverDisabled`]).
    DriverDisabled(&'static str),
}

impl std::fmt::Display for PropertyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Unknown(name) => write!(
                f,
                "unknown producer property {name:?} (kprod takes the Java client's and \
                 librdkafka's producer property names: see kprod_tokio::config_from_properties)"
            ),
            Self::Invalid {
                property,
                value,
                expected,
            } => write!(
                f,
                "invalid value {value:?} for {property}: expected {expected}"
            ),
            Self::Config(e) => e.fmt(f),
            Self::Conflict {
                first: (name, value),
                second: (later, later_value),
            } => write!(
                f,
                "{name}={value} and {later}={later_value} set {} twice, to different values: \
                 give it once",
                setting_of(name)
            ),
            Self::Unsupported {
                property,
                value,
                reason,
            } => write!(f, "{property}={value} is not supported: {reason}"),
            Self::File {
                property,
                path,
                reason,
            } => write!(f, "{property}={}: {reason}", path.display()),
            Self::NoRuntime => f.write_str(crate::NO_RUNTIME),
            Self::DriverDisabled(driver) => crate::driver_disabled(f, driver),
        }
    }
}

impl std::error::Error for PropertyError {}

fn invalid(property: &str, value: &str, expected: &'static str) -> PropertyError {
    PropertyError::Invalid {
        property: property.to_owned(),
        value: value.to_owned(),
        expected,
    }
}

fn number<T: std::str::FromStr>(name: &str, v: &str) -> Result<T, PropertyError> {
    v.parse()
        .map_err(|_| invalid(name, v, "a non-negative integer"))
}

fn millis(name: &str, v: &str) -> Result<Duration, PropertyError> {
    number(name, v).map(Duration::from_millis)
}

/// Milliseconds, an integer or a decimal fraction (librdkafka's `linger.ms` is a double).
fn fractional_millis(name: &str, v: &str) -> Result<Duration, PropertyError> {
    if let Ok(d) = millis(name, v) {
        return Ok(d);
    }
    let ms: f64 = (v.parse().ok())
        .filter(|ms: &f64| ms.is_finite() && *ms >= 0.0 && !v.starts_with(['+', '-']))
        .ok_or_else(|| invalid(name, v, "a non-negative number of milliseconds"))?;
    Ok(Duration::try_from_secs_f64(ms / 1000.0).unwrap_or(ProducerConfig::MAX_DURATION))
}

/// A boolean as Java (`true`, `false`, any case) and librdkafka (also `t`, `f`, `1`, `0`)
/// take one.
pub(crate) fn boolean(name: &str, v: &str) -> Result<bool, PropertyError> {
    match v.to_ascii_lowercase().as_str() {
        "true" | "t" | "1" => Ok(true),
        "false" | "f" | "0" => Ok(false),
        _ => Err(invalid(name, v, "true or false")),
    }
}

/// How the producer's connections to brokers are secured: `security.protocol` and the `ssl.*`
/// properties. The core never sees any of it; it only picks the [`crate::Connector`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Security {
    /// `security.protocol=PLAINTEXT` (the default): plain TCP.
    #[default]
    Plaintext,
    /// `security.protocol=SSL`: TLS, as [`TlsOptions`] says.
    Ssl(TlsOptions),
}

/// TLS settings from the `ssl.*` properties. Holds file paths only, never key material, so
/// its `Debug` output is safe to log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsOptions {
    /// `ssl.ca.location` (or the Java client's PEM `ssl.truststore.location`): a PEM file of
    /// the CA certificates that may sign brokers' certificates. `None`: the operating
    /// system's trust store.
    pub ca_location: Option<PathBuf>,
    /// `ssl.certificate.location`: the client's PEM certificate chain, for mutual TLS (or the
    /// Java client's PEM `ssl.keystore.location`, which holds the key too).
    pub certificate_location: Option<PathBuf>,
    /// `ssl.key.location`: the client certificate's unencrypted PEM private key (PKCS#8,
    /// PKCS#1 or SEC1), or the PEM `ssl.keystore.location`.
    pub key_location: Option<PathBuf>,
    /// `ssl.endpoint.identification.algorithm`: `https` (the default, `true`) checks that the
    /// broker's certificate is valid for the host name (or IP address) connected to; an empty
    /// value (or `none`, `false`) skips that check, while the chain is still verified against
    /// the trusted CAs, validity dates included.
    pub verify_hostname: bool,
    /// TLS 1.2 may be negotiated: `ssl.enabled.protocols` lists `TLSv1.2` (by default it
    /// does).
    pub tls12: bool,
    /// TLS 1.3 may be negotiated: `ssl.enabled.protocols` lists `TLSv1.3` (by default it
    /// does) and `ssl.protocol` is not `TLSv1.2`.
    pub tls13: bool,
    /// The property that named [`Self::ca_location`], for error messages:
    /// `ssl.ca.location`, or the Java client's `ssl.truststore.location`.
    pub ca_property: &'static str,
    /// The property that named [`Self::certificate_location`]: `ssl.certificate.location`,
    /// or `ssl.keystore.location` (a PEM key store).
    pub certificate_property: &'static str,
    /// The property that named [`Self::key_location`]: `ssl.key.location`, or
    /// `ssl.keystore.location`.
    pub key_property: &'static str,
}

impl Default for TlsOptions {
    fn default() -> Self {
        Self {
            ca_location: None,
            certificate_location: None,
            key_location: None,
            verify_hostname: true,
            tls12: true,
            tls13: true,
            ca_property: "ssl.ca.location",
            certificate_property: "ssl.certificate.location",
            key_property: "ssl.key.location",
        }
    }
}

/// Everything a producer needs from its properties: the core's configuration and how to reach
/// brokers.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ClientConfig {
    /// The core's configuration.
    pub producer: ProducerConfig,
    /// How connections are secured.
    pub security: Security,
    /// `socket.connection.setup.timeout.ms`: how long a connection (TCP, and the TLS handshake
    /// under `SSL`) may take before the core counts the connect as failed and retries after its
    /// reconnect backoff; set into [`ProducerConfig::connect_timeout`] when the producer
    /// starts. `None`: [`ProducerConfig::connect_timeout`] as it is (10 s by default).
    pub connect_timeout: Option<Duration>,
    /// The TCP socket options (`socket.nagle.disable`, `socket.keepalive.enable`,
    /// `send.buffer.bytes`, `receive.buffer.bytes` and librdkafka's `socket.*.buffer.bytes`),
    /// set on every connection the producer opens, under TLS too.
    pub socket: SocketOptions,
}

impl ClientConfig {
    /// Plain TCP connections for `producer`, with the default connect timeout.
    pub fn new(producer: ProducerConfig) -> Self {
        Self {
            producer,
            security: Security::Plaintext,
            connect_timeout: None,
            socket: SocketOptions::default(),
        }
    }

    /// Builds the configuration from Kafka producer properties (a setting given twice, under
    /// one name or through an alias, with different values is refused:
    /// [`PropertyError::Conflict`]): every
    /// property [`config_from_properties`] takes, plus `security.protocol` (`PLAINTEXT`, the
    /// default, `SSL`, `SASL_PLAINTEXT` or `SASL_SSL`), `sasl.mechanism` (`PLAIN`,
    /// `SCRAM-SHA-256`, `SCRAM-SHA-512`, `OAUTHBEARER`; librdkafka's `sasl.mechanisms` too),
    /// `sasl.username` and `sasl.password` (PLAIN and SCRAM; OAUTHBEARER takes its tokens from
    /// a [`crate::TokenProvider`]) or instead a Java client's `sasl.jaas.config`
    /// (`PlainLoginModule`/`ScramLoginModule` with `username` and `password`,
    /// `OAuthBearerLoginModule` with only `extension_<key>` options), librdkafka's
    /// `sasl.oauthbearer.extensions` (KIP-342 SASL extensions), `ssl.ca.location`, `ssl.certificate.location`, `ssl.key.location` and
    /// `ssl.endpoint.identification.algorithm` (`https`, the default, or empty). As in the
    /// Java client, `ssl.*` properties are ignored under `PLAINTEXT` and `SASL_PLAINTEXT`, and
    /// `sasl.*` properties under `PLAINTEXT` and `SSL`. SASL goes into
    /// [`ProducerConfig::sasl`] (the core authenticates each connection); `SASL_SSL` also
    /// sets [`Security::Ssl`], `SASL_PLAINTEXT` [`Security::Plaintext`]. Files are read when the
    /// producer starts ([`crate::ProducerHandle::from_config`]), not here.
    ///
    /// Also `socket.connection.setup.timeout.ms` (the connect timeout,
    /// [`ClientConfig::connect_timeout`], which the core applies),
    /// `socket.connection.setup.timeout.max.ms`, the socket options
    /// ([`ClientConfig::socket`]), the Java client's PEM trust and key stores
    /// (`ssl.truststore.type=PEM` with `ssl.truststore.location`, `ssl.keystore.type=PEM` with
    /// `ssl.keystore.location`), `ssl.enabled.protocols` and `ssl.protocol` (TLS 1.2 and
    /// 1.3), and the other `ssl.*` and `sasl.*` names of both clients, taken or refused as
    /// the table of [`config_from_properties`] says. An empty `sasl.jaas.config` is none.
    pub fn from_properties(props: &[(&str, &str)]) -> Result<Self, PropertyError> {
        let mut c = ProducerConfig::default();
        let mut protocol = "PLAINTEXT".to_owned();
        let mut tls = TlsOptions::default();
        let mut sasl = SaslProps::default();
        let mut extras = SecurityExtras::default();
        let mut levels = CodecLevels::default();
        let mut later = Deferred::default();
        // Whether enable.idempotence was given: the Java client (3.2+) turns idempotence off
        // by itself when acks is 0 or 1 and enable.idempotence is not set.
        let mut idempotence_set = false;
        // Whether the delivery timeout was given: the Java client raises its default when it
        // is below linger.ms + request.timeout.ms.
        let mut delivery_timeout_set = false;
        // Whether it was given as librdkafka's `message.timeout.ms`, and whether
        // `request.timeout.ms` was given.
        let (mut message_timeout_set, mut request_timeout_set) = (false, false);
        // Whether adaptive partitioning, the reconnect backoff and its maximum were given:
        // Java turns adaptive partitioning off under any `partitioner.class`, and derives the
        // reconnect backoff's maximum from `reconnect.backoff.ms` alone.
        let (mut adaptive_set, mut reconnect_set) = (false, false);
        // librdkafka's refresh interval given: its `metadata.max.age.ms` beside it is
        // librdkafka's cache age (3 times the interval by default), which kprod has no
        // use for, not the Java client's refresh interval (a review found the pair refused
        // as a conflict).
        let librdkafka_refresh =
            (props.iter()).any(|(name, _)| name.trim() == "topic.metadata.refresh.interval.ms");
        // The first property given for each setting (by `setting_of`).
        let mut given = BTreeMap::new();
        for &(name, value) in props {
            let (name, v) = (name.trim(), value.trim());
            if librdkafka_refresh && name == "metadata.max.age.ms" {
                millis(name, v)?;
                tracing::warn!(
                    "metadata.max.age.ms={v} beside topic.metadata.refresh.interval.ms: taken \
                     as librdkafka's metadata cache age, which kprod does not keep; the \
                     refresh interval is topic.metadata.refresh.interval.ms"
                );
                continue;
            }
            idempotence_set |= name == "enable.idempotence";
            delivery_timeout_set |= matches!(name, "delivery.timeout.ms" | "message.timeout.ms");
            message_timeout_set |= name == "message.timeout.ms";
            request_timeout_set |= name == "request.timeout.ms";
            adaptive_set |= name == "partitioner.adaptive.partitioning.enable";
            reconnect_set |= name == "reconnect.backoff.ms";
            if !producer_property(&mut c, name, v)?
                && !levels.property(name, v)?
                && !compat_property(&mut later, name, v)?
                && !extras.property(name, v)?
            {
                security_property(&mut protocol, &mut tls, &mut sasl, name, v)?;
            }
            // librdkafka's topic-level "the global codec" sets nothing.
            if name == "compression.codec" && v.eq_ignore_ascii_case("inherit") {
                continue;
            }
            match given.entry(setting_of(name)) {
                Entry::Vacant(e) => {
                    e.insert((name, v));
                }
                Entry::Occupied(e) if !agree(*e.get(), (name, v)) => {
                    let (first, first_value) = *e.get();
                    return Err(PropertyError::Conflict {
                        first: (first.to_owned(), shown(first, first_value)),
                        second: (name.to_owned(), shown(name, v)),
                    });
                }
                Entry::Occupied(_) => {}
            }
        }
        levels.apply(&mut c);
        if !idempotence_set && c.acks != -1 {
            // As the Java client (3.0+), which logs it at INFO: a warning here, since retries
            // may then duplicate and reorder records.
            tracing::warn!(
                "acks={} without enable.idempotence: idempotence is off (a retry may \
                 duplicate or reorder records); set enable.idempotence=false to say so",
                c.acks
            );
            c.enable_idempotence = false;
        }
        if !delivery_timeout_set {
            raise_default_delivery_timeout(&mut c);
        }
        // librdkafka bounds each request by the message's remaining time, so its
        // `message.timeout.ms` may be below 30 s: without `request.timeout.ms`, the request
        // timeout is shortened to fit within it (after `linger.ms`).
        if message_timeout_set && !request_timeout_set {
            let room = c.delivery_timeout.saturating_sub(c.linger);
            if !room.is_zero() && room < c.request_timeout {
                c.request_timeout = room;
            }
        }
        later.check(&c)?;
        match &later.reconnect_backoff_max {
            Some((_, max)) => c.reconnect_backoff_max = Some(*max),
            // As Java (`postProcessReconnectBackoffConfigs`): `reconnect.backoff.ms` alone is
            // a constant backoff, and otherwise the maximum is 1000 ms, whatever
            // `retry.backoff.max.ms` says. Before (review finding, 2026-12-06), it was
            // `retry.backoff.max.ms`: a file setting that to 30000 had reconnects to a
            // restarted broker wait up to 30 s, where Java waits 1 s.
            None if reconnect_set => {
                tracing::warn!(
                    "reconnect.backoff.ms is set and reconnect.backoff.max.ms is not: a \
                     constant reconnect backoff, as in Java (librdkafka doubles it up to \
                     10 s: set reconnect.backoff.max.ms for that)"
                );
                c.reconnect_backoff_max = Some(c.reconnect_backoff);
            }
            None => c.reconnect_backoff_max = Some(Duration::from_secs(1)),
        }
        if later.partitioner_class.is_some() && !adaptive_set {
            // Java turns adaptive partitioning off whenever `partitioner.class` is set
            // (`KafkaProducer`: the built-in partitioner only when none is named); the old
            // classes move a sticky partition on at each new batch, not by load.
            c.adaptive_partitioning = false;
        }
        if let Some((_, max)) = &later.connect_timeout_max {
            c.connect_timeout_max = Some(*max);
        }
        if let Some(p) = later.partitioner()? {
            c.partitioner = p;
        }
        c.sasl = sasl.build(&protocol)?;
        if protocol.starts_with("SASL_") {
            extras.check_sasl(c.sasl.as_ref().map(|s| s.mechanism))?;
        }
        c.validate().map_err(|mut e| {
            if message_timeout_set && e.setting == "delivery.timeout.ms" {
                e.reason.push_str(" (given as message.timeout.ms)");
            }
            PropertyError::Config(e)
        })?;
        let security =
            match protocol.as_str() {
                "PLAINTEXT" | "SASL_PLAINTEXT" => Security::Plaintext,
                _ => {
                    // The Java stores first: a PEM key store fills both files below.
                    extras.apply_tls(&mut tls)?;
                    match (&tls.certificate_location, &tls.key_location) {
                        (Some(_), None) => return Err(invalid(
                            "ssl.key.location",
                            "",
                            "the PEM private key of the certificate in ssl.certificate.location",
                        )),
                        (None, Some(_)) => {
                            return Err(invalid(
                                "ssl.certificate.location",
                                "",
                                "the PEM certificate of the private key in ssl.key.location",
                            ))
                        }
                        _ => {}
                    }
                    Security::Ssl(tls)
                }
            };
        Ok(Self {
            producer: c,
            security,
            connect_timeout: later.connect_timeout,
            socket: later.socket,
        })
    }
}

/// The setting property `name` sets: a librdkafka alias (or an older name) stands for the
/// Java name, so that a setting given twice is found under whichever names it was given.
fn setting_of(name: &str) -> &str {
    match name {
        "metadata.broker.list" => "bootstrap.servers",
        "request.required.acks" => "acks",
        "queue.buffering.max.ms" => "linger.ms",
        "message.timeout.ms" => "delivery.timeout.ms",
        "topic.metadata.refresh.interval.ms" => "metadata.max.age.ms",
        "queue.buffering.max.kbytes" => "buffer.memory",
        "message.max.bytes" => "max.request.size",
        "max.in.flight" => "max.in.flight.requests.per.connection",
        "compression.codec" => "compression.type",
        "message.send.max.retries" => "retries",
        "socket.send.buffer.bytes" => "send.buffer.bytes",
        "socket.receive.buffer.bytes" => "receive.buffer.bytes",
        "sasl.mechanisms" => "sasl.mechanism",
        _ => name,
    }
}

/// Whether two properties setting one setting (`setting_of`), each already taken once,
/// give it the same value: the same entry again, the same effect (`acks=all` and
/// `request.required.acks=-1`, `buffer.memory=1048576` and `queue.buffering.max.kbytes=1024`,
/// `send.buffer.bytes=-1` and `socket.send.buffer.bytes=0`; but `buffer.memory=1024` and
/// `queue.buffering.max.kbytes=1024` differ), else the same text or the same boolean
/// (`true` and `TRUE`).
fn agree(a: (&str, &str), b: (&str, &str)) -> bool {
    if a == b {
        return true;
    }
    let (mut x, mut y) = (ProducerConfig::default(), ProducerConfig::default());
    if let (Ok(true), Ok(true)) = (
        producer_property(&mut x, a.0, a.1),
        producer_property(&mut y, b.0, b.1),
    ) {
        return x == y;
    }
    let (mut x, mut y) = (Deferred::default(), Deferred::default());
    if let (Ok(true), Ok(true)) = (
        compat_property(&mut x, a.0, a.1),
        compat_property(&mut y, b.0, b.1),
    ) {
        if x.effect() != y.effect() {
            return false;
        }
        // Under one name, values without an effect of their own (`client.rack`) are
        // compared as text (below).
        if a.0 != b.0 {
            return true;
        }
    }
    a.1 == b.1
        || matches!(
            (boolean(a.0, a.1), boolean(b.0, b.1)),
            (Ok(p), Ok(q)) if p == q
        )
        // A keyword read in any case (`SSL` and `ssl`, `PLAIN` and `plain`: a review found
        // them refused as a conflict).
        || (KEYWORD_SETTINGS.contains(&setting_of(a.0)) && a.1.eq_ignore_ascii_case(b.1))
}

/// Settings whose values are keywords read in any case.
const KEYWORD_SETTINGS: &[&str] = &[
    "security.protocol",
    "sasl.mechanism",
    "ssl.endpoint.identification.algorithm",
    "compression.type",
    "broker.address.family",
];

/// `v` as an error message may show it: `(hidden)` for a secret (a password, a client
/// secret, a JAAS configuration, an inline key).
fn shown(name: &str, v: &str) -> String {
    let secret = name.contains("password")
        || name.contains("secret")
        || name.contains("passphrase")
        || name.ends_with(".pem")
        || name.ends_with(".key")
        || matches!(
            name,
            "sasl.jaas.config" | "sasl.oauthbearer.config" | "ssl.keystore.key"
        );
    if secret { "(hidden)" } else { v }.to_owned()
}

/// The Java client's rule for a `delivery.timeout.ms` the properties do not give: when its
/// default (120000 ms) is below `linger.ms + request.timeout.ms`, it is raised to that sum,
/// at most `i32::MAX` ms, with a warning. A value given is held to the rule by
/// [`ProducerConfig::validate`], as Java refuses one.
fn raise_default_delivery_timeout(c: &mut ProducerConfig) {
    let sum = c.linger.saturating_add(c.request_timeout);
    if c.delivery_timeout >= sum {
        return;
    }
    let raised = sum.min(Duration::from_millis(i32::MAX as u64));
    let ms = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
    tracing::warn!(
        delivery_timeout_ms = ms(c.delivery_timeout),
        linger_ms = ms(c.linger),
        request_timeout_ms = ms(c.request_timeout),
        raised_to_ms = ms(raised),
        "delivery.timeout.ms is not set and its default is below linger.ms + \
         request.timeout.ms: raised to their sum, as the Java client does (set \
         delivery.timeout.ms to choose it)"
    );
    c.delivery_timeout = raised;
}

pub(crate) fn path(v: &str) -> Option<PathBuf> {
    (!v.is_empty()).then(|| PathBuf::from(v))
}

/// Applies a security property; errors on an unknown name.
fn security_property(
    protocol: &mut String,
    tls: &mut TlsOptions,
    sasl: &mut SaslProps,
    name: &str,
    v: &str,
) -> Result<(), PropertyError> {
    match name {
        "security.protocol" => {
            let upper = v.to_ascii_uppercase();
            match upper.as_str() {
                "PLAINTEXT" | "SSL" | "SASL_PLAINTEXT" | "SASL_SSL" => *protocol = upper,
                _ => {
                    return Err(invalid(
                        name,
                        v,
                        "PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL",
                    ))
                }
            }
        }
        "ssl.ca.location" => tls.ca_location = path(v),
        "ssl.certificate.location" => tls.certificate_location = path(v),
        "ssl.key.location" => tls.key_location = path(v),
        "ssl.endpoint.identification.algorithm" => {
            tls.verify_hostname = match v.to_ascii_lowercase().as_str() {
                "https" => true,
                "" | "none" | "false" => false,
                _ => {
                    return Err(invalid(
                        name,
                        v,
                        "https (verify the broker's host name) or an empty string (do not)",
                    ))
                }
            };
        }
        _ if sasl.property(name, v) => {}
        _ => return Err(PropertyError::Unknown(name.to_owned())),
    }
    Ok(())
}

/// Applies a producer property; `false` if the name is not one.
fn producer_property(c: &mut ProducerConfig, name: &str, v: &str) -> Result<bool, PropertyError> {
    match name {
        // `metadata.broker.list` is librdkafka's first name for it.
        "bootstrap.servers" | "metadata.broker.list" => {
            // A listener's protocol prefix (`PLAINTEXT://host:port`, as copied from a
            // broker's `listeners`) is dropped, as the Java client does.
            let unprefixed = |s: &str| -> String {
                match s.split_once("://") {
                    Some((scheme, rest))
                        if !scheme.is_empty()
                            && scheme
                                .chars()
                                .all(|c| c.is_ascii_alphanumeric() || c == '_') =>
                    {
                        rest.to_owned()
                    }
                    _ => s.to_owned(),
                }
            };
            c.bootstrap_servers = v
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(unprefixed)
                .collect();
        }
        "client.id" => c.client_id = (!v.is_empty()).then(|| v.to_owned()),
        // `request.required.acks` is librdkafka's alias.
        "acks" | "request.required.acks" => {
            c.acks = match v.to_ascii_lowercase().as_str() {
                "all" | "-1" => -1,
                "1" => 1,
                "0" => 0,
                _ => return Err(invalid(name, v, "all, -1, 1 or 0")),
            };
        }
        "enable.idempotence" => c.enable_idempotence = boolean(name, v)?,
        "partitioner.adaptive.partitioning.enable" => {
            c.adaptive_partitioning = boolean(name, v)?;
        }
        "allow.auto.create.topics" => c.allow_auto_topic_creation = boolean(name, v)?,
        // librdkafka: `queue.buffering.max.ms` (`linger.ms` is its alias) waits for a batch to
        // fill, as linger.ms does.
        // librdkafka's is a fraction of a millisecond as well (`0.5`).
        "linger.ms" | "queue.buffering.max.ms" => c.linger = fractional_millis(name, v)?,
        "request.timeout.ms" => c.request_timeout = millis(name, v)?,
        // librdkafka: `message.timeout.ms` (`delivery.timeout.ms` is its alias) bounds a
        // record's whole life in the producer, retries included, as delivery.timeout.ms does.
        // librdkafka's `message.timeout.ms=0` is "no timeout": the longest the core takes
        // (`ProducerConfig::MAX_DURATION`, what a larger value is capped to). Java's
        // `delivery.timeout.ms` has no such value (it must cover linger.ms +
        // request.timeout.ms).
        "delivery.timeout.ms" | "message.timeout.ms" => {
            let d = millis(name, v)?;
            c.delivery_timeout = if !d.is_zero() {
                d
            } else if name == "message.timeout.ms" {
                ProducerConfig::MAX_DURATION
            } else {
                return Err(invalid(
                    name,
                    v,
                    "a positive number of milliseconds, at least linger.ms + \
                     request.timeout.ms (0, no timeout, is librdkafka's message.timeout.ms=0 \
                     only)",
                ));
            };
        }
        "retry.backoff.ms" => c.retry_backoff = millis(name, v)?,
        "retry.backoff.max.ms" => c.retry_backoff_max = millis(name, v)?,
        "reconnect.backoff.ms" => c.reconnect_backoff = millis(name, v)?,
        // librdkafka: `topic.metadata.refresh.interval.ms` is the period of its proactive
        // metadata refresh (its own `metadata.max.age.ms` is a cache age: Java's meaning wins).
        // librdkafka's `-1` turns its periodic refresh off: metadata is then asked for only
        // when something needs it (a new topic, an error).
        "topic.metadata.refresh.interval.ms" if v == "-1" => {
            c.metadata_max_age = ProducerConfig::MAX_DURATION;
        }
        "metadata.max.age.ms" | "topic.metadata.refresh.interval.ms" => {
            c.metadata_max_age = millis(name, v)?;
        }
        // Java 4.x (KIP-1102): the bootstrap servers dialled again after this long without
        // a metadata answer.
        "metadata.recovery.rebootstrap.trigger.ms" => {
            c.metadata_recovery_rebootstrap_trigger = Some(millis(name, v)?);
        }
        "max.block.ms" => c.max_block = millis(name, v)?,
        "metadata.max.idle.ms" => {
            let d = millis(name, v)?;
            if d < Duration::from_secs(5) {
                return Err(invalid(name, v, "at least 5000 ms, as in the Java client"));
            }
            c.metadata_max_idle = Some(d);
        }
        // Java: a negative value turns idle closing off; librdkafka: 0 does.
        "connections.max.idle.ms" => {
            let ms: i64 = v.parse().map_err(|_| {
                invalid(
                    name,
                    v,
                    "milliseconds, or -1 (or 0) to never close an idle connection",
                )
            })?;
            c.connections_max_idle = u64::try_from(ms)
                .ok()
                .filter(|&ms| ms > 0)
                .map(Duration::from_millis);
        }
        // 0 disables batching in the Java client (each batch holds one record), which is
        // what a limit of one byte does.
        "batch.size" => c.batch_size = number::<usize>(name, v)?.max(1),
        "buffer.memory" => c.buffer_memory = number(name, v)?,
        // librdkafka's record-count limits, beside the byte limits.
        // 0 is no limit in librdkafka.
        "queue.buffering.max.messages" => {
            c.max_buffered_records = Some(number::<usize>(name, v)?).filter(|n| *n > 0);
        }
        "batch.num.messages" => c.max_batch_records = Some(number(name, v)?),
        // librdkafka: the most bytes of records held before producing waits (it counts KiB).
        "queue.buffering.max.kbytes" => {
            c.buffer_memory = number::<usize>(name, v)?
                .checked_mul(1024)
                .ok_or_else(|| invalid(name, v, "a number of KiB that fits in memory"))?;
        }
        // librdkafka: `message.max.bytes` is the largest request it builds.
        "max.request.size" | "message.max.bytes" => c.max_request_size = number(name, v)?,
        "max.in.flight.requests.per.connection" | "max.in.flight" => {
            c.max_in_flight = number(name, v)?;
        }
        // librdkafka: fail the producer rather than leave a gap in a partition.
        "enable.gapless.guarantee" => {
            c.gap_policy = if boolean(name, v)? {
                GapPolicy::Fatal
            } else {
                GapPolicy::ContinueWithGap
            };
        }
        // librdkafka (KIP-511): the name and version sent in ApiVersions.
        "client.software.name" => c.client_software_name = v.to_owned(),
        "client.software.version" => c.client_software_version = v.to_owned(),
        // kprod's own: the highest version of each API a connection may speak
        // (`ProducerConfig::max_versions`), to pin a producer to an old broker's versions.
        "kprod.max.batches.per.request" => {
            c.max_batches_per_request = Some(number(name, v)?);
        }
        "kprod.max.produce.version" => c.max_versions.produce = Some(number(name, v)?),
        "kprod.max.metadata.version" => c.max_versions.metadata = Some(number(name, v)?),
        "kprod.max.init.producer.id.version" => {
            c.max_versions.init_producer_id = Some(number(name, v)?);
        }
        "kprod.max.api.versions.version" => c.max_versions.api_versions = Some(number(name, v)?),
        // kprod's own: every API capped at what an Apache Kafka release served.
        "kprod.broker.version.max" => c.broker_version_max = Some(v.to_owned()),
        // kprod's own: how far backoffs are spread (the Java client's is a fixed 20 %).
        "kprod.backoff.jitter.percent" => c.backoff_jitter_percent = number(name, v)?,
        // The brokers' `producer.id.expiration.ms` (or a lower bound of it).
        "kprod.producer.id.expiration.ms" => c.producer_id_expiration = Some(millis(name, v)?),
        // librdkafka: the largest response accepted (checked against max.request.size once
        // every property is read).
        "receive.message.max.bytes" => c.max_frame_size = number::<usize>(name, v)?,
        // librdkafka's topic-level value for "the global setting": no change.
        "compression.codec" if v.eq_ignore_ascii_case("inherit") => {}
        // `compression.codec` is librdkafka's alias.
        "compression.type" | "compression.codec" => {
            c.compression.codec = CompressionType::from_name(v)
                .ok_or_else(|| invalid(name, v, "none, gzip, snappy, lz4 or zstd"))?;
        }
        _ => return Ok(false),
    }
    Ok(true)
}

pub(crate) fn unsupported(name: &str, v: &str, reason: &'static str) -> PropertyError {
    PropertyError::Unsupported {
        property: name.to_owned(),
        value: v.to_owned(),
        reason,
    }
}

/// Settings checked once every property is read (they depend on others).
#[derive(Default)]
struct Deferred {
    /// `retries` / `message.send.max.retries`: the name, the value, the count.
    retries: Option<(String, String, u64)>,
    /// `reconnect.backoff.max.ms`: the value and the duration.
    reconnect_backoff_max: Option<(String, Duration)>,
    /// `socket.connection.setup.timeout.ms`.
    connect_timeout: Option<Duration>,
    /// `socket.connection.setup.timeout.max.ms`: the value and the duration.
    connect_timeout_max: Option<(String, Duration)>,
    /// librdkafka's `partitioner`: the value and the partitioner.
    partitioner: Option<(String, Partitioner)>,
    /// Java's `partitioner.ignore.keys`.
    ignore_keys: Option<bool>,
    /// Java's `partitioner.class`, when not empty: whether it ignores keys
    /// (`UniformStickyPartitioner`) or hashes them (`DefaultPartitioner`).
    partitioner_class: Option<bool>,
    /// The socket options.
    socket: SocketOptions,
}

impl Deferred {
    /// What these settings say, without the names and texts kept for error messages.
    #[allow(clippy::type_complexity)]
    fn effect(
        &self,
    ) -> (
        Option<u64>,
        Option<Duration>,
        Option<Duration>,
        Option<Duration>,
        Option<Partitioner>,
        Option<bool>,
        Option<bool>,
        SocketOptions,
    ) {
        (
            self.retries.as_ref().map(|r| r.2),
            self.reconnect_backoff_max.as_ref().map(|r| r.1),
            self.connect_timeout,
            self.connect_timeout_max.as_ref().map(|r| r.1),
            self.partitioner.as_ref().map(|r| r.1),
            self.ignore_keys,
            self.partitioner_class,
            self.socket,
        )
    }

    /// The partitioner the partitioner properties describe, once all are read (whatever
    /// the order of the Java and librdkafka names): Java's class or
    /// `partitioner.ignore.keys=true` ignore keys (the `random` partitioner), an explicit
    /// `DefaultPartitioner` hashes them with murmur2 (Java then ignores
    /// `partitioner.ignore.keys`), else librdkafka's `partitioner`, else the default. A
    /// librdkafka `partitioner` that says otherwise than the Java settings is refused.
    fn partitioner(&self) -> Result<Option<Partitioner>, PropertyError> {
        // The Java settings' partitioner, and why a librdkafka one that differs is refused.
        const CLASS: &str = "partitioner.class names another partitioner; give one of the two";
        let java = match self.partitioner_class {
            Some(true) => Some((Partitioner::Random, CLASS)),
            Some(false) => Some((Partitioner::Murmur2Random, CLASS)),
            None if self.ignore_keys == Some(true) => Some((
                Partitioner::Random,
                "partitioner.ignore.keys=true ignores keys, which is partitioner=random",
            )),
            None => None,
        };
        match (java, &self.partitioner) {
            (None, rd) => Ok(rd.as_ref().map(|(_, p)| *p)),
            (Some((j, _)), None) => Ok(Some(j)),
            (Some((j, _)), Some((_, p)))
                if *p == j || (j == Partitioner::Murmur2Random && *p == Partitioner::Murmur2) =>
            {
                Ok(Some(j))
            }
            (Some((_, why)), Some((v, _))) => Err(unsupported("partitioner", v, why)),
        }
    }

    fn check(&self, c: &ProducerConfig) -> Result<(), PropertyError> {
        // acks=0 requests are never retried (no answer comes): any count describes that.
        if let Some((name, v, retries)) = self.retries.as_ref().filter(|_| c.acks != 0) {
            if *retries == 0 {
                return Err(unsupported(
                    name,
                    v,
                    "kprod always retries retriable errors \
                     until delivery.timeout.ms; to give up sooner, lower delivery.timeout.ms",
                ));
            }
            // Each Java retry waits at least retry.backoff.ms less 20 % of jitter: with at
            // least this many retries the delivery timeout always ends retrying first, which
            // is kprod's rule.
            let backoff_ms = c.retry_backoff.as_millis().saturating_mul(4) / 5;
            let until_timeout =
                u128::from(*retries).saturating_mul(backoff_ms) >= c.delivery_timeout.as_millis();
            if *retries < i32::MAX as u64 && !until_timeout {
                return Err(unsupported(
                    name,
                    v,
                    "kprod does not count retries: it retries retriable errors until \
                     delivery.timeout.ms, and this count could stop retrying before that \
                     (retries x 0.8 x retry.backoff.ms < delivery.timeout.ms); remove it or \
                     set 2147483647 (the Java default), and bound retrying with \
                     delivery.timeout.ms",
                ));
            }
        }
        Ok(())
    }
}

/// Java's partitioner that behaves as kprod's default (murmur2 of the key as Java computes
/// it, and the sticky partitioner of KIP-480 for records without a key); an empty value is
/// the client's default.
const DEFAULT_PARTITIONER: &str = "org.apache.kafka.clients.producer.internals.DefaultPartitioner";

/// Kafka's serializers that write what kprod writes: bytes as they are, a string as its
/// UTF-8 (the `StringSerializer`'s default encoding).
const BYTES_SERIALIZERS: [&str; 4] = [
    "org.apache.kafka.common.serialization.ByteArraySerializer",
    "org.apache.kafka.common.serialization.ByteBufferSerializer",
    "org.apache.kafka.common.serialization.BytesSerializer",
    "org.apache.kafka.common.serialization.StringSerializer",
];

/// Java's deprecated partitioner that ignores keys (sticky batches for every record), as
/// `partitioner.ignore.keys=true` does since 3.3.
const UNIFORM_STICKY: &str = "org.apache.kafka.clients.producer.UniformStickyPartitioner";

/// The other standard producer properties of the Java client and librdkafka: the ones kprod
/// honours (some only with certain values) and the ones it refuses, each with the reason.
/// `Ok(false)` if `name` is none of them.
fn compat_property(later: &mut Deferred, name: &str, v: &str) -> Result<bool, PropertyError> {
    let is = |accepted: &[&str]| accepted.iter().any(|a| a.eq_ignore_ascii_case(v));
    match name {
        // librdkafka: `message.send.max.retries` (`retries` is its alias).
        "retries" | "message.send.max.retries" => {
            let n = number(name, v)?;
            later.retries = Some((name.to_owned(), v.to_owned(), n));
        }
        "reconnect.backoff.max.ms" => {
            later.reconnect_backoff_max = Some((v.to_owned(), millis(name, v)?));
        }
        "socket.connection.setup.timeout.ms" => {
            let d = millis(name, v)?;
            if d.is_zero() {
                return Err(invalid(name, v, "a positive number of milliseconds"));
            }
            later.connect_timeout = Some(d);
        }
        "socket.connection.setup.timeout.max.ms" => {
            later.connect_timeout_max = Some((v.to_owned(), millis(name, v)?));
        }
        // Kafka's serializers of bytes, and of strings (UTF-8, Java's default encoding):
        // what kprod does with the bytes it is given (a Java properties file always names
        // one, as the Java producer requires it).
        "key.serializer" | "value.serializer" if BYTES_SERIALIZERS.contains(&v) => {}
        "key.serializer" | "value.serializer" => {
            return Err(unsupported(
                name,
                v,
                "kprod takes keys and values as bytes (anything Into<Bytes>: Record::new, \
                 Record::with_key); serialize them in the application and remove this \
                 Java class (Kafka's ByteArraySerializer, ByteBufferSerializer, \
                 BytesSerializer and StringSerializer are taken: they do what kprod does)",
            ))
        }
        "transactional.id" if v.is_empty() => {}
        "transactional.id" | "transaction.timeout.ms" => {
            return Err(unsupported(
                name,
                v,
                "kprod has no transactions (it is an idempotent producer: exactly once and in \
                 order per partition, without atomic writes across partitions)",
            ))
        }
        "partitioner.class" if v.is_empty() => later.partitioner_class = None,
        "partitioner.class" if v == DEFAULT_PARTITIONER => {
            later.partitioner_class = Some(false);
        }
        "partitioner.class" if v == UNIFORM_STICKY => {
            later.partitioner_class = Some(true);
        }
        "partitioner.ignore.keys" => later.ignore_keys = Some(boolean(name, v)?),
        // librdkafka's partitioners: the key hash that places keyed records (records without
        // a key are sticky under every one, as in librdkafka since 1.5).
        "partitioner" => {
            let p = Partitioner::from_name(v).ok_or_else(|| {
                invalid(
                    name,
                    v,
                    "murmur2_random, murmur2, consistent_random, consistent, fnv1a_random, \
                     fnv1a or random",
                )
            })?;
            later.partitioner = Some((v.to_owned(), p));
        }
        "partitioner.class" => {
            return Err(unsupported(
                name,
                v,
                "kprod runs no Java classes: it takes DefaultPartitioner (murmur2 of the key, \
                 sticky batches for records without one), UniformStickyPartitioner (keys \
                 ignored, as partitioner.ignore.keys=true) and librdkafka's partitioner \
                 names; choose a partition per record with Record::with_partition instead",
            ))
        }
        "partitioner.availability.timeout.ms" if millis(name, v)?.is_zero() => {}
        "partitioner.availability.timeout.ms" => {
            return Err(unsupported(
                name,
                v,
                "kprod does not avoid partitions by broker load (KIP-794); set it to 0",
            ))
        }
        // Java 4.x: when no known broker answers, kprod goes back to the bootstrap servers.
        "metadata.recovery.strategy" if is(&["rebootstrap"]) => {}
        "metadata.recovery.strategy" => {
            return Err(unsupported(
                name,
                v,
                "kprod goes back to the bootstrap servers when no known broker can be \
                 reached (rebootstrap)",
            ))
        }
        // KIP-714 client telemetry.
        "enable.metrics.push" if !boolean(name, v)? => {}
        "enable.metrics.push" => {
            return Err(unsupported(
                name,
                v,
                "kprod pushes no client metrics to the broker (KIP-714); metrics() gives \
                 them to the application; set it to false",
            ))
        }
        "interceptor.classes" | "metric.reporters" if v.is_empty() => {}
        "interceptor.classes" => {
            return Err(unsupported(
                name,
                v,
                "kprod runs no Java classes; act on records before Record is handed to \
                 send, and on outcomes where the delivery futures resolve",
            ))
        }
        _ if name.starts_with("metrics.") || name == "metric.reporters" => {
            return Err(unsupported(
                name,
                v,
                "kprod keeps no metrics registry; it reports connections, retries, epoch \
                 bumps and failures as tracing events",
            ))
        }
        "statistics.interval.ms" if millis(name, v)?.is_zero() => {}
        "statistics.interval.ms" => {
            return Err(unsupported(
                name,
                v,
                "kprod emits no statistics callback; it reports connections, retries and \
                 failures as tracing events",
            ))
        }
        "debug" if v.is_empty() => {}
        "debug" => {
            return Err(unsupported(
                name,
                v,
                "kprod logs through tracing: enable its events with the subscriber's filter \
                 (for example RUST_LOG=kprod_tokio=debug with tracing-subscriber's EnvFilter)",
            ))
        }
        // librdkafka.
        "broker.address.family" => {
            later.socket.address_family = match v.to_ascii_lowercase().as_str() {
                "any" => AddressFamily::Any,
                "v4" => AddressFamily::V4,
                "v6" => AddressFamily::V6,
                _ => return Err(invalid(name, v, "any, v4 or v6")),
            };
        }
        // A producer uses its rack only to prefer partitions led in it
        // (`partitioner.rack.aware`, refused unless false), as in Java; librdkafka's
        // producer not at all.
        "client.rack" => {}
        "partitioner.rack.aware" if !boolean(name, v)? => {}
        "partitioner.rack.aware" => {
            return Err(unsupported(
                name,
                v,
                "kprod's partitioner does not prefer partitions led in the client's rack; \
                 set it to false",
            ))
        }
        "buffer.memory.allocation.strategy" if is(&["full"]) => {}
        "buffer.memory.allocation.strategy" => {
            return Err(unsupported(
                name,
                v,
                "kprod charges a batch its whole batch.size against buffer.memory when it \
                 opens (Java's full strategy)",
            ))
        }
        "bootstrap.resolve.timeout.ms" => {
            return Err(unsupported(
                name,
                v,
                "kprod resolves broker names when it connects, never at start, and retries \
                 a name that does not resolve as a failed connect (its records fail at \
                 delivery.timeout.ms); remove it",
            ))
        }
        "metadata.cluster.check.enable" if !boolean(name, v)? => {}
        "metadata.cluster.check.enable" => {
            return Err(unsupported(
                name,
                v,
                "kprod does not send the cluster and node ids it expects when it connects \
                 (Kafka 4.4's misrouted-connection check); set it to false",
            ))
        }
        "config.providers" if v.is_empty() => {}
        "config.providers" => {
            return Err(unsupported(
                name,
                v,
                "kprod runs no Java classes: resolve ${provider:path:key} references before \
                 passing the properties",
            ))
        }
        "transaction.two.phase.commit.enable" if !boolean(name, v)? => {}
        "transaction.two.phase.commit.enable" => {
            return Err(unsupported(name, v, "kprod has no transactions"))
        }
        // librdkafka: no longer used by librdkafka itself (offsets are always reported).
        "produce.offset.report" => {
            boolean(name, v)?;
        }
        "delivery.report.only.error" if !boolean(name, v)? => {}
        "delivery.report.only.error" => {
            return Err(unsupported(
                name,
                v,
                "every record's outcome resolves its own future; drop the ones you do not \
                 need",
            ))
        }
        // A request timeout closes its connection: one failure.
        "socket.max.fails" if v == "1" => {}
        "socket.max.fails" => {
            return Err(unsupported(
                name,
                v,
                "kprod closes a connection at its first request timeout (1)",
            ))
        }
        "sticky.partitioning.linger.ms" => {
            return Err(unsupported(
                name,
                v,
                "kprod moves records without a key to another partition when their batch \
                 is full or sent (as the Java client, KIP-480), not on a timer; remove it",
            ))
        }
        // librdkafka settings it no longer uses itself.
        "metadata.request.timeout.ms"
        | "socket.blocking.max.ms"
        | "reconnect.backoff.jitter.ms" => {
            number::<i64>(name, v)?;
        }
        "queuing.strategy" if is(&["fifo"]) => {}
        "queuing.strategy" => {
            return Err(unsupported(
                name,
                v,
                "kprod sends records in the order they were sent (fifo)",
            ))
        }
        // librdkafka: ask for the topics in use only, connect to the brokers needed only;
        // what kprod does.
        "topic.metadata.refresh.sparse" | "enable.sparse.connections" if boolean(name, v)? => {}
        "topic.metadata.refresh.sparse" | "enable.sparse.connections" => {
            return Err(unsupported(
                name,
                v,
                "kprod asks for the metadata of the topics it uses, and connects to the brokers \
                 it needs, only",
            ))
        }
        "topic.metadata.refresh.fast.interval.ms" | "topic.metadata.refresh.fast.cnt" => {
            return Err(unsupported(
                name,
                v,
                "kprod asks for metadata again after retry.backoff.ms (growing to \
                 retry.backoff.max.ms) while it lacks a leader; set those",
            ))
        }
        "topic.metadata.propagation.max.ms" => {
            return Err(unsupported(
                name,
                v,
                "a record for a topic not (yet) in metadata waits up to max.block.ms; set that",
            ))
        }
        "broker.address.ttl" => {
            return Err(unsupported(
                name,
                v,
                "kprod resolves a broker's name at each connect and keeps no address cache",
            ))
        }
        "api.version.request.timeout.ms" => {
            return Err(unsupported(
                name,
                v,
                "kprod times ApiVersions with request.timeout.ms (and tries the next bootstrap \
                 server after bootstrap_patience)",
            ))
        }
        "message.copy.max.bytes" | "queue.buffering.backpressure.threshold" => {
            return Err(unsupported(
                name,
                v,
                "kprod encodes every record into its batch when it is sent, and has no \
                 librdkafka-style internal queues to tune; remove it",
            ))
        }
        // librdkafka: a check that the library was built with these features.
        "builtin.features" => {
            for f in v.split(',').map(str::trim).filter(|f| !f.is_empty()) {
                // Which arms are true depends on the cargo features.
                #[allow(clippy::match_like_matches_macro)]
                let built = match f {
                    "gzip" => cfg!(feature = "gzip"),
                    "snappy" => cfg!(feature = "snappy"),
                    "lz4" => cfg!(feature = "lz4"),
                    "zstd" => cfg!(feature = "zstd"),
                    "ssl" => cfg!(feature = "tls"),
                    "sasl" | "sasl_plain" | "sasl_oauthbearer" => true,
                    "sasl_scram" => cfg!(feature = "scram"),
                    _ => false,
                };
                if !built {
                    // The value shown is the feature missing.
                    return Err(unsupported(
                        name,
                        f,
                        "this kprod-tokio lacks that feature: gzip, snappy, lz4, zstd, ssl \
                         (cargo feature `tls`) and sasl_scram (`scram`) are cargo features, \
                         sasl, sasl_plain and sasl_oauthbearer always built; regex, plugins, \
                         sasl_gssapi, http and oidc do not exist in kprod",
                    ));
                }
            }
        }
        // librdkafka: logging and seeding details of its own.
        "log.thread.name" | "enable.random.seed" => {
            boolean(name, v)?;
        }
        "log.queue" if !boolean(name, v)? => {}
        "topic.blacklist" | "plugin.library.paths" if v.is_empty() => {}
        "internal.termination.signal" | "api.version.fallback.ms" | "enabled_events"
            if v == "0" => {}
        "log.queue"
        | "topic.blacklist"
        | "plugin.library.paths"
        | "internal.termination.signal"
        | "api.version.fallback.ms"
        | "enabled_events" => {
            return Err(unsupported(
                name,
                v,
                "a librdkafka mechanism kprod does not have (its logging goes to tracing, it \
                 asks for metadata of the topics it sends to only, loads no plugins and \
                 negotiates versions with ApiVersions only); remove it",
            ))
        }
        // librdkafka's C API: callbacks and pointers, not properties.
        _ if name.ends_with("_cb")
            || [
                "opaque",
                "default_topic_conf",
                "ssl_key",
                "ssl_certificate",
                "ssl_ca",
                "ssl_engine_callback_data",
                "interceptors",
                "msg_order_cmp",
            ]
            .contains(&name) =>
        {
            return Err(unsupported(
                name,
                v,
                "a pointer of librdkafka's C API; kprod reports outcomes through the futures \
                 and the Event stream, and takes files and Rust values",
            ))
        }
        // kprod reports each closed connection as a tracing event (info; an idle close at
        // debug): the subscriber's filter decides what is shown.
        "log.connection.close" => {
            boolean(name, v)?;
        }
        "log_level" => {
            return Err(unsupported(
                name,
                v,
                "kprod logs through tracing: choose levels with the subscriber's filter \
                 (for example RUST_LOG=kprod_tokio=info with tracing-subscriber's EnvFilter)",
            ))
        }
        "socket.keepalive.enable" => {
            later.socket.keepalive = boolean(name, v)?;
        }
        "socket.nagle.disable" => {
            later.socket.nodelay = boolean(name, v)?;
        }
        // Java: -1 is the operating system's default; librdkafka: 0.
        "send.buffer.bytes"
        | "receive.buffer.bytes"
        | "socket.send.buffer.bytes"
        | "socket.receive.buffer.bytes" => {
            let os_default = if name.starts_with("socket.") {
                "0"
            } else {
                "-1"
            };
            let size = if v == os_default {
                None
            } else {
                // librdkafka's range is 1..=100000000; Java's any positive int.
                let most = if os_default == "0" {
                    100_000_000
                } else {
                    i32::MAX as u32
                };
                let n = number::<u32>(name, v).ok().filter(|n| *n > 0 && *n <= most);
                let expected = if os_default == "0" {
                    "a size in bytes up to 100000000, or 0 for the operating system's default"
                } else {
                    "a size in bytes, or -1 for the operating system's default"
                };
                Some(n.ok_or_else(|| invalid(name, v, expected))?)
            };
            if name.contains("send") {
                later.socket.send_buffer = size;
            } else {
                later.socket.receive_buffer = size;
            }
        }
        // tokio's connect tries every address a name resolves to, in order.
        "client.dns.lookup" if is(&["use_all_dns_ips"]) => {}
        "client.dns.lookup" => {
            return Err(unsupported(
                name,
                v,
                "kprod connects to every address a host name resolves to, in turn \
                 (use_all_dns_ips)",
            ))
        }
        "socket.timeout.ms" => {
            return Err(unsupported(
                name,
                v,
                "kprod times every request with request.timeout.ms (Java's meaning: the \
                 client's deadline as well as the broker's, where librdkafka's \
                 request.timeout.ms is the broker's alone); use that",
            ))
        }
        "broker.version.fallback" => {
            return Err(unsupported(
                name,
                v,
                "librdkafka uses it only for brokers that do not answer ApiVersions, and kprod \
                 always asks them (every broker with idempotence answers); to cap the versions \
                 at what an Apache Kafka release served, use kprod.broker.version.max",
            ))
        }
        "api.version.request" if boolean(name, v)? => {}
        "api.version.request" => {
            return Err(unsupported(
                name,
                v,
                "kprod always asks brokers for their API versions (it speaks Produce v3 and \
                 later, Kafka 0.11+)",
            ))
        }
        _ => return Ok(false),
    }
    Ok(true)
}

/// The compression levels: librdkafka's `compression.level` and the Java client's
/// per-codec `compression.gzip.level`, `compression.lz4.level` and `compression.zstd.level`
/// (KIP-390), resolved once every property is read, so their order does not matter.
#[derive(Default)]
struct CodecLevels {
    any: Option<i32>,
    per_codec: [Option<i32>; 5],
}

impl CodecLevels {
    /// Takes a level property; `Ok(false)` if `name` is not one.
    fn property(&mut self, name: &str, v: &str) -> Result<bool, PropertyError> {
        let slot = match name {
            "compression.level" => &mut self.any,
            "compression.gzip.level" => &mut self.per_codec[1],
            "compression.lz4.level" => &mut self.per_codec[3],
            "compression.zstd.level" => &mut self.per_codec[4],
            _ => return Ok(false),
        };
        let level: i32 = v.parse().map_err(|_| invalid(name, v, "an integer"))?;
        // -1 is the codec's default for librdkafka's `compression.level` and for Java's
        // gzip (`Deflater.DEFAULT_COMPRESSION`); for zstd it is a level like any other (its
        // fastest positive-ratio one), and lz4 has none below 1 (a review finding: a zstd
        // level of -1 was taken as the default, 3).
        let default = level == -1 && matches!(name, "compression.level" | "compression.gzip.level");
        *slot = (!default).then_some(level);
        Ok(true)
    }

    /// Sets the level of the chosen codec: its own property wins over `compression.level`. A
    /// codec without levels (snappy, none) ignores `compression.level`, as librdkafka does.
    fn apply(&self, c: &mut ProducerConfig) {
        let codec = c.compression.codec;
        if let Some((lowest, _)) = codec.level_range() {
            let own = self.per_codec[codec.id() as usize];
            // librdkafka's `compression.level=0` is valid for every codec (gzip's and lz4's
            // fastest); Kafka's gzip and lz4 levels start at 1, the fastest they have.
            let any = self.any.map(|l| if l == 0 { l.max(lowest) } else { l });
            c.compression.level = own.or(any);
        }
    }
}

/// Builds a [`ProducerConfig`] from Kafka producer properties, starting from the defaults,
/// then runs [`ProducerConfig::validate`].
///
/// It takes the producer properties a Java-client or librdkafka configuration carries. Every
/// property is either honoured or refused with an error that names it and says why
/// ([`PropertyError::Unsupported`], [`PropertyError::Invalid`], [`PropertyError::Config`]); a
/// name kprod does not know is [`PropertyError::Unknown`]. Nothing is silently ignored: the
/// few settings taken without effect are ones the Java client or librdkafka also ignore in
/// that situation (Kerberos settings without GSSAPI, the tuning of a token retrieval kprod
/// refuses, settings librdkafka no longer uses) or logging details, each listed below.
/// librdkafka's names are aliases of the Java setting with the same meaning. Nor does one
/// entry silently override another: a setting given twice, under one name or under a name
/// and its alias, with values that differ (`linger.ms=5` and `linger.ms=10`, or `linger.ms=5`
/// and `queue.buffering.max.ms=50`) is refused ([`PropertyError::Conflict`], naming both);
/// repeating the same value (or one that means the same, `acks=all` and
/// `request.required.acks=-1`) is taken.
///
/// Honoured:
///
/// | property (librdkafka alias) | meaning in kprod |
/// |---|---|
/// | `bootstrap.servers` | comma-separated `host:port` list (a `PLAINTEXT://`-style prefix is dropped, as in Java; a malformed address is a `Config` error naming it) |
/// | `client.id` | empty means none |
/// | `acks` (`request.required.acks`) | `all` / `-1` (the default), `1` (the leader alone acknowledges: [`crate::Acknowledgement::Leader`]) or `0` (no acknowledgement: records end [`crate::Acknowledgement::Unacknowledged`], without an offset); `0` and `1` need idempotence off, and as in the Java client they turn it off when `enable.idempotence` is not given |
/// | `enable.idempotence` | `true` (the default) or `false`: no producer id, so a retry may duplicate a record and, with more than one request in flight, reorder it; `true` with `acks` `0` or `1` is refused, as in the Java client |
/// | `linger.ms` (`queue.buffering.max.ms`) | how long a batch waits to fill (a fraction of a millisecond too, as librdkafka takes: `0.5`) |
/// | `batch.size` | bytes per batch, measured as Kafka does (compressed estimate); `0` disables batching (one record per batch), as in Java |
/// | `buffer.memory` (`queue.buffering.max.kbytes`, in KiB) | bytes of records held until they resolve (with the driver's own memory for each, 77 B on 64-bit Linux); beyond it `send` waits |
/// | `max.request.size` (`message.max.bytes`) | the most bytes of batches in one Produce request; a record whose batch alone would be larger is refused (Java's rule) |
/// | `partitioner` (librdkafka) | the key hash that places keyed records ([`kprod_core::Partitioner`]): `murmur2_random` (Java's, the default) or `murmur2`, `consistent_random` (librdkafka's default, CRC-32; an empty key is placed as none) or `consistent`, `fnv1a_random` or `fnv1a`, `random` (keys ignored); a record without a key goes to the sticky partition under every one |
/// | `max.in.flight.requests.per.connection` (`max.in.flight`) | 1..=5, also the per-partition bound across connections |
/// | `request.timeout.ms` | a request unanswered this long closes its connection |
/// | `delivery.timeout.ms` (`message.timeout.ms`) | a record's whole life in the producer, retries included; at least `linger.ms + request.timeout.ms` (when neither name is given and the default, 120000, is below that sum, it is raised to the sum, at most 2147483647, with a warning, as in Java); `message.timeout.ms=0` is librdkafka's "no timeout" ([`ProducerConfig::MAX_DURATION`]), `delivery.timeout.ms=0` is refused; given as `message.timeout.ms` without `request.timeout.ms`, the request timeout is shortened to fit within it, as librdkafka bounds each Produce request by the message's remaining time (kprod has one request timeout: Metadata, InitProducerId and the handshakes get the shorter one too; set `request.timeout.ms` to choose it) |
/// | `retries` (`message.send.max.retries`) | kprod retries until `delivery.timeout.ms`: accepted when the count cannot end retrying first (`2147483647`, the default of both clients, or `retries x 0.8 x retry.backoff.ms >= delivery.timeout.ms`); `0` and smaller counts are refused, except with `acks=0`, whose requests are never retried |
/// | `retry.backoff.ms`, `retry.backoff.max.ms` | backoff before a batch is retried, doubling up to the maximum, spread by 20 % either side unless constant (`kprod.backoff.jitter.percent`); a `retry.backoff.ms` above the maximum is a constant backoff of `retry.backoff.ms` (the Java client 3.7+ waits the maximum instead, with a warning) |
/// | `reconnect.backoff.ms` | backoff before reconnecting to a broker, doubling, spread as the retry backoff |
/// | `reconnect.backoff.max.ms` | the most the reconnect backoff doubles to ([`ProducerConfig::reconnect_backoff_max`]); when not given, 1000 (whatever `retry.backoff.max.ms` says), or `reconnect.backoff.ms` when that is given alone (a constant backoff, with a warning), as in Java (librdkafka, which shares the name, doubles it up to 10 s by default); a `reconnect.backoff.ms` above it is waited in full every time |
/// | `metadata.max.age.ms` (`topic.metadata.refresh.interval.ms`) | periodic metadata refresh; librdkafka's `topic.metadata.refresh.interval.ms=-1` turns it off (metadata is asked for when something needs it); given beside `topic.metadata.refresh.interval.ms`, `metadata.max.age.ms` is librdkafka's cache age: checked and left |
/// | `metadata.max.idle.ms` | a topic not sent to for this long is left out of metadata requests until its next record (at least 5000, as in Java) |
/// | `connections.max.idle.ms` | a connection with nothing in flight and no traffic for this long is closed, and opened again when needed ([`ProducerConfig::connections_max_idle`]; 540000 by default, as in Java); `-1` (Java) or `0` (librdkafka) never closes one |
/// | `queue.buffering.max.messages` (librdkafka) | the most records held until they resolve ([`ProducerConfig::max_buffered_records`]); beyond it `send` waits, as for `buffer.memory` |
/// | `batch.num.messages` (librdkafka) | the most records in one batch ([`ProducerConfig::max_batch_records`]) |
/// | `max.block.ms` | how long a record waits for its topic in metadata before failing, and how long `send`/`enqueue` wait for room in `buffer.memory` before refusing the record (`QueueFull`, handed back) |
/// | `allow.auto.create.topics` | sent in Metadata requests |
/// | `compression.type` (`compression.codec`) | `none`, `gzip`, `snappy`, `lz4`, `zstd` |
/// | `compression.level`, `compression.{gzip,lz4,zstd}.level` | the codec's level; `-1` is the default of `compression.level` and of gzip's (a zstd level like any other, refused for lz4, as in Java); librdkafka's `compression.level=0` is gzip's and lz4's fastest, 1 |
/// | `enable.gapless.guarantee` (librdkafka) | `true`: [`GapPolicy::Fatal`], `false`: [`GapPolicy::ContinueWithGap`] |
/// | `client.software.name`, `client.software.version` (librdkafka) | sent in ApiVersions (KIP-511) |
/// | `partitioner.class` | empty, `org.apache.kafka.clients.producer.internals.DefaultPartitioner` (murmur2 keys, sticky batches for null keys: kprod's default) or `org.apache.kafka.clients.producer.UniformStickyPartitioner` (keys ignored); either turns adaptive partitioning off, as Java does for any class, unless `partitioner.adaptive.partitioning.enable` is given (which Java then ignores); a librdkafka `partitioner` that contradicts it is refused |
/// | `partitioner.ignore.keys` | `true`: keys ignored, every record goes to the sticky partition (the `random` partitioner; as Java's `UniformStickyPartitioner`, also taken as `partitioner.class`) |
/// | `partitioner.adaptive.partitioning.enable` | [`ProducerConfig::adaptive_partitioning`]: `true` (the default) moves a sticky partition to the least loaded of the next partitions with a leader, `false` to the next one |
/// | `partitioner.availability.timeout.ms` | `0` |
/// | `transactional.id`, `interceptor.classes`, `metric.reporters`, `debug` | empty (none) |
/// | `statistics.interval.ms` | `0` (no statistics) |
/// | `socket.keepalive.enable` | `SO_KEEPALIVE` ([`crate::SocketOptions::keepalive`], `false` by default, as in librdkafka); with any other value than `false`, only through [`ClientConfig::from_properties`] |
/// | `socket.nagle.disable` | `TCP_NODELAY` ([`crate::SocketOptions::nodelay`], `true` by default); `false` only through [`ClientConfig::from_properties`] |
/// | `send.buffer.bytes`, `receive.buffer.bytes` (`-1`), `socket.send.buffer.bytes`, `socket.receive.buffer.bytes` (`0`) | `SO_SNDBUF` and `SO_RCVBUF` ([`crate::SocketOptions`]); `-1` (Java's names) and `0` (librdkafka's) leave them to the operating system, the default; a size only through [`ClientConfig::from_properties`] |
/// | `broker.address.family` (librdkafka) | `any`, `v4` or `v6`: which of a name's addresses are tried ([`crate::SocketOptions::address_family`]); other than `any` only through [`ClientConfig::from_properties`] |
/// | `receive.message.max.bytes` (librdkafka) | the largest response accepted ([`ProducerConfig::max_frame_size`]) |
/// | `client.rack` | any (a producer uses it only for rack-aware partitioning) |
/// | `partitioner.rack.aware`, `metadata.cluster.check.enable`, `transaction.two.phase.commit.enable`, `delivery.report.only.error` (librdkafka) | `false` |
/// | `buffer.memory.allocation.strategy` | `full` (a batch is charged its `batch.size` when it opens) |
/// | `config.providers` | empty |
/// | `socket.max.fails` (librdkafka) | `1` (a request timeout closes its connection) |
/// | `topic.metadata.refresh.sparse`, `enable.sparse.connections` (librdkafka) | `true` |
/// | `queuing.strategy` (librdkafka) | `fifo` |
/// | `produce.offset.report`, `metadata.request.timeout.ms`, `socket.blocking.max.ms`, `reconnect.backoff.jitter.ms`, `log.connection.close` (librdkafka) | any (unused by librdkafka itself; closes are tracing events) |
/// | `compression.codec` (librdkafka, topic level) | also `inherit`: the global codec |
/// | `ssl.truststore.type`, `ssl.truststore.location` | `PEM`: the location is the CA file (as `ssl.ca.location`); JKS and PKCS12 only without a location |
/// | `ssl.keystore.type`, `ssl.keystore.location` | `PEM`: one file holding the client's unencrypted key and its chain (as `ssl.certificate.location` and `ssl.key.location`) |
/// | `ssl.enabled.protocols`, `ssl.protocol` | TLS 1.2 and 1.3 as listed (`TLSv1.2`, `TLSv1.3`); `ssl.protocol=TLSv1.2` never negotiates 1.3, as in Java |
/// | `ssl.keymanager.algorithm`, `ssl.trustmanager.algorithm`, `ssl.cipher.suites`, `ssl.key.password`, `ssl.keystore.password`, `ssl.truststore.password`, `enable.ssl.certificate.verification`, `ssl.ca.certificate.stores`, `ssl.engine.id` | `SunX509`/`PKIX`, `PKIX`, empty, empty passwords, `true`, `Root`, `dynamic` |
/// | `sasl.kerberos.*`, `sasl.login.refresh.*` and the other `sasl.login.*` and `sasl.oauthbearer.*` tuning | any: they tune GSSAPI (refused) and Java's or librdkafka's own token retrieval (refused: `sasl.oauthbearer.token.endpoint.url`, client credentials, assertions, `sasl.oauthbearer.method=oidc`, `sasl.login.callback.handler.class`) |
/// | `metadata.broker.list` (librdkafka) | as `bootstrap.servers` |
/// | `builtin.features` (librdkafka) | features this kprod-tokio has (gzip, snappy, lz4, zstd, ssl, sasl, sasl_plain, sasl_scram, sasl_oauthbearer) |
/// | `log.thread.name`, `enable.random.seed` (librdkafka) | any (logging goes to tracing; the core uses no randomness) |
/// | `log.queue` (librdkafka) | `false` |
/// | `topic.blacklist`, `plugin.library.paths` (librdkafka) | empty |
/// | `internal.termination.signal`, `api.version.fallback.ms`, `enabled_events` (librdkafka) | `0` |
/// | librdkafka's C API callbacks and pointers (`dr_msg_cb`, `opaque`, ...) | refused |
/// | `ssl.curves.list`, `ssl.sigalgs.list`, `ssl.crl.location`, `ssl.provider`, `ssl.providers`, `ssl.engine.*`, `ssl.engine.factory.class`, `ssl.secure.random.implementation`, `security.providers` | empty (`ssl.engine.id`: `dynamic`) |
/// | inline PEM (`ssl.truststore.certificates`, `ssl.keystore.certificate.chain`, `ssl.keystore.key`, `ssl.ca.pem`, `ssl.certificate.pem`, `ssl.key.pem`) | empty (give files) |
/// | `sasl.login.class`, `sasl.login.callback.handler.class`, `sasl.client.callback.handler.class` | empty (under `SASL_*`) |
/// | `sasl.jaas.config` | empty means none (see [`ClientConfig::from_properties`]) |
/// | `client.dns.lookup` | `use_all_dns_ips`: every resolved address is tried, the next one 250 ms after the previous attempt started or at once when it failed, the first to connect used (RFC 8305) |
/// | `api.version.request` (librdkafka) | `true` |
/// | `metadata.recovery.strategy` | `rebootstrap`: when no known broker can be reached, kprod asks the bootstrap servers again |
/// | `metadata.recovery.rebootstrap.trigger.ms` | after this long without a metadata answer since a connect failed or a request timed out, with none of the known brokers' connections ready, the bootstrap servers are dialled beside them ([`ProducerConfig::metadata_recovery_rebootstrap_trigger`]; 300000 by default, as in Java) |
/// | `enable.metrics.push` | `false` (no KIP-714 client telemetry) |
/// | `security.protocol`, `ssl.*`, `sasl.*` | see [`ClientConfig::from_properties`] |
/// | `socket.connection.setup.timeout.ms` | how long a connect (and TLS handshake) may take ([`ProducerConfig::connect_timeout`], 10 s by default) |
/// | `socket.connection.setup.timeout.max.ms` | each connect to a broker that failed in a row doubles the next one's timeout up to this, spread as the backoffs (KIP-601; [`ProducerConfig::connect_timeout_max`], 30000 by default as in Java); at or below the connect timeout, the connect timeout every time |
/// | `kprod.max.batches.per.request` (kprod's own) | the most batches (partitions) in one Produce request ([`ProducerConfig::max_batches_per_request`]; by default as many full batches as `max.request.size` holds, at least 16) |
/// | `kprod.max.produce.version`, `kprod.max.metadata.version`, `kprod.max.init.producer.id.version`, `kprod.max.api.versions.version` (kprod's own) | the highest version of each API a connection speaks ([`ProducerConfig::max_versions`]) |
/// | `kprod.backoff.jitter.percent` (kprod's own) | `0` to `50`: each backoff spread by up to this many percent either side ([`ProducerConfig::backoff_jitter_percent`]; 20 by default, the Java client's fixed spread) |
/// | `kprod.producer.id.expiration.ms` (kprod's own) | the brokers' `producer.id.expiration.ms`, or a lower bound of it: a partition idle this long sends one batch alone until it is acknowledged ([`ProducerConfig::producer_id_expiration`]; by default `delivery.timeout.ms`, at most 1 day, Kafka's default) |
/// | `kprod.broker.version.max` (kprod's own) | an Apache Kafka release from `0.11` to `4.4` (`2.3`, `3.9.1`): every API capped at the version that release served ([`ProducerConfig::broker_version_max`]); the lower of it and a `kprod.max.*.version` wins |
///
/// Taken without effect: `key.serializer` and `value.serializer` naming one of Kafka's
/// serializers of bytes or strings (`org.apache.kafka.common.serialization.`
/// `ByteArraySerializer`, `ByteBufferSerializer`, `BytesSerializer`, `StringSerializer`: kprod
/// takes bytes, and a Rust string's bytes are its UTF-8, Java's default encoding).
///
/// Refused, with the reason in the error: `key.serializer` and `value.serializer` naming any
/// other class (kprod takes bytes), `transactional.id` and `transaction.timeout.ms` (no
/// transactions), any other `partitioner.class`, `interceptor.classes` (no Java classes),
/// `metrics.*` and `metric.reporters`
/// (no metrics registry: tracing events), other values of `debug` (tracing filters) and
/// `statistics.interval.ms`, `log_level` (tracing filters), `bootstrap.resolve.timeout.ms`,
/// librdkafka's `sticky.partitioning.linger.ms`,
/// `broker.address.ttl`, `topic.metadata.refresh.fast.*`, `topic.metadata.propagation.max.ms`,
/// `api.version.request.timeout.ms`, `message.copy.max.bytes`,
/// `queue.buffering.backpressure.threshold`, other values of the settings above (for
/// `ssl.*`, only under `SSL` and `SASL_SSL`; for `sasl.*`, only under `SASL_*`),
/// `client.dns.lookup=resolve_canonical_bootstrap_servers_only`,
/// `socket.timeout.ms` (use `request.timeout.ms`), `api.version.request=false`,
/// `broker.version.fallback` (librdkafka's fallback for brokers without ApiVersions; use
/// `kprod.broker.version.max`), `retries=0`.
///
/// The security properties are understood too, but a producer built from this configuration
/// alone connects over plain TCP with the default socket options
/// ([`crate::ProducerHandle::connect`]), so any `security.protocol` other than `PLAINTEXT` or
/// `SASL_PLAINTEXT` (SASL runs in the core), and any socket option other than its default,
/// is refused here rather than ignored: use
/// [`ClientConfig::from_properties`] or [`crate::ProducerHandle::from_properties`].
///
/// ```
/// use kprod_tokio::{config_from_properties, PropertyError};
///
/// let config = config_from_properties(&[
///     ("bootstrap.servers", "broker1:9092,broker2:9092"),
///     ("acks", "all"),
///     ("retries", "2147483647"),
///     ("queue.buffering.max.ms", "20"), // librdkafka's linger.ms
/// ])?;
/// assert_eq!(config.linger, std::time::Duration::from_millis(20));
///
/// let err = config_from_properties(&[
///     ("bootstrap.servers", "broker1:9092"),
///     ("value.serializer", "com.example.AvroSerializer"),
/// ])
/// .unwrap_err();
/// assert!(matches!(err, PropertyError::Unsupported { ref property, .. } if property == "value.serializer"));
/// assert!(err.to_string().contains("bytes"));
/// # Ok::<(), PropertyError>(())
/// ```
pub fn config_from_properties(props: &[(&str, &str)]) -> Result<ProducerConfig, PropertyError> {
    let mut c = ClientConfig::from_properties(props)?;
    // The core keeps the connect timeout.
    if let Some(t) = c.connect_timeout {
        c.producer.connect_timeout = t;
    }
    // The socket options are the connector's, which a bare ProducerConfig does not carry:
    // the last property that leaves one away from its default is refused.
    let d = SocketOptions::default();
    let moved = |name: &str| match name {
        "socket.nagle.disable" => c.socket.nodelay != d.nodelay,
        "socket.keepalive.enable" => c.socket.keepalive != d.keepalive,
        "send.buffer.bytes" | "socket.send.buffer.bytes" => c.socket.send_buffer.is_some(),
        "receive.buffer.bytes" | "socket.receive.buffer.bytes" => c.socket.receive_buffer.is_some(),
        "broker.address.family" => c.socket.address_family != d.address_family,
        _ => false,
    };
    if let Some((name, v)) = props.iter().rev().find(|(name, _)| moved(name.trim())) {
        return Err(PropertyError::Unsupported {
            property: name.trim().to_owned(),
            value: v.trim().to_owned(),
            reason: "config_from_properties builds the producer configuration only, and its \
                     producer connects with the default socket options; use \
                     ProducerHandle::from_properties (or ClientConfig::from_properties, whose \
                     `socket` field holds them)",
        });
    }
    match c.security {
        Security::Plaintext => Ok(c.producer),
        // The value the application gave (SSL or SASL_SSL), not a fixed one (a review
        // finding: SASL_SSL was reported as SSL).
        Security::Ssl(_) => Err(PropertyError::Unsupported {
            property: "security.protocol".to_owned(),
            value: (props.iter().rev())
                .find(|(name, _)| name.trim() == "security.protocol")
                .map_or("SSL", |(_, v)| v.trim())
                .to_owned(),
            reason: "config_from_properties builds the producer configuration only and its \
                     producer connects over plain TCP; use ProducerHandle::from_properties \
                     (or ClientConfig::from_properties) for TLS",
        }),
    }
}

#[cfg(test)]
mod compression_tests {
    use kprod_core::{Compression, CompressionType};

    use super::*;

    fn compression(props: &[(&str, &str)]) -> Result<Compression, PropertyError> {
        let mut all = vec![("bootstrap.servers", "127.0.0.1:9092")];
        all.extend_from_slice(props);
        config_from_properties(&all).map(|c| c.compression)
    }

    #[test]
    fn compression_type_and_levels_use_kafkas_names() {
        use CompressionType::*;
        assert_eq!(compression(&[]).unwrap(), Compression::NONE);
        assert_eq!(
            compression(&[("compression.type", "ZSTD")]).unwrap(),
            Compression::new(Zstd)
        );
        assert_eq!(
            compression(&[("compression.level", "7"), ("compression.codec", "gzip")]).unwrap(),
            Compression::with_level(Gzip, 7),
            "librdkafka's names, in any order"
        );
        assert_eq!(
            compression(&[
                ("compression.type", "zstd"),
                ("compression.level", "5"),
                ("compression.zstd.level", "-2"),
                ("compression.gzip.level", "9"),
            ])
            .unwrap(),
            Compression::with_level(Zstd, -2),
            "the codec's own level wins; other codecs' levels are ignored"
        );
        assert_eq!(
            compression(&[("compression.type", "snappy"), ("compression.level", "5")]).unwrap(),
            Compression::new(Snappy),
            "snappy has no levels"
        );
        assert_eq!(
            compression(&[
                ("compression.type", "gzip"),
                ("compression.gzip.level", "-1")
            ])
            .unwrap(),
            Compression::new(Gzip)
        );
        assert!(matches!(
            compression(&[("compression.type", "brotli")]),
            Err(PropertyError::Invalid { .. })
        ));
        assert!(matches!(
            compression(&[("compression.level", "high")]),
            Err(PropertyError::Invalid { .. })
        ));
        match compression(&[
            ("compression.type", "gzip"),
            ("compression.gzip.level", "10"),
        ]) {
            Err(PropertyError::Config(e)) => assert_eq!(e.setting, "compression.type"),
            other => panic!("{other:?}"),
        }
    }
}

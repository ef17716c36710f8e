//! `ProducerConfig` and the connection's security settings from Java-client property names.

use std::path::PathBuf;
use std::time::Duration;

use crate::sasl::SaslProps;

use kprod_core::{CompressionType, ConfigError, ProducerConfig};

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
}

impl std::fmt::Display for PropertyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Unknown(name) => write!(f, "unknown producer property {name:?}"),
            Self::Invalid {
                property,
                value,
                expected,
            } => write!(
                f,
                "invalid value {value:?} for {property}: expected {expected}"
            ),
            Self::Config(e) => e.fmt(f),
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

fn boolean(name: &str, v: &str) -> Result<bool, PropertyError> {
    match v.to_ascii_lowercase().as_str() {
        "true" => Ok(true),
        "false" => Ok(false),
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
    /// `ssl.ca.location`: a PEM file of the CA certificates that may sign brokers'
    /// certificates. `None`: the operating system's trust store.
    pub ca_location: Option<PathBuf>,
    /// `ssl.certificate.location`: the client's PEM certificate chain, for mutual TLS.
    pub certificate_location: Option<PathBuf>,
    /// `ssl.key.location`: the client certificate's unencrypted PEM private key (PKCS#8,
    /// PKCS#1 or SEC1).
    pub key_location: Option<PathBuf>,
    /// `ssl.endpoint.identification.algorithm`: `https` (the default, `true`) checks that the
    /// broker's certificate is valid for the host name (or IP address) connected to; an empty
    /// value (or `none`, `false`) skips that check, while the chain is still verified against
    /// the trusted CAs, validity dates included.
    pub verify_hostname: bool,
}

impl Default for TlsOptions {
    fn default() -> Self {
        Self {
            ca_location: None,
            certificate_location: None,
            key_location: None,
            verify_hostname: true,
        }
    }
}

/// Everything a producer needs from its properties: the core's configuration and how to reach
/// brokers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientConfig {
    /// The core's configuration.
    pub producer: ProducerConfig,
    /// How connections are secured.
    pub security: Security,
}

impl ClientConfig {
    /// Builds the configuration from Kafka producer properties (later entries win): every
    /// property [`config_from_properties`] takes, plus `security.protocol` (`PLAINTEXT`, the
    /// default, `SSL`, `SASL_PLAINTEXT` or `SASL_SSL`), `sasl.mechanism` (`PLAIN`,
    /// `SCRAM-SHA-256`, `SCRAM-SHA-512`, `OAUTHBEARER`; librdkafka's `sasl.mechanisms` too),
    /// `sasl.username` and `sasl.password` (PLAIN and SCRAM; OAUTHBEARER takes its tokens from
    /// a [`crate::TokenProvider`]), `ssl.ca.location`, `ssl.certificate.location`, `ssl.key.location` and
    /// `ssl.endpoint.identification.algorithm` (`https`, the default, or empty). As in the
    /// Java client, `ssl.*` properties are ignored under `PLAINTEXT` and `SASL_PLAINTEXT`, and
    /// `sasl.*` properties under `PLAINTEXT` and `SSL`. SASL goes into
    /// [`ProducerConfig::sasl`] (the core authenticates each connection); `SASL_SSL` also
    /// sets [`Security::Ssl`], `SASL_PLAINTEXT` [`Security::Plaintext`]. Files are read when the
    /// producer starts ([`crate::ProducerHandle::from_config`]), not here.
    pub fn from_properties(props: &[(&str, &str)]) -> Result<Self, PropertyError> {
        let mut c = ProducerConfig::default();
        let mut protocol = "PLAINTEXT".to_owned();
        let mut tls = TlsOptions::default();
        let mut sasl = SaslProps::default();
        let mut levels = CodecLevels::default();
        for &(name, value) in props {
            let (name, v) = (name.trim(), value.trim());
            if !producer_property(&mut c, name, v)? && !levels.property(name, v)? {
                security_property(&mut protocol, &mut tls, &mut sasl, name, v)?;
            }
        }
        levels.apply(&mut c);
        c.sasl = sasl.build(&protocol)?;
        c.validate().map_err(PropertyError::Config)?;
        let security =
            match protocol.as_str() {
                "PLAINTEXT" | "SASL_PLAINTEXT" => Security::Plaintext,
                _ => {
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
        })
    }
}

fn path(v: &str) -> Option<PathBuf> {
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
        "bootstrap.servers" => {
            c.bootstrap_servers = v
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect();
        }
        "client.id" => c.client_id = (!v.is_empty()).then(|| v.to_owned()),
        "acks" => {
            c.acks = match v.to_ascii_lowercase().as_str() {
                "all" | "-1" => -1,
                "1" => 1,
                "0" => 0,
                _ => return Err(invalid(name, v, "all, -1, 1 or 0")),
            };
        }
        "enable.idempotence" => c.enable_idempotence = boolean(name, v)?,
        "allow.auto.create.topics" => c.allow_auto_topic_creation = boolean(name, v)?,
        "linger.ms" => c.linger = millis(name, v)?,
        "request.timeout.ms" => c.request_timeout = millis(name, v)?,
        "delivery.timeout.ms" => c.delivery_timeout = millis(name, v)?,
        "retry.backoff.ms" => c.retry_backoff = millis(name, v)?,
        "retry.backoff.max.ms" => c.retry_backoff_max = millis(name, v)?,
        "reconnect.backoff.ms" => c.reconnect_backoff = millis(name, v)?,
        "metadata.max.age.ms" => c.metadata_max_age = millis(name, v)?,
        "batch.size" => c.batch_size = number(name, v)?,
        "buffer.memory" => c.buffer_memory = number(name, v)?,
        "max.request.size" => c.max_request_size = number(name, v)?,
        "max.in.flight.requests.per.connection" => c.max_in_flight = number(name, v)?,
        // `compression.codec` is librdkafka's alias.
        "compression.type" | "compression.codec" => {
            c.compression.codec = CompressionType::from_name(v)
                .ok_or_else(|| invalid(name, v, "none, gzip, snappy, lz4 or zstd"))?;
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
        // -1 is the codec's default in both clients' conventions.
        *slot = (level != -1).then_some(level);
        Ok(true)
    }

    /// Sets the level of the chosen codec: its own property wins over `compression.level`. A
    /// codec without levels (snappy, none) ignores `compression.level`, as librdkafka does.
    fn apply(&self, c: &mut ProducerConfig) {
        let codec = c.compression.codec;
        if codec.level_range().is_some() {
            let own = self.per_codec[codec.id() as usize];
            c.compression.level = own.or(self.any);
        }
    }
}

/// Builds a [`ProducerConfig`] from Kafka producer properties (later entries win), starting
/// from the defaults, then runs [`ProducerConfig::validate`].
///
/// Supported: `bootstrap.servers` (comma-separated), `client.id` (empty means none), `acks`
/// (`all`, `-1`, `1`, `0`), `enable.idempotence`, `allow.auto.create.topics`, `linger.ms`,
/// `request.timeout.ms`, `delivery.timeout.ms`, `retry.backoff.ms`, `retry.backoff.max.ms`,
/// `reconnect.backoff.ms`, `metadata.max.age.ms`, `batch.size`, `buffer.memory`,
/// `max.request.size`, `max.in.flight.requests.per.connection`, `compression.type` (`none`,
/// `gzip`, `snappy`, `lz4`, `zstd`; librdkafka's alias `compression.codec`) and its level
/// (`compression.level`, or the Java client's `compression.gzip.level`,
/// `compression.lz4.level`, `compression.zstd.level`; `-1` is the codec's default).
///
/// The security properties are understood too, but a producer built from this configuration
/// alone connects over plain TCP ([`crate::ProducerHandle::connect`]), so any
/// `security.protocol` other than `PLAINTEXT` or `SASL_PLAINTEXT` (SASL runs in the core) is
/// refused here rather than ignored: use
/// [`ClientConfig::from_properties`] or [`crate::ProducerHandle::from_properties`].
pub fn config_from_properties(props: &[(&str, &str)]) -> Result<ProducerConfig, PropertyError> {
    let c = ClientConfig::from_properties(props)?;
    match c.security {
        Security::Plaintext => Ok(c.producer),
        Security::Ssl(_) => Err(PropertyError::Unsupported {
            property: "security.protocol".to_owned(),
            value: "SSL".to_owned(),
            reason: "config_from_properties builds the producer configuration only and its \
                     producer connects over plain TCP; use ProducerHandle::from_properties \
                     (or ClientConfig::from_properties) for SSL",
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

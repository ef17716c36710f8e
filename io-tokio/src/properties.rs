//! `ProducerConfig` from Java-client property names.

use std::time::Duration;

use kprod_core::{ConfigError, ProducerConfig};

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

/// Builds a [`ProducerConfig`] from Kafka producer properties (later entries win), starting
/// from the defaults, then runs [`ProducerConfig::validate`].
///
/// Supported: `bootstrap.servers` (comma-separated), `client.id` (empty means none), `acks`
/// (`all`, `-1`, `1`, `0`), `enable.idempotence`, `allow.auto.create.topics`, `linger.ms`,
/// `request.timeout.ms`, `delivery.timeout.ms`, `retry.backoff.ms`, `retry.backoff.max.ms`,
/// `reconnect.backoff.ms`, `metadata.max.age.ms`, `batch.size`, `buffer.memory`,
/// `max.request.size` and `max.in.flight.requests.per.connection`.
pub fn config_from_properties(props: &[(&str, &str)]) -> Result<ProducerConfig, PropertyError> {
    let mut c = ProducerConfig::default();
    for &(name, value) in props {
        let (name, v) = (name.trim(), value.trim());
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
            _ => return Err(PropertyError::Unknown(name.to_owned())),
        }
    }
    c.validate().map_err(PropertyError::Config)?;
    Ok(c)
}

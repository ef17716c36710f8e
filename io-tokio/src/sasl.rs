//! SASL in the adapter: the `sasl.*` properties, the SCRAM nonce and the OAUTHBEARER token
//! provider. The exchange itself runs in the core (`kprod_core::sasl`); the adapter only
//! answers the core's [`kprod_core::Output::SaslInput`] requests.
//!
//! # Nonces
//!
//! A SCRAM client nonce must be unpredictable and never repeat. The adapter draws 24 bytes
//! from the operating system's CSPRNG (`getrandom`, the same source `rand`'s `OsRng` and
//! rustls use) and hex-encodes them: 48 characters, 192 bits. std's `RandomState` was the
//! alternative without a dependency, but its keys are only meant to resist hash flooding, and
//! SipHash output is not documented as a secure random stream. The core itself takes the
//! nonce as an input, so the model and simulations can answer with fixed nonces and stay
//! deterministic.

use std::sync::Arc;

use kprod_core::{SaslConfig, SaslInput, SaslMechanism, SaslNeed, Secret};

use crate::PropertyError;

/// Supplies OAUTHBEARER tokens (compact JWS strings) to the producer.
///
/// Called on the producer's driver task each time a connection authenticates or
/// re-authenticates, so it must return quickly: keep the current token cached and refresh it
/// in the background (as the Java client's login refresh thread does). An `Err` fails the
/// producer with `FatalError::Authentication` carrying the message, which must not contain a
/// secret. Any `Fn() -> Result<String, String> + Send + Sync` closure is a provider.
pub trait TokenProvider: Send + Sync + 'static {
    /// The token to authenticate with now.
    fn token(&self) -> Result<String, String>;
}

impl<F> TokenProvider for F
where
    F: Fn() -> Result<String, String> + Send + Sync + 'static,
{
    fn token(&self) -> Result<String, String> {
        self()
    }
}

/// The core's SASL request, answered.
pub(crate) fn answer(need: SaslNeed, provider: Option<&Arc<dyn TokenProvider>>) -> SaslInput {
    match need {
        SaslNeed::Nonce => match fresh_nonce() {
            Some(n) => SaslInput::Nonce(n),
            None => SaslInput::Unavailable(
                "the operating system's random number generator failed, so no SCRAM nonce"
                    .to_owned(),
            ),
        },
        SaslNeed::Token => match provider {
            None => SaslInput::Unavailable(
                "sasl.mechanism=OAUTHBEARER needs a token provider \
                 (ProducerHandle::from_properties_with_token_provider)"
                    .to_owned(),
            ),
            Some(p) => match p.token() {
                Ok(t) => SaslInput::Token(Secret::new(t)),
                Err(e) => SaslInput::Unavailable(format!("the token provider failed: {e}")),
            },
        },
    }
}

/// 24 bytes from the OS CSPRNG, hex-encoded.
fn fresh_nonce() -> Option<String> {
    let mut bytes = [0u8; 24];
    getrandom::fill(&mut bytes).ok()?;
    Some(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// The `sasl.*` properties, gathered in any order and checked once all are read.
#[derive(Default)]
pub(crate) struct SaslProps {
    mechanism: Option<String>,
    username: Option<String>,
    password: Option<Secret>,
}

impl SaslProps {
    /// Takes a `sasl.*` property; `false` if `name` is not one.
    pub(crate) fn property(&mut self, name: &str, v: &str) -> bool {
        match name {
            // `sasl.mechanisms` is librdkafka's name.
            "sasl.mechanism" | "sasl.mechanisms" => self.mechanism = Some(v.to_owned()),
            "sasl.username" => self.username = Some(v.to_owned()),
            "sasl.password" => self.password = Some(Secret::new(v)),
            _ => return false,
        }
        true
    }

    /// The core's SASL settings for `security.protocol` (already upper case): `None` unless
    /// it is `SASL_PLAINTEXT` or `SASL_SSL`; as in the Java client, `sasl.*` properties are
    /// ignored otherwise.
    pub(crate) fn build(self, protocol: &str) -> Result<Option<SaslConfig>, PropertyError> {
        if !protocol.starts_with("SASL_") {
            return Ok(None);
        }
        let expected = "PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER";
        let name = self.mechanism.unwrap_or_default();
        let mechanism = match SaslMechanism::from_name(&name) {
            Some(m) => m,
            None if name.is_empty() => {
                return Err(PropertyError::Invalid {
                    property: "sasl.mechanism".to_owned(),
                    value: name,
                    expected,
                })
            }
            None if name.eq_ignore_ascii_case("GSSAPI") => {
                return Err(PropertyError::Unsupported {
                    property: "sasl.mechanism".to_owned(),
                    value: name,
                    reason: "Kerberos (GSSAPI) is not supported; use PLAIN, SCRAM-SHA-256, \
                             SCRAM-SHA-512 or OAUTHBEARER",
                })
            }
            None => {
                return Err(PropertyError::Invalid {
                    property: "sasl.mechanism".to_owned(),
                    value: name,
                    expected,
                })
            }
        };
        if mechanism == SaslMechanism::OAuthBearer {
            return Ok(Some(SaslConfig::oauthbearer()));
        }
        let username =
            self.username
                .filter(|u| !u.is_empty())
                .ok_or_else(|| PropertyError::Invalid {
                    property: "sasl.username".to_owned(),
                    value: String::new(),
                    expected: "the user name to authenticate as (PLAIN and SCRAM)",
                })?;
        let password = self.password.ok_or_else(|| PropertyError::Invalid {
            property: "sasl.password".to_owned(),
            value: String::new(),
            expected: "the user's password (PLAIN and SCRAM)",
        })?;
        Ok(Some(SaslConfig::new(mechanism, username, password)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nonces_are_fresh_and_well_formed() {
        let a = fresh_nonce().unwrap();
        let b = fresh_nonce().unwrap();
        assert_ne!(a, b);
        assert_eq!(a.len(), 48);
        assert!(a.bytes().all(|c| c.is_ascii_hexdigit()));
    }

    #[test]
    fn tokens_come_from_the_provider() {
        let p: Arc<dyn TokenProvider> = Arc::new(|| Ok::<_, String>("h.p.".to_owned()));
        assert_eq!(
            answer(SaslNeed::Token, Some(&p)),
            SaslInput::Token(Secret::new("h.p."))
        );
        let failing: Arc<dyn TokenProvider> = Arc::new(|| Err::<String, _>("no IdP".to_owned()));
        assert!(matches!(
            answer(SaslNeed::Token, Some(&failing)),
            SaslInput::Unavailable(e) if e.contains("no IdP")
        ));
        assert!(matches!(
            answer(SaslNeed::Token, None),
            SaslInput::Unavailable(e) if e.contains("token provider")
        ));
    }
}

//! The `ssl.*` and `sasl.*` properties of the Java client and librdkafka beyond the ones that
//! name kprod's own settings (`ssl.ca.location`, `sasl.mechanism`, ...): Java's PEM trust
//! and key stores and TLS versions, which kprod honours; the Java key-manager names, store
//! types and passwords, cipher suites and built-in OAuth token retrieval, which it takes at
//! the values that describe what it does and refuses otherwise; and the Kerberos settings,
//! used only by GSSAPI (refused with the mechanism). As in the Java client, `ssl.*` settings
//! count only under `SSL` and `SASL_SSL`, and `sasl.*` settings only under `SASL_*`: a
//! refusal is raised only when the protocol uses them.

use std::collections::BTreeMap;
use std::path::PathBuf;

use kprod_core::SaslMechanism;

use crate::properties::{path, unsupported, TlsOptions};
use crate::PropertyError;

/// Java's default OAUTHBEARER token retriever (which asks for nothing unless configured).
const DEFAULT_JWT_RETRIEVER: &str =
    "org.apache.kafka.common.security.oauthbearer.DefaultJwtRetriever";

const PEM_ONLY: &str = "kprod reads PEM files: give the store as PEM (ssl.truststore.type=PEM, \
                        ssl.keystore.type=PEM) or use ssl.ca.location, \
                        ssl.certificate.location and ssl.key.location";
const NO_PASSWORDS: &str = "kprod reads unencrypted PEM private keys and PEM stores, which \
                            have no password (decrypt a key with `openssl pkey -in \
                            encrypted.pem -out key.pem`); leave it empty";
const NO_INLINE_PEM: &str = "kprod reads certificates and keys from PEM files only: put them \
                             in files and give their paths (ssl.ca.location, \
                             ssl.certificate.location, ssl.key.location)";
const NO_JAVA_TLS: &str = "kprod's TLS is rustls with its own crypto provider; it takes no \
                           Java or OpenSSL providers, engines or random sources";
const OAUTH_PROVIDER: &str = "kprod fetches no OAUTHBEARER tokens itself: they come from the \
                              application's TokenProvider \
                              (ProducerHandle::from_properties_with_token_provider)";
const NO_SASL_CLASSES: &str = "kprod runs no Java classes: PLAIN and SCRAM take sasl.username \
                               and sasl.password (or sasl.jaas.config), OAUTHBEARER a \
                               TokenProvider";

/// What the extra `ssl.*` and `sasl.*` properties say, checked once the protocol is known.
#[derive(Debug, Default)]
pub(crate) struct SecurityExtras {
    /// `ssl.protocol`.
    protocol: Option<String>,
    /// `ssl.enabled.protocols`.
    enabled: Option<String>,
    truststore_type: Option<String>,
    truststore_location: Option<PathBuf>,
    keystore_type: Option<String>,
    keystore_location: Option<PathBuf>,
    /// Non-empty `ssl.key.password`, `ssl.keystore.password`, `ssl.truststore.password`.
    key_password: bool,
    keystore_password: bool,
    truststore_password: bool,
    /// `ssl.*` values refused if TLS is used, by property (a later default value lifts one).
    tls_refused: BTreeMap<String, PropertyError>,
    /// `sasl.*` values refused if SASL is used, by property.
    sasl_refused: BTreeMap<String, PropertyError>,
    /// `sasl.*` values refused if SASL is used with OAUTHBEARER, by property.
    oauth_refused: BTreeMap<String, PropertyError>,
}

/// Records `name`'s refusal in `map` unless `ok`, lifting an earlier one if `ok`.
fn refuse_unless(
    map: &mut BTreeMap<String, PropertyError>,
    ok: bool,
    name: &str,
    v: &str,
    reason: &'static str,
) {
    if ok {
        map.remove(name);
    } else {
        map.insert(name.to_owned(), unsupported(name, v, reason));
    }
}

impl SecurityExtras {
    /// Takes `name` if it is one of these properties; `false` if not.
    pub(crate) fn property(&mut self, name: &str, v: &str) -> Result<bool, PropertyError> {
        let is = |accepted: &[&str]| accepted.iter().any(|a| a.eq_ignore_ascii_case(v));
        let tls = &mut self.tls_refused;
        match name {
            "ssl.protocol" => self.protocol = Some(v.to_owned()),
            "ssl.enabled.protocols" => self.enabled = Some(v.to_owned()),
            "ssl.truststore.type" => self.truststore_type = Some(v.to_owned()),
            "ssl.truststore.location" => self.truststore_location = path(v),
            "ssl.keystore.type" => self.keystore_type = Some(v.to_owned()),
            "ssl.keystore.location" => self.keystore_location = path(v),
            // A password matters only with what it opens (checked in `apply_tls`).
            "ssl.key.password" => self.key_password = !v.is_empty(),
            "ssl.keystore.password" => self.keystore_password = !v.is_empty(),
            "ssl.truststore.password" => self.truststore_password = !v.is_empty(),
            "ssl.truststore.certificates"
            | "ssl.keystore.certificate.chain"
            | "ssl.keystore.key"
            | "ssl.ca.pem"
            | "ssl.certificate.pem"
            | "ssl.key.pem" => {
                refuse_unless(tls, v.is_empty(), name, "(hidden)", NO_INLINE_PEM);
            }
            // JSSE names: SunX509 (or its PKIX variant) picks the one key a PEM store
            // holds; PKIX is the path validation rustls does.
            "ssl.keymanager.algorithm" => refuse_unless(
                tls,
                is(&["SunX509", "PKIX", "NewSunX509"]),
                name,
                v,
                "kprod's client key is the one PEM key given (SunX509 or PKIX)",
            ),
            "ssl.trustmanager.algorithm" => refuse_unless(
                tls,
                is(&["PKIX"]),
                name,
                v,
                "kprod validates the broker's chain by PKIX (RFC 5280) path validation",
            ),
            "ssl.cipher.suites" => refuse_unless(
                tls,
                v.is_empty(),
                name,
                v,
                "kprod uses rustls's cipher suites (TLS 1.3 and the TLS 1.2 ECDHE AEAD \
                 suites); leave it empty",
            ),
            "ssl.provider"
            | "ssl.engine.factory.class"
            | "ssl.secure.random.implementation"
            | "security.providers"
            | "ssl.engine.location"
            | "ssl.providers" => refuse_unless(tls, v.is_empty(), name, v, NO_JAVA_TLS),
            // librdkafka.
            "ssl.engine.id" => refuse_unless(tls, is(&["dynamic"]), name, v, NO_JAVA_TLS),
            "enable.ssl.certificate.verification" => {
                let on = crate::properties::boolean(name, v)?;
                refuse_unless(
                    tls,
                    on,
                    name,
                    v,
                    "kprod always verifies the broker's certificate chain; \
                     ssl.endpoint.identification.algorithm= (empty) skips only the host \
                     name check",
                );
            }
            "ssl.ca.certificate.stores" => refuse_unless(
                tls,
                is(&["Root"]),
                name,
                v,
                "kprod reads the system's trusted roots, or the PEM file in ssl.ca.location",
            ),
            "ssl.curves.list" | "ssl.sigalgs.list" => refuse_unless(
                tls,
                v.is_empty(),
                name,
                v,
                "kprod uses rustls's key exchange groups and signature schemes; leave it empty",
            ),
            "ssl.crl.location" => refuse_unless(
                tls,
                v.is_empty(),
                name,
                v,
                "kprod does not check certificate revocation lists",
            ),
            // Kerberos: used only by GSSAPI, which is refused (`sasl.mechanism`).
            "sasl.kerberos.service.name"
            | "sasl.kerberos.kinit.cmd"
            | "sasl.kerberos.min.time.before.relogin"
            | "sasl.kerberos.ticket.renew.jitter"
            | "sasl.kerberos.ticket.renew.window.factor"
            | "sasl.kerberos.principal"
            | "sasl.kerberos.keytab" => {}
            "sasl.login.class"
            | "sasl.client.callback.handler.class"
            | "sasl.login.callback.handler.class" => {
                refuse_unless(
                    &mut self.sasl_refused,
                    v.is_empty(),
                    name,
                    v,
                    NO_SASL_CLASSES,
                );
            }
            // What asks for a token retrieval of the client's own.
            "sasl.oauthbearer.token.endpoint.url"
            | "sasl.oauthbearer.client.credentials.client.id"
            | "sasl.oauthbearer.client.credentials.client.secret"
            | "sasl.oauthbearer.assertion.file"
            | "sasl.oauthbearer.assertion.private.key.file"
            | "sasl.oauthbearer.assertion.template.file"
            | "sasl.oauthbearer.config"
            | "sasl.oauthbearer.client.id"
            | "sasl.oauthbearer.client.secret"
            | "sasl.oauthbearer.assertion.private.key.pem"
            | "sasl.oauthbearer.assertion.jwt.template.file"
            | "https.ca.location"
            | "https.ca.pem" => {
                // Secrets, inline keys and librdkafka's `sasl.oauthbearer.config` (marked
                // sensitive there: it may carry a token) are not shown.
                let value = if name.contains("secret")
                    || name.ends_with(".pem")
                    || name == "sasl.oauthbearer.config"
                {
                    "(hidden)"
                } else {
                    v
                };
                refuse_unless(
                    &mut self.oauth_refused,
                    v.is_empty(),
                    name,
                    value,
                    OAUTH_PROVIDER,
                );
            }
            "sasl.oauthbearer.jwt.retriever.class" => refuse_unless(
                &mut self.oauth_refused,
                v.is_empty() || v == DEFAULT_JWT_RETRIEVER,
                name,
                v,
                OAUTH_PROVIDER,
            ),
            "sasl.oauthbearer.method" => refuse_unless(
                &mut self.oauth_refused,
                is(&["default"]),
                name,
                v,
                OAUTH_PROVIDER,
            ),
            "enable.sasl.oauthbearer.unsecure.jwt" => {
                let on = crate::properties::boolean(name, v)?;
                refuse_unless(&mut self.oauth_refused, !on, name, v, OAUTH_PROVIDER);
            }
            // The tuning of a token retrieval kprod does not do (refused above when asked
            // for): no effect, as in the Java client with a callback handler of its own.
            _ if name.starts_with("sasl.login.")
                && [
                    "refresh.buffer.seconds",
                    "refresh.min.period.seconds",
                    "refresh.window.factor",
                    "refresh.window.jitter",
                    "retry.backoff.max.ms",
                    "retry.backoff.ms",
                    "connect.timeout.ms",
                    "read.timeout.ms",
                ]
                .contains(&&name["sasl.login.".len()..]) => {}
            _ if name.starts_with("sasl.oauthbearer.")
                && [
                    "allow.unverified.audience",
                    "allow.unverified.issuer",
                    "assertion.algorithm",
                    "assertion.claim.aud",
                    "assertion.claim.exp.seconds",
                    "assertion.claim.iss",
                    "assertion.claim.jti.include",
                    "assertion.claim.nbf.seconds",
                    "assertion.claim.sub",
                    "assertion.private.key.passphrase",
                    "clock.skew.seconds",
                    "expected.audience",
                    "expected.issuer",
                    "header.urlencode",
                    "jwks.endpoint.refresh.ms",
                    "jwks.endpoint.retry.backoff.max.ms",
                    "jwks.endpoint.retry.backoff.ms",
                    "jwks.endpoint.url",
                    "jwt.validator.class",
                    "scope",
                    "scope.claim.name",
                    "sub.claim.name",
                    "grant.type",
                    "metadata.authentication.type",
                ]
                .contains(&&name["sasl.oauthbearer.".len()..]) => {}
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// Applies the TLS settings to `tls`, for a protocol that uses TLS.
    pub(crate) fn apply_tls(&self, tls: &mut TlsOptions) -> Result<(), PropertyError> {
        if let Some(e) = self.tls_refused.values().next() {
            return Err(e.clone());
        }
        let hidden = |name: &str| unsupported(name, "(hidden)", NO_PASSWORDS);
        // A store type counts only with a store (Java ignores it otherwise).
        let pem =
            |ty: &Option<String>| ty.as_deref().is_some_and(|t| t.eq_ignore_ascii_case("PEM"));
        // A store kprod reads: PEM only.
        let pem_only = |property: &str, ty: &Option<String>, location: &PathBuf| {
            if pem(ty) {
                Ok(())
            } else {
                Err(unsupported(
                    property,
                    &location.display().to_string(),
                    PEM_ONLY,
                ))
            }
        };
        if let Some(location) = &self.truststore_location {
            pem_only("ssl.truststore.location", &self.truststore_type, location)?;
            if tls.ca_location.as_ref().is_some_and(|ca| ca != location) {
                return Err(PropertyError::Invalid {
                    property: "ssl.truststore.location".to_owned(),
                    value: location.display().to_string(),
                    expected: "the same file as ssl.ca.location (give one of the two)",
                });
            }
            tls.ca_location = Some(location.clone());
            tls.ca_property = "ssl.truststore.location";
        }
        if let Some(location) = &self.keystore_location {
            pem_only("ssl.keystore.location", &self.keystore_type, location)?;
            if tls.certificate_location.is_some() || tls.key_location.is_some() {
                return Err(PropertyError::Invalid {
                    property: "ssl.keystore.location".to_owned(),
                    value: location.display().to_string(),
                    expected: "no ssl.certificate.location or ssl.key.location beside it \
                               (the PEM key store holds both)",
                });
            }
            // One PEM file holding the private key and the certificate chain.
            tls.certificate_location = Some(location.clone());
            tls.key_location = Some(location.clone());
            tls.certificate_property = "ssl.keystore.location";
            tls.key_property = "ssl.keystore.location";
        }
        // Passwords once the stores are known to be PEM (a JKS store is refused for that).
        if self.truststore_password && self.truststore_location.is_some() {
            return Err(hidden("ssl.truststore.password"));
        }
        if self.keystore_password && self.keystore_location.is_some() {
            return Err(hidden("ssl.keystore.password"));
        }
        // The key's password: of the PEM key store's key, or of librdkafka's ssl.key.location.
        if self.key_password && tls.key_location.is_some() {
            return Err(hidden("ssl.key.password"));
        }
        let (mut tls12, mut tls13) = (true, true);
        if let Some(list) = self.enabled.as_deref().filter(|l| !l.trim().is_empty()) {
            (tls12, tls13) = (false, false);
            for p in list.split(',').map(str::trim).filter(|p| !p.is_empty()) {
                match p.to_ascii_uppercase().as_str() {
                    "TLSV1.2" => tls12 = true,
                    "TLSV1.3" => tls13 = true,
                    // Older Kafka defaults list these too; current JVMs disable them, and
                    // rustls has none: what is left of the list is used.
                    "TLSV1.1" | "TLSV1" | "SSLV3" => {}
                    _ => {
                        return Err(unsupported(
                            "ssl.enabled.protocols",
                            list,
                            "kprod speaks TLS 1.2 and 1.3 only (TLSv1.2, TLSv1.3)",
                        ))
                    }
                }
            }
        }
        match self
            .protocol
            .as_deref()
            .map(str::to_ascii_uppercase)
            .as_deref()
        {
            None | Some("TLS") | Some("TLSV1.3") => {}
            // As in Java: an SSLContext for TLS 1.2 never negotiates 1.3.
            Some("TLSV1.2") => tls13 = false,
            Some(_) => {
                return Err(unsupported(
                    "ssl.protocol",
                    self.protocol.as_deref().unwrap_or_default(),
                    "kprod speaks TLS 1.2 and 1.3 only (TLS, TLSv1.2, TLSv1.3)",
                ))
            }
        }
        if !tls12 && !tls13 {
            return Err(PropertyError::Invalid {
                property: "ssl.enabled.protocols".to_owned(),
                value: self.enabled.clone().unwrap_or_default(),
                expected: "TLSv1.2 or TLSv1.3 (with ssl.protocol=TLSv1.2, TLSv1.2 among them)",
            });
        }
        tls.tls12 = tls12;
        tls.tls13 = tls13;
        Ok(())
    }

    /// The refusal a SASL protocol with `mechanism` raises, if any.
    pub(crate) fn check_sasl(&self, mechanism: Option<SaslMechanism>) -> Result<(), PropertyError> {
        if let Some(e) = self.sasl_refused.values().next() {
            return Err(e.clone());
        }
        if mechanism == Some(SaslMechanism::OAuthBearer) {
            if let Some(e) = self.oauth_refused.values().next() {
                return Err(e.clone());
            }
        }
        Ok(())
    }
}

//! TLS connections (`security.protocol=SSL`) through rustls with the ring provider.
//!
//! Trusted roots: `ssl.ca.location` when given, else the operating system's trust store
//! (`rustls-native-certs`), as librdkafka (OpenSSL's default store) and the Java client (the
//! JVM's store) do; an organisation's private CA installed on the host is then trusted without
//! configuration, which a compiled-in list (webpki-roots) would not do.
//!
//! Verification is on by default: the chain must lead to a trusted root and be within its
//! validity dates, and the certificate must be valid for the host (DNS name or IP address) in
//! the broker address. The host is also sent as SNI (except for IP addresses, which SNI cannot
//! carry). `ssl.endpoint.identification.algorithm=` (empty) drops only the host-name check.
//!
//! Errors: [`TlsConnector::fatal_reason`] classifies a certificate rejected by either side as a
//! refusal that no retry of the connection can fix (the core treats it as a refused SASL
//! handshake; see the crate documentation); everything else (refused, reset, a handshake cut
//! short) is an ordinary connection failure that the core retries.

use std::fmt;
use std::io;
use std::path::Path;
use std::sync::Arc;

use tokio::net::TcpStream;
use tokio_rustls::rustls::client::danger::{
    HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier,
};
use tokio_rustls::rustls::client::verify_server_cert_signed_by_trust_anchor;
use tokio_rustls::rustls::crypto::{
    ring, verify_tls12_signature, verify_tls13_signature, CryptoProvider,
};
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use tokio_rustls::rustls::server::ParsedCertificate;
use tokio_rustls::rustls::{
    AlertDescription, CertificateError, ClientConfig, DigitallySignedStruct, Error as TlsError,
    RootCertStore, SignatureScheme,
};

use crate::{Connector, PropertyError, SocketOptions, TcpConnector, TlsOptions};

/// Opens TLS connections to brokers over [`TcpConnector`]'s TCP. Built from [`TlsOptions`]
/// with [`TlsConnector::new`], which reads the certificate and key files once.
///
/// Its `Debug` output names the files and the number of trusted roots, never key material.
#[derive(Clone)]
pub struct TlsConnector {
    config: Arc<ClientConfig>,
    options: TlsOptions,
    roots: usize,
    tcp: TcpConnector,
}

impl fmt::Debug for TlsConnector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsConnector")
            .field("ca_location", &self.options.ca_location)
            .field("trusted_roots", &self.roots)
            .field("certificate_location", &self.options.certificate_location)
            .field("key_location", &self.options.key_location)
            .field("verify_hostname", &self.options.verify_hostname)
            .field("tls12", &self.options.tls12)
            .field("tls13", &self.options.tls13)
            .field("socket", &self.tcp.options())
            .finish_non_exhaustive()
    }
}

/// The server name of a TLS connection to `addr`, or why its host cannot be one (rustls'
/// rules: `bad!host`, `a..b`, a last label of digits or hex such as `kafka.0x1f`).
pub(crate) fn server_name(addr: &str) -> Result<ServerName<'static>, String> {
    let host = host_of(addr);
    ServerName::try_from(host.to_owned()).map_err(|e| {
        format!("TLS: {host:?} (from broker address {addr:?}) is not a valid TLS server name: {e}")
    })
}

fn file_error(property: &str, path: &Path, reason: impl ToString) -> PropertyError {
    PropertyError::File {
        property: property.to_owned(),
        path: path.to_owned(),
        reason: reason.to_string(),
    }
}

fn read_certs(property: &str, path: &Path) -> Result<Vec<CertificateDer<'static>>, PropertyError> {
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| file_error(property, path, format!("cannot read: {e}")))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| file_error(property, path, format!("not a PEM certificate file: {e}")))?;
    if certs.is_empty() {
        return Err(file_error(
            property,
            path,
            "holds no PEM certificate (-----BEGIN CERTIFICATE-----)",
        ));
    }
    Ok(certs)
}

impl TlsConnector {
    /// Reads the CA file (or the system trust store), the client certificate and its key.
    ///
    /// # Errors
    /// A [`PropertyError::File`] naming the property whose file cannot be read or parsed, or
    /// whose key does not match its certificate; [`PropertyError::Invalid`] when no trusted
    /// root is left, no TLS version is enabled (or the provider refuses those that are), or
    /// only one of the client certificate and its key is given.
    pub fn new(options: &TlsOptions) -> Result<Self, PropertyError> {
        let mut roots = RootCertStore::empty();
        match &options.ca_location {
            Some(path) => {
                for cert in read_certs(options.ca_property, path)? {
                    roots.add(cert).map_err(|e| {
                        file_error(
                            options.ca_property,
                            path,
                            format!("unusable CA certificate: {e}"),
                        )
                    })?;
                }
            }
            None => {
                let found = rustls_native_certs::load_native_certs();
                for e in &found.errors {
                    tracing::warn!(error = %e, "while loading the system's trusted certificates");
                }
                // Like every TLS client reading a system store: skip what rustls cannot parse.
                let (_added, _ignored) = roots.add_parsable_certificates(found.certs);
            }
        }
        if roots.is_empty() {
            return Err(PropertyError::Invalid {
                property: options.ca_property.to_owned(),
                value: String::new(),
                expected: "a PEM file of CA certificates: the system's trust store holds none",
            });
        }
        let provider = Arc::new(ring::default_provider());
        if !options.tls12 && !options.tls13 {
            return Err(PropertyError::Invalid {
                property: "ssl.enabled.protocols".to_owned(),
                value: String::new(),
                expected: "TLSv1.2 or TLSv1.3 (TlsOptions::tls12 or tls13)",
            });
        }
        let versions: Vec<&'static tokio_rustls::rustls::SupportedProtocolVersion> = [
            (options.tls13, &tokio_rustls::rustls::version::TLS13),
            (options.tls12, &tokio_rustls::rustls::version::TLS12),
        ]
        .into_iter()
        .filter_map(|(on, v)| on.then_some(v))
        .collect();
        let builder = ClientConfig::builder_with_provider(provider.clone())
            .with_protocol_versions(&versions)
            .map_err(|e| PropertyError::Invalid {
                property: "security.protocol".to_owned(),
                value: format!("SSL ({e})"),
                expected: "a TLS version the crypto provider supports",
            })?;
        let n_roots = roots.len();
        let roots = Arc::new(roots);
        let builder = if options.verify_hostname {
            builder.with_root_certificates(roots)
        } else {
            builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(ChainOnly { roots, provider }))
        };
        let config = match (&options.certificate_location, &options.key_location) {
            (Some(cert), Some(key)) => {
                let chain = read_certs(options.certificate_property, cert)?;
                let key_der = PrivateKeyDer::from_pem_file(key).map_err(|e| {
                    file_error(
                        options.key_property,
                        key,
                        format!("no unencrypted PEM private key (PKCS#8, PKCS#1 or SEC1): {e}"),
                    )
                })?;
                builder.with_client_auth_cert(chain, key_der).map_err(|e| {
                    file_error(
                        options.key_property,
                        key,
                        format!("unusable with the certificate in {}: {e}", cert.display()),
                    )
                })?
            }
            (None, None) => builder.with_no_client_auth(),
            (Some(_), None) => {
                return Err(PropertyError::Invalid {
                    property: "ssl.key.location".to_owned(),
                    value: String::new(),
                    expected: "the PEM private key of the certificate in ssl.certificate.location",
                })
            }
            (None, Some(_)) => {
                return Err(PropertyError::Invalid {
                    property: "ssl.certificate.location".to_owned(),
                    value: String::new(),
                    expected: "the PEM certificate of the private key in ssl.key.location",
                })
            }
        };
        Ok(Self {
            config: Arc::new(config),
            options: options.clone(),
            roots: n_roots,
            tcp: TcpConnector::default(),
        })
    }

    /// The same connector, its TCP connections opened with `options`.
    #[must_use]
    pub fn with_socket_options(mut self, options: SocketOptions) -> Self {
        self.tcp = TcpConnector::new(options);
        self
    }

    /// Why `error` (from [`Connector::connect`] or from a stream this connector opened) is a
    /// configuration error that no retry fixes, or `None` for an ordinary connection failure.
    pub fn fatal_reason(&self, error: &io::Error) -> Option<String> {
        let inner = error.get_ref()?;
        let tls = inner.downcast_ref::<TlsError>()?;
        let ca = match &self.options.ca_location {
            Some(p) => format!("the CAs in {}={}", self.options.ca_property, p.display()),
            None => "the system's trusted CAs (ssl.ca.location is not set)".to_owned(),
        };
        let client = match &self.options.certificate_location {
            Some(p) => format!(
                "the client certificate {}={}",
                self.options.certificate_property,
                p.display()
            ),
            None => "no client certificate (ssl.certificate.location is not set)".to_owned(),
        };
        Some(match tls {
            TlsError::InvalidCertificate(c) => match c {
                CertificateError::UnknownIssuer => format!(
                    "TLS: the broker's certificate is not signed by a trusted CA: \
                     it was checked against {ca} ({tls})"
                ),
                CertificateError::Expired | CertificateError::ExpiredContext { .. } => {
                    format!("TLS: the broker's certificate has expired ({tls})")
                }
                CertificateError::NotValidYet | CertificateError::NotValidYetContext { .. } => {
                    format!("TLS: the broker's certificate is not valid yet ({tls})")
                }
                CertificateError::NotValidForName
                | CertificateError::NotValidForNameContext { .. } => format!(
                    "TLS: the broker's certificate is not valid for the host name connected \
                     to ({tls}); hostname verification is on \
                     (ssl.endpoint.identification.algorithm=https)"
                ),
                _ => format!("TLS: the broker's certificate was rejected ({tls})"),
            },
            TlsError::NoCertificatesPresented => {
                "TLS: the broker presented no certificate".to_owned()
            }
            TlsError::PeerIncompatible(_) => {
                format!("TLS: the broker has no TLS version or cipher suite in common ({tls})")
            }
            TlsError::AlertReceived(alert) => match alert {
                AlertDescription::CertificateRequired
                | AlertDescription::BadCertificate
                | AlertDescription::UnsupportedCertificate
                | AlertDescription::CertificateRevoked
                | AlertDescription::CertificateExpired
                | AlertDescription::CertificateUnknown
                | AlertDescription::UnknownCA
                | AlertDescription::AccessDenied => format!(
                    "TLS: the broker refused this client's certificate (alert {alert:?}); \
                     this client offered {client}"
                ),
                AlertDescription::HandshakeFailure
                | AlertDescription::ProtocolVersion
                | AlertDescription::InsufficientSecurity => format!(
                    "TLS: the broker refused the handshake (alert {alert:?}): no TLS version or \
                     cipher suite in common, or a client certificate is required and this \
                     client offered {client}"
                ),
                _ => return None,
            },
            _ => return None,
        })
    }
}

/// The host part of `host:port` (brackets removed from an IPv6 literal).
fn host_of(addr: &str) -> &str {
    let host = match addr.rsplit_once(':') {
        Some((h, port)) if !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()) => h,
        _ => addr,
    };
    host.strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host)
}

impl Connector for TlsConnector {
    type Stream = tokio_rustls::client::TlsStream<TcpStream>;

    async fn connect(&self, addr: &str) -> io::Result<Self::Stream> {
        // A broker's address that cannot be a server name fails its connect like an
        // unreachable one: only that broker is affected (a bootstrap server's is refused when
        // the producer starts from properties). Before, it stopped the whole producer as a
        // configuration error, for one broker's advertised name.
        let name =
            server_name(addr).map_err(|why| io::Error::new(io::ErrorKind::InvalidInput, why))?;
        let tcp = self.tcp.connect(addr).await?;
        tokio_rustls::TlsConnector::from(self.config.clone())
            .connect(name, tcp)
            .await
    }

    fn fatal_reason(&self, error: &io::Error) -> Option<String> {
        TlsConnector::fatal_reason(self, error)
    }
}

/// `ssl.endpoint.identification.algorithm=` (empty): the chain is verified against the trusted
/// roots with its validity dates and key usage, exactly as the default verifier does it, and
/// only the host-name check is left out.
#[derive(Debug)]
struct ChainOnly {
    roots: Arc<RootCertStore>,
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, TlsError> {
        let cert = ParsedCertificate::try_from(end_entity)?;
        verify_server_cert_signed_by_trust_anchor(
            &cert,
            &self.roots,
            intermediates,
            now,
            self.provider.signature_verification_algorithms.all,
        )?;
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, TlsError> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, TlsError> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::host_of;

    #[test]
    fn host_of_strips_port_and_brackets() {
        assert_eq!(host_of("broker-1.example:9093"), "broker-1.example");
        assert_eq!(host_of("127.0.0.1:9093"), "127.0.0.1");
        assert_eq!(host_of("[::1]:9093"), "::1");
        assert_eq!(host_of("broker"), "broker");
    }
}

//! SASL authentication: the configuration and the client side of each mechanism, as pure
//! state machines.
//!
//! Mechanisms: `PLAIN` (RFC 4616), `SCRAM-SHA-256` and `SCRAM-SHA-512` (RFC 5802, RFC 7677;
//! feature `scram`, which brings `hmac`, `sha2` and `pbkdf2`), and `OAUTHBEARER` (RFC 7628,
//! KIP-255) with a token the driver supplies.
//!
//! The core has no randomness and no token source, so two things come from the driver as
//! inputs when the producer asks for them with [`crate::Output::SaslInput`]: the SCRAM client
//! nonce ([`SaslInput::Nonce`]) and the OAUTHBEARER token ([`SaslInput::Token`]). A model or a
//! simulation that never configures SASL is untouched, and one that does stays deterministic
//! by answering with fixed values.
//!
//! Secrets (the password, a token, SCRAM's derived keys) are held in [`Secret`]s, whose
//! `Debug` output is redacted, so neither the configuration nor the producer's state prints
//! them.

use bytes::Bytes;

use crate::ConfigError;

/// A secret string (a password or a token): compared and hashed like a string, but its
/// `Debug` output never shows it.
#[derive(Clone, PartialEq, Eq, Hash, Default)]
pub struct Secret(String);

impl Secret {
    /// Wraps a secret.
    pub fn new(secret: impl Into<String>) -> Self {
        Self(secret.into())
    }

    /// The secret itself.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

impl From<&str> for Secret {
    fn from(s: &str) -> Self {
        Self::new(s)
    }
}

impl From<String> for Secret {
    fn from(s: String) -> Self {
        Self(s)
    }
}

/// A SASL mechanism (`sasl.mechanism`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SaslMechanism {
    /// `PLAIN`: user name and password in the clear (use it over TLS only).
    Plain,
    /// `SCRAM-SHA-256` (needs kprod-core's `scram` feature).
    ScramSha256,
    /// `SCRAM-SHA-512` (needs kprod-core's `scram` feature).
    ScramSha512,
    /// `OAUTHBEARER`: a bearer token the driver supplies on request.
    OAuthBearer,
}

impl SaslMechanism {
    /// The mechanism's name on the wire and in `sasl.mechanism`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Plain => "PLAIN",
            Self::ScramSha256 => "SCRAM-SHA-256",
            Self::ScramSha512 => "SCRAM-SHA-512",
            Self::OAuthBearer => "OAUTHBEARER",
        }
    }

    /// Parses a `sasl.mechanism` value (case-insensitive).
    pub fn from_name(name: &str) -> Option<Self> {
        [
            Self::Plain,
            Self::ScramSha256,
            Self::ScramSha512,
            Self::OAuthBearer,
        ]
        .into_iter()
        .find(|m| m.name().eq_ignore_ascii_case(name))
    }
}

impl std::fmt::Display for SaslMechanism {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// SASL settings (`security.protocol=SASL_PLAINTEXT|SASL_SSL`, `sasl.mechanism`,
/// `sasl.username`, `sasl.password`). Every connection authenticates right after ApiVersions
/// and before any other request, and re-authenticates before the session lifetime the broker
/// announces ends (KIP-368).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SaslConfig {
    /// The mechanism.
    pub mechanism: SaslMechanism,
    /// `sasl.username` (PLAIN and SCRAM; unused by OAUTHBEARER).
    pub username: String,
    /// `sasl.password` (PLAIN and SCRAM; unused by OAUTHBEARER).
    pub password: Secret,
    /// OAUTHBEARER's SASL extensions (KIP-342, RFC 7628 §3.1), sent with the token as
    /// `key=value` pairs: what some services require beside the token (Confluent Cloud's
    /// `logicalCluster` and `identityPoolId`). librdkafka's `sasl.oauthbearer.extensions`,
    /// the Java client's `extension_<key>` login module options. Keys are letters only and
    /// not `auth`; values printable ASCII, space, tab, CR or LF. Empty for other mechanisms.
    pub extensions: Vec<(String, String)>,
}

impl SaslConfig {
    /// `mechanism` with a user name and password.
    pub fn new(
        mechanism: SaslMechanism,
        username: impl Into<String>,
        password: impl Into<Secret>,
    ) -> Self {
        Self {
            mechanism,
            username: username.into(),
            password: password.into(),
            extensions: Vec::new(),
        }
    }

    /// OAUTHBEARER: tokens come from the driver ([`SaslInput::Token`]).
    pub fn oauthbearer() -> Self {
        Self::new(SaslMechanism::OAuthBearer, "", "")
    }

    /// With an OAUTHBEARER SASL extension (see [`Self::extensions`]).
    #[must_use]
    pub fn with_extension(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.extensions.push((key.into(), value.into()));
        self
    }

    /// Checks what can be checked before connecting.
    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        let err = |setting: &'static str, reason: &str| ConfigError {
            setting,
            reason: reason.to_owned(),
        };
        match self.mechanism {
            SaslMechanism::OAuthBearer => return self.validate_extensions(),
            SaslMechanism::ScramSha256 | SaslMechanism::ScramSha512 if !cfg!(feature = "scram") => {
                return Err(err(
                    "sasl.mechanism",
                    "SCRAM needs kprod-core's `scram` feature (on by default in kprod-tokio)",
                ))
            }
            _ => {}
        }
        if !self.extensions.is_empty() {
            return Err(err(
                "sasl.oauthbearer.extensions",
                "SASL extensions are OAUTHBEARER's only",
            ));
        }
        if self.username.is_empty() {
            return Err(err("sasl.username", "must be set for PLAIN and SCRAM"));
        }
        if self.username.contains('\0') {
            return Err(err("sasl.username", "must not contain NUL"));
        }
        if self.password.expose().contains('\0') {
            return Err(err("sasl.password", "must not contain NUL"));
        }
        Ok(())
    }
}

impl SaslConfig {
    /// KIP-342's rules, as Kafka's `OAuthBearerClientInitialResponse` checks them: a key is
    /// letters only and not `auth` (the token's own key), given once; a value is printable
    /// ASCII, space, tab, CR or LF, and not empty.
    fn validate_extensions(&self) -> Result<(), ConfigError> {
        let err = |reason: String| ConfigError {
            setting: "sasl.oauthbearer.extensions",
            reason,
        };
        for (i, (key, value)) in self.extensions.iter().enumerate() {
            if key.is_empty() || !key.bytes().all(|b| b.is_ascii_alphabetic()) {
                return Err(err(format!(
                    "extension key {key:?}: letters only (KIP-342)"
                )));
            }
            if key == "auth" {
                return Err(err("extension key \"auth\" is the token's own".to_owned()));
            }
            if self.extensions[..i].iter().any(|(k, _)| k == key) {
                return Err(err(format!("extension key {key:?} given twice")));
            }
            let value_ok = |b: u8| (0x21..=0x7e).contains(&b) || b" \t\r\n".contains(&b);
            if value.is_empty() || !value.bytes().all(value_ok) {
                return Err(err(format!(
                    "extension {key:?}: a value of printable ASCII, space, tab, CR or LF"
                )));
            }
        }
        Ok(())
    }
}

/// What the producer needs from the driver to go on authenticating a connection
/// ([`crate::Output::SaslInput`]); answer with [`crate::Producer::handle_sasl_input`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SaslNeed {
    /// A fresh SCRAM client nonce: at least 16 unpredictable printable ASCII characters,
    /// no comma (for instance 24 random bytes, hex- or base64-encoded), never reused.
    Nonce,
    /// The current OAUTHBEARER token (a compact JWS).
    Token,
}

/// The driver's answer to a [`SaslNeed`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum SaslInput {
    /// A SCRAM client nonce.
    Nonce(String),
    /// An OAUTHBEARER token.
    Token(Secret),
    /// The driver cannot supply it (the token provider failed): that connection's
    /// authentication fails ([`crate::Diagnostic::HandshakeFailed`]; before any connection
    /// completed its handshake, [`crate::FatalError::Authentication`]).
    Unavailable(String),
}

/// SASL error codes (not in [`crate::protocol::ErrorCode`]: only the exchange uses them).
pub(crate) const UNSUPPORTED_SASL_MECHANISM: i16 = 33;
pub(crate) const ILLEGAL_SASL_STATE: i16 = 34;
pub(crate) const SASL_AUTHENTICATION_FAILED: i16 = 58;

/// The name of a SASL-related error code, for messages.
pub(crate) fn code_name(code: i16) -> String {
    match code {
        UNSUPPORTED_SASL_MECHANISM => "UNSUPPORTED_SASL_MECHANISM (33)".to_owned(),
        ILLEGAL_SASL_STATE => "ILLEGAL_SASL_STATE (34)".to_owned(),
        SASL_AUTHENTICATION_FAILED => "SASL_AUTHENTICATION_FAILED (58)".to_owned(),
        c => crate::protocol::ErrorCode::from_i16(c).to_string(),
    }
}

/// The next step of an exchange.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Step {
    /// Send these bytes in a SaslAuthenticate request.
    Send(Bytes),
    /// Ask the driver for this.
    Need(SaslNeed),
    /// The client is satisfied; the server's answer to the last request decides.
    Done,
    /// The exchange failed on the client side: why.
    Fail(String),
}

/// The client side of one authentication exchange.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Exchange {
    /// PLAIN: one message, then the server's empty answer.
    Plain,
    /// OAUTHBEARER.
    OAuth(OAuthState),
    /// SCRAM-SHA-256 or -512.
    Scram(ScramState),
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum OAuthState {
    AwaitToken,
    Sent,
    /// The server answered the token with an error challenge (RFC 7628 §3.2.2); we sent the
    /// dummy `%x01` and wait for its failure.
    Rejected(String),
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum ScramState {
    AwaitNonce,
    AwaitServerFirst {
        nonce: String,
        client_first_bare: String,
    },
    AwaitServerFinal {
        server_signature: Secret,
    },
    Done,
}

/// The last SCRAM salted password (`Hi(password, salt, i)`, RFC 5802 §3) and what it was
/// derived from: Kafka keeps one salt and iteration count per user, so every broker's
/// exchange, reconnects and re-authentications included, reuses it instead of running
/// PBKDF2 again (4,096 to 100,000 rounds, while the driver holds the producer: every
/// application thread waited for it at each handshake, a review finding).
#[derive(Clone, PartialEq, Eq, Hash, Default)]
pub(crate) struct SaltedCache(Option<(SaslMechanism, Vec<u8>, u32, Vec<u8>)>);

impl std::fmt::Debug for SaltedCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.0 {
            Some((m, _, i, _)) => write!(f, "SaltedCache({m:?}, {i} iterations, (hidden))"),
            None => f.write_str("SaltedCache(empty)"),
        }
    }
}

impl SaltedCache {
    /// The salted password of `password` for `(mechanism, salt, iterations)`: the one kept
    /// if it matches, else derived and kept. `None` without the `scram` feature.
    fn salted(
        &mut self,
        mechanism: SaslMechanism,
        password: &[u8],
        salt: &[u8],
        iterations: u32,
    ) -> Option<&[u8]> {
        let hit = matches!(&self.0, Some((m, s, i, _)) if *m == mechanism && s == salt && *i == iterations);
        if !hit {
            let salted = scram::salted(mechanism, password, salt, iterations)?;
            self.0 = Some((mechanism, salt.to_vec(), iterations, salted));
        }
        self.0.as_ref().map(|(_, _, _, salted)| salted.as_slice())
    }
}

impl Exchange {
    /// Starts an exchange for `cfg`.
    pub(crate) fn start(cfg: &SaslConfig) -> (Self, Step) {
        match cfg.mechanism {
            SaslMechanism::Plain => {
                let mut msg = Vec::with_capacity(cfg.username.len() + cfg.password.0.len() + 2);
                msg.push(0);
                msg.extend_from_slice(cfg.username.as_bytes());
                msg.push(0);
                msg.extend_from_slice(cfg.password.0.as_bytes());
                (Self::Plain, Step::Send(Bytes::from(msg)))
            }
            SaslMechanism::OAuthBearer => (
                Self::OAuth(OAuthState::AwaitToken),
                Step::Need(SaslNeed::Token),
            ),
            SaslMechanism::ScramSha256 | SaslMechanism::ScramSha512 => (
                Self::Scram(ScramState::AwaitNonce),
                Step::Need(SaslNeed::Nonce),
            ),
        }
    }

    /// The driver's answer to a `Step::Need`.
    pub(crate) fn input(&mut self, cfg: &SaslConfig, input: SaslInput) -> Step {
        match (self, input) {
            (_, SaslInput::Unavailable(why)) => Step::Fail(why),
            (Self::OAuth(s @ OAuthState::AwaitToken), SaslInput::Token(token)) => {
                let t = token.expose();
                if t.is_empty() || t.bytes().any(|b| !(0x21..=0x7e).contains(&b)) {
                    return Step::Fail(
                        "the token provider returned an empty or malformed token".into(),
                    );
                }
                *s = OAuthState::Sent;
                // RFC 7628 §3.1: gs2 header without authzid, the auth key-value pair, then
                // the extensions' (KIP-342), each ended by ^A, and a final ^A.
                let mut msg = format!("n,,\x01auth=Bearer {t}\x01");
                for (k, v) in &cfg.extensions {
                    msg.push_str(&format!("{k}={v}\x01"));
                }
                msg.push('\x01');
                Step::Send(Bytes::from(msg))
            }
            (Self::Scram(s @ ScramState::AwaitNonce), SaslInput::Nonce(nonce)) => {
                if nonce.len() < 16
                    || nonce
                        .bytes()
                        .any(|b| !(0x21..=0x7e).contains(&b) || b == b',')
                {
                    return Step::Fail(
                        "the driver's SCRAM nonce is not 16+ printable characters without a comma"
                            .into(),
                    );
                }
                let client_first_bare = format!("n={},r={nonce}", sasl_name(&cfg.username));
                let msg = format!("n,,{client_first_bare}");
                *s = ScramState::AwaitServerFirst {
                    nonce,
                    client_first_bare,
                };
                Step::Send(Bytes::from(msg))
            }
            _ => Step::Fail("unexpected SASL input".into()),
        }
    }

    /// The server's bytes from a successful SaslAuthenticate response.
    pub(crate) fn server(
        &mut self,
        cfg: &SaslConfig,
        bytes: &[u8],
        cache: &mut SaltedCache,
    ) -> Step {
        match self {
            Self::Plain => Step::Done,
            Self::OAuth(s) => match s {
                OAuthState::Sent if bytes.is_empty() => Step::Done,
                OAuthState::Sent => {
                    // An error challenge: answer `%x01`; the server then fails the exchange.
                    *s = OAuthState::Rejected(String::from_utf8_lossy(bytes).into_owned());
                    Step::Send(Bytes::from_static(b"\x01"))
                }
                OAuthState::Rejected(e) => Step::Fail(format!("the token was rejected: {e}")),
                OAuthState::AwaitToken => Step::Fail("unexpected server message".into()),
            },
            Self::Scram(s) => scram_server(s, cfg, bytes, cache),
        }
    }

    /// Detail to add to the broker's error message, if the exchange learned any.
    pub(crate) fn failure_detail(&self) -> Option<&str> {
        match self {
            Self::OAuth(OAuthState::Rejected(e)) => Some(e),
            _ => None,
        }
    }
}

/// RFC 5802 §5.1: `=` and `,` in a user name become `=3D` and `=2C`.
fn sasl_name(name: &str) -> String {
    name.replace('=', "=3D").replace(',', "=2C")
}

/// Kafka's stores use at least 4096 iterations; the cap bounds the work a hostile server can
/// make the producer do (Kafka's own tools allow at most 16384).
const SCRAM_MIN_ITERATIONS: u32 = 4096;
const SCRAM_MAX_ITERATIONS: u32 = 100_000;

fn scram_server(
    s: &mut ScramState,
    cfg: &SaslConfig,
    bytes: &[u8],
    cache: &mut SaltedCache,
) -> Step {
    let Ok(msg) = std::str::from_utf8(bytes) else {
        return Step::Fail("the server's SCRAM message is not UTF-8".into());
    };
    match std::mem::replace(s, ScramState::Done) {
        ScramState::AwaitServerFirst {
            nonce,
            client_first_bare,
        } => {
            let attr = |k: char| {
                msg.split(',')
                    .find_map(|a| a.strip_prefix(k).and_then(|a| a.strip_prefix('=')))
            };
            if msg.starts_with("m=") {
                return Step::Fail("the server requires an unsupported SCRAM extension".into());
            }
            if let Some(e) = attr('e') {
                return Step::Fail(format!("the server refused: {e}"));
            }
            let (Some(server_nonce), Some(salt), Some(iterations)) =
                (attr('r'), attr('s'), attr('i'))
            else {
                return Step::Fail("malformed SCRAM server-first message".into());
            };
            if !server_nonce.starts_with(&nonce) || server_nonce.len() == nonce.len() {
                return Step::Fail("the server's SCRAM nonce does not extend ours".into());
            }
            let Some(salt) = base64_decode(salt) else {
                return Step::Fail("the server's SCRAM salt is not base64".into());
            };
            let iterations: u32 = match iterations.parse() {
                Ok(i) if (SCRAM_MIN_ITERATIONS..=SCRAM_MAX_ITERATIONS).contains(&i) => i,
                _ => {
                    return Step::Fail(format!(
                        "SCRAM iteration count {iterations:?} outside {SCRAM_MIN_ITERATIONS}..={SCRAM_MAX_ITERATIONS}"
                    ))
                }
            };
            // Channel binding "n,," is "biws" in base64.
            let without_proof = format!("c=biws,r={server_nonce}");
            let auth_message = format!("{client_first_bare},{msg},{without_proof}");
            let password = cfg.password.expose().as_bytes();
            let Some((proof, server_signature)) = cache
                .salted(cfg.mechanism, password, &salt, iterations)
                .and_then(|salted| scram::keys(cfg.mechanism, salted, auth_message.as_bytes()))
            else {
                return Step::Fail("SCRAM needs kprod-core's `scram` feature".into());
            };
            *s = ScramState::AwaitServerFinal {
                server_signature: Secret(base64_encode(&server_signature)),
            };
            Step::Send(Bytes::from(format!(
                "{without_proof},p={}",
                base64_encode(&proof)
            )))
        }
        ScramState::AwaitServerFinal { server_signature } => {
            if let Some(e) = msg.strip_prefix("e=") {
                return Step::Fail(format!("the server refused: {e}"));
            }
            let v = msg.split(',').find_map(|a| a.strip_prefix("v="));
            if v == Some(server_signature.expose()) {
                Step::Done
            } else {
                Step::Fail(
                    "the server's SCRAM signature is wrong: it does not know the credentials"
                        .into(),
                )
            }
        }
        _ => Step::Fail("unexpected SCRAM server message".into()),
    }
}

#[cfg(feature = "scram")]
mod scram {
    use hmac::{Hmac, Mac};
    use sha2::{Digest, Sha256, Sha512};

    use super::SaslMechanism;

    /// `Hi(password, salt, i)`: PBKDF2 with the mechanism's HMAC.
    pub(super) fn salted(
        mechanism: SaslMechanism,
        password: &[u8],
        salt: &[u8],
        iterations: u32,
    ) -> Option<Vec<u8>> {
        Some(match mechanism {
            SaslMechanism::ScramSha256 => {
                let mut salted = vec![0u8; <Sha256 as Digest>::output_size()];
                pbkdf2::pbkdf2_hmac::<Sha256>(password, salt, iterations, &mut salted);
                salted
            }
            SaslMechanism::ScramSha512 => {
                let mut salted = vec![0u8; <Sha512 as Digest>::output_size()];
                pbkdf2::pbkdf2_hmac::<Sha512>(password, salt, iterations, &mut salted);
                salted
            }
            _ => return None,
        })
    }

    macro_rules! keys_with {
        ($hash:ty, $salted:expr, $auth:expr) => {{
            type H = Hmac<$hash>;
            let salted: &[u8] = $salted;
            let hmac = |key: &[u8], data: &[u8]| -> Vec<u8> {
                let mut m = <H as Mac>::new_from_slice(key).expect("HMAC takes any key length");
                m.update(data);
                m.finalize().into_bytes().to_vec()
            };
            let client_key = hmac(salted, b"Client Key");
            let stored_key = <$hash>::digest(&client_key);
            let client_signature = hmac(&stored_key, $auth);
            let proof: Vec<u8> = client_key
                .iter()
                .zip(&client_signature)
                .map(|(a, b)| a ^ b)
                .collect();
            let server_key = hmac(salted, b"Server Key");
            (proof, hmac(&server_key, $auth))
        }};
    }

    /// The client proof and the expected server signature (RFC 5802 §3), from the salted
    /// password.
    pub(super) fn keys(
        mechanism: SaslMechanism,
        salted: &[u8],
        auth_message: &[u8],
    ) -> Option<(Vec<u8>, Vec<u8>)> {
        Some(match mechanism {
            SaslMechanism::ScramSha256 => keys_with!(Sha256, salted, auth_message),
            SaslMechanism::ScramSha512 => keys_with!(Sha512, salted, auth_message),
            _ => return None,
        })
    }
}

#[cfg(not(feature = "scram"))]
mod scram {
    use super::SaslMechanism;

    pub(super) fn salted(_: SaslMechanism, _: &[u8], _: &[u8], _: u32) -> Option<Vec<u8>> {
        None
    }

    pub(super) fn keys(_: SaslMechanism, _: &[u8], _: &[u8]) -> Option<(Vec<u8>, Vec<u8>)> {
        None
    }
}

const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Standard base64 with padding.
pub(crate) fn base64_encode(data: &[u8]) -> String {
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(B64[(n >> (18 - 6 * i)) as usize & 63] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Standard base64 with padding; `None` if malformed.
pub(crate) fn base64_decode(s: &str) -> Option<Vec<u8>> {
    let s = s.as_bytes();
    if s.len() & 3 != 0 {
        return None;
    }
    let mut out = Vec::with_capacity(s.len() / 4 * 3);
    for (ci, chunk) in s.chunks(4).enumerate() {
        let last = ci == s.len() / 4 - 1;
        let pad = chunk.iter().rev().take_while(|&&c| c == b'=').count();
        if pad > 2 || (pad > 0 && !last) {
            return None;
        }
        let mut n = 0u32;
        for &c in &chunk[..4 - pad] {
            let v = B64.iter().position(|&x| x == c)? as u32;
            n = (n << 6) | v;
        }
        n <<= 6 * pad as u32;
        let bytes = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
        out.extend_from_slice(&bytes[..3 - pad]);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_round_trips() {
        for (raw, enc) in [
            (&b""[..], ""),
            (b"f", "Zg=="),
            (b"fo", "Zm8="),
            (b"foo", "Zm9v"),
            (b"foob", "Zm9vYg=="),
            (b"fooba", "Zm9vYmE="),
            (b"foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(base64_encode(raw), enc);
            assert_eq!(base64_decode(enc).as_deref(), Some(raw));
        }
        for bad in ["Zg=", "Z===", "Zg==Zg==", "Zm9*"] {
            assert_eq!(base64_decode(bad), None, "{bad}");
        }
    }

    #[test]
    fn plain_sends_the_credentials_once() {
        let cfg = SaslConfig::new(SaslMechanism::Plain, "alice", "alice-secret");
        let (mut ex, step) = Exchange::start(&cfg);
        assert_eq!(
            step,
            Step::Send(Bytes::from_static(b"\0alice\0alice-secret"))
        );
        assert_eq!(
            ex.server(&cfg, b"", &mut SaltedCache::default()),
            Step::Done
        );
    }

    /// KIP-342: extensions follow the token, each `key=value` ended by ^A, as Kafka's
    /// `OAuthBearerClientInitialResponse` writes them; invalid ones are a configuration error
    /// naming `sasl.oauthbearer.extensions`.
    #[test]
    fn oauthbearer_sends_its_extensions_after_the_token() {
        let cfg = SaslConfig::oauthbearer()
            .with_extension("logicalCluster", "lkc-abc")
            .with_extension("identityPoolId", "pool-1 x");
        assert!(cfg.validate().is_ok());
        let (mut ex, _) = Exchange::start(&cfg);
        let step = ex.input(&cfg, SaslInput::Token(Secret::new("a.b.")));
        assert_eq!(
            step,
            Step::Send(Bytes::from_static(
                b"n,,\x01auth=Bearer a.b.\x01logicalCluster=lkc-abc\x01identityPoolId=pool-1 x\x01\x01"
            ))
        );
        let bad = |k: &str, v: &str| {
            let e = SaslConfig::oauthbearer().with_extension(k, v).validate();
            e.map_err(|e| (e.setting, e.reason))
        };
        for (k, v) in [
            ("auth", "x"),
            ("a1", "x"),
            ("", "x"),
            ("k", ""),
            ("k", "\x01"),
        ] {
            let e = bad(k, v).expect_err(k);
            assert_eq!(e.0, "sasl.oauthbearer.extensions", "{k}={v:?}: {e:?}");
        }
        let twice = SaslConfig::oauthbearer()
            .with_extension("k", "1")
            .with_extension("k", "2");
        assert!(twice.validate().is_err());
        let plain = SaslConfig::new(SaslMechanism::Plain, "u", "p").with_extension("k", "v");
        assert_eq!(
            plain.validate().unwrap_err().setting,
            "sasl.oauthbearer.extensions"
        );
    }

    #[test]
    fn oauthbearer_asks_for_a_token_and_answers_a_rejection() {
        let cfg = SaslConfig::oauthbearer();
        let (mut ex, step) = Exchange::start(&cfg);
        assert_eq!(step, Step::Need(SaslNeed::Token));
        let step = ex.input(&cfg, SaslInput::Token(Secret::new("a.b.")));
        assert_eq!(
            step,
            Step::Send(Bytes::from_static(b"n,,\x01auth=Bearer a.b.\x01\x01"))
        );
        let mut ok = ex.clone();
        assert_eq!(
            ok.server(&cfg, b"", &mut SaltedCache::default()),
            Step::Done
        );
        let challenge = br#"{"status":"invalid_token"}"#;
        assert_eq!(
            ex.server(&cfg, challenge, &mut SaltedCache::default()),
            Step::Send(Bytes::from_static(b"\x01"))
        );
        assert_eq!(ex.failure_detail(), Some(r#"{"status":"invalid_token"}"#));
        let (mut ex, _) = Exchange::start(&cfg);
        assert!(matches!(
            ex.input(&cfg, SaslInput::Token(Secret::new("has space"))),
            Step::Fail(_)
        ));
    }

    #[test]
    fn debug_never_shows_the_password() {
        let cfg = SaslConfig::new(SaslMechanism::ScramSha256, "alice", "hunter2-pw");
        let text = format!("{cfg:?} {:?}", SaslInput::Token(Secret::new("tok-xyz")));
        assert!(
            !text.contains("hunter2-pw") && !text.contains("tok-xyz"),
            "{text}"
        );
    }

    /// RFC 7677 §3: the SCRAM-SHA-256 example exchange, byte for byte.
    #[cfg(feature = "scram")]
    #[test]
    fn scram_sha_256_rfc7677_example() {
        let cfg = SaslConfig::new(SaslMechanism::ScramSha256, "user", "pencil");
        let (mut ex, step) = Exchange::start(&cfg);
        assert_eq!(step, Step::Need(SaslNeed::Nonce));
        let first = ex.input(&cfg, SaslInput::Nonce("rOprNGfwEbeRWgbNEkqO".into()));
        assert_eq!(
            first,
            Step::Send(Bytes::from_static(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"))
        );
        let server_first = b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096";
        let fin = ex.server(&cfg, server_first, &mut SaltedCache::default());
        assert_eq!(
            fin,
            Step::Send(Bytes::from_static(
                b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
            ))
        );
        let mut forged = ex.clone();
        assert_eq!(
            ex.server(
                &cfg,
                b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=",
                &mut SaltedCache::default()
            ),
            Step::Done
        );
        assert!(matches!(
            forged.server(
                &cfg,
                b"v=AAAATRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=",
                &mut SaltedCache::default()
            ),
            Step::Fail(_)
        ));
    }

    /// A second exchange with the same salt and iteration count reuses the salted password
    /// of the first (no PBKDF2 run): given a wrong password, it still sends the proof the
    /// right one makes, which only the kept salted password can give. Another salt derives
    /// it again (and the wrong password then shows).
    #[cfg(feature = "scram")]
    #[test]
    fn scram_reuses_the_salted_password_for_the_same_salt() {
        let server_first = b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096";
        let expected = Step::Send(Bytes::from_static(
            b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
        ));
        let mut cache = SaltedCache::default();
        let exchange = |password: &str, server_first: &[u8], cache: &mut SaltedCache| {
            let cfg = SaslConfig::new(SaslMechanism::ScramSha256, "user", password);
            let (mut ex, _) = Exchange::start(&cfg);
            ex.input(&cfg, SaslInput::Nonce("rOprNGfwEbeRWgbNEkqO".into()));
            ex.server(&cfg, server_first, cache)
        };
        assert_eq!(exchange("pencil", server_first, &mut cache), expected);
        assert!(!format!("{cache:?}").contains("W22Z"), "{cache:?}");
        assert_eq!(exchange("wrong", server_first, &mut cache), expected);
        let other_salt = b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=QUFBQQ==,i=4096";
        let Step::Send(again) = exchange("pencil", other_salt, &mut cache) else {
            panic!("a proof")
        };
        assert_ne!(Step::Send(again), expected);
        assert_ne!(exchange("wrong", server_first, &mut cache), expected);
    }

    /// SCRAM-SHA-512 has no RFC example: the exchange must agree with itself computed from
    /// the definitions (proof XOR signature gives back the client key whose hash is the
    /// stored key), and the lengths are SHA-512's.
    #[cfg(feature = "scram")]
    #[test]
    fn scram_sha_512_proof_is_consistent() {
        use hmac::{Hmac, Mac};
        use sha2::{Digest, Sha512};
        let cfg = SaslConfig::new(SaslMechanism::ScramSha512, "al=ice,x", "pw");
        let (mut ex, _) = Exchange::start(&cfg);
        let first = ex.input(&cfg, SaslInput::Nonce("0123456789abcdefghij".into()));
        assert_eq!(
            first,
            Step::Send(Bytes::from_static(
                b"n,,n=al=3Dice=2Cx,r=0123456789abcdefghij"
            ))
        );
        let server_first = "r=0123456789abcdefghijSERVER,s=c2FsdA==,i=4096";
        let Step::Send(fin) = ex.server(&cfg, server_first.as_bytes(), &mut SaltedCache::default())
        else {
            panic!("no client-final");
        };
        let fin = std::str::from_utf8(&fin).unwrap();
        let proof = base64_decode(fin.split(",p=").nth(1).unwrap()).unwrap();
        assert_eq!(proof.len(), 64);
        let auth = format!(
            "n=al=3Dice=2Cx,r=0123456789abcdefghij,{server_first},c=biws,r=0123456789abcdefghijSERVER"
        );
        let mut salted = [0u8; 64];
        pbkdf2::pbkdf2_hmac::<Sha512>(b"pw", b"salt", 4096, &mut salted);
        let mac = |k: &[u8], d: &[u8]| {
            let mut m = <Hmac<Sha512> as Mac>::new_from_slice(k).unwrap();
            m.update(d);
            m.finalize().into_bytes().to_vec()
        };
        let stored = Sha512::digest(mac(&salted, b"Client Key"));
        let sig = mac(&stored, auth.as_bytes());
        let client_key: Vec<u8> = proof.iter().zip(&sig).map(|(a, b)| a ^ b).collect();
        assert_eq!(Sha512::digest(&client_key), stored);
        let server_sig = base64_encode(&mac(&mac(&salted, b"Server Key"), auth.as_bytes()));
        assert_eq!(
            ex.server(
                &cfg,
                format!("v={server_sig}").as_bytes(),
                &mut SaltedCache::default()
            ),
            Step::Done
        );
    }

    #[cfg(feature = "scram")]
    #[test]
    fn scram_refuses_bad_server_messages() {
        let cfg = SaslConfig::new(SaslMechanism::ScramSha256, "u", "p");
        let started = || {
            let (mut ex, _) = Exchange::start(&cfg);
            ex.input(&cfg, SaslInput::Nonce("0123456789abcdef".into()));
            ex
        };
        for bad in [
            &b"r=XXXX0123456789abcdef1,s=c2FsdA==,i=4096"[..], // nonce not ours
            b"r=0123456789abcdef,s=c2FsdA==,i=4096",           // nonce not extended
            b"r=0123456789abcdef1,s=c2FsdA==,i=10",            // too few iterations
            b"r=0123456789abcdef1,s=c2FsdA==,i=99999999",      // too many
            b"r=0123456789abcdef1,s=***,i=4096",               // salt not base64
            b"e=other-error",
            b"m=ext,r=0123456789abcdef1,s=c2FsdA==,i=4096",
            b"\xff",
        ] {
            assert!(
                matches!(
                    started().server(&cfg, bad, &mut SaltedCache::default()),
                    Step::Fail(_)
                ),
                "{bad:?}"
            );
        }
        let (mut ex, _) = Exchange::start(&cfg);
        assert!(matches!(
            ex.input(&cfg, SaslInput::Nonce("short".into())),
            Step::Fail(_)
        ));
    }
}

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
/// re-authenticates, under the lock every `send` and `enqueue` takes, so it must return
/// quickly: a provider that fetches a token from an identity provider synchronously (100 ms
/// and more) stalls every sender of the producer, on every runtime worker, for that long,
/// blocking those threads. Keep the current token cached and refresh it in the background
/// (as the Java client's login refresh thread does). An `Err` fails that
/// connection's authentication with the message, which must not contain a secret: before any
/// connection completed its handshake it fails the producer (`FatalError::Authentication`, once every
/// bootstrap server has failed so), later only that connection, which is opened again after
/// the reconnect backoff. Any `Fn() -> Result<String, String> + Send + Sync` closure is a provider.
/// It is called while the driver holds the lock that every `ProducerHandle` call takes, so it
/// must not call the producer either: that call would wait for itself for ever.
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
            // A panic in the application's provider is caught (the panic hook has reported
            // it) and is a failed token like any other: it ran on the producer's task, under
            // the core's lock, and took the task and every record's outcome down with it.
            Some(p) => match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| p.token())) {
                Ok(Ok(t)) => SaslInput::Token(Secret::new(t)),
                Ok(Err(e)) => SaslInput::Unavailable(format!("the token provider failed: {e}")),
                Err(_) => SaslInput::Unavailable("the token provider panicked".to_owned()),
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
    /// `sasl.jaas.config`, kept whole until `build` (it may hold a password).
    jaas: Option<Secret>,
    /// OAUTHBEARER's SASL extensions: librdkafka's `sasl.oauthbearer.extensions`, and the
    /// `extension_<key>` options of a Java `OAuthBearerLoginModule` line.
    extensions: Vec<(String, String)>,
}

impl SaslProps {
    /// Takes a `sasl.*` property; `false` if `name` is not one.
    pub(crate) fn property(&mut self, name: &str, v: &str) -> bool {
        match name {
            // `sasl.mechanisms` is librdkafka's name.
            "sasl.mechanism" | "sasl.mechanisms" => self.mechanism = Some(v.to_owned()),
            "sasl.username" => self.username = Some(v.to_owned()),
            "sasl.password" => self.password = Some(Secret::new(v)),
            // Empty: none (as a property list that lists every name leaves it).
            "sasl.jaas.config" => self.jaas = (!v.is_empty()).then(|| Secret::new(v)),
            // librdkafka's `key=value,key=value`; checked in `build`.
            "sasl.oauthbearer.extensions" => {
                self.extensions.clear();
                self.extensions.extend(
                    (v.split(','))
                        .map(str::trim)
                        .filter(|p| !p.is_empty())
                        .map(|p| match p.split_once('=') {
                            Some((k, v)) => (k.trim().to_owned(), v.trim().to_owned()),
                            None => (p.to_owned(), String::new()),
                        }),
                );
            }
            _ => return false,
        }
        true
    }

    /// The core's SASL settings for `security.protocol` (already upper case): `None` unless
    /// it is `SASL_PLAINTEXT` or `SASL_SSL`; as in the Java client, `sasl.*` properties are
    /// ignored otherwise.
    pub(crate) fn build(mut self, protocol: &str) -> Result<Option<SaslConfig>, PropertyError> {
        if !protocol.starts_with("SASL_") {
            return Ok(None);
        }
        let expected = "PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER";
        if let Some(jaas) = self.jaas.take() {
            self.apply_jaas(&Jaas::parse(jaas.expose())?)?;
        }
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
            let mut c = SaslConfig::oauthbearer();
            c.extensions = self.extensions;
            // The core checks KIP-342's rules; here the property is named for a pair with no
            // `=` (the core would call its value empty).
            if let Some((k, _)) = c.extensions.iter().find(|(_, v)| v.is_empty()) {
                return Err(PropertyError::Invalid {
                    property: "sasl.oauthbearer.extensions".to_owned(),
                    value: k.clone(),
                    expected: "key=value pairs separated by commas (KIP-342 SASL extensions)",
                });
            }
            return Ok(Some(c));
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

impl SaslProps {
    /// Takes the mechanism, user name and password from a parsed `sasl.jaas.config`, as the
    /// Java client does: the login module names the mechanism family, its options carry the
    /// credentials. Giving them twice (also as `sasl.username`/`sasl.password`) is refused
    /// rather than silently preferring one.
    fn apply_jaas(&mut self, jaas: &Jaas) -> Result<(), PropertyError> {
        let unsupported = |reason| PropertyError::Unsupported {
            property: "sasl.jaas.config".to_owned(),
            value: jaas.module.clone(),
            reason,
        };
        let family = match jaas.module.rsplit('.').next().unwrap_or_default() {
            "PlainLoginModule" => "PLAIN",
            "ScramLoginModule" => "SCRAM",
            "OAuthBearerLoginModule" => "OAUTHBEARER",
            "Krb5LoginModule" => {
                return Err(unsupported(
                    "Kerberos (GSSAPI) is not supported; use PLAIN, SCRAM-SHA-256, \
                     SCRAM-SHA-512 or OAUTHBEARER",
                ))
            }
            _ => {
                return Err(unsupported(
                    "kprod understands the PlainLoginModule, ScramLoginModule and \
                     OAuthBearerLoginModule of org.apache.kafka.common.security",
                ))
            }
        };
        let mechanism = self.mechanism.get_or_insert_with(|| family.to_owned());
        // Java's default mechanism is GSSAPI; a SCRAM module needs sasl.mechanism to say which.
        let matches = match family {
            "SCRAM" => mechanism.to_ascii_uppercase().starts_with("SCRAM-"),
            f => mechanism.eq_ignore_ascii_case(f),
        };
        if !matches {
            return Err(PropertyError::Invalid {
                property: "sasl.mechanism".to_owned(),
                value: mechanism.clone(),
                expected: "the mechanism of sasl.jaas.config's login module (PlainLoginModule: \
                           PLAIN; ScramLoginModule: SCRAM-SHA-256 or SCRAM-SHA-512; \
                           OAuthBearerLoginModule: OAUTHBEARER)",
            });
        }
        if family == "OAUTHBEARER" {
            // `extension_<key>` options are SASL extensions (KIP-342, as Kafka's OIDC login
            // handler reads them); the others configure the unsecured test token or the
            // client's own token retrieval.
            for (key, value) in &jaas.options {
                match key.strip_prefix("extension_") {
                    Some(k) => (self.extensions).push((k.to_owned(), value.expose().to_owned())),
                    None => {
                        return Err(unsupported(
                            "OAuthBearerLoginModule options other than extension_<key> (the \
                             unsecured test token) are not supported: tokens come from a \
                             token provider (ProducerHandle::from_properties_with_token_provider)",
                        ))
                    }
                }
            }
            return Ok(());
        }
        if self.username.is_some() || self.password.is_some() {
            return Err(unsupported(
                "the credentials are given twice: set either sasl.jaas.config or \
                 sasl.username and sasl.password",
            ));
        }
        for (key, value) in &jaas.options {
            match key.as_str() {
                "username" => self.username = Some(value.expose().to_owned()),
                "password" => self.password = Some(value.clone()),
                // SCRAM delegation tokens and other options change what the broker checks.
                _ => {
                    return Err(unsupported(
                        "a login module option other than username and password (kprod \
                         authenticates with a user name and password only)",
                    ))
                }
            }
        }
        Ok(())
    }
}

/// A `sasl.jaas.config` value: `LoginModuleClass required key="value" ... ;` (one module;
/// values quoted with `"` and backslash escapes, or bare words).
#[derive(Debug, PartialEq, Eq)]
struct Jaas {
    module: String,
    /// Options in order; values are secrets (the password is one).
    options: Vec<(String, Secret)>,
}

/// Skips whitespace and comments as Kafka's `JaasConfig` tokenizer does: `/* ... */`, and `/`
/// (`//` included) to the end of the line. An unclosed `/*` runs to the end.
fn skip_blank(rest: &mut &str) {
    loop {
        let s = rest.trim_start();
        if let Some(after) = s.strip_prefix("/*") {
            *rest = after.find("*/").map_or("", |i| &after[i + 2..]);
        } else if let Some(after) = s.strip_prefix('/') {
            *rest = after.find(['\n', '\r']).map_or("", |i| &after[i..]);
        } else {
            *rest = s;
            return;
        }
    }
}

impl Jaas {
    /// Parses one login module entry as Kafka's `JaasConfig` does (Java's `StreamTokenizer`:
    /// words end at whitespace, `=`, `;`, a quote or `/`, which starts a comment). Errors
    /// never echo the value (it may hold a password).
    fn parse(text: &str) -> Result<Self, PropertyError> {
        let invalid = |expected| PropertyError::Invalid {
            property: "sasl.jaas.config".to_owned(),
            value: "(not shown: it may hold a password)".to_owned(),
            expected,
        };
        let mut rest = text;
        let word = |rest: &mut &str| -> Option<String> {
            skip_blank(rest);
            let s = *rest;
            let end = s
                .find(|c: char| c.is_whitespace() || "=;\"'/".contains(c))
                .unwrap_or(s.len());
            if end == 0 {
                return None;
            }
            *rest = &s[end..];
            Some(s[..end].to_owned())
        };
        let module = word(&mut rest).ok_or_else(|| {
            invalid("a login module class, e.g. org.apache.kafka.common.security.plain.PlainLoginModule required username=\"...\" password=\"...\";")
        })?;
        let flag = word(&mut rest).unwrap_or_default();
        if !flag.eq_ignore_ascii_case("required") {
            return Err(invalid(
                "the control flag `required` after the login module class",
            ));
        }
        let mut options = Vec::new();
        loop {
            skip_blank(&mut rest);
            if let Some(mut after) = rest.strip_prefix(';') {
                skip_blank(&mut after);
                if !after.is_empty() {
                    return Err(invalid("one login module entry, ended by `;`"));
                }
                return Ok(Self { module, options });
            }
            let key =
                word(&mut rest).ok_or_else(|| invalid("key=\"value\" options ended by `;`"))?;
            skip_blank(&mut rest);
            rest = rest
                .strip_prefix('=')
                .ok_or_else(|| invalid("key=\"value\" options ended by `;`"))?;
            skip_blank(&mut rest);
            // Quoted in `"` or `'`, with the escapes of Java's `StreamTokenizer`: `\t`, `\n`
            // and the other C escapes, octal `\101`, and `\` before anything else for that
            // character. A line break ends a quoted value there, which then fails to parse in
            // Java: refused.
            let quote = rest.chars().next().filter(|c| *c == '"' || *c == '\'');
            let value = if let Some(q) = quote {
                let quoted = &rest[1..];
                let unclosed =
                    || invalid("a closing quote, on the same line, for every quoted value");
                let mut value = String::new();
                let mut chars = quoted.char_indices().peekable();
                let end = loop {
                    match chars.next() {
                        None | Some((_, '\n' | '\r')) => return Err(unclosed()),
                        Some((i, c)) if c == q => break i,
                        Some((_, '\\')) => {
                            let Some((_, c)) = chars.next() else {
                                return Err(unclosed());
                            };
                            let escaped = match c {
                                'a' => '\u{7}',
                                'b' => '\u{8}',
                                'f' => '\u{c}',
                                'n' => '\n',
                                'r' => '\r',
                                't' => '\t',
                                'v' => '\u{b}',
                                '0'..='7' => {
                                    // Up to three octal digits, the third only after a first
                                    // of 0–3 (a byte).
                                    let mut n = c as u32 - '0' as u32;
                                    let mut digits = 1;
                                    while let Some(&(_, d @ '0'..='7')) = chars.peek() {
                                        if digits == 2 && c > '3' {
                                            break;
                                        }
                                        n = n * 8 + (d as u32 - '0' as u32);
                                        digits += 1;
                                        chars.next();
                                        if digits == 3 {
                                            break;
                                        }
                                    }
                                    char::from_u32(n).unwrap_or(c)
                                }
                                c => c,
                            };
                            value.push(escaped);
                        }
                        Some((_, c)) => value.push(c),
                    }
                };
                rest = &quoted[end + 1..];
                value
            } else {
                word(&mut rest).ok_or_else(|| invalid("key=\"value\" options ended by `;`"))?
            };
            options.push((key, Secret::new(value)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn build(props: &[(&str, &str)]) -> Result<Option<SaslConfig>, PropertyError> {
        let mut p = SaslProps::default();
        for (k, v) in props {
            assert!(p.property(k, v), "{k} is a sasl property");
        }
        p.build("SASL_SSL")
    }

    /// Review finding (2026-12-05): a token provider that panics is a token unavailable (the
    /// core fails the connection, or stops before the first handshake, with that reason); the
    /// panic went through the driver's task and stopped the producer without a cause.
    #[test]
    fn a_panicking_token_provider_is_an_unavailable_token() {
        let panicking: Arc<dyn TokenProvider> =
            Arc::new(|| -> Result<String, String> { panic!("provider bug") });
        match answer(SaslNeed::Token, Some(&panicking)) {
            SaslInput::Unavailable(why) => assert!(why.contains("panicked"), "{why}"),
            _ => panic!("a panic gives no token"),
        }
        let failing: Arc<dyn TokenProvider> =
            Arc::new(|| -> Result<String, String> { Err("expired".into()) });
        match answer(SaslNeed::Token, Some(&failing)) {
            SaslInput::Unavailable(why) => assert!(why.contains("expired"), "{why}"),
            _ => panic!("an error gives no token"),
        }
    }

    const PLAIN: &str = r#"org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" password="s3cr\"et";"#;

    #[test]
    fn jaas_plain_gives_mechanism_and_credentials() {
        let from_jaas = build(&[("sasl.jaas.config", PLAIN)]).unwrap();
        let direct = build(&[
            ("sasl.mechanism", "PLAIN"),
            ("sasl.username", "alice"),
            ("sasl.password", "s3cr\"et"),
        ])
        .unwrap();
        assert_eq!(from_jaas, direct);
        assert!(from_jaas.is_some());
    }

    /// Kafka's `JaasConfig` reads the line with Java's `StreamTokenizer`: `'` quotes as `"`
    /// does, and `\t`, `\n`, octal and the other escapes stand for their characters. Before
    /// (a review probe), `password='s3cret'` kept its quotes and `\t` became `t`: the wrong
    /// password was sent.
    #[test]
    fn jaas_values_are_read_as_java_reads_them() {
        let m =
            r#"org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" "#;
        let cases = [
            (r#"password='s3cret';"#, "s3cret"),
            (r#"password="it's";"#, "it's"),
            (r#"password='say "hi"';"#, "say \"hi\""),
            (r#"password="a\tb\nc\rd";"#, "a\tb\nc\rd"),
            (r#"password="\a\b\f\v";"#, "\u{7}\u{8}\u{c}\u{b}"),
            (r#"password="\101\60\0x\477";"#, "A0\0x\u{27}7"),
            (r#"password="back\\slash \q";"#, "back\\slash q"),
            // Comments: `/` starts one outside quotes, to the end of the line, as does `//`;
            // `/* */` may sit anywhere between tokens.
            ("password=abc//c\n;", "abc"),
            ("password=abc/def\n;", "abc"),
            (
                "/* first */ password = /* the value: */ \"x/y\" ; // done",
                "x/y",
            ),
        ];
        for (option, password) in cases {
            let from_jaas = build(&[("sasl.jaas.config", &format!("{m}{option}"))]);
            let direct = build(&[
                ("sasl.mechanism", "PLAIN"),
                ("sasl.username", "alice"),
                ("sasl.password", password),
            ]);
            assert_eq!(from_jaas.unwrap(), direct.unwrap(), "{option}");
        }
        // Refused as Java refuses them: an unclosed quote, a line break inside quotes (Java
        // ends the value there and the rest fails to parse), a comment that swallows the `;`.
        for option in [
            "password='hunter2;",
            "password=\"hunter\n2\";",
            "password=hunter/2;",
        ] {
            let e = build(&[("sasl.jaas.config", &format!("{m}{option}"))]).unwrap_err();
            let e = e.to_string();
            assert!(
                e.contains("closing quote") || e.contains("ended by"),
                "{option:?}: {e}"
            );
            assert!(!e.contains("hunter"), "{e}");
        }
    }

    #[test]
    fn jaas_scram_needs_the_scram_mechanism() {
        let jaas = "org.apache.kafka.common.security.scram.ScramLoginModule required \
                    username=bob password=\"pw\" ;";
        let ok = build(&[
            ("sasl.mechanism", "SCRAM-SHA-512"),
            ("sasl.jaas.config", jaas),
        ]);
        assert_eq!(
            ok.unwrap(),
            build(&[
                ("sasl.mechanism", "SCRAM-SHA-512"),
                ("sasl.username", "bob"),
                ("sasl.password", "pw"),
            ])
            .unwrap()
        );
        // SCRAM's family alone does not say which hash: sasl.mechanism must.
        let e = build(&[("sasl.jaas.config", jaas)]).unwrap_err();
        assert!(e.to_string().contains("sasl.mechanism"), "{e}");
        let e = build(&[("sasl.mechanism", "PLAIN"), ("sasl.jaas.config", jaas)]).unwrap_err();
        assert!(e.to_string().contains("ScramLoginModule"), "{e}");
    }

    #[test]
    fn jaas_refusals_name_the_reason_and_never_the_password() {
        let cases = [
            (
                "com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true;",
                "Kerberos",
            ),
            (
                "x.y.PlainLoginModule optional username=\"a\" password=\"hunter2\";",
                "required",
            ),
            (
                "x.y.PlainLoginModule required username=\"a\" password=\"hunter2;",
                "closing quote",
            ),
            (
                "x.y.PlainLoginModule required username=\"a\" password=\"hunter2\"",
                "ended by",
            ),
            (
                "x.y.PlainLoginModule required username=\"a\" password=\"hunter2\"; b",
                "one login",
            ),
            (
                "x.y.PlainLoginModule required username=\"a\" password=\"hunter2\" tokenauth=true;",
                "option",
            ),
            ("x.y.OtherModule required;", "understands"),
        ];
        for (jaas, why) in cases {
            let e = build(&[("sasl.jaas.config", jaas)])
                .unwrap_err()
                .to_string();
            assert!(e.contains(why), "{jaas}: {e}");
            assert!(!e.contains("hunter2"), "{jaas}: the password leaked: {e}");
        }
        let twice = build(&[("sasl.jaas.config", PLAIN), ("sasl.username", "alice")]);
        assert!(twice.unwrap_err().to_string().contains("twice"));
    }

    /// KIP-342 SASL extensions, from librdkafka's property and from a Java login module line:
    /// before, `sasl.oauthbearer.extensions` was taken and ignored, so a Confluent Cloud
    /// configuration (`logicalCluster`, `identityPoolId`) failed authentication with no word
    /// about why.
    #[test]
    fn oauthbearer_extensions_from_either_client() {
        let want = Some(
            SaslConfig::oauthbearer()
                .with_extension("logicalCluster", "lkc-1")
                .with_extension("identityPoolId", "pool-2"),
        );
        let librdkafka = build(&[
            ("sasl.mechanism", "OAUTHBEARER"),
            (
                "sasl.oauthbearer.extensions",
                "logicalCluster=lkc-1, identityPoolId=pool-2",
            ),
        ]);
        assert_eq!(librdkafka.unwrap(), want);
        let java = build(&[(
            "sasl.jaas.config",
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required \
             extension_logicalCluster=\"lkc-1\" extension_identityPoolId='pool-2';",
        )]);
        assert_eq!(java.unwrap(), want);
        let e = build(&[
            ("sasl.mechanism", "OAUTHBEARER"),
            ("sasl.oauthbearer.extensions", "logicalCluster"),
        ]);
        assert!(e
            .unwrap_err()
            .to_string()
            .contains("sasl.oauthbearer.extensions"));
        // No effect under another mechanism, as in librdkafka.
        let plain = build(&[
            ("sasl.mechanism", "PLAIN"),
            ("sasl.username", "u"),
            ("sasl.password", "p"),
            ("sasl.oauthbearer.extensions", "a=b"),
        ]);
        assert_eq!(plain.unwrap().unwrap().extensions, vec![]);
    }

    #[test]
    fn jaas_oauthbearer_without_options() {
        let jaas = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required ;";
        assert_eq!(
            build(&[("sasl.jaas.config", jaas)]).unwrap(),
            Some(SaslConfig::oauthbearer())
        );
        let unsecured = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule \
                         required unsecuredLoginStringClaim_sub=\"me\";";
        let e = build(&[("sasl.jaas.config", unsecured)]).unwrap_err();
        assert!(e.to_string().contains("token provider"), "{e}");
    }

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

//! `config_from_properties`.

use std::time::Duration;

use std::path::PathBuf;

use kprod_core::ProducerConfig;
use kprod_tokio::{config_from_properties, ClientConfig, PropertyError, Security, TlsOptions};

#[test]
fn a_full_valid_set_maps_every_property() {
    let c = config_from_properties(&[
        ("bootstrap.servers", "a:9092, b:9093"),
        ("client.id", "app"),
        ("acks", "all"),
        ("enable.idempotence", "true"),
        ("allow.auto.create.topics", "false"),
        ("linger.ms", "7"),
        ("batch.size", "32768"),
        ("buffer.memory", "8388608"),
        ("max.request.size", "2097152"),
        ("max.in.flight.requests.per.connection", "3"),
        ("request.timeout.ms", "10000"),
        ("delivery.timeout.ms", "60000"),
        ("retry.backoff.ms", "20"),
        ("retry.backoff.max.ms", "500"),
        ("reconnect.backoff.ms", "30"),
        ("metadata.max.age.ms", "1000"),
        ("metadata.max.idle.ms", "60000"),
    ])
    .unwrap();
    assert_eq!(c.bootstrap_servers, ["a:9092", "b:9093"]);
    assert_eq!(c.client_id.as_deref(), Some("app"));
    assert_eq!(c.acks, -1);
    assert!(c.enable_idempotence && !c.allow_auto_topic_creation);
    assert_eq!(c.linger, Duration::from_millis(7));
    assert_eq!(
        (
            c.batch_size,
            c.buffer_memory,
            c.max_request_size,
            c.max_in_flight
        ),
        (32768, 8 << 20, 2 << 20, 3)
    );
    assert_eq!(c.request_timeout, Duration::from_secs(10));
    assert_eq!(c.delivery_timeout, Duration::from_secs(60));
    assert_eq!(c.retry_backoff, Duration::from_millis(20));
    assert_eq!(c.retry_backoff_max, Duration::from_millis(500));
    assert_eq!(c.reconnect_backoff, Duration::from_millis(30));
    assert_eq!(c.metadata_max_age, Duration::from_secs(1));
    assert_eq!(c.metadata_max_idle, Some(Duration::from_secs(60)));
    let c = config_from_properties(&[("bootstrap.servers", "a:1"), ("acks", "-1")]).unwrap();
    assert_eq!(c.acks, -1);
    assert_eq!(
        c.metadata_max_idle,
        Some(Duration::from_secs(300)),
        "Java's default"
    );
    // Java's minimum is 5000 ms.
    let e = config_from_properties(&[
        ("bootstrap.servers", "a:1"),
        ("metadata.max.idle.ms", "4999"),
    ])
    .unwrap_err();
    assert!(e.to_string().contains("metadata.max.idle.ms"), "{e}");
}

#[test]
fn an_unknown_property_is_named() {
    let e = config_from_properties(&[("bootstrap.servers", "a:1"), ("compression.typo", "x")])
        .unwrap_err();
    assert_eq!(e, PropertyError::Unknown("compression.typo".into()));
    assert!(e.to_string().contains("compression.typo"), "{e}");
}

#[test]
fn unparsable_values_are_named() {
    for (name, value) in [
        ("linger.ms", "soon"),
        ("linger.ms", "-1"),
        ("batch.size", "1.5"),
        ("acks", "2"),
        ("enable.idempotence", "yes"),
        ("max.in.flight.requests.per.connection", ""),
    ] {
        let e = config_from_properties(&[("bootstrap.servers", "a:1"), (name, value)]).unwrap_err();
        match &e {
            PropertyError::Invalid { property, .. } => assert_eq!(property, name),
            other => panic!("{name}={value}: {other:?}"),
        }
        assert!(e.to_string().contains(name), "{e}");
    }
}

#[test]
fn parsed_but_invalid_configs_fail_validation() {
    for (props, setting) in [
        (vec![], "bootstrap.servers"),
        (
            vec![
                ("bootstrap.servers", "a:1"),
                ("enable.idempotence", "true"),
                ("acks", "1"),
            ],
            "acks",
        ),
        (
            vec![
                ("bootstrap.servers", "a:1"),
                ("acks", "0"),
                ("enable.idempotence", "true"),
            ],
            "acks",
        ),
        (
            vec![
                ("bootstrap.servers", "a:1"),
                ("kprod.broker.version.max", "0.10"),
            ],
            "kprod.broker.version.max",
        ),
        (
            vec![
                ("bootstrap.servers", "a:1"),
                ("max.in.flight.requests.per.connection", "6"),
            ],
            "max.in.flight.requests.per.connection",
        ),
        (
            vec![("bootstrap.servers", "a:1"), ("buffer.memory", "0")],
            "buffer.memory",
        ),
    ] {
        match config_from_properties(&props) {
            Err(PropertyError::Config(e)) => assert_eq!(e.setting, setting),
            other => panic!("{props:?}: {other:?}"),
        }
    }
}

#[test]
fn security_defaults_to_plaintext_and_ssl_settings_map() {
    let c = ClientConfig::from_properties(&[("bootstrap.servers", "a:1")]).unwrap();
    assert_eq!(c.security, Security::Plaintext);
    // As in the Java client, ssl.* settings are ignored under PLAINTEXT.
    let c = ClientConfig::from_properties(&[
        ("bootstrap.servers", "a:1"),
        ("security.protocol", "plaintext"),
        ("ssl.ca.location", "/ca.pem"),
    ])
    .unwrap();
    assert_eq!(c.security, Security::Plaintext);
    let c = ClientConfig::from_properties(&[
        ("bootstrap.servers", "a:1"),
        ("security.protocol", "SSL"),
        ("ssl.ca.location", "/etc/kafka/ca.pem"),
        ("ssl.certificate.location", "/etc/kafka/client.pem"),
        ("ssl.key.location", "/etc/kafka/client.key"),
        ("linger.ms", "3"),
    ])
    .unwrap();
    assert_eq!(c.producer.linger, Duration::from_millis(3));
    assert_eq!(
        c.security,
        Security::Ssl(TlsOptions {
            ca_location: Some(PathBuf::from("/etc/kafka/ca.pem")),
            certificate_location: Some(PathBuf::from("/etc/kafka/client.pem")),
            key_location: Some(PathBuf::from("/etc/kafka/client.key")),
            verify_hostname: true,
            tls12: true,
            tls13: true,
            ca_property: "ssl.ca.location",
            certificate_property: "ssl.certificate.location",
            key_property: "ssl.key.location",
        })
    );
    for (value, verify) in [
        ("https", true),
        ("HTTPS", true),
        ("", false),
        ("none", false),
    ] {
        let c = ClientConfig::from_properties(&[
            ("bootstrap.servers", "a:1"),
            ("security.protocol", "ssl"),
            ("ssl.endpoint.identification.algorithm", value),
        ])
        .unwrap();
        let Security::Ssl(tls) = c.security else {
            panic!("SSL expected")
        };
        assert_eq!(tls.verify_hostname, verify, "{value:?}");
        assert_eq!(tls.ca_location, None, "system roots by default");
    }
}

#[test]
fn security_errors_name_the_property() {
    for protocol in ["SASL_SSL", "SASL_PLAINTEXT"] {
        let e = ClientConfig::from_properties(&[
            ("bootstrap.servers", "a:1"),
            ("security.protocol", protocol),
        ])
        .unwrap_err();
        assert!(
            matches!(e, PropertyError::Invalid { ref property, .. } if property == "sasl.mechanism"),
            "{e:?}"
        );
    }
    let e = ClientConfig::from_properties(&[
        ("bootstrap.servers", "a:1"),
        ("security.protocol", "TLS"),
    ])
    .unwrap_err();
    assert!(e.to_string().contains("security.protocol"), "{e}");
    let e = ClientConfig::from_properties(&[
        ("bootstrap.servers", "a:1"),
        ("ssl.endpoint.identification.algorithm", "ldap"),
    ])
    .unwrap_err();
    assert!(
        e.to_string()
            .contains("ssl.endpoint.identification.algorithm"),
        "{e}"
    );
    let e = ClientConfig::from_properties(&[
        ("bootstrap.servers", "a:1"),
        ("security.protocol", "SSL"),
        ("ssl.certificate.location", "/c.pem"),
    ])
    .unwrap_err();
    assert!(e.to_string().contains("ssl.key.location"), "{e}");
    let e = ClientConfig::from_properties(&[
        ("bootstrap.servers", "a:1"),
        ("ssl.no.such.setting", "x"),
    ])
    .unwrap_err();
    assert_eq!(e, PropertyError::Unknown("ssl.no.such.setting".into()));
    // config_from_properties' producer would connect over plain TCP: SSL is refused, not
    // silently dropped.
    let e = config_from_properties(&[("bootstrap.servers", "a:1"), ("security.protocol", "SSL")])
        .unwrap_err();
    assert!(e.to_string().contains("from_properties"), "{e}");
    // The value given is the one named (a review finding: SASL_SSL was reported as SSL).
    let e = config_from_properties(&[
        ("bootstrap.servers", "a:1"),
        ("security.protocol", "SASL_SSL"),
        ("sasl.mechanism", "PLAIN"),
        ("sasl.username", "u"),
        ("sasl.password", "p"),
    ])
    .unwrap_err();
    assert!(e.to_string().contains("security.protocol=SASL_SSL"), "{e}");
}

#[cfg(feature = "tls")]
#[tokio::test]
async fn tls_files_that_cannot_be_read_are_named() {
    let e = kprod_tokio::ProducerHandle::from_properties(&[
        ("bootstrap.servers", "a:1"),
        ("security.protocol", "SSL"),
        ("ssl.ca.location", "/nonexistent/kprod-ca.pem"),
    ])
    .unwrap_err();
    let text = e.to_string();
    assert!(
        text.starts_with("ssl.ca.location=/nonexistent/kprod-ca.pem")
            && text.contains("cannot read"),
        "{text}"
    );
}

/// `security.protocol=SASL_*` with `sasl.mechanism`, `sasl.username` and `sasl.password`: the
/// core gets the SASL settings, the connector the transport; the password never shows in
/// `Debug`; errors name the property.
#[test]
fn sasl_properties() {
    use kprod_core::{SaslConfig, SaslMechanism};
    let c = ClientConfig::from_properties(&[
        ("bootstrap.servers", "a:1"),
        ("security.protocol", "sasl_ssl"),
        ("sasl.mechanism", "SCRAM-SHA-256"),
        ("sasl.username", "alice"),
        ("sasl.password", "p4ssw0rd-do-not-print"),
        ("ssl.ca.location", "/ca.pem"),
    ])
    .unwrap();
    assert_eq!(
        c.producer.sasl,
        Some(SaslConfig::new(
            SaslMechanism::ScramSha256,
            "alice",
            "p4ssw0rd-do-not-print"
        ))
    );
    assert!(matches!(c.security, Security::Ssl(ref t) if t.ca_location.is_some()));
    let debug = format!("{c:?}");
    assert!(!debug.contains("p4ssw0rd-do-not-print"), "{debug}");
    assert!(
        debug.contains("ScramSha256") && debug.contains("alice"),
        "{debug}"
    );

    // SASL_PLAINTEXT: plain TCP, so config_from_properties takes it too; librdkafka's name.
    let p = config_from_properties(&[
        ("bootstrap.servers", "a:1"),
        ("security.protocol", "SASL_PLAINTEXT"),
        ("sasl.mechanisms", "plain"),
        ("sasl.username", "bob"),
        ("sasl.password", "pw"),
    ])
    .unwrap();
    assert_eq!(
        p.sasl,
        Some(SaslConfig::new(SaslMechanism::Plain, "bob", "pw"))
    );
    // sasl.* is ignored without SASL, as in the Java client.
    let p = config_from_properties(&[
        ("bootstrap.servers", "a:1"),
        ("sasl.mechanism", "PLAIN"),
        ("sasl.username", "bob"),
    ])
    .unwrap();
    assert_eq!(p.sasl, None);
    let c = ClientConfig::from_properties(&[
        ("bootstrap.servers", "a:1"),
        ("security.protocol", "SASL_PLAINTEXT"),
        ("sasl.mechanism", "OAUTHBEARER"),
    ])
    .unwrap();
    assert_eq!(c.producer.sasl, Some(SaslConfig::oauthbearer()));

    for (props, property, expect) in [
        (
            vec![("sasl.mechanism", "GSSAPI")],
            "sasl.mechanism",
            "Kerberos",
        ),
        (vec![("sasl.mechanism", "NTLM")], "sasl.mechanism", "PLAIN"),
        (
            vec![("sasl.mechanism", "PLAIN"), ("sasl.password", "x")],
            "sasl.username",
            "user name",
        ),
        (
            vec![("sasl.mechanism", "SCRAM-SHA-512"), ("sasl.username", "u")],
            "sasl.password",
            "password",
        ),
    ] {
        let mut all = vec![
            ("bootstrap.servers", "a:1"),
            ("security.protocol", "SASL_PLAINTEXT"),
        ];
        all.extend(props);
        let e = ClientConfig::from_properties(&all).unwrap_err();
        let text = e.to_string();
        assert!(
            text.contains(property) && text.contains(expect),
            "{all:?}: {text}"
        );
    }
}

/// OAUTHBEARER needs a token provider: refused up front without one.
#[tokio::test]
async fn oauthbearer_without_a_token_provider_is_refused() {
    let props = [
        ("bootstrap.servers", "127.0.0.1:1"),
        ("security.protocol", "SASL_PLAINTEXT"),
        ("sasl.mechanism", "OAUTHBEARER"),
    ];
    let e = kprod_tokio::ProducerHandle::from_properties(&props).unwrap_err();
    assert!(e.to_string().contains("token provider"), "{e}");
    let p = kprod_tokio::ProducerHandle::from_properties_with_token_provider(&props, || {
        Ok::<_, String>("h.p.".to_owned())
    });
    assert!(p.is_ok());
}

/// Java's "forever", `Long.MAX_VALUE` ms, is accepted for the duration properties and means
/// "effectively never" (capped at `ProducerConfig::MAX_DURATION`), never a panic.
#[test]
fn long_max_value_durations_mean_never() {
    let forever = "9223372036854775807";
    let config = config_from_properties(&[
        ("bootstrap.servers", "localhost:9092"),
        ("max.block.ms", forever),
        ("delivery.timeout.ms", forever),
        ("metadata.max.age.ms", forever),
        ("request.timeout.ms", forever),
        ("retry.backoff.max.ms", forever),
    ])
    .unwrap();
    let p = kprod_core::Producer::new(config, std::time::Instant::now()).unwrap();
    let never = ProducerConfig::MAX_DURATION;
    let c = p.config();
    assert_eq!(
        (
            c.max_block,
            c.delivery_timeout,
            c.metadata_max_age,
            c.request_timeout
        ),
        (never, never, never, never)
    );
}

fn tls_of(extra: &[(&str, &str)]) -> Result<TlsOptions, PropertyError> {
    let mut props = vec![("bootstrap.servers", "a:1"), ("security.protocol", "SSL")];
    props.extend_from_slice(extra);
    match ClientConfig::from_properties(&props)?.security {
        Security::Ssl(tls) => Ok(tls),
        other => panic!("SSL expected: {other:?}"),
    }
}

fn unsupported_property(r: Result<impl std::fmt::Debug, PropertyError>) -> (String, String) {
    match r {
        Err(PropertyError::Unsupported {
            property, value, ..
        }) => (property, value),
        other => panic!("a refusal expected: {other:?}"),
    }
}

/// The Java client's TLS settings: PEM trust and key stores become kprod's files, the TLS
/// versions are honoured (TLS 1.1 and 1.0 left out of a list, as current JVMs do), and what
/// kprod cannot do (JKS stores, passwords with what they open, cipher lists) is refused
/// naming the property, secrets hidden; under PLAINTEXT, as in Java, none of it counts.
#[test]
fn java_tls_stores_and_versions_map_or_are_refused() {
    let tls = tls_of(&[
        ("ssl.truststore.type", "PEM"),
        ("ssl.truststore.location", "/etc/kafka/ca.pem"),
        ("ssl.keystore.type", "pem"),
        ("ssl.keystore.location", "/etc/kafka/client-store.pem"),
        ("ssl.keymanager.algorithm", "SunX509"),
        ("ssl.trustmanager.algorithm", "PKIX"),
        ("ssl.enabled.protocols", "TLSv1.2,TLSv1.3"),
        ("ssl.protocol", "TLSv1.3"),
        ("ssl.cipher.suites", ""),
        ("ssl.key.password", ""),
    ])
    .unwrap();
    assert_eq!(tls.ca_location, Some(PathBuf::from("/etc/kafka/ca.pem")));
    let store = Some(PathBuf::from("/etc/kafka/client-store.pem"));
    assert_eq!(
        (&tls.certificate_location, &tls.key_location),
        (&store, &store)
    );
    assert!(tls.tls12 && tls.tls13);
    // Versions.
    let v = |extra: &[(&str, &str)]| tls_of(extra).map(|t| (t.tls12, t.tls13));
    assert_eq!(
        v(&[("ssl.enabled.protocols", "TLSv1.2")]).unwrap(),
        (true, false)
    );
    assert_eq!(
        v(&[("ssl.enabled.protocols", "TLSv1.3")]).unwrap(),
        (false, true)
    );
    assert_eq!(v(&[("ssl.protocol", "TLSv1.2")]).unwrap(), (true, false));
    assert_eq!(v(&[("ssl.enabled.protocols", "")]).unwrap(), (true, true));
    // Older Kafka's default lists TLS 1.1 and 1.0 too, which current JVMs disable: the rest
    // of the list is used.
    assert_eq!(
        v(&[("ssl.enabled.protocols", "TLSv1.2,TLSv1.1,TLSv1")]).unwrap(),
        (true, false)
    );
    assert!(matches!(
        v(&[("ssl.enabled.protocols", "TLSv1.1")]),
        Err(PropertyError::Invalid { .. })
    ));
    assert!(matches!(
        v(&[
            ("ssl.enabled.protocols", "TLSv1.3"),
            ("ssl.protocol", "TLSv1.2")
        ]),
        Err(PropertyError::Invalid { .. })
    ));
    for (name, value) in [
        ("ssl.enabled.protocols", "TLSv1.2,DTLSv1.2"),
        ("ssl.protocol", "SSLv3"),
        ("ssl.cipher.suites", "TLS_AES_128_GCM_SHA256"),
        ("ssl.trustmanager.algorithm", "SunX509"),
        ("ssl.truststore.location", "/etc/kafka/truststore.jks"),
        ("ssl.provider", "SunJSSE"),
        ("enable.ssl.certificate.verification", "false"),
    ] {
        assert_eq!(
            unsupported_property(tls_of(&[(name, value)])),
            (name.to_owned(), value.to_owned())
        );
    }
    // A password is refused with what it opens (an encrypted key, a store), never shown;
    // alone it opens nothing and counts for nothing, as in Java.
    for (name, with) in [
        ("ssl.key.password", ("ssl.key.location", "/k.pem")),
        ("ssl.key.password", ("ssl.keystore.location", "/s.pem")),
        ("ssl.keystore.password", ("ssl.keystore.location", "/s.pem")),
        (
            "ssl.truststore.password",
            ("ssl.truststore.location", "/t.pem"),
        ),
    ] {
        let pem = [("ssl.keystore.type", "PEM"), ("ssl.truststore.type", "PEM")];
        let cert = ("ssl.certificate.location", "/c.pem");
        let mut props = vec![(name, "changeit"), with, pem[0], pem[1]];
        if with.0 == "ssl.key.location" {
            props.push(cert);
        }
        let (property, shown) = unsupported_property(tls_of(&props));
        assert_eq!(property, name);
        assert!(!shown.contains("changeit"), "{shown}");
        assert!(tls_of(&[(name, "changeit")]).is_ok(), "{name} alone");
    }
    // A store type counts only with a store.
    assert!(tls_of(&[("ssl.truststore.type", "BCFKS")]).is_ok());
    // The Java stores are named in file errors.
    let t = tls_of(&[
        ("ssl.truststore.type", "PEM"),
        ("ssl.truststore.location", "/t.pem"),
        ("ssl.keystore.type", "PEM"),
        ("ssl.keystore.location", "/s.pem"),
    ])
    .unwrap();
    assert_eq!(
        (t.ca_property, t.certificate_property, t.key_property),
        (
            "ssl.truststore.location",
            "ssl.keystore.location",
            "ssl.keystore.location"
        )
    );
    #[cfg(feature = "tls")]
    {
        let e = kprod_tokio::TlsConnector::new(&t).unwrap_err();
        assert!(e.to_string().contains("ssl.truststore.location"), "{e}");
    }
    // A later default does not lift a refusal: one setting given twice differently is
    // refused; under PLAINTEXT nothing of it counts.
    assert!(matches!(
        tls_of(&[("ssl.cipher.suites", "X"), ("ssl.cipher.suites", "")]),
        Err(PropertyError::Conflict { .. })
    ));
    assert!(tls_of(&[("ssl.cipher.suites", ""), ("ssl.cipher.suites", "")]).is_ok());
    assert!(ClientConfig::from_properties(&[
        ("bootstrap.servers", "a:1"),
        ("ssl.key.password", "changeit"),
        ("ssl.truststore.location", "/etc/kafka/truststore.jks"),
    ])
    .is_ok());
    // A PEM trust store and ssl.ca.location must agree.
    assert!(matches!(
        tls_of(&[
            ("ssl.ca.location", "/a.pem"),
            ("ssl.truststore.type", "PEM"),
            ("ssl.truststore.location", "/b.pem"),
        ]),
        Err(PropertyError::Invalid { .. })
    ));
}

/// The Java client's and librdkafka's own OAUTHBEARER token retrieval and Java login classes
/// are refused under SASL (tokens come from a TokenProvider); their tuning and the Kerberos
/// settings are inert, as in those clients when they are not used.
#[test]
fn sasl_extras_are_refused_only_where_they_would_matter() {
    let sasl = |mechanism: &str, extra: &[(&str, &str)]| {
        let mut props = vec![
            ("bootstrap.servers", "a:1"),
            ("security.protocol", "SASL_PLAINTEXT"),
            ("sasl.mechanism", mechanism),
            ("sasl.username", "u"),
            ("sasl.password", "p"),
        ];
        props.extend_from_slice(extra);
        ClientConfig::from_properties(&props)
    };
    let url = ("sasl.oauthbearer.token.endpoint.url", "https://idp/token");
    assert_eq!(
        unsupported_property(sasl("OAUTHBEARER", &[url])),
        (url.0.to_owned(), url.1.to_owned())
    );
    assert!(
        sasl("PLAIN", &[url]).is_ok(),
        "no effect without OAUTHBEARER"
    );
    // Secrets and inline keys are named, not shown; so is librdkafka's
    // `sasl.oauthbearer.config`, which may carry a token (before, a review probe found it
    // repeated in the error).
    for name in [
        "sasl.oauthbearer.assertion.private.key.pem",
        "sasl.oauthbearer.client.credentials.client.secret",
        "sasl.oauthbearer.config",
    ] {
        let (property, shown) = unsupported_property(sasl(
            "OAUTHBEARER",
            &[(name, "-----BEGIN PRIVATE KEY-----")],
        ));
        assert_eq!((property.as_str(), shown.as_str()), (name, "(hidden)"));
    }
    let handler = ("sasl.login.callback.handler.class", "com.example.Login");
    assert_eq!(unsupported_property(sasl("PLAIN", &[handler])).0, handler.0);
    for inert in [
        ("sasl.kerberos.service.name", "kafka"),
        ("sasl.login.refresh.window.factor", "0.8"),
        ("sasl.oauthbearer.scope.claim.name", "scope"),
        ("sasl.jaas.config", ""),
    ] {
        assert!(sasl("PLAIN", &[inert]).is_ok(), "{inert:?}");
    }
    // Under PLAINTEXT the SASL settings do not count.
    assert!(ClientConfig::from_properties(&[("bootstrap.servers", "a:1"), handler]).is_ok());
}

/// librdkafka's `broker.address.family` and `receive.message.max.bytes`.
#[test]
fn address_family_and_largest_response() {
    use kprod_tokio::AddressFamily;
    let family = |v: &str| {
        ClientConfig::from_properties(&[("bootstrap.servers", "a:1"), ("broker.address.family", v)])
            .map(|c| c.socket.address_family)
    };
    assert_eq!(family("any").unwrap(), AddressFamily::Any);
    assert_eq!(family("v4").unwrap(), AddressFamily::V4);
    assert_eq!(family("V6").unwrap(), AddressFamily::V6);
    assert!(matches!(family("ipv4"), Err(PropertyError::Invalid { .. })));
    let v4: std::net::SocketAddr = "10.0.0.1:9092".parse().unwrap();
    let v6: std::net::SocketAddr = "[::1]:9092".parse().unwrap();
    assert!(AddressFamily::V4.admits(&v4) && !AddressFamily::V4.admits(&v6));
    assert!(AddressFamily::V6.admits(&v6) && !AddressFamily::V6.admits(&v4));
    assert!(AddressFamily::Any.admits(&v4) && AddressFamily::Any.admits(&v6));
    // A bare ProducerConfig cannot carry it.
    let e = config_from_properties(&[
        ("bootstrap.servers", "a:1"),
        ("broker.address.family", "v4"),
    ]);
    assert_eq!(unsupported_property(e).0, "broker.address.family");
    let c = config_from_properties(&[
        ("bootstrap.servers", "a:1"),
        ("receive.message.max.bytes", "5000000"),
    ])
    .unwrap();
    assert_eq!(c.max_frame_size, 5_000_000);
}

/// Review finding (2026-12-05): librdkafka value forms that were refused although they mean
/// something kprod does: a fractional `linger.ms`, `topic.metadata.refresh.interval.ms=-1`
/// (no periodic refresh), `compression.level=0` with gzip or lz4 (their fastest); and
/// `kprod.producer.id.expiration.ms`, the brokers' expiry, could not be set by property.
#[test]
fn librdkafka_value_forms_are_taken() {
    let base = ("bootstrap.servers", "a:1");
    let c = config_from_properties(&[base, ("linger.ms", "0.5")]).unwrap();
    assert_eq!(c.linger, Duration::from_micros(500));
    let c = config_from_properties(&[base, ("queue.buffering.max.ms", "12.25")]).unwrap();
    assert_eq!(c.linger, Duration::from_micros(12_250));
    for bad in ["-1", "-0.5", "NaN", "inf", "+0.5", "1ms"] {
        assert!(
            config_from_properties(&[base, ("linger.ms", bad)]).is_err(),
            "linger.ms={bad}"
        );
    }
    let c = config_from_properties(&[base, ("topic.metadata.refresh.interval.ms", "-1")]).unwrap();
    assert_eq!(c.metadata_max_age, ProducerConfig::MAX_DURATION);
    assert!(config_from_properties(&[base, ("metadata.max.age.ms", "-1")]).is_err());
    for (codec, level) in [("gzip", Some(1)), ("lz4", Some(1)), ("zstd", Some(0))] {
        let c = config_from_properties(&[
            base,
            ("compression.codec", codec),
            ("compression.level", "0"),
        ])
        .unwrap();
        assert_eq!(c.compression.level, level, "{codec}");
    }
    // -1: the default of compression.level and of gzip's own; a zstd level like any other;
    // no lz4 level (Java refuses it too).
    for (codec, name, level) in [
        ("zstd", "compression.zstd.level", Some(-1)),
        ("gzip", "compression.gzip.level", None),
        ("zstd", "compression.level", None),
    ] {
        let c = config_from_properties(&[base, ("compression.type", codec), (name, "-1")]).unwrap();
        assert_eq!(c.compression.level, level, "{name}");
    }
    assert!(config_from_properties(&[
        base,
        ("compression.type", "lz4"),
        ("compression.lz4.level", "-1"),
    ])
    .is_err());
    // Java's per-codec name keeps Java's range.
    assert!(config_from_properties(&[
        base,
        ("compression.type", "gzip"),
        ("compression.gzip.level", "0"),
    ])
    .is_err());
    let c =
        config_from_properties(&[base, ("kprod.producer.id.expiration.ms", "3600000")]).unwrap();
    assert_eq!(c.producer_id_expiration, Some(Duration::from_secs(3600)));
    assert_eq!(c.producer_state_expiry(), Duration::from_secs(3600));
}

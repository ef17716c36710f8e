//! The `kprod.max.*.version` properties: per-API protocol version caps.

use kprod_tokio::kprod_core::protocol::MaxVersions;
use kprod_tokio::{config_from_properties, PropertyError};

#[test]
fn each_cap_property_sets_its_api_and_the_default_is_uncapped() {
    let c = config_from_properties(&[("bootstrap.servers", "a:1")]).unwrap();
    assert_eq!(c.max_versions, MaxVersions::NONE);
    let c = config_from_properties(&[
        ("bootstrap.servers", "a:1"),
        ("kprod.max.produce.version", "3"),
        ("kprod.max.metadata.version", "1"),
        ("kprod.max.init.producer.id.version", "0"),
    ])
    .unwrap();
    assert_eq!(
        c.max_versions,
        MaxVersions {
            produce: Some(3),
            metadata: Some(1),
            init_producer_id: Some(0),
            api_versions: None,
        }
    );
}

#[test]
fn a_cap_outside_the_supported_versions_names_its_property() {
    for (prop, value) in [
        ("kprod.max.produce.version", "2"),
        ("kprod.max.produce.version", "13"),
        ("kprod.max.metadata.version", "0"),
        ("kprod.max.init.producer.id.version", "6"),
    ] {
        let e = config_from_properties(&[("bootstrap.servers", "a:1"), (prop, value)]).unwrap_err();
        match &e {
            PropertyError::Config(c) => assert_eq!(c.setting, prop, "{e}"),
            other => panic!("{prop}={value}: {other:?}"),
        }
        assert!(e.to_string().contains(prop), "{e}");
    }
    let e = config_from_properties(&[
        ("bootstrap.servers", "a:1"),
        ("kprod.max.produce.version", "seven"),
    ])
    .unwrap_err();
    assert!(
        matches!(&e, PropertyError::Invalid { property, .. } if property == "kprod.max.produce.version"),
        "{e:?}"
    );
}

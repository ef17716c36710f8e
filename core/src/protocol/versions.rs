//! Choosing the versions a connection speaks, from the broker's ApiVersions answer and the
//! user's caps.
//!
//! kprod supports every version that still carries idempotence: Produce v3–v12 (v3 is the
//! first with RecordBatch v2), Metadata v1–v12, InitProducerId v0–v5 and ApiVersions v0–v3.
//! For each API the connection speaks the highest version in kprod's range, the broker's range
//! and under the user's cap ([`MaxVersions`]); a broker whose range shares none of kprod's
//! versions of an API fails the handshake (Kafka 4.x advertises Produce from 0 but refuses
//! 0–2, KAFKA-18659; kprod's Produce starts at 3). Two facts about the broker follow from the result and change what the
//! producer does (see [`NegotiatedVersions`]): whether it knows KIP-360 (InitProducerId v3+,
//! Kafka 2.5+), and whether its Produce responses can carry KIP-951 leader hints (Produce v10+,
//! Kafka 3.7+).

use super::api_versions::ApiVersionsResponse;
use super::init_producer_id::InitProducerIdRequest;
use super::metadata::MetadataRequest;
use super::produce::ProduceRequest;
use super::{api_key, negotiate, Message, VersionRange};

/// Per-API maximum versions set by the user (`kprod.max.produce.version`,
/// `kprod.max.metadata.version`, `kprod.max.init.producer.id.version`): the connection never
/// speaks a higher version, even if both sides could. `None` leaves an API uncapped. Like
/// librdkafka's `broker.version.fallback`, this lets a user pin a producer to what an old
/// broker speaks, and lets tests force every old version against a new broker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct MaxVersions {
    /// Highest Produce version (3..=12).
    pub produce: Option<i16>,
    /// Highest Metadata version (1..=12).
    pub metadata: Option<i16>,
    /// Highest InitProducerId version (0..=5).
    pub init_producer_id: Option<i16>,
    /// Highest ApiVersions version (0..=3): the version of the first request on every
    /// connection (`kprod.max.api.versions.version`).
    pub api_versions: Option<i16>,
}

/// The highest versions each Apache Kafka release served (Produce, Metadata, InitProducerId,
/// ApiVersions), from the first with idempotence on: `validVersions` in
/// `clients/src/main/resources/common/message/*.json` at each release tag (2.2 and later),
/// the request classes' `schemaVersions()` (1.0–2.1) and `Protocol.java` (0.11). A release
/// that served more than kprod speaks is capped at kprod's own maxima.
const KAFKA_RELEASES: &[((u16, u16), [i16; 4])] = &[
    ((0, 11), [3, 4, 0, 1]),
    ((1, 0), [5, 5, 0, 1]),
    ((1, 1), [5, 5, 0, 1]),
    ((2, 0), [6, 6, 1, 2]),
    ((2, 1), [7, 7, 1, 2]),
    ((2, 2), [7, 7, 1, 2]),
    ((2, 3), [7, 8, 1, 2]),
    ((2, 4), [8, 9, 2, 3]),
    ((2, 5), [8, 9, 3, 3]),
    ((2, 6), [8, 9, 3, 3]),
    ((2, 7), [8, 9, 4, 3]),
    ((2, 8), [9, 11, 4, 3]),
    ((3, 0), [9, 11, 4, 3]),
    ((3, 1), [9, 12, 4, 3]),
    ((3, 2), [9, 12, 4, 3]),
    ((3, 3), [9, 12, 4, 3]),
    ((3, 4), [9, 12, 4, 3]),
    ((3, 5), [9, 12, 4, 3]),
    ((3, 6), [9, 12, 4, 3]),
    ((3, 7), [10, 12, 4, 3]),
    ((3, 8), [11, 12, 5, 3]),
    ((3, 9), [11, 12, 5, 3]),
    // 4.x: at least what kprod speaks (4.4 probed: Produce 0-13, of which it refuses 0-2,
    // KAFKA-18659; Metadata 0-13, InitProducerId 0-5); negotiation still takes a lower
    // broker maximum.
    ((4, 0), [12, 12, 5, 3]),
    ((4, 1), [12, 12, 5, 3]),
    ((4, 2), [12, 12, 5, 3]),
    ((4, 3), [12, 12, 5, 3]),
    ((4, 4), [12, 12, 5, 3]),
];

impl MaxVersions {
    /// No cap.
    pub const NONE: Self = Self {
        produce: None,
        metadata: None,
        init_producer_id: None,
        api_versions: None,
    };

    /// The caps of an Apache Kafka release (`kprod.broker.version.max`): the highest versions
    /// of Produce, Metadata, InitProducerId and ApiVersions that `release` served, written
    /// `major.minor` with any patch level (`2.3`, `2.3.1`, `0.11.0.2`). Releases before 0.11
    /// (no idempotence, no RecordBatch v2) and releases kprod does not know (after 4.4, which
    /// need no cap) are refused with the reason.
    pub fn kafka_release(release: &str) -> Result<Self, String> {
        let mut parts = release.trim().split('.');
        let mut next = || parts.next().and_then(|p| p.parse::<u16>().ok());
        let (Some(major), Some(minor)) = (next(), next()) else {
            return Err(format!(
                "{release:?} is not an Apache Kafka release (major.minor, e.g. 2.3 or 3.9.1)"
            ));
        };
        if (major, minor) < (0, 11) {
            return Err(format!(
                "Apache Kafka {major}.{minor} is older than 0.11, the first release with \
                 idempotent producers and RecordBatch v2; kprod cannot produce to it"
            ));
        }
        let Some((_, [p, m, i, a])) = KAFKA_RELEASES.iter().find(|(r, _)| *r == (major, minor))
        else {
            return Err(format!(
                "kprod knows Apache Kafka 0.11 to 4.4, not {major}.{minor} (a newer release \
                 needs no cap: negotiation picks the versions)"
            ));
        };
        Ok(Self {
            produce: Some(*p),
            metadata: Some(*m),
            init_producer_id: Some(*i),
            api_versions: Some(*a),
        })
    }

    /// The lower of two caps, per API.
    pub fn min(self, other: Self) -> Self {
        let lower = |a: Option<i16>, b: Option<i16>| match (a, b) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        Self {
            produce: lower(self.produce, other.produce),
            metadata: lower(self.metadata, other.metadata),
            init_producer_id: lower(self.init_producer_id, other.init_producer_id),
            api_versions: lower(self.api_versions, other.api_versions),
        }
    }

    /// Checks every cap against kprod's own range; on failure names the property.
    pub fn check(&self) -> Result<(), (&'static str, String)> {
        let one = |cap: Option<i16>, ours: VersionRange, prop: &'static str| match cap {
            Some(v) if !ours.contains(v) => Err((
                prop,
                format!(
                    "{v} is outside the supported versions {}..={}",
                    ours.min, ours.max
                ),
            )),
            _ => Ok(()),
        };
        one(
            self.produce,
            ProduceRequest::VERSIONS,
            "kprod.max.produce.version",
        )?;
        one(
            self.metadata,
            MetadataRequest::VERSIONS,
            "kprod.max.metadata.version",
        )?;
        one(
            self.init_producer_id,
            InitProducerIdRequest::VERSIONS,
            "kprod.max.init.producer.id.version",
        )?;
        one(
            self.api_versions,
            super::api_versions::ApiVersionsRequest::VERSIONS,
            "kprod.max.api.versions.version",
        )
    }

    /// The ApiVersions version a connection asks with first.
    pub(crate) fn first_api_versions(&self) -> i16 {
        let ours = super::api_versions::ApiVersionsRequest::VERSIONS.max;
        self.api_versions.map_or(ours, |cap| cap.min(ours))
    }
}

/// The versions one connection speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct NegotiatedVersions {
    /// The ApiVersions version the broker answered.
    pub api_versions: i16,
    /// Produce.
    pub produce: i16,
    /// Metadata.
    pub metadata: i16,
    /// InitProducerId; -1 when the broker does not serve it and idempotence is off
    /// ([`negotiate_versions_for`]).
    pub init_producer_id: i16,
}

impl Default for NegotiatedVersions {
    /// The highest versions kprod speaks (what a connection starts from).
    fn default() -> Self {
        Self {
            api_versions: super::api_versions::ApiVersionsRequest::VERSIONS.max,
            produce: ProduceRequest::VERSIONS.max,
            metadata: MetadataRequest::VERSIONS.max,
            init_producer_id: InitProducerIdRequest::VERSIONS.max,
        }
    }
}

impl NegotiatedVersions {
    /// Whether the broker knows KIP-360 (Kafka 2.5+), i.e. speaks InitProducerId v3+. A
    /// broker that does not is an old Apache Kafka (0.11–2.4) whose clients answered every
    /// sequence problem with a new producer id: kprod then never bumps its epoch locally but
    /// asks for a new producer id and re-sequences from 0 under it (spec §B, P9).
    pub fn kip360(&self) -> bool {
        self.init_producer_id >= 3
    }

    /// Whether Produce responses can carry KIP-951 leader hints (`CurrentLeader`,
    /// `NodeEndpoints`; Produce v10+). Below, a NOT_LEADER_OR_FOLLOWER is followed by a
    /// metadata refresh only.
    pub fn leader_hints(&self) -> bool {
        self.produce >= 10
    }
}

impl std::fmt::Display for NegotiatedVersions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "ApiVersions v{}, Produce v{}, Metadata v{}, ",
            self.api_versions, self.produce, self.metadata
        )?;
        match self.init_producer_id {
            v if v >= 0 => write!(f, "InitProducerId v{v}"),
            _ => f.write_str("no InitProducerId"),
        }
    }
}

/// Why no version could be chosen for an API: its name.
pub type NegotiationError = &'static str;

/// Picks the versions a connection speaks from the broker's ApiVersions answer (given at
/// `api_versions`) under `caps`. Fails with the name of the first API the broker lacks or
/// shares no version of with kprod (under the cap).
pub fn negotiate_versions(
    resp: &ApiVersionsResponse,
    api_versions: i16,
    caps: &MaxVersions,
) -> Result<NegotiatedVersions, NegotiationError> {
    negotiate_versions_for(resp, api_versions, caps, true)
}

/// [`negotiate_versions`] for a producer with idempotence on (`idempotent`) or off. Without
/// idempotence no InitProducerId is ever sent, so a broker that does not serve it (OCI
/// Streaming, KoP without transactions, the Kafka 2.8 KRaft preview) is fine: its
/// `init_producer_id` is then -1.
pub fn negotiate_versions_for(
    resp: &ApiVersionsResponse,
    api_versions: i16,
    caps: &MaxVersions,
    idempotent: bool,
) -> Result<NegotiatedVersions, NegotiationError> {
    let pick = |key: i16, ours: VersionRange, cap: Option<i16>, name: &'static str| {
        let ours = match cap {
            Some(c) => VersionRange::new(ours.min, ours.max.min(c)),
            None => ours,
        };
        if ours.min > ours.max {
            return Err(name);
        }
        resp.range_of(key)
            .and_then(|theirs| negotiate(key, ours, theirs))
            .ok_or(name)
    };
    Ok(NegotiatedVersions {
        api_versions,
        produce: pick(
            api_key::PRODUCE,
            ProduceRequest::VERSIONS,
            caps.produce,
            "Produce",
        )?,
        metadata: pick(
            api_key::METADATA,
            MetadataRequest::VERSIONS,
            caps.metadata,
            "Metadata",
        )?,
        init_producer_id: match pick(
            api_key::INIT_PRODUCER_ID,
            InitProducerIdRequest::VERSIONS,
            caps.init_producer_id,
            "InitProducerId",
        ) {
            Err(_) if !idempotent => -1,
            r => r?,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::super::api_versions::ApiVersion;
    use super::*;

    fn broker(produce: (i16, i16), metadata: (i16, i16), pid: (i16, i16)) -> ApiVersionsResponse {
        let k = |api_key, (min_version, max_version)| ApiVersion {
            api_key,
            min_version,
            max_version,
        };
        ApiVersionsResponse {
            error_code: 0,
            api_keys: vec![
                k(api_key::PRODUCE, produce),
                k(api_key::METADATA, metadata),
                k(api_key::API_VERSIONS, (0, 3)),
                k(api_key::INIT_PRODUCER_ID, pid),
            ],
            throttle_time_ms: 0,
        }
    }

    fn v(api: i16, p: i16, m: i16, i: i16) -> NegotiatedVersions {
        NegotiatedVersions {
            api_versions: api,
            produce: p,
            metadata: m,
            init_producer_id: i,
        }
    }

    #[test]
    fn the_brokers_of_the_readme_table() {
        let none = MaxVersions::NONE;
        // Apache Kafka 4.4 (probed): Produce 0-13 (0-2 refused, KAFKA-18659), Metadata 0-13,
        // InitProducerId 0-5.
        let k44 = broker((0, 13), (0, 13), (0, 5));
        assert_eq!(negotiate_versions(&k44, 3, &none), Ok(v(3, 12, 12, 5)));
        // Apache Kafka 3.9: Produce 0-11, Metadata 0-12, InitProducerId 0-5.
        let k39 = broker((0, 11), (0, 12), (0, 5));
        assert_eq!(negotiate_versions(&k39, 3, &none), Ok(v(3, 11, 12, 5)));
        // Redpanda (its handler declarations): Produce 0-7, Metadata 0-8, InitProducerId 0-3:
        // KIP-360 but no KIP-951 leader hints.
        let rp = broker((0, 7), (0, 8), (0, 3));
        let n = negotiate_versions(&rp, 3, &none).unwrap();
        assert_eq!(n, v(3, 7, 8, 3));
        assert!(n.kip360() && !n.leader_hints());
        // A broker without KIP-360 (Apache Kafka 2.0-2.3: InitProducerId 0-1).
        let k23 = broker((0, 7), (0, 8), (0, 1));
        let n = negotiate_versions(&k23, 2, &none).unwrap();
        assert_eq!(n, v(2, 7, 8, 1));
        assert!(!n.kip360() && !n.leader_hints());
        // Azure Event Hubs: Produce 0-7, Metadata 0-5; with InitProducerId 0-1 it would be
        // spoken as below, without InitProducerId kprod refuses it.
        let eh = broker((0, 7), (0, 5), (0, 1));
        assert_eq!(negotiate_versions(&eh, 2, &none), Ok(v(2, 7, 5, 1)));
        // Kafka 0.11: Produce 0-3, Metadata 0-4, InitProducerId 0.
        let k011 = broker((0, 3), (0, 4), (0, 0));
        assert_eq!(negotiate_versions(&k011, 1, &none), Ok(v(1, 3, 4, 0)));
        // Kafka 0.10.2: no idempotence at all.
        let k0102 = broker((0, 2), (0, 2), (0, 0));
        assert_eq!(negotiate_versions(&k0102, 1, &none), Err("Produce"));
        let mut no_pid = broker((0, 8), (0, 8), (0, 0));
        no_pid
            .api_keys
            .retain(|a| a.api_key != api_key::INIT_PRODUCER_ID);
        assert_eq!(negotiate_versions(&no_pid, 1, &none), Err("InitProducerId"));
        // Without idempotence no InitProducerId is sent: it need not be served.
        let n = negotiate_versions_for(&no_pid, 1, &none, false).unwrap();
        assert_eq!((n.produce, n.metadata, n.init_producer_id), (8, 8, -1));
        assert!(negotiate_versions_for(&k0102, 1, &none, false).is_err());
    }

    #[test]
    fn caps_lower_every_api_and_a_cap_below_the_broker_fails() {
        let k44 = broker((3, 13), (0, 13), (0, 5));
        let caps = MaxVersions {
            produce: Some(3),
            metadata: Some(1),
            init_producer_id: Some(0),
            api_versions: None,
        };
        caps.check().unwrap();
        let n = negotiate_versions(&k44, 3, &caps).unwrap();
        assert_eq!(n, v(3, 3, 1, 0));
        assert!(!n.kip360());
        let caps = MaxVersions {
            produce: Some(9),
            ..MaxVersions::NONE
        };
        assert_eq!(negotiate_versions(&k44, 3, &caps), Ok(v(3, 9, 12, 5)));
        // A broker whose Metadata starts at 9 (a future Kafka) cannot honour a cap of 8.
        let future = broker((3, 13), (9, 13), (0, 5));
        let caps = MaxVersions {
            metadata: Some(8),
            ..MaxVersions::NONE
        };
        assert_eq!(negotiate_versions(&future, 3, &caps), Err("Metadata"));
    }

    #[test]
    fn kafka_releases_map_to_the_versions_they_served() {
        let caps = |r: &str| MaxVersions::kafka_release(r).unwrap();
        let v4 = |p, m, i, a| MaxVersions {
            produce: Some(p),
            metadata: Some(m),
            init_producer_id: Some(i),
            api_versions: Some(a),
        };
        assert_eq!(caps("0.11"), v4(3, 4, 0, 1));
        assert_eq!(caps("0.11.0.2"), v4(3, 4, 0, 1));
        assert_eq!(caps("1.1.1"), v4(5, 5, 0, 1));
        assert_eq!(caps("2.0"), v4(6, 6, 1, 2));
        assert_eq!(caps("2.3"), v4(7, 8, 1, 2));
        assert_eq!(caps("2.3.1"), caps("2.3"));
        assert_eq!(caps("2.4"), v4(8, 9, 2, 3));
        assert_eq!(caps("2.5"), v4(8, 9, 3, 3));
        assert_eq!(caps("2.8"), v4(9, 11, 4, 3));
        assert_eq!(caps("3.7"), v4(10, 12, 4, 3));
        assert_eq!(caps("3.9.1"), v4(11, 12, 5, 3));
        assert_eq!(caps("4.4.0"), v4(12, 12, 5, 3));
        // Every table entry is within kprod's own range, and KIP-360 starts at 2.5.
        for ((major, minor), _) in KAFKA_RELEASES {
            let c = caps(&format!("{major}.{minor}"));
            c.check().unwrap();
            let k44 = broker((3, 13), (0, 13), (0, 5));
            let n = negotiate_versions(&k44, 3, &c).unwrap();
            assert_eq!(n.kip360(), (*major, *minor) >= (2, 5), "{major}.{minor}");
            assert_eq!(
                n.leader_hints(),
                (*major, *minor) >= (3, 7),
                "{major}.{minor}"
            );
        }
        for (bad, says) in [
            ("0.10.2", "older than 0.11"),
            ("0.9", "older than 0.11"),
            ("4.5", "0.11 to 4.4"),
            ("9.0", "0.11 to 4.4"),
            ("2", "not an Apache Kafka release"),
            ("two.three", "not an Apache Kafka release"),
            ("", "not an Apache Kafka release"),
        ] {
            let e = MaxVersions::kafka_release(bad).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }

    #[test]
    fn the_lower_cap_wins_per_api() {
        let release = MaxVersions::kafka_release("2.3").unwrap();
        let own = MaxVersions {
            produce: Some(5),
            metadata: None,
            init_producer_id: Some(3),
            api_versions: None,
        };
        assert_eq!(
            release.min(own),
            MaxVersions {
                produce: Some(5),
                metadata: Some(8),
                init_producer_id: Some(1),
                api_versions: Some(2),
            }
        );
        assert_eq!(MaxVersions::NONE.min(own), own);
        assert_eq!(release.first_api_versions(), 2);
        assert_eq!(MaxVersions::NONE.first_api_versions(), 3);
    }

    #[test]
    fn caps_outside_the_supported_range_name_their_property() {
        for (caps, prop) in [
            (
                MaxVersions {
                    produce: Some(2),
                    ..MaxVersions::NONE
                },
                "kprod.max.produce.version",
            ),
            (
                MaxVersions {
                    produce: Some(13),
                    ..MaxVersions::NONE
                },
                "kprod.max.produce.version",
            ),
            (
                MaxVersions {
                    metadata: Some(0),
                    ..MaxVersions::NONE
                },
                "kprod.max.metadata.version",
            ),
            (
                MaxVersions {
                    init_producer_id: Some(6),
                    ..MaxVersions::NONE
                },
                "kprod.max.init.producer.id.version",
            ),
            (
                MaxVersions {
                    api_versions: Some(4),
                    ..MaxVersions::NONE
                },
                "kprod.max.api.versions.version",
            ),
        ] {
            assert_eq!(caps.check().unwrap_err().0, prop);
        }
    }
}

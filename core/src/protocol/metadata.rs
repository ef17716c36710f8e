//! Metadata (key 3), v1–v12.
//!
//! v1 is the first version with a nullable topic list (null = all topics), `rack`,
//! `controller_id` and `is_internal`; v2 adds `cluster_id`, v3 `throttle_time_ms`, v4 the
//! request's `allow_auto_topic_creation` (before it the broker's own setting applies; decoded
//! as `true`), v5 `offline_replicas`, v7 `leader_epoch` (-1 before), v8 the authorized
//! operations (`i32::MIN` before). v9 is the first flexible version. v10 adds topic ids, v11
//! drops `include_cluster_authorized_operations` (request) and `cluster_authorized_operations`
//! (response), v12 makes the response topic name nullable.

use bytes::{BufMut, BytesMut};

use super::{api_key, DecodeError, Message, Reader, Request, VersionRange, Writer};

/// Metadata request.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct MetadataRequest {
    /// Topics to describe; `None` means all topics.
    pub topics: Option<Vec<MetadataRequestTopic>>,
    /// Whether the broker may auto-create the topics.
    pub allow_auto_topic_creation: bool,
    /// v8–v10 only.
    pub include_cluster_authorized_operations: bool,
    /// Since v8: whether to include topic ACL operations.
    pub include_topic_authorized_operations: bool,
}

/// One requested topic.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct MetadataRequestTopic {
    /// Since v10; all zeros when unknown.
    pub topic_id: [u8; 16],
    /// The name; nullable since v10.
    pub name: Option<String>,
}

impl Message for MetadataRequest {
    const API_KEY: i16 = api_key::METADATA;
    const VERSIONS: VersionRange = VersionRange::new(1, 12);
    const FLEXIBLE_SINCE: i16 = 9;

    fn encode(&self, version: i16, buf: &mut BytesMut) {
        let flex = Self::is_flexible(version);
        buf.put_array_len(self.topics.as_ref().map(Vec::len), flex);
        for t in self.topics.iter().flatten() {
            if version >= 10 {
                buf.put_slice(&t.topic_id);
                buf.put_nullable_string(t.name.as_deref(), true);
            } else {
                buf.put_string(t.name.as_deref().unwrap_or(""), flex);
            }
            if flex {
                buf.put_empty_tags();
            }
        }
        if version >= 4 {
            buf.put_bool(self.allow_auto_topic_creation);
        }
        if (8..=10).contains(&version) {
            buf.put_bool(self.include_cluster_authorized_operations);
        }
        if version >= 8 {
            buf.put_bool(self.include_topic_authorized_operations);
        }
        if flex {
            buf.put_empty_tags();
        }
    }

    fn decode(version: i16, r: &mut Reader) -> Result<Self, DecodeError> {
        let flex = Self::is_flexible(version);
        let topics = match r.nullable_array_len(flex)? {
            None => None,
            Some(n) => {
                // Preallocate no more memory than the bytes that remain (an element is far
                // larger in memory than its shortest encoding).
                let mut v =
                    Vec::with_capacity(n.min(r.remaining() / size_of::<MetadataRequestTopic>()));
                for _ in 0..n {
                    let (topic_id, name) = if version >= 10 {
                        (r.uuid()?, r.nullable_string(true)?)
                    } else {
                        ([0; 16], Some(r.string(flex)?))
                    };
                    if flex {
                        r.skip_tagged_fields()?;
                    }
                    v.push(MetadataRequestTopic { topic_id, name });
                }
                Some(v)
            }
        };
        let allow_auto_topic_creation = if version >= 4 { r.bool()? } else { true };
        let include_cluster_authorized_operations = if (8..=10).contains(&version) {
            r.bool()?
        } else {
            false
        };
        let include_topic_authorized_operations = if version >= 8 { r.bool()? } else { false };
        if flex {
            r.skip_tagged_fields()?;
        }
        Ok(Self {
            topics,
            allow_auto_topic_creation,
            include_cluster_authorized_operations,
            include_topic_authorized_operations,
        })
    }
}

impl Request for MetadataRequest {
    type Response = MetadataResponse;
}

/// Metadata response.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct MetadataResponse {
    /// Throttle time (since v3, 0 before).
    pub throttle_time_ms: i32,
    /// Live brokers.
    pub brokers: Vec<MetadataBroker>,
    /// Cluster id (since v2).
    pub cluster_id: Option<String>,
    /// Controller id, or -1.
    pub controller_id: i32,
    /// Topics.
    pub topics: Vec<MetadataTopic>,
    /// v8–v10 only (`i32::MIN` otherwise).
    pub cluster_authorized_operations: i32,
}

/// One broker.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct MetadataBroker {
    /// Node id.
    pub node_id: i32,
    /// Host name.
    pub host: String,
    /// Port.
    pub port: i32,
    /// Rack, if any.
    pub rack: Option<String>,
}

/// One topic.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct MetadataTopic {
    /// Topic error.
    pub error_code: i16,
    /// Name; nullable since v12.
    pub name: Option<String>,
    /// Since v10.
    pub topic_id: [u8; 16],
    /// Whether the topic is internal.
    pub is_internal: bool,
    /// Partitions.
    pub partitions: Vec<MetadataPartition>,
    /// ACL operations bitfield (since v8, `i32::MIN` before).
    pub topic_authorized_operations: i32,
}

/// One partition.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct MetadataPartition {
    /// Partition error.
    pub error_code: i16,
    /// Partition index.
    pub partition_index: i32,
    /// Leader node id, or -1.
    pub leader_id: i32,
    /// Leader epoch, or -1 (since v7, -1 before).
    pub leader_epoch: i32,
    /// Replicas.
    pub replica_nodes: Vec<i32>,
    /// In-sync replicas.
    pub isr_nodes: Vec<i32>,
    /// Offline replicas (since v5).
    pub offline_replicas: Vec<i32>,
}

impl Message for MetadataResponse {
    const API_KEY: i16 = api_key::METADATA;
    const VERSIONS: VersionRange = VersionRange::new(1, 12);
    const FLEXIBLE_SINCE: i16 = 9;

    fn encode(&self, version: i16, buf: &mut BytesMut) {
        let flex = Self::is_flexible(version);
        if version >= 3 {
            buf.put_i32(self.throttle_time_ms);
        }
        buf.put_array_len(Some(self.brokers.len()), flex);
        for b in &self.brokers {
            buf.put_i32(b.node_id);
            buf.put_string(&b.host, flex);
            buf.put_i32(b.port);
            buf.put_nullable_string(b.rack.as_deref(), flex);
            if flex {
                buf.put_empty_tags();
            }
        }
        if version >= 2 {
            buf.put_nullable_string(self.cluster_id.as_deref(), flex);
        }
        buf.put_i32(self.controller_id);
        buf.put_array_len(Some(self.topics.len()), flex);
        for t in &self.topics {
            buf.put_i16(t.error_code);
            if version >= 12 {
                buf.put_nullable_string(t.name.as_deref(), true);
            } else {
                buf.put_string(t.name.as_deref().unwrap_or(""), flex);
            }
            if version >= 10 {
                buf.put_slice(&t.topic_id);
            }
            buf.put_bool(t.is_internal);
            buf.put_array_len(Some(t.partitions.len()), flex);
            for p in &t.partitions {
                buf.put_i16(p.error_code);
                buf.put_i32(p.partition_index);
                buf.put_i32(p.leader_id);
                if version >= 7 {
                    buf.put_i32(p.leader_epoch);
                }
                buf.put_i32_array(&p.replica_nodes, flex);
                buf.put_i32_array(&p.isr_nodes, flex);
                if version >= 5 {
                    buf.put_i32_array(&p.offline_replicas, flex);
                }
                if flex {
                    buf.put_empty_tags();
                }
            }
            if version >= 8 {
                buf.put_i32(t.topic_authorized_operations);
            }
            if flex {
                buf.put_empty_tags();
            }
        }
        if (8..=10).contains(&version) {
            buf.put_i32(self.cluster_authorized_operations);
        }
        if flex {
            buf.put_empty_tags();
        }
    }

    fn decode(version: i16, r: &mut Reader) -> Result<Self, DecodeError> {
        let flex = Self::is_flexible(version);
        let throttle_time_ms = if version >= 3 { r.i32()? } else { 0 };
        let brokers = r.array(flex, |r| {
            let b = MetadataBroker {
                node_id: r.i32()?,
                host: r.string(flex)?,
                port: r.i32()?,
                rack: r.nullable_string(flex)?,
            };
            if flex {
                r.skip_tagged_fields()?;
            }
            Ok(b)
        })?;
        let cluster_id = if version >= 2 {
            r.nullable_string(flex)?
        } else {
            None
        };
        let controller_id = r.i32()?;
        let topics = r.array(flex, |r| {
            let error_code = r.i16()?;
            let name = if version >= 12 {
                r.nullable_string(true)?
            } else {
                Some(r.string(flex)?)
            };
            let topic_id = if version >= 10 { r.uuid()? } else { [0; 16] };
            let is_internal = r.bool()?;
            let partitions = r.array(flex, |r| {
                let p = MetadataPartition {
                    error_code: r.i16()?,
                    partition_index: r.i32()?,
                    leader_id: r.i32()?,
                    leader_epoch: if version >= 7 { r.i32()? } else { -1 },
                    replica_nodes: r.i32_array(flex)?,
                    isr_nodes: r.i32_array(flex)?,
                    offline_replicas: if version >= 5 {
                        r.i32_array(flex)?
                    } else {
                        Vec::new()
                    },
                };
                if flex {
                    r.skip_tagged_fields()?;
                }
                Ok(p)
            })?;
            let topic_authorized_operations = if version >= 8 { r.i32()? } else { i32::MIN };
            if flex {
                r.skip_tagged_fields()?;
            }
            Ok(MetadataTopic {
                error_code,
                name,
                topic_id,
                is_internal,
                partitions,
                topic_authorized_operations,
            })
        })?;
        let cluster_authorized_operations = if (8..=10).contains(&version) {
            r.i32()?
        } else {
            i32::MIN
        };
        if flex {
            r.skip_tagged_fields()?;
        }
        Ok(Self {
            throttle_time_ms,
            brokers,
            cluster_id,
            controller_id,
            topics,
            cluster_authorized_operations,
        })
    }
}

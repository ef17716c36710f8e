//! Metadata (key 3), flexible versions v9–v12.
//!
//! v10 adds topic ids, v11 drops `include_cluster_authorized_operations` (request) and
//! `cluster_authorized_operations` (response), v12 makes the response topic name nullable.

use bytes::{BufMut, BytesMut};

use super::{api_key, DecodeError, Message, Reader, Request, VersionRange, Writer};

/// Metadata request.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct MetadataRequest {
    /// Topics to describe; `None` means all topics.
    pub topics: Option<Vec<MetadataRequestTopic>>,
    /// Whether the broker may auto-create the topics.
    pub allow_auto_topic_creation: bool,
    /// v9–v10 only.
    pub include_cluster_authorized_operations: bool,
    /// Whether to include topic ACL operations.
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
    const VERSIONS: VersionRange = VersionRange::new(9, 12);
    const FLEXIBLE_SINCE: i16 = 9;

    fn encode(&self, version: i16, buf: &mut BytesMut) {
        buf.put_array_len(self.topics.as_ref().map(Vec::len), true);
        for t in self.topics.iter().flatten() {
            if version >= 10 {
                buf.put_slice(&t.topic_id);
                buf.put_nullable_string(t.name.as_deref(), true);
            } else {
                buf.put_string(t.name.as_deref().unwrap_or(""), true);
            }
            buf.put_empty_tags();
        }
        buf.put_bool(self.allow_auto_topic_creation);
        if version <= 10 {
            buf.put_bool(self.include_cluster_authorized_operations);
        }
        buf.put_bool(self.include_topic_authorized_operations);
        buf.put_empty_tags();
    }

    fn decode(version: i16, r: &mut Reader) -> Result<Self, DecodeError> {
        let topics = match r.nullable_array_len(true)? {
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
                        ([0; 16], Some(r.string(true)?))
                    };
                    r.skip_tagged_fields()?;
                    v.push(MetadataRequestTopic { topic_id, name });
                }
                Some(v)
            }
        };
        let allow_auto_topic_creation = r.bool()?;
        let include_cluster_authorized_operations = if version <= 10 { r.bool()? } else { false };
        let include_topic_authorized_operations = r.bool()?;
        r.skip_tagged_fields()?;
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
    /// Throttle time.
    pub throttle_time_ms: i32,
    /// Live brokers.
    pub brokers: Vec<MetadataBroker>,
    /// Cluster id.
    pub cluster_id: Option<String>,
    /// Controller id, or -1.
    pub controller_id: i32,
    /// Topics.
    pub topics: Vec<MetadataTopic>,
    /// v9–v10 only.
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
    /// ACL operations bitfield.
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
    /// Leader epoch, or -1.
    pub leader_epoch: i32,
    /// Replicas.
    pub replica_nodes: Vec<i32>,
    /// In-sync replicas.
    pub isr_nodes: Vec<i32>,
    /// Offline replicas.
    pub offline_replicas: Vec<i32>,
}

impl Message for MetadataResponse {
    const API_KEY: i16 = api_key::METADATA;
    const VERSIONS: VersionRange = VersionRange::new(9, 12);
    const FLEXIBLE_SINCE: i16 = 9;

    fn encode(&self, version: i16, buf: &mut BytesMut) {
        buf.put_i32(self.throttle_time_ms);
        buf.put_array_len(Some(self.brokers.len()), true);
        for b in &self.brokers {
            buf.put_i32(b.node_id);
            buf.put_string(&b.host, true);
            buf.put_i32(b.port);
            buf.put_nullable_string(b.rack.as_deref(), true);
            buf.put_empty_tags();
        }
        buf.put_nullable_string(self.cluster_id.as_deref(), true);
        buf.put_i32(self.controller_id);
        buf.put_array_len(Some(self.topics.len()), true);
        for t in &self.topics {
            buf.put_i16(t.error_code);
            if version >= 12 {
                buf.put_nullable_string(t.name.as_deref(), true);
            } else {
                buf.put_string(t.name.as_deref().unwrap_or(""), true);
            }
            if version >= 10 {
                buf.put_slice(&t.topic_id);
            }
            buf.put_bool(t.is_internal);
            buf.put_array_len(Some(t.partitions.len()), true);
            for p in &t.partitions {
                buf.put_i16(p.error_code);
                buf.put_i32(p.partition_index);
                buf.put_i32(p.leader_id);
                buf.put_i32(p.leader_epoch);
                buf.put_i32_array(&p.replica_nodes, true);
                buf.put_i32_array(&p.isr_nodes, true);
                buf.put_i32_array(&p.offline_replicas, true);
                buf.put_empty_tags();
            }
            buf.put_i32(t.topic_authorized_operations);
            buf.put_empty_tags();
        }
        if version <= 10 {
            buf.put_i32(self.cluster_authorized_operations);
        }
        buf.put_empty_tags();
    }

    fn decode(version: i16, r: &mut Reader) -> Result<Self, DecodeError> {
        let throttle_time_ms = r.i32()?;
        let brokers = r.array(true, |r| {
            let b = MetadataBroker {
                node_id: r.i32()?,
                host: r.string(true)?,
                port: r.i32()?,
                rack: r.nullable_string(true)?,
            };
            r.skip_tagged_fields()?;
            Ok(b)
        })?;
        let cluster_id = r.nullable_string(true)?;
        let controller_id = r.i32()?;
        let topics = r.array(true, |r| {
            let error_code = r.i16()?;
            let name = if version >= 12 {
                r.nullable_string(true)?
            } else {
                Some(r.string(true)?)
            };
            let topic_id = if version >= 10 { r.uuid()? } else { [0; 16] };
            let is_internal = r.bool()?;
            let partitions = r.array(true, |r| {
                let p = MetadataPartition {
                    error_code: r.i16()?,
                    partition_index: r.i32()?,
                    leader_id: r.i32()?,
                    leader_epoch: r.i32()?,
                    replica_nodes: r.i32_array(true)?,
                    isr_nodes: r.i32_array(true)?,
                    offline_replicas: r.i32_array(true)?,
                };
                r.skip_tagged_fields()?;
                Ok(p)
            })?;
            let topic_authorized_operations = r.i32()?;
            r.skip_tagged_fields()?;
            Ok(MetadataTopic {
                error_code,
                name,
                topic_id,
                is_internal,
                partitions,
                topic_authorized_operations,
            })
        })?;
        let cluster_authorized_operations = if version <= 10 { r.i32()? } else { i32::MIN };
        r.skip_tagged_fields()?;
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

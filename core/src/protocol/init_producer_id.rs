//! InitProducerId (key 22), v0–v5.
//!
//! An idempotent producer sends `transactional_id = null`; the broker then always hands out a
//! fresh producer id with epoch 0 and ignores `producer_id`/`producer_epoch` (which v3+ carry,
//! sent as -1 here). v0 and v1 (Kafka 0.11–2.3) are non-flexible and have the same layout (v1
//! only changed the broker's throttling); v2 (2.4) is the first flexible version; v3 (2.5,
//! KIP-360) adds `producer_id`/`producer_epoch`. A broker whose highest InitProducerId version
//! is below 3 predates KIP-360: the producer then never bumps its epoch locally but asks for a
//! new producer id instead (see `NegotiatedVersions::kip360`).

use bytes::{BufMut, BytesMut};

use super::{api_key, DecodeError, Message, Reader, Request, VersionRange, Writer};

/// InitProducerId request.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct InitProducerIdRequest {
    /// Null for an idempotent producer.
    pub transactional_id: Option<String>,
    /// Ignored without a transactional id.
    pub transaction_timeout_ms: i32,
    /// Since v3. -1 for a fresh id.
    pub producer_id: i64,
    /// Since v3. -1 for a fresh id.
    pub producer_epoch: i16,
}

impl Default for InitProducerIdRequest {
    fn default() -> Self {
        Self {
            transactional_id: None,
            transaction_timeout_ms: i32::MAX,
            producer_id: -1,
            producer_epoch: -1,
        }
    }
}

impl Message for InitProducerIdRequest {
    const API_KEY: i16 = api_key::INIT_PRODUCER_ID;
    const VERSIONS: VersionRange = VersionRange::new(0, 5);
    const FLEXIBLE_SINCE: i16 = 2;

    fn encode(&self, version: i16, buf: &mut BytesMut) {
        let flex = Self::is_flexible(version);
        buf.put_nullable_string(self.transactional_id.as_deref(), flex);
        buf.put_i32(self.transaction_timeout_ms);
        if version >= 3 {
            buf.put_i64(self.producer_id);
            buf.put_i16(self.producer_epoch);
        }
        if flex {
            buf.put_empty_tags();
        }
    }

    fn decode(version: i16, r: &mut Reader) -> Result<Self, DecodeError> {
        let flex = Self::is_flexible(version);
        let transactional_id = r.nullable_string(flex)?;
        let transaction_timeout_ms = r.i32()?;
        let (producer_id, producer_epoch) = if version >= 3 {
            (r.i64()?, r.i16()?)
        } else {
            (-1, -1)
        };
        if flex {
            r.skip_tagged_fields()?;
        }
        Ok(Self {
            transactional_id,
            transaction_timeout_ms,
            producer_id,
            producer_epoch,
        })
    }
}

impl Request for InitProducerIdRequest {
    type Response = InitProducerIdResponse;
}

/// InitProducerId response.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct InitProducerIdResponse {
    /// Throttle time.
    pub throttle_time_ms: i32,
    /// Error code.
    pub error_code: i16,
    /// The producer id, or -1.
    pub producer_id: i64,
    /// The epoch, or -1.
    pub producer_epoch: i16,
}

impl Message for InitProducerIdResponse {
    const API_KEY: i16 = api_key::INIT_PRODUCER_ID;
    const VERSIONS: VersionRange = VersionRange::new(0, 5);
    const FLEXIBLE_SINCE: i16 = 2;

    fn encode(&self, version: i16, buf: &mut BytesMut) {
        buf.put_i32(self.throttle_time_ms);
        buf.put_i16(self.error_code);
        buf.put_i64(self.producer_id);
        buf.put_i16(self.producer_epoch);
        if Self::is_flexible(version) {
            buf.put_empty_tags();
        }
    }

    fn decode(version: i16, r: &mut Reader) -> Result<Self, DecodeError> {
        let m = Self {
            throttle_time_ms: r.i32()?,
            error_code: r.i16()?,
            producer_id: r.i64()?,
            producer_epoch: r.i16()?,
        };
        if Self::is_flexible(version) {
            r.skip_tagged_fields()?;
        }
        Ok(m)
    }
}

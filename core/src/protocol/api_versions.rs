//! ApiVersions (key 18), v0–v3.
//!
//! v3 is the first flexible version and sends `client_software_name`/`version` (KIP-511).
//! The response header is always v0, whatever the version. When the broker does not support
//! our version it answers at v0 with UNSUPPORTED_VERSION and, since Kafka 2.4, lists its own
//! ApiVersions range so the client can retry at the highest version it supports.

use bytes::{BufMut, BytesMut};

use super::{api_key, DecodeError, Message, Reader, Request, VersionRange, Writer};

/// ApiVersions request.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct ApiVersionsRequest {
    /// Since v3. Must match `[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?`.
    pub client_software_name: String,
    /// Since v3. Same pattern as the name.
    pub client_software_version: String,
}

impl Message for ApiVersionsRequest {
    const API_KEY: i16 = api_key::API_VERSIONS;
    const VERSIONS: VersionRange = VersionRange::new(0, 3);
    const FLEXIBLE_SINCE: i16 = 3;

    fn encode(&self, version: i16, buf: &mut BytesMut) {
        if version >= 3 {
            buf.put_string(&self.client_software_name, true);
            buf.put_string(&self.client_software_version, true);
            buf.put_empty_tags();
        }
    }

    fn decode(version: i16, r: &mut Reader) -> Result<Self, DecodeError> {
        if version >= 3 {
            let client_software_name = r.string(true)?;
            let client_software_version = r.string(true)?;
            r.skip_tagged_fields()?;
            Ok(Self {
                client_software_name,
                client_software_version,
            })
        } else {
            Ok(Self::default())
        }
    }
}

impl Request for ApiVersionsRequest {
    type Response = ApiVersionsResponse;

    fn response_header_version(_version: i16) -> i16 {
        0
    }
}

/// One API's supported range.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ApiVersion {
    /// API key.
    pub api_key: i16,
    /// Lowest supported version.
    pub min_version: i16,
    /// Highest supported version.
    pub max_version: i16,
}

/// ApiVersions response. The tagged feature fields of v3 are skipped on decode.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct ApiVersionsResponse {
    /// Top-level error.
    pub error_code: i16,
    /// Supported APIs.
    pub api_keys: Vec<ApiVersion>,
    /// Since v1.
    pub throttle_time_ms: i32,
}

impl ApiVersionsResponse {
    /// The broker's range for `key`, if it supports that API.
    pub fn range_of(&self, key: i16) -> Option<VersionRange> {
        self.api_keys
            .iter()
            .find(|a| a.api_key == key)
            .map(|a| VersionRange::new(a.min_version, a.max_version))
    }
}

impl Message for ApiVersionsResponse {
    const API_KEY: i16 = api_key::API_VERSIONS;
    const VERSIONS: VersionRange = VersionRange::new(0, 3);
    const FLEXIBLE_SINCE: i16 = 3;

    fn encode(&self, version: i16, buf: &mut BytesMut) {
        let flex = Self::is_flexible(version);
        buf.put_i16(self.error_code);
        buf.put_array_len(Some(self.api_keys.len()), flex);
        for k in &self.api_keys {
            buf.put_i16(k.api_key);
            buf.put_i16(k.min_version);
            buf.put_i16(k.max_version);
            if flex {
                buf.put_empty_tags();
            }
        }
        if version >= 1 {
            buf.put_i32(self.throttle_time_ms);
        }
        if flex {
            buf.put_empty_tags();
        }
    }

    fn decode(version: i16, r: &mut Reader) -> Result<Self, DecodeError> {
        let flex = Self::is_flexible(version);
        let error_code = r.i16()?;
        let api_keys = r.array(flex, |r| {
            let k = ApiVersion {
                api_key: r.i16()?,
                min_version: r.i16()?,
                max_version: r.i16()?,
            };
            if flex {
                r.skip_tagged_fields()?;
            }
            Ok(k)
        })?;
        let throttle_time_ms = if version >= 1 { r.i32()? } else { 0 };
        if flex {
            r.skip_tagged_fields()?;
        }
        Ok(Self {
            error_code,
            api_keys,
            throttle_time_ms,
        })
    }
}

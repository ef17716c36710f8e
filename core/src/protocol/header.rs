//! Request header v1/v2 and response header v0/v1.
//!
//! `client_id` keeps its classic i16-length encoding even in the flexible v2 header
//! (its JSON field has `"flexibleVersions": "none"`). The ApiVersions response header is
//! always v0 (KIP-511).

use bytes::{BufMut, BytesMut};

use super::{DecodeError, Reader, Writer};

/// A request header.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RequestHeader {
    /// API key.
    pub api_key: i16,
    /// API version.
    pub api_version: i16,
    /// Correlation id, echoed by the response.
    pub correlation_id: i32,
    /// Client id (classic nullable string in both versions).
    pub client_id: Option<String>,
}

impl RequestHeader {
    /// Encodes as header `version` (1 or 2).
    pub fn encode(&self, version: i16, buf: &mut BytesMut) {
        encode_request_header(
            self.api_key,
            self.api_version,
            self.correlation_id,
            self.client_id.as_deref(),
            version,
            buf,
        );
    }

    /// Decodes header `version` (1 or 2).
    pub fn decode(version: i16, r: &mut Reader) -> Result<Self, DecodeError> {
        let api_key = r.i16()?;
        let api_version = r.i16()?;
        let correlation_id = r.i32()?;
        let client_id = r.nullable_string(false)?;
        if version >= 2 {
            r.skip_tagged_fields()?;
        }
        Ok(Self {
            api_key,
            api_version,
            correlation_id,
            client_id,
        })
    }
}

/// Encodes a request header from borrowed fields (no [`RequestHeader`] needed, so nothing is
/// allocated on the way to the wire).
pub fn encode_request_header(
    api_key: i16,
    api_version: i16,
    correlation_id: i32,
    client_id: Option<&str>,
    version: i16,
    buf: &mut BytesMut,
) {
    buf.put_i16(api_key);
    buf.put_i16(api_version);
    buf.put_i32(correlation_id);
    buf.put_nullable_string(client_id, false);
    if version >= 2 {
        buf.put_empty_tags();
    }
}

/// A response header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ResponseHeader {
    /// The request's correlation id.
    pub correlation_id: i32,
}

impl ResponseHeader {
    /// Encodes as header `version` (0 or 1).
    pub fn encode(&self, version: i16, buf: &mut BytesMut) {
        buf.put_i32(self.correlation_id);
        if version >= 1 {
            buf.put_empty_tags();
        }
    }

    /// Decodes header `version` (0 or 1).
    pub fn decode(version: i16, r: &mut Reader) -> Result<Self, DecodeError> {
        let correlation_id = r.i32()?;
        if version >= 1 {
            r.skip_tagged_fields()?;
        }
        Ok(Self { correlation_id })
    }

    /// Reads only the correlation id at the front of a response frame, without consuming it.
    pub fn peek_correlation_id(frame: &[u8]) -> Result<i32, DecodeError> {
        let b: [u8; 4] = frame
            .get(..4)
            .and_then(|s| s.try_into().ok())
            .ok_or(DecodeError::Truncated)?;
        Ok(i32::from_be_bytes(b))
    }
}

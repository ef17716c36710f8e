//! The Kafka wire protocol, as far as an idempotent producer needs it.
//!
//! Every message is hand-written: one file per API, each with its request and response,
//! the supported version range and the first flexible version next to the struct
//! (rskafka's `RequestBody` pattern). Encoding is infallible for the versions we support;
//! decoding returns a [`DecodeError`] and never panics, whatever the input.
//!
//! References:
//! - <https://kafka.apache.org/protocol.html>
//! - apache/kafka `clients/src/main/resources/common/message/*.json`
//! - KIP-482 (tagged fields), KIP-511 (ApiVersions v3), KIP-951 (leader hints in Produce v10)

pub mod api_versions;
pub mod compression;
pub mod error_code;
pub mod frame;
pub mod header;
pub mod init_producer_id;
pub mod metadata;
pub mod primitives;
pub mod produce;
pub mod record_batch;
pub mod sasl;
pub mod versions;

use bytes::{BufMut, Bytes, BytesMut};

pub use error_code::ErrorCode;
pub use frame::FrameDecoder;
pub use header::{RequestHeader, ResponseHeader};
pub use primitives::{Reader, Writer};
pub use versions::{negotiate_versions, negotiate_versions_for, MaxVersions, NegotiatedVersions};

/// Why a buffer could not be decoded. Only ever produced by bytes from a peer.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DecodeError {
    /// The buffer ended in the middle of a field.
    Truncated,
    /// A varint ran past its maximum width.
    VarintOverflow,
    /// A length prefix was negative (other than -1 for null) or too large.
    InvalidLength(i64),
    /// A non-nullable field was null.
    UnexpectedNull,
    /// A string was not UTF-8.
    InvalidUtf8,
    /// Bytes were left over after the message.
    TrailingBytes(usize),
    /// Tagged fields were not in strictly increasing tag order.
    TagOrder(u32),
    /// A frame's size prefix was negative or above the configured maximum.
    FrameSize(i32),
    /// The version is outside the range this codec supports.
    UnsupportedVersion {
        /// API key.
        api_key: i16,
        /// Requested version.
        version: i16,
    },
    /// A record batch's stored CRC differs from the computed one.
    CrcMismatch {
        /// CRC stored in the batch.
        stored: u32,
        /// CRC computed over the batch.
        computed: u32,
    },
    /// A record batch had a magic byte other than 2.
    UnsupportedMagic(i8),
    /// A field held a value that makes no sense (described by the string).
    Invalid(&'static str),
}

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Truncated => write!(f, "buffer ended in the middle of a field"),
            Self::VarintOverflow => write!(f, "varint too long"),
            Self::InvalidLength(n) => write!(f, "invalid length {n}"),
            Self::UnexpectedNull => write!(f, "null in a non-nullable field"),
            Self::InvalidUtf8 => write!(f, "string is not UTF-8"),
            Self::TrailingBytes(n) => write!(f, "{n} trailing bytes after the message"),
            Self::TagOrder(t) => write!(f, "tagged field {t} out of order"),
            Self::FrameSize(n) => write!(f, "frame size {n} out of range"),
            Self::UnsupportedVersion { api_key, version } => {
                write!(f, "api {api_key} version {version} is not supported")
            }
            Self::CrcMismatch { stored, computed } => {
                write!(
                    f,
                    "crc mismatch: stored {stored:#010x}, computed {computed:#010x}"
                )
            }
            Self::UnsupportedMagic(m) => write!(f, "record batch magic {m} is not supported"),
            Self::Invalid(what) => write!(f, "invalid field: {what}"),
        }
    }
}

impl std::error::Error for DecodeError {}

/// Kafka API keys used by the producer.
pub mod api_key {
    /// Produce.
    pub const PRODUCE: i16 = 0;
    /// Metadata.
    pub const METADATA: i16 = 3;
    /// SaslHandshake.
    pub const SASL_HANDSHAKE: i16 = 17;
    /// ApiVersions.
    pub const API_VERSIONS: i16 = 18;
    /// InitProducerId.
    pub const INIT_PRODUCER_ID: i16 = 22;
    /// SaslAuthenticate.
    pub const SASL_AUTHENTICATE: i16 = 36;
}

/// An inclusive range of API versions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct VersionRange {
    /// Lowest version, inclusive.
    pub min: i16,
    /// Highest version, inclusive.
    pub max: i16,
}

impl VersionRange {
    /// A range from `min` to `max` inclusive.
    pub const fn new(min: i16, max: i16) -> Self {
        Self { min, max }
    }

    /// Whether `v` is in the range.
    pub const fn contains(&self, v: i16) -> bool {
        v >= self.min && v <= self.max
    }

    /// The overlap of two ranges, if any.
    pub fn intersect(&self, other: &Self) -> Option<Self> {
        let min = self.min.max(other.min);
        let max = self.max.min(other.max);
        (min <= max).then_some(Self { min, max })
    }
}

/// Picks the version to use for an API: the highest version in both our range and the
/// broker's. Kafka 4.0 advertises a Produce minimum of 0 while it refuses anything below 3
/// (KAFKA-18659): kprod's own Produce minimum is 3, so the overlap never picks those. A
/// broker whose minimum is above what kprod speaks gets no version (the handshake fails
/// with `UnsupportedVersions`), rather than requests it said it does not serve (a review
/// finding: the advertised Produce minimum was ignored upwards too, and each request was
/// refused until its delivery timeout).
pub fn negotiate(_api_key: i16, ours: VersionRange, broker: VersionRange) -> Option<i16> {
    ours.intersect(&broker).map(|r| r.max)
}

/// A message body with a versioned encoding.
pub trait Message: Sized {
    /// The API this message belongs to.
    const API_KEY: i16;
    /// The versions this codec supports.
    const VERSIONS: VersionRange;
    /// The first flexible (compact, tagged) version.
    const FLEXIBLE_SINCE: i16;

    /// Encodes the body at `version`. The caller guarantees `version` is in [`Self::VERSIONS`].
    fn encode(&self, version: i16, buf: &mut BytesMut);

    /// Decodes a body at `version`, consuming exactly the body.
    fn decode(version: i16, r: &mut Reader) -> Result<Self, DecodeError>;

    /// A guess at the encoded size, so that encoding does not have to grow its buffer.
    fn size_hint(&self) -> usize {
        128
    }

    /// Whether `version` uses the flexible encoding.
    fn is_flexible(version: i16) -> bool {
        version >= Self::FLEXIBLE_SINCE
    }

    /// Fails if `version` is outside [`Self::VERSIONS`].
    fn check_version(version: i16) -> Result<(), DecodeError> {
        if Self::VERSIONS.contains(version) {
            Ok(())
        } else {
            Err(DecodeError::UnsupportedVersion {
                api_key: Self::API_KEY,
                version,
            })
        }
    }

    /// Decodes a whole body from `bytes` and fails on trailing bytes.
    fn decode_exact(version: i16, bytes: Bytes) -> Result<Self, DecodeError> {
        Self::check_version(version)?;
        let mut r = Reader::new(bytes);
        let m = Self::decode(version, &mut r)?;
        r.expect_end()?;
        Ok(m)
    }
}

/// A request body, tied to its response type.
pub trait Request: Message {
    /// The response body type.
    type Response: Message;

    /// The request header version for `version`.
    fn request_header_version(version: i16) -> i16 {
        if Self::is_flexible(version) {
            2
        } else {
            1
        }
    }

    /// The response header version for `version`. ApiVersions overrides this: its response
    /// header is always v0 (KIP-511).
    fn response_header_version(version: i16) -> i16 {
        if Self::is_flexible(version) {
            1
        } else {
            0
        }
    }
}

/// Encodes a whole request frame: size prefix, request header, body.
pub fn encode_request<R: Request>(
    req: &R,
    version: i16,
    correlation_id: i32,
    client_id: Option<&str>,
) -> Bytes {
    debug_assert!(R::VERSIONS.contains(version));
    let client_id_len = client_id.map_or(0, str::len);
    let mut buf = BytesMut::with_capacity(req.size_hint() + client_id_len + 16);
    buf.put_i32(0);
    header::encode_request_header(
        R::API_KEY,
        version,
        correlation_id,
        client_id,
        R::request_header_version(version),
        &mut buf,
    );
    req.encode(version, &mut buf);
    let size = (buf.len() - 4) as i32;
    buf[..4].copy_from_slice(&size.to_be_bytes());
    buf.freeze()
}

/// Encodes a whole response frame: size prefix, response header, body.
pub fn encode_response<R: Request>(resp: &R::Response, version: i16, correlation_id: i32) -> Bytes {
    let mut buf = BytesMut::with_capacity(resp.size_hint() + 16);
    buf.put_i32(0);
    ResponseHeader { correlation_id }.encode(R::response_header_version(version), &mut buf);
    resp.encode(version, &mut buf);
    let size = (buf.len() - 4) as i32;
    buf[..4].copy_from_slice(&size.to_be_bytes());
    buf.freeze()
}

/// Decodes a response frame (size prefix already removed) whose correlation id was already
/// matched to `R` at `version`. Trailing bytes after the body are ignored.
pub fn decode_response<R: Request>(
    version: i16,
    frame: Bytes,
) -> Result<(ResponseHeader, R::Response), DecodeError> {
    R::Response::check_version(version)?;
    let mut r = Reader::new(frame);
    let header = ResponseHeader::decode(R::response_header_version(version), &mut r)?;
    // Bytes after the body are ignored, as the Java client and librdkafka do: the frame size
    // already delimits the message, and peers exist that append a byte (librdkafka's mock
    // cluster ends every Metadata v9+ response with a second tagged-field section).
    let body = R::Response::decode(version, &mut r)?;
    Ok((header, body))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn negotiation_takes_the_highest_common_version() {
        let ours = VersionRange::new(9, 12);
        assert_eq!(
            negotiate(api_key::METADATA, ours, VersionRange::new(0, 13)),
            Some(12)
        );
        assert_eq!(
            negotiate(api_key::METADATA, ours, VersionRange::new(0, 10)),
            Some(10)
        );
        assert_eq!(
            negotiate(api_key::METADATA, ours, VersionRange::new(0, 8)),
            None
        );
        assert_eq!(
            negotiate(api_key::METADATA, ours, VersionRange::new(13, 13)),
            None
        );
    }

    #[test]
    fn negotiation_takes_the_overlap_of_the_produce_ranges() {
        // Kafka 4.0 advertises 0 and refuses 0-2 (KAFKA-18659): kprod's minimum is 3. A
        // broker that serves none of kprod's versions gets none.
        let ours = VersionRange::new(3, 12);
        assert_eq!(
            negotiate(api_key::PRODUCE, ours, VersionRange::new(0, 12)),
            Some(12)
        );
        assert_eq!(
            negotiate(api_key::PRODUCE, ours, VersionRange::new(13, 13)),
            None
        );
        assert_eq!(
            negotiate(api_key::PRODUCE, ours, VersionRange::new(0, 7)),
            Some(7)
        );
        assert_eq!(
            negotiate(api_key::PRODUCE, ours, VersionRange::new(0, 2)),
            None
        );
    }
}

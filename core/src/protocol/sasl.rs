//! SaslHandshake (key 17), v0–v1, and SaslAuthenticate (key 36), v0–v2.
//!
//! kprod always sends SaslHandshake v1 (KIP-152): the mechanism's tokens then travel inside
//! SaslAuthenticate requests, framed like every other request, instead of as raw bytes (v0).
//! SaslAuthenticate v1 adds `session_lifetime_ms` to the response (KIP-368: the client must
//! re-authenticate before it ends); v2 is the flexible version.
//!
//! The authentication bytes can hold a password (PLAIN) or a token (OAUTHBEARER), so the
//! `Debug` output of these messages shows their length only.

use bytes::{BufMut, Bytes, BytesMut};

use super::{api_key, DecodeError, Message, Reader, Request, VersionRange, Writer};

/// SaslHandshake request: the mechanism the client wants.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SaslHandshakeRequest {
    /// `PLAIN`, `SCRAM-SHA-256`, `SCRAM-SHA-512`, `OAUTHBEARER`, ...
    pub mechanism: String,
}

impl Message for SaslHandshakeRequest {
    const API_KEY: i16 = api_key::SASL_HANDSHAKE;
    const VERSIONS: VersionRange = VersionRange::new(0, 1);
    /// No version of SaslHandshake is flexible.
    const FLEXIBLE_SINCE: i16 = i16::MAX;

    fn encode(&self, _version: i16, buf: &mut BytesMut) {
        buf.put_string(&self.mechanism, false);
    }

    fn decode(_version: i16, r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(Self {
            mechanism: r.string(false)?,
        })
    }
}

impl Request for SaslHandshakeRequest {
    type Response = SaslHandshakeResponse;
}

/// SaslHandshake response.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct SaslHandshakeResponse {
    /// Error code (UNSUPPORTED_SASL_MECHANISM when the mechanism is not enabled).
    pub error_code: i16,
    /// The mechanisms enabled on the listener.
    pub mechanisms: Vec<String>,
}

impl Message for SaslHandshakeResponse {
    const API_KEY: i16 = api_key::SASL_HANDSHAKE;
    const VERSIONS: VersionRange = VersionRange::new(0, 1);
    const FLEXIBLE_SINCE: i16 = i16::MAX;

    fn encode(&self, _version: i16, buf: &mut BytesMut) {
        buf.put_i16(self.error_code);
        buf.put_array_len(Some(self.mechanisms.len()), false);
        for m in &self.mechanisms {
            buf.put_string(m, false);
        }
    }

    fn decode(_version: i16, r: &mut Reader) -> Result<Self, DecodeError> {
        let error_code = r.i16()?;
        let mechanisms = r.array(false, |r| r.string(false))?;
        Ok(Self {
            error_code,
            mechanisms,
        })
    }
}

/// SaslAuthenticate request: one token of the mechanism's exchange.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct SaslAuthenticateRequest {
    /// The mechanism's bytes (may hold a password or a token).
    pub auth_bytes: Bytes,
}

impl std::fmt::Debug for SaslAuthenticateRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SaslAuthenticateRequest")
            .field(
                "auth_bytes",
                &format_args!("<{} bytes>", self.auth_bytes.len()),
            )
            .finish()
    }
}

impl Message for SaslAuthenticateRequest {
    const API_KEY: i16 = api_key::SASL_AUTHENTICATE;
    const VERSIONS: VersionRange = VersionRange::new(0, 2);
    const FLEXIBLE_SINCE: i16 = 2;

    fn encode(&self, version: i16, buf: &mut BytesMut) {
        let flex = Self::is_flexible(version);
        buf.put_nullable_bytes(Some(&self.auth_bytes), flex);
        if flex {
            buf.put_empty_tags();
        }
    }

    fn size_hint(&self) -> usize {
        self.auth_bytes.len() + 16
    }

    fn decode(version: i16, r: &mut Reader) -> Result<Self, DecodeError> {
        let flex = Self::is_flexible(version);
        let auth_bytes = r.nullable_bytes(flex)?.ok_or(DecodeError::UnexpectedNull)?;
        if flex {
            r.skip_tagged_fields()?;
        }
        Ok(Self { auth_bytes })
    }
}

impl Request for SaslAuthenticateRequest {
    type Response = SaslAuthenticateResponse;
}

/// SaslAuthenticate response.
#[derive(Clone, PartialEq, Eq, Hash, Default)]
pub struct SaslAuthenticateResponse {
    /// Error code (SASL_AUTHENTICATION_FAILED for bad credentials).
    pub error_code: i16,
    /// The broker's explanation, if any.
    pub error_message: Option<String>,
    /// The mechanism's next bytes from the server.
    pub auth_bytes: Bytes,
    /// Since v1: milliseconds until the session expires, 0 for never (KIP-368).
    pub session_lifetime_ms: i64,
}

impl std::fmt::Debug for SaslAuthenticateResponse {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SaslAuthenticateResponse")
            .field("error_code", &self.error_code)
            .field("error_message", &self.error_message)
            .field(
                "auth_bytes",
                &format_args!("<{} bytes>", self.auth_bytes.len()),
            )
            .field("session_lifetime_ms", &self.session_lifetime_ms)
            .finish()
    }
}

impl Message for SaslAuthenticateResponse {
    const API_KEY: i16 = api_key::SASL_AUTHENTICATE;
    const VERSIONS: VersionRange = VersionRange::new(0, 2);
    const FLEXIBLE_SINCE: i16 = 2;

    fn encode(&self, version: i16, buf: &mut BytesMut) {
        let flex = Self::is_flexible(version);
        buf.put_i16(self.error_code);
        buf.put_nullable_string(self.error_message.as_deref(), flex);
        buf.put_nullable_bytes(Some(&self.auth_bytes), flex);
        if version >= 1 {
            buf.put_i64(self.session_lifetime_ms);
        }
        if flex {
            buf.put_empty_tags();
        }
    }

    fn decode(version: i16, r: &mut Reader) -> Result<Self, DecodeError> {
        let flex = Self::is_flexible(version);
        let error_code = r.i16()?;
        let error_message = r.nullable_string(flex)?;
        // Kafka never sends null here, but a failed exchange may come with no bytes at all.
        let auth_bytes = r.nullable_bytes(flex)?.unwrap_or_default();
        let session_lifetime_ms = if version >= 1 { r.i64()? } else { 0 };
        if flex {
            r.skip_tagged_fields()?;
        }
        Ok(Self {
            error_code,
            error_message,
            auth_bytes,
            session_lifetime_ms,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{decode_response, encode_request, encode_response};

    #[test]
    fn handshake_v1_bytes() {
        let req = SaslHandshakeRequest {
            mechanism: "PLAIN".into(),
        };
        let frame = encode_request(&req, 1, 7, Some("c"));
        // size, key 17, version 1, correlation 7, client id "c", mechanism "PLAIN".
        let mut want = vec![0, 0, 0, 18, 0, 17, 0, 1, 0, 0, 0, 7, 0, 1, b'c', 0, 5];
        want.extend_from_slice(b"PLAIN");
        assert_eq!(&frame[..], &want[..]);

        let resp = SaslHandshakeResponse {
            error_code: 33,
            mechanisms: vec!["SCRAM-SHA-256".into(), "PLAIN".into()],
        };
        let bytes = encode_response::<SaslHandshakeRequest>(&resp, 1, 7);
        let (h, back) = decode_response::<SaslHandshakeRequest>(1, bytes.slice(4..)).unwrap();
        assert_eq!(h.correlation_id, 7);
        assert_eq!(back, resp);
    }

    #[test]
    fn authenticate_round_trips_at_every_version() {
        for v in 0..=2 {
            let req = SaslAuthenticateRequest {
                auth_bytes: Bytes::from_static(b"\0alice\0secret"),
            };
            let mut buf = BytesMut::new();
            req.encode(v, &mut buf);
            let back = SaslAuthenticateRequest::decode_exact(v, buf.freeze()).unwrap();
            assert_eq!(back, req);

            let resp = SaslAuthenticateResponse {
                error_code: 58,
                error_message: Some("Authentication failed".into()),
                auth_bytes: Bytes::from_static(b"v=abc"),
                session_lifetime_ms: if v >= 1 { 3000 } else { 0 },
            };
            let bytes = encode_response::<SaslAuthenticateRequest>(&resp, v, 9);
            let (_, back) =
                decode_response::<SaslAuthenticateRequest>(v, bytes.slice(4..)).unwrap();
            assert_eq!(back, resp, "v{v}");
        }
    }

    #[test]
    fn authenticate_v2_is_compact_and_v1_carries_the_lifetime() {
        let resp = SaslAuthenticateResponse {
            error_code: 0,
            error_message: None,
            auth_bytes: Bytes::from_static(b"ok"),
            session_lifetime_ms: 2,
        };
        let mut v2 = BytesMut::new();
        resp.encode(2, &mut v2);
        // error 0, null compact string, compact bytes "ok", lifetime 2, no tags.
        assert_eq!(
            &v2[..],
            &[0, 0, 0, 3, b'o', b'k', 0, 0, 0, 0, 0, 0, 0, 2, 0]
        );
        let mut v1 = BytesMut::new();
        resp.encode(1, &mut v1);
        assert_eq!(
            &v1[..],
            &[0, 0, 0xff, 0xff, 0, 0, 0, 2, b'o', b'k', 0, 0, 0, 0, 0, 0, 0, 2]
        );
    }

    #[test]
    fn hostile_responses_do_not_panic() {
        for v in 0..=2 {
            for len in 0..24 {
                let junk: Vec<u8> = (0..len).map(|i| (i * 37 + v as usize) as u8).collect();
                let auth = SaslAuthenticateResponse::decode_exact(v, Bytes::from(junk.clone()));
                let handshake = SaslHandshakeResponse::decode_exact(v.min(1), Bytes::from(junk));
                // Shorter than an error code and a length: an error, never a made-up answer.
                if len < 4 {
                    assert!(auth.is_err(), "v{v}, {len} bytes: {auth:?}");
                    assert!(handshake.is_err(), "v{v}, {len} bytes: {handshake:?}");
                }
            }
        }
    }

    #[test]
    fn debug_hides_the_auth_bytes() {
        let req = SaslAuthenticateRequest {
            auth_bytes: Bytes::from_static(b"\0alice\0hunter2"),
        };
        let text = format!("{req:?}");
        assert!(!text.contains("hunter2"), "{text}");
        assert!(text.contains("14 bytes"), "{text}");
    }
}

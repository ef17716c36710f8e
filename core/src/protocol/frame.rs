//! Length-prefixed framing: every Kafka message is an `int32` size followed by that many bytes.

use bytes::{Buf, Bytes, BytesMut};

use super::DecodeError;

/// Default cap on a frame's size (100 MiB, Kafka's `socket.request.max.bytes` default).
pub const DEFAULT_MAX_FRAME_SIZE: usize = 100 * 1024 * 1024;

/// Splits whole frames off the front of a caller-owned buffer that receives arbitrary chunks.
///
/// A size that is negative or above the maximum is an error, reported before any allocation.
/// After an error the connection must be dropped: the stream can no longer be framed.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FrameDecoder {
    max_frame_size: usize,
}

impl Default for FrameDecoder {
    fn default() -> Self {
        Self::new(DEFAULT_MAX_FRAME_SIZE)
    }
}

/// How far past the bytes received [`FrameDecoder::decode`] reserves room for a frame.
const RESERVE_AHEAD: usize = 1 << 20;

impl FrameDecoder {
    /// A decoder that refuses frames larger than `max_frame_size` bytes.
    pub fn new(max_frame_size: usize) -> Self {
        Self { max_frame_size }
    }

    /// Takes the next whole frame (without its size prefix) off the front of `buf`.
    /// Returns `Ok(None)` when `buf` holds only part of a frame; nothing is consumed then.
    pub fn decode(&self, buf: &mut BytesMut) -> Result<Option<Bytes>, DecodeError> {
        let Some(prefix) = buf.get(..4) else {
            return Ok(None);
        };
        let size = i32::from_be_bytes([prefix[0], prefix[1], prefix[2], prefix[3]]);
        if size < 0 || size as usize > self.max_frame_size {
            return Err(DecodeError::FrameSize(size));
        }
        let size = size as usize;
        if buf.len() < 4 + size {
            // Reserve for the rest of this frame only once its size was validated, and at
            // most `RESERVE_AHEAD` past what arrived: a peer announcing a frame of the
            // largest size and sending nothing more holds a mebibyte, not the whole
            // `max_frame_size` (100 MiB by default; a review finding). Larger frames grow as
            // their bytes come.
            buf.reserve((4 + size - buf.len()).min(RESERVE_AHEAD));
            return Ok(None);
        }
        buf.advance(4);
        Ok(Some(buf.split_to(size).freeze()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::BufMut;

    fn framed(payloads: &[&[u8]]) -> Vec<u8> {
        let mut v = Vec::new();
        for p in payloads {
            v.put_i32(p.len() as i32);
            v.put_slice(p);
        }
        v
    }

    /// A frame announced at nearly the largest size, its bytes not yet come: room for a
    /// mebibyte is reserved, not for the whole frame; the frame still comes out whole.
    #[test]
    fn a_large_frame_announced_reserves_little_until_its_bytes_come() {
        let d = FrameDecoder::default();
        let size = DEFAULT_MAX_FRAME_SIZE - 1;
        let mut buf = BytesMut::new();
        buf.put_i32(size as i32);
        assert_eq!(d.decode(&mut buf).unwrap(), None);
        assert!(buf.capacity() <= 2 * RESERVE_AHEAD, "{}", buf.capacity());
        let payload = vec![7u8; 3 * RESERVE_AHEAD + 5];
        let mut buf = BytesMut::new();
        buf.put_i32(payload.len() as i32);
        for chunk in payload.chunks(64 * 1024) {
            assert_eq!(d.decode(&mut buf).unwrap(), None);
            buf.put_slice(chunk);
        }
        assert_eq!(d.decode(&mut buf).unwrap().as_deref(), Some(&payload[..]));
    }

    #[test]
    fn one_byte_at_a_time() {
        let stream = framed(&[b"hello", b"", b"kafka!"]);
        let d = FrameDecoder::default();
        let mut buf = BytesMut::new();
        let mut out = Vec::new();
        for b in stream {
            buf.put_u8(b);
            while let Some(f) = d.decode(&mut buf).unwrap() {
                out.push(f);
            }
        }
        assert_eq!(out, vec![&b"hello"[..], &b""[..], &b"kafka!"[..]]);
        assert!(buf.is_empty());
    }

    #[test]
    fn oversize_and_negative_sizes_are_errors() {
        let d = FrameDecoder::new(16);
        let mut buf = BytesMut::from(&[0x00, 0x00, 0x00, 0x11][..]);
        assert_eq!(d.decode(&mut buf), Err(DecodeError::FrameSize(17)));
        let mut buf = BytesMut::from(&[0xff, 0xff, 0xff, 0xff][..]);
        assert_eq!(d.decode(&mut buf), Err(DecodeError::FrameSize(-1)));
        let mut buf = BytesMut::from(&[0x7f, 0xff, 0xff, 0xff][..]);
        assert_eq!(
            FrameDecoder::default().decode(&mut buf),
            Err(DecodeError::FrameSize(i32::MAX))
        );
        assert!(buf.capacity() < 1024, "no allocation for a rejected size");
    }
}

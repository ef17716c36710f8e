//! Kafka's primitive types: fixed-width big-endian integers, varints, strings, bytes, arrays
//! and tagged-field sections, in both the classic and the compact (flexible) encodings.
//!
//! Decoding goes through [`Reader`], which checks every length against the bytes actually
//! present before it slices or allocates, so a hostile length can never trigger a large
//! allocation or a panic. Encoding goes through the [`Writer`] extension trait on `BytesMut`.
//!
//! References: <https://kafka.apache.org/protocol.html#protocol_types>, KIP-482 (tagged fields).

use bytes::{Buf, BufMut, Bytes, BytesMut};

use super::DecodeError;

/// A checked cursor over a received frame.
#[derive(Debug, Clone)]
pub struct Reader {
    buf: Bytes,
}

impl Reader {
    /// Reads from `buf`.
    pub fn new(buf: Bytes) -> Self {
        Self { buf }
    }

    /// Bytes not yet consumed.
    pub fn remaining(&self) -> usize {
        self.buf.len()
    }

    /// The unconsumed bytes, without consuming them.
    pub fn peek_rest(&self) -> &[u8] {
        &self.buf
    }

    /// Fails unless every byte was consumed.
    pub fn expect_end(&self) -> Result<(), DecodeError> {
        if self.buf.is_empty() {
            Ok(())
        } else {
            Err(DecodeError::TrailingBytes(self.buf.len()))
        }
    }

    fn need(&self, n: usize) -> Result<(), DecodeError> {
        if self.buf.len() < n {
            Err(DecodeError::Truncated)
        } else {
            Ok(())
        }
    }

    /// Reads a boolean (one byte, non-zero is true).
    pub fn bool(&mut self) -> Result<bool, DecodeError> {
        Ok(self.u8()? != 0)
    }

    /// Reads an unsigned byte.
    pub fn u8(&mut self) -> Result<u8, DecodeError> {
        self.need(1)?;
        Ok(self.buf.get_u8())
    }

    /// Reads a signed byte.
    pub fn i8(&mut self) -> Result<i8, DecodeError> {
        self.need(1)?;
        Ok(self.buf.get_i8())
    }

    /// Reads a big-endian i16.
    pub fn i16(&mut self) -> Result<i16, DecodeError> {
        self.need(2)?;
        Ok(self.buf.get_i16())
    }

    /// Reads a big-endian i32.
    pub fn i32(&mut self) -> Result<i32, DecodeError> {
        self.need(4)?;
        Ok(self.buf.get_i32())
    }

    /// Reads a big-endian u32.
    pub fn u32(&mut self) -> Result<u32, DecodeError> {
        self.need(4)?;
        Ok(self.buf.get_u32())
    }

    /// Reads a big-endian i64.
    pub fn i64(&mut self) -> Result<i64, DecodeError> {
        self.need(8)?;
        Ok(self.buf.get_i64())
    }

    /// Reads a 16-byte UUID.
    pub fn uuid(&mut self) -> Result<[u8; 16], DecodeError> {
        self.need(16)?;
        let mut out = [0u8; 16];
        self.buf.copy_to_slice(&mut out);
        Ok(out)
    }

    /// Reads an unsigned LEB128 varint of at most 5 bytes (a u32).
    pub fn uvarint(&mut self) -> Result<u32, DecodeError> {
        let mut value: u32 = 0;
        for i in 0..5 {
            let b = self.u8()?;
            if i == 4 && b > 0x0f {
                return Err(DecodeError::VarintOverflow);
            }
            value |= u32::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(DecodeError::VarintOverflow)
    }

    /// Reads an unsigned LEB128 varint of at most 10 bytes (a u64).
    pub fn uvarlong(&mut self) -> Result<u64, DecodeError> {
        let mut value: u64 = 0;
        for i in 0..10 {
            let b = self.u8()?;
            if i == 9 && b > 0x01 {
                return Err(DecodeError::VarintOverflow);
            }
            value |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(DecodeError::VarintOverflow)
    }

    /// Reads a zigzag-encoded signed varint (record fields).
    pub fn varint(&mut self) -> Result<i32, DecodeError> {
        let v = self.uvarint()?;
        Ok(((v >> 1) as i32) ^ -((v & 1) as i32))
    }

    /// Reads a zigzag-encoded signed varlong (record fields).
    pub fn varlong(&mut self) -> Result<i64, DecodeError> {
        let v = self.uvarlong()?;
        Ok(((v >> 1) as i64) ^ -((v & 1) as i64))
    }

    /// Takes exactly `n` bytes, zero-copy.
    pub fn take(&mut self, n: usize) -> Result<Bytes, DecodeError> {
        self.need(n)?;
        Ok(self.buf.split_to(n))
    }

    /// Skips exactly `n` bytes.
    pub fn skip(&mut self, n: usize) -> Result<(), DecodeError> {
        self.need(n)?;
        self.buf.advance(n);
        Ok(())
    }

    /// Reads a length that is `-1` for null, checking it against the bytes present.
    fn checked_len(&self, len: i64) -> Result<Option<usize>, DecodeError> {
        if len < -1 {
            return Err(DecodeError::InvalidLength(len));
        }
        if len == -1 {
            return Ok(None);
        }
        let len = usize::try_from(len).map_err(|_| DecodeError::InvalidLength(len))?;
        self.need(len)?;
        Ok(Some(len))
    }

    /// Reads the length prefix of a (compact) string or bytes field; `None` is null.
    fn blob_len(&mut self, compact: bool, wide: bool) -> Result<Option<usize>, DecodeError> {
        let len = if compact {
            i64::from(self.uvarint()?) - 1
        } else if wide {
            i64::from(self.i32()?)
        } else {
            i64::from(self.i16()?)
        };
        self.checked_len(len)
    }

    /// Reads a nullable string (`compact` selects COMPACT_NULLABLE_STRING).
    pub fn nullable_string(&mut self, compact: bool) -> Result<Option<String>, DecodeError> {
        match self.blob_len(compact, false)? {
            None => Ok(None),
            Some(n) => {
                let bytes = self.take(n)?;
                String::from_utf8(bytes.to_vec())
                    .map(Some)
                    .map_err(|_| DecodeError::InvalidUtf8)
            }
        }
    }

    /// Reads a nullable string without copying it: its bytes (a slice of the frame), checked
    /// to be UTF-8 as [`Self::nullable_string`] checks them.
    pub fn nullable_str_bytes(&mut self, compact: bool) -> Result<Option<Bytes>, DecodeError> {
        match self.blob_len(compact, false)? {
            None => Ok(None),
            Some(n) => {
                let bytes = self.take(n)?;
                std::str::from_utf8(&bytes).map_err(|_| DecodeError::InvalidUtf8)?;
                Ok(Some(bytes))
            }
        }
    }

    /// Reads a non-null string.
    pub fn string(&mut self, compact: bool) -> Result<String, DecodeError> {
        self.nullable_string(compact)?
            .ok_or(DecodeError::UnexpectedNull)
    }

    /// Reads nullable bytes (`compact` selects COMPACT_NULLABLE_BYTES, else an i32 length).
    pub fn nullable_bytes(&mut self, compact: bool) -> Result<Option<Bytes>, DecodeError> {
        match self.blob_len(compact, true)? {
            None => Ok(None),
            Some(n) => self.take(n).map(Some),
        }
    }

    /// Reads the element count of a nullable array. Every element takes at least one byte, so
    /// a count above the bytes remaining is rejected before anything is allocated.
    pub fn nullable_array_len(&mut self, compact: bool) -> Result<Option<usize>, DecodeError> {
        let len = if compact {
            i64::from(self.uvarint()?) - 1
        } else {
            i64::from(self.i32()?)
        };
        self.checked_len(len)
    }

    /// Reads the element count of a non-null array.
    pub fn array_len(&mut self, compact: bool) -> Result<usize, DecodeError> {
        self.nullable_array_len(compact)?
            .ok_or(DecodeError::UnexpectedNull)
    }

    /// Reads an array with `f` decoding each element.
    pub fn array<T>(
        &mut self,
        compact: bool,
        mut f: impl FnMut(&mut Self) -> Result<T, DecodeError>,
    ) -> Result<Vec<T>, DecodeError> {
        let n = self.array_len(compact)?;
        // `n` is at most the bytes remaining, but an element can be far larger in memory than
        // on the wire: preallocate no more than the bytes remaining, and let the vector grow
        // with the elements actually decoded.
        let mut out = Vec::with_capacity(n.min(self.remaining() / size_of::<T>().max(1)));
        for _ in 0..n {
            out.push(f(self)?);
        }
        Ok(out)
    }

    /// Reads an array of i32 values.
    pub fn i32_array(&mut self, compact: bool) -> Result<Vec<i32>, DecodeError> {
        self.array(compact, Self::i32)
    }

    /// Reads a tagged-field section. `f` is called with each tag and a reader over exactly that
    /// field's bytes; it returns `Ok(false)` for a tag it does not know, which is then skipped.
    /// A known field must be consumed exactly.
    pub fn tagged_fields(
        &mut self,
        mut f: impl FnMut(u32, &mut Self) -> Result<bool, DecodeError>,
    ) -> Result<(), DecodeError> {
        let count = self.uvarint()?;
        let mut last: Option<u32> = None;
        for _ in 0..count {
            let tag = self.uvarint()?;
            if last.is_some_and(|l| tag <= l) {
                return Err(DecodeError::TagOrder(tag));
            }
            last = Some(tag);
            let size = self.uvarint()? as usize;
            let mut field = Self::new(self.take(size)?);
            if f(tag, &mut field)? {
                field.expect_end()?;
            }
        }
        Ok(())
    }

    /// Skips a tagged-field section, ignoring every field in it.
    pub fn skip_tagged_fields(&mut self) -> Result<(), DecodeError> {
        self.tagged_fields(|_, _| Ok(false))
    }
}

/// Kafka encodings on top of [`BufMut`].
pub trait Writer: BufMut {
    /// Writes an unsigned LEB128 varint.
    fn put_uvarint(&mut self, mut v: u32) {
        while v >= 0x80 {
            self.put_u8((v as u8) | 0x80);
            v >>= 7;
        }
        self.put_u8(v as u8);
    }

    /// Writes an unsigned LEB128 varlong.
    fn put_uvarlong(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.put_u8((v as u8) | 0x80);
            v >>= 7;
        }
        self.put_u8(v as u8);
    }

    /// Writes a zigzag-encoded signed varint.
    fn put_varint(&mut self, v: i32) {
        self.put_uvarint(((v << 1) ^ (v >> 31)) as u32);
    }

    /// Writes a zigzag-encoded signed varlong.
    fn put_varlong(&mut self, v: i64) {
        self.put_uvarlong(((v << 1) ^ (v >> 63)) as u64);
    }

    /// Writes a boolean.
    fn put_bool(&mut self, v: bool) {
        self.put_u8(u8::from(v));
    }

    /// Writes a nullable string, classic (i16 length) or compact.
    fn put_nullable_string(&mut self, s: Option<&str>, compact: bool) {
        match (s, compact) {
            (None, true) => self.put_uvarint(0),
            (None, false) => self.put_i16(-1),
            (Some(s), true) => {
                self.put_uvarint(s.len() as u32 + 1);
                self.put_slice(s.as_bytes());
            }
            (Some(s), false) => {
                self.put_i16(s.len() as i16);
                self.put_slice(s.as_bytes());
            }
        }
    }

    /// Writes a non-null string.
    fn put_string(&mut self, s: &str, compact: bool) {
        self.put_nullable_string(Some(s), compact);
    }

    /// Writes nullable bytes, classic (i32 length) or compact.
    fn put_nullable_bytes(&mut self, b: Option<&[u8]>, compact: bool) {
        match (b, compact) {
            (None, true) => self.put_uvarint(0),
            (None, false) => self.put_i32(-1),
            (Some(b), true) => {
                self.put_uvarint(b.len() as u32 + 1);
                self.put_slice(b);
            }
            (Some(b), false) => {
                self.put_i32(b.len() as i32);
                self.put_slice(b);
            }
        }
    }

    /// Writes an array length; `None` is a null array.
    fn put_array_len(&mut self, n: Option<usize>, compact: bool) {
        match (n, compact) {
            (None, true) => self.put_uvarint(0),
            (None, false) => self.put_i32(-1),
            (Some(n), true) => self.put_uvarint(n as u32 + 1),
            (Some(n), false) => self.put_i32(n as i32),
        }
    }

    /// Writes an array of i32 values.
    fn put_i32_array(&mut self, v: &[i32], compact: bool) {
        self.put_array_len(Some(v.len()), compact);
        for x in v {
            self.put_i32(*x);
        }
    }

    /// Writes an empty tagged-field section.
    fn put_empty_tags(&mut self) {
        self.put_uvarint(0);
    }
}

impl<B: BufMut + ?Sized> Writer for B {}

/// Number of bytes `v` takes as an unsigned varint.
pub fn uvarint_len(v: u32) -> usize {
    match v {
        0..=0x7f => 1,
        0x80..=0x3fff => 2,
        0x4000..=0x1f_ffff => 3,
        0x20_0000..=0x0fff_ffff => 4,
        _ => 5,
    }
}

/// Number of bytes `v` takes as a zigzag varint.
pub fn varint_len(v: i32) -> usize {
    uvarint_len(((v << 1) ^ (v >> 31)) as u32)
}

/// Number of bytes `v` takes as a zigzag varlong.
pub fn varlong_len(v: i64) -> usize {
    let mut z = ((v << 1) ^ (v >> 63)) as u64;
    let mut n = 1;
    while z >= 0x80 {
        z >>= 7;
        n += 1;
    }
    n
}

/// Writes one tagged field whose body is produced by `f`.
pub fn put_tagged_field(buf: &mut BytesMut, tag: u32, f: impl FnOnce(&mut BytesMut)) {
    let mut body = BytesMut::new();
    f(&mut body);
    buf.put_uvarint(tag);
    buf.put_uvarint(body.len() as u32);
    buf.put_slice(&body);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reader(b: &[u8]) -> Reader {
        Reader::new(Bytes::copy_from_slice(b))
    }

    #[test]
    fn zigzag_varints_round_trip_at_the_edges() {
        for v in [0, 1, -1, 63, -64, 64, i32::MAX, i32::MIN, 300, -300] {
            let mut b = BytesMut::new();
            b.put_varint(v);
            assert_eq!(b.len(), varint_len(v), "len of {v}");
            assert_eq!(reader(&b).varint().unwrap(), v);
        }
        for v in [0, 1, -1, i64::MAX, i64::MIN, 1 << 40, -(1 << 40)] {
            let mut b = BytesMut::new();
            b.put_varlong(v);
            assert_eq!(b.len(), varlong_len(v), "len of {v}");
            assert_eq!(reader(&b).varlong().unwrap(), v);
        }
    }

    #[test]
    fn varint_lengths_match_the_encodings() {
        let mut edges: Vec<i64> = vec![0, 1, -1, i64::MIN, i64::MAX];
        for bits in 1..63 {
            let p = 1i64 << bits;
            edges.extend([p, p - 1, -p, -p + 1, p >> 1, -(p >> 1) - 1]);
        }
        for v in edges {
            let mut b = BytesMut::new();
            b.put_varlong(v);
            assert_eq!(varlong_len(v), b.len(), "varlong {v}");
            if let Ok(v) = i32::try_from(v) {
                let mut b = BytesMut::new();
                b.put_varint(v);
                assert_eq!(varint_len(v), b.len(), "varint {v}");
                let mut b = BytesMut::new();
                b.put_uvarint(v as u32);
                assert_eq!(uvarint_len(v as u32), b.len(), "uvarint {v}");
            }
        }
    }

    #[test]
    fn known_varint_encodings() {
        // Zigzag: 0 -> 0, -1 -> 1, 1 -> 2, -64 -> 127, 64 -> 128 (two bytes).
        let cases: [(i32, &[u8]); 5] = [
            (0, &[0x00]),
            (-1, &[0x01]),
            (1, &[0x02]),
            (-64, &[0x7f]),
            (64, &[0x80, 0x01]),
        ];
        for (v, bytes) in cases {
            let mut b = BytesMut::new();
            b.put_varint(v);
            assert_eq!(&b[..], bytes, "encoding of {v}");
        }
        let mut b = BytesMut::new();
        b.put_uvarint(300);
        assert_eq!(&b[..], &[0xac, 0x02]);
    }

    #[test]
    fn overlong_varints_are_errors() {
        assert_eq!(
            reader(&[0xff, 0xff, 0xff, 0xff, 0x1f]).uvarint(),
            Err(DecodeError::VarintOverflow)
        );
        assert_eq!(
            reader(&[0xff, 0xff, 0xff, 0xff, 0xff, 0x01]).uvarint(),
            Err(DecodeError::VarintOverflow)
        );
        assert_eq!(reader(&[0x80]).uvarint(), Err(DecodeError::Truncated));
        assert_eq!(
            reader(&[0xff; 11]).uvarlong(),
            Err(DecodeError::VarintOverflow)
        );
    }

    #[test]
    fn strings_in_both_encodings_and_null() {
        for compact in [false, true] {
            let mut b = BytesMut::new();
            b.put_string("héllo", compact);
            b.put_nullable_string(None, compact);
            let mut r = reader(&b);
            assert_eq!(r.string(compact).unwrap(), "héllo");
            assert_eq!(r.nullable_string(compact).unwrap(), None);
            r.expect_end().unwrap();
        }
    }

    #[test]
    fn hostile_lengths_fail_without_allocating() {
        // i32::MAX elements claimed, four bytes present.
        let mut r = reader(&[0x7f, 0xff, 0xff, 0xff, 0, 0, 0, 0]);
        assert_eq!(r.array_len(false), Err(DecodeError::Truncated));
        // A string longer than the buffer.
        assert_eq!(
            reader(&[0x00, 0x10, b'a']).string(false),
            Err(DecodeError::Truncated)
        );
        // Negative lengths other than -1.
        assert_eq!(
            reader(&[0xff, 0xfe]).nullable_string(false),
            Err(DecodeError::InvalidLength(-2))
        );
        // Invalid UTF-8.
        assert_eq!(
            reader(&[0x00, 0x01, 0xff]).string(false),
            Err(DecodeError::InvalidUtf8)
        );
    }

    #[test]
    fn unknown_tags_are_skipped_and_known_ones_read() {
        let mut b = BytesMut::new();
        b.put_uvarint(2);
        put_tagged_field(&mut b, 0, |f| f.put_i32(7));
        put_tagged_field(&mut b, 9, |f| f.put_slice(b"opaque"));
        b.put_u8(0xaa);
        let mut r = reader(&b);
        let mut seen = None;
        r.tagged_fields(|tag, f| {
            if tag == 0 {
                seen = Some(f.i32()?);
                Ok(true)
            } else {
                Ok(false)
            }
        })
        .unwrap();
        assert_eq!(seen, Some(7));
        assert_eq!(r.u8().unwrap(), 0xaa);
    }
}

//! Partition choice: an explicit partition, a key hash (the Java client's murmur2 by
//! default, or librdkafka's CRC-32 or FNV-1a: [`Partitioner`]), or the sticky partitioner for
//! records without a key (KIP-480).
//!
//! References: apache/kafka `Utils.murmur2`, `BuiltInPartitioner.partitionForKey`, KIP-480;
//! librdkafka's `partitioner` property (`rd_kafka_msg_partitioner_*`, `rd_crc32`,
//! `rd_fnv1a`).

/// How a record without an explicit partition is placed: `partitioner` in librdkafka's
/// names. A record without a key (`None`) goes to the sticky partition under every one of
/// them, as in the Java client and in librdkafka since sticky partitioning (1.5): no order
/// is promised for such records either way. The choice only matters for keyed records,
/// whose partition must match what other producers of the same topic choose, so that a
/// key's records stay on one partition (in order) across clients.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Partitioner {
    /// The Java client's default partitioner, librdkafka's `murmur2_random`: positive
    /// murmur2 of the key, an empty key hashed as any other.
    #[default]
    Murmur2Random,
    /// librdkafka's `murmur2`: as [`Self::Murmur2Random`] (a record without a key is sticky).
    Murmur2,
    /// librdkafka's default, `consistent_random`: CRC-32 (zlib's) of the key, unsigned,
    /// modulo the partition count; an empty key is placed as no key.
    ConsistentRandom,
    /// librdkafka's `consistent`: as [`Self::ConsistentRandom`], but an empty key is hashed
    /// (to partition 0).
    Consistent,
    /// librdkafka's `fnv1a_random` (Sarama's default hash partitioner): FNV-1a of the key
    /// as a signed 32-bit number, its absolute value modulo the partition count.
    Fnv1aRandom,
    /// librdkafka's `fnv1a`: as [`Self::Fnv1aRandom`].
    Fnv1a,
    /// librdkafka's `random`: keys are ignored, every record goes to the sticky partition
    /// (librdkafka picks a random one per record: no order either way).
    Random,
}

impl Partitioner {
    /// Every partitioner, with its librdkafka name.
    pub const ALL: [(Self, &'static str); 7] = [
        (Self::Murmur2Random, "murmur2_random"),
        (Self::Murmur2, "murmur2"),
        (Self::ConsistentRandom, "consistent_random"),
        (Self::Consistent, "consistent"),
        (Self::Fnv1aRandom, "fnv1a_random"),
        (Self::Fnv1a, "fnv1a"),
        (Self::Random, "random"),
    ];

    /// The partitioner librdkafka calls `name`.
    pub fn from_name(name: &str) -> Option<Self> {
        (Self::ALL.iter())
            .find(|(_, n)| n.eq_ignore_ascii_case(name))
            .map(|(p, _)| *p)
    }

    /// Its librdkafka name.
    pub fn name(self) -> &'static str {
        (Self::ALL.iter())
            .find(|(p, _)| *p == self)
            .map_or("murmur2_random", |(_, n)| n)
    }

    /// Whether a record with `key` goes to the sticky partition (no hash places it).
    pub fn is_sticky(self, key: Option<&[u8]>) -> bool {
        match key {
            None => true,
            Some(k) => self == Self::Random || (self == Self::ConsistentRandom && k.is_empty()),
        }
    }

    /// The partition of a record with `key` among `num_partitions` (> 0), or `None` for the
    /// sticky partition ([`Self::is_sticky`]).
    pub fn partition_for(self, key: Option<&[u8]>, num_partitions: i32) -> Option<i32> {
        let key = key.filter(|_| !self.is_sticky(key))?;
        let n = num_partitions.max(1);
        Some(match self {
            Self::Murmur2Random | Self::Murmur2 => partition_for_key(key, n),
            Self::ConsistentRandom | Self::Consistent => (crc32(key) % n as u32) as i32,
            Self::Fnv1aRandom | Self::Fnv1a => (fnv1a(key) % n as u32) as i32,
            Self::Random => return None, // sticky whatever the key: filtered above
        })
    }
}

/// CRC-32 as zlib computes it (reflected polynomial 0xEDB88320), as librdkafka's
/// `consistent` partitioners hash keys. Not the CRC-32C of record batches.
pub fn crc32(data: &[u8]) -> u32 {
    const TABLE: [u32; 256] = {
        let mut table = [0u32; 256];
        let mut i = 0;
        while i < 256 {
            let mut c = i as u32;
            let mut bit = 0;
            while bit < 8 {
                c = if c & 1 == 1 {
                    0xEDB8_8320 ^ (c >> 1)
                } else {
                    c >> 1
                };
                bit += 1;
            }
            table[i] = c;
            i += 1;
        }
        table
    };
    let mut crc = !0u32;
    for &b in data {
        crc = TABLE[((crc ^ u32::from(b)) & 0xff) as usize] ^ (crc >> 8);
    }
    !crc
}

/// FNV-1a (32-bit) as librdkafka's `fnv1a` partitioners take it: the hash read as a signed
/// number, its absolute value (as Sarama's `NewHashPartitioner`; `i32::MIN` stays 2^31).
pub fn fnv1a(data: &[u8]) -> u32 {
    let mut h: u32 = 0x811C_9DC5;
    for &b in data {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x0100_0193);
    }
    (h as i32).wrapping_abs() as u32
}

/// Kafka's murmur2 variant (seed 0x9747b28c), exactly as `org.apache.kafka.common.utils.Utils`.
pub fn murmur2(data: &[u8]) -> i32 {
    const SEED: u32 = 0x9747_b28c;
    const M: u32 = 0x5bd1_e995;
    const R: u32 = 24;
    let len = data.len();
    let mut h: u32 = SEED ^ (len as u32);
    let mut chunks = data.chunks_exact(4);
    for c in &mut chunks {
        let mut k = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    let tail = chunks.remainder();
    if tail.len() >= 3 {
        h ^= u32::from(tail[2]) << 16;
    }
    if tail.len() >= 2 {
        h ^= u32::from(tail[1]) << 8;
    }
    if !tail.is_empty() {
        h ^= u32::from(tail[0]);
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h as i32
}

/// The Java default partitioner's choice for a keyed record: `toPositive(murmur2(key)) % n`.
/// `num_partitions` should be above 0; 0 or less is taken as 1.
pub fn partition_for_key(key: &[u8], num_partitions: i32) -> i32 {
    (murmur2(key) & 0x7fff_ffff) % num_partitions.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn murmur2_matches_kafkas_published_vectors() {
        // apache/kafka UtilsTest.testMurmur2.
        let cases: [(&[u8], i32); 6] = [
            (b"21", -973_932_308),
            (b"foobar", -790_332_482),
            (b"a-little-bit-long-string", -985_981_536),
            (b"a-little-bit-longer-string", -1_486_304_829),
            (
                b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8",
                -58_897_971,
            ),
            (b"abc", 479_470_107),
        ];
        for (key, want) in cases {
            assert_eq!(murmur2(key), want, "{}", String::from_utf8_lossy(key));
        }
    }

    #[test]
    fn crc32_and_fnv1a_match_their_reference_values() {
        // The standard check values: CRC-32 of "123456789" is 0xCBF43926; FNV-1a 32 of ""
        // is its offset basis and of "a" 0xE40C292C (negative as i32: its absolute value).
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
        assert_eq!(crc32(b""), 0);
        assert_eq!(fnv1a(b""), 0x811C_9DC5u32.wrapping_neg());
        assert_eq!(fnv1a(b"a"), 0xE40C_292Cu32.wrapping_neg());
        assert_eq!(fnv1a(b"foobar"), 0xBF9C_F968u32.wrapping_neg());
    }

    #[test]
    fn partitioners_place_keys_by_their_hash_and_no_key_sticky() {
        for (p, name) in Partitioner::ALL {
            assert_eq!(Partitioner::from_name(name), Some(p));
            assert_eq!(p.name(), name);
            assert_eq!(p.partition_for(None, 6), None, "{name}");
            for key in [&b""[..], b"k"] {
                assert_eq!(
                    p.is_sticky(Some(key)),
                    p.partition_for(Some(key), 6).is_none(),
                    "{name} {key:?}"
                );
            }
        }
        assert_eq!(Partitioner::from_name("default"), None);
        let n = 7;
        let key = &b"order-42"[..];
        assert_eq!(
            Partitioner::Murmur2Random.partition_for(Some(key), n),
            Some(partition_for_key(key, n))
        );
        assert_eq!(
            Partitioner::ConsistentRandom.partition_for(Some(key), n),
            Some((crc32(key) % 7) as i32)
        );
        assert_eq!(
            Partitioner::Fnv1a.partition_for(Some(key), n),
            Some((fnv1a(key) % 7) as i32)
        );
        assert_eq!(Partitioner::Random.partition_for(Some(key), n), None);
        // An empty key: as no key for consistent_random only.
        assert_eq!(
            Partitioner::ConsistentRandom.partition_for(Some(b""), n),
            None
        );
        assert_eq!(Partitioner::Consistent.partition_for(Some(b""), n), Some(0));
        for n in 1..40 {
            for (p, _) in Partitioner::ALL {
                if let Some(i) = p.partition_for(Some(b"\xff\x00k"), n) {
                    assert!((0..n).contains(&i));
                }
            }
        }
    }

    #[test]
    fn keyed_partition_is_positive_modulo() {
        // "21" hashes to a negative value: the sign bit is masked, not negated.
        let expected = (-973_932_308i32 & 0x7fff_ffff) % 6;
        assert_eq!(partition_for_key(b"21", 6), expected);
        for n in 1..50 {
            let p = partition_for_key(b"foobar", n);
            assert!((0..n).contains(&p));
        }
    }
}

//! Partition choice: an explicit partition, the Java client's murmur2 key hash, or the
//! sticky partitioner for records without a key (KIP-480).
//!
//! References: apache/kafka `Utils.murmur2`, `BuiltInPartitioner.partitionForKey`, KIP-480.

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
pub fn partition_for_key(key: &[u8], num_partitions: i32) -> i32 {
    debug_assert!(num_partitions > 0);
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

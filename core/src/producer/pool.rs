//! Buffers of acknowledged batches, kept for the next batches (issue 12: a batch used to cost
//! two allocations, its buffer and its record list; the record list now leaves with the
//! batch's [`crate::Event::Delivered`], so a batch costs one).
//!
//! When a batch is acknowledged its sealed bytes are usually no longer shared (the driver
//! dropped the `Transmit` chunk once written), so [`bytes::Bytes::try_into_mut`] gives the
//! buffer back without copying; it waits here for the next batch that fits. The pool holds
//! capacity only: it is scratch space, so the producer's `PartialEq`/`Hash` ignore it (it
//! lives in [`super::index::Derived`]) and a clone of the producer starts with an empty pool.

use bytes::{Bytes, BytesMut};

/// At most this many idle buffers are kept: enough for the batches of a few requests in
/// flight; the rest are freed.
const MAX_IDLE: usize = 16;

#[derive(Default)]
pub(super) struct BatchPool {
    bufs: Vec<BytesMut>,
}

/// Capacities only: the idle buffers still hold acknowledged records' bytes, which a
/// producer's `Debug` must not show (a review found a delivered record's value in it).
impl std::fmt::Debug for BatchPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let capacities: Vec<usize> = self.bufs.iter().map(BytesMut::capacity).collect();
        f.debug_struct("BatchPool")
            .field("idle_capacities", &capacities)
            .finish()
    }
}

impl Clone for BatchPool {
    /// Capacity only: a clone starts empty.
    fn clone(&self) -> Self {
        Self::default()
    }
}

impl BatchPool {
    /// A buffer with room for `capacity` bytes and at most `most`, if one is idle. The batch
    /// taking it is charged against `buffer.memory` for `capacity` (and for what it grows
    /// by), so a quiet partition's batch asks for not much more than that: a buffer many
    /// times larger (a 1 MiB batch's, for a batch reserving 16 kB) would hold memory the
    /// charge does not count (a review finding); a busy one, which grows into it, may take
    /// any.
    pub(super) fn buffer(&mut self, capacity: usize, most: usize) -> Option<BytesMut> {
        let i = (self.bufs.iter()).rposition(|b| (capacity..=most).contains(&b.capacity()))?;
        Some(self.bufs.swap_remove(i))
    }

    /// Takes back the bytes of a batch (acknowledged, or just copied into a buffer of their
    /// size) if nothing else holds them and their capacity is in `capacities` (a size a new
    /// batch takes, not oversized).
    pub(super) fn put_wire(&mut self, wire: Bytes, capacities: std::ops::RangeInclusive<usize>) {
        if self.bufs.len() < MAX_IDLE {
            if let Ok(buf) = wire.try_into_mut() {
                if capacities.contains(&buf.capacity()) {
                    self.bufs.push(buf);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_buffer_much_larger_than_asked_is_not_handed_out() {
        let mut pool = BatchPool::default();
        let quiet = (16 << 10) + (4 << 10);
        pool.put_wire(BytesMut::with_capacity(1 << 20).freeze(), 0..=usize::MAX);
        assert!(
            pool.buffer(16 << 10, quiet).is_none(),
            "1 MiB for a quiet 16 kB"
        );
        pool.put_wire(BytesMut::with_capacity(18 << 10).freeze(), 0..=usize::MAX);
        let got = pool.buffer(16 << 10, quiet).expect("18 kB for 16 kB");
        assert_eq!(got.capacity(), 18 << 10);
        let busy = pool
            .buffer(16 << 10, usize::MAX)
            .expect("1 MiB for a busy 16 kB");
        assert_eq!(busy.capacity(), 1 << 20);
    }
}

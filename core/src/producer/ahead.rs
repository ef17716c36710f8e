//! Compression ahead of the seal, away from the producer.
//!
//! A batch of a compressed topic is compressed when it is sealed, inside
//! [`Producer::poll_output`]. A driver that shares the producer behind a lock (kprod-tokio:
//! the application's threads take it to accept records) then holds that lock for the codec's
//! whole run, and a gzip batch of a megabyte holds it for tens of milliseconds. With
//! [`Producer::set_compress_ahead`] the producer instead lists each batch as it closes for
//! records; the driver takes it ([`Producer::poll_compression`], a copy of its records),
//! compresses it without the producer ([`CompressionTask::run`]) and hands the result back
//! ([`Producer::take_compressed`]); the seal then only writes the header and the CRC.
//!
//! A batch's bytes on the wire are what its seal would have written: the task runs the
//! seal's own compression on the same records, and a result that no longer matches its
//! batch (a record joined it, which a closed batch never takes, or it was sealed, split or
//! failed meanwhile) is dropped, the seal compressing as before. What can differ is where
//! later batches end: the topic's compression-ratio estimate, which decides when a batch is
//! full, learns from a result when it comes back instead of at the seal. Sequencing never
//! looks at any of it, so the model, which runs without compression, is unaffected.
//!
//! Memory: a batch compressed ahead holds its records twice (raw and compressed) until its
//! seal drops the raw ones. What is held so, counted by the raw size of the tasks handed out,
//! reaches an eighth of `buffer.memory`; past it a leader still takes batches up to its equal
//! part of that budget, and the total up to twice it (so that a leader that cannot take its
//! batches, which keeps them until they are sent or expire, leaves the others their part),
//! plus one batch per leader (a leader holding nothing may always take one); other batches
//! are compressed at their seal. A batch counts until it is sealed or gone. This is outside
//! `buffer.memory`.

use std::collections::VecDeque;

use smallvec::SmallVec;

use super::Producer;
use crate::partition::{Batch, BatchState};
use crate::protocol::record_batch::{CompressionJob, Precompressed};

/// The closed batches waiting for a task, and those whose task is out or done.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub(super) struct CompressAhead {
    /// Closed batches by (topic, partition, batch id), in the order they closed.
    queue: VecDeque<(usize, usize, u64)>,
    /// Batches whose records were handed out, with the raw size counted for each and the
    /// leader its partition had then, until they are sealed or gone (released from the front
    /// as they are sealed, roughly in order; all are looked at once a leader's part is used
    /// up, so that one batch held back, its leader gone, keeps no other's count).
    held: VecDeque<Held>,
    /// What `held` counts for each leader (`None`: no leader) holding any.
    parts: SmallVec<[(Option<i32>, usize); 8]>,
}

/// A batch handed out: (topic, partition, batch id), its raw size, its leader then.
type Held = (usize, usize, u64, usize, Option<i32>);

impl CompressAhead {
    pub(super) fn push(&mut self, at: (usize, usize, u64)) {
        self.queue.push_back(at);
    }

    fn count(&mut self, leader: Option<i32>, bytes: usize) {
        match self.parts.iter_mut().find(|p| p.0 == leader) {
            Some(p) => p.1 += bytes,
            None => self.parts.push((leader, bytes)),
        }
    }

    fn release(&mut self, leader: Option<i32>, bytes: usize) {
        if let Some(i) = self.parts.iter().position(|p| p.0 == leader) {
            self.parts[i].1 -= bytes;
            if self.parts[i].1 == 0 {
                self.parts.swap_remove(i);
            }
        }
    }

    /// Whether a batch of `leader` may be compressed ahead: while what is held stays within
    /// `budget`; past it, while the leader holds less than its equal part of it and the
    /// total stays within twice the budget (a leader that cannot take its batches keeps what
    /// it holds until they are sent or expire); and always for a leader holding nothing.
    fn admits(&self, leader: Option<i32>, budget: usize) -> bool {
        let total: usize = self.parts.iter().map(|p| p.1).sum();
        let mine = (self.parts.iter())
            .find(|p| p.0 == leader)
            .map_or(0, |p| p.1);
        let leaders = self.parts.len() + usize::from(mine == 0);
        mine == 0 || total < budget || mine < budget / leaders && total < budget.saturating_mul(2)
    }
}

/// The records of one closed batch to compress away from the producer: [`Self::run`] it
/// anywhere (it holds a copy) and give the result to [`Producer::take_compressed`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CompressionTask {
    at: (usize, usize, u64),
    job: CompressionJob,
}

impl CompressionTask {
    /// Compresses the records as the seal would (the codec and level of the batch's topic).
    pub fn run(self) -> CompressedBatch {
        CompressedBatch {
            at: self.at,
            out: self.job.run(),
        }
    }

    /// The uncompressed size of the records.
    pub fn len(&self) -> usize {
        self.job.len()
    }

    /// Whether there are no records (never, for a task handed out).
    pub fn is_empty(&self) -> bool {
        self.job.is_empty()
    }
}

/// A [`CompressionTask`]'s result, for [`Producer::take_compressed`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CompressedBatch {
    at: (usize, usize, u64),
    /// The compressed records, or `None` if the codec failed (the seal then tries again
    /// itself).
    out: Option<Precompressed>,
}

impl Producer {
    /// Whether closed batches of compressed topics are listed for a driver to compress away
    /// from the producer ([`Self::poll_compression`]). Off by default: every batch is then
    /// compressed at its seal, in [`Self::poll_output`]. A driver that turns it on should
    /// take the tasks as batches close (each wake-up), or they wait in a list: a batch
    /// listed but never taken is compressed at its seal as before. Turning it off drops the
    /// list; results handed back later are still taken.
    pub fn set_compress_ahead(&mut self, on: bool) {
        match (on, self.compress_ahead.is_some()) {
            (true, false) => self.compress_ahead = Some(CompressAhead::default()),
            (false, true) => self.compress_ahead = None,
            _ => {}
        }
    }

    /// The next closed batch whose records the driver may compress without the producer, if
    /// any (see [`Self::set_compress_ahead`]). Batches compressed ahead and not yet sealed
    /// hold an eighth of `buffer.memory`; past it a leader takes batches up to its equal part
    /// of that, the total up to twice it, one batch each at least: a listed batch that does
    /// not fit is dropped from the list and compressed at its seal.
    pub fn poll_compression(&mut self) -> Option<CompressionTask> {
        let budget = self.cfg.buffer_memory / 8;
        let Self {
            compress_ahead,
            topics,
            ..
        } = self;
        let ahead = compress_ahead.as_mut()?;
        let unsealed = |&(ti, pi, id, _, _): &Held| {
            find(topics, (ti, pi, id)).is_some_and(|b| b.builder.is_some())
        };
        // Release what was sealed (or is gone) since, from the front.
        while let Some(&h) = ahead.held.front() {
            if unsealed(&h) {
                break;
            }
            ahead.held.pop_front();
            ahead.release(h.4, h.3);
        }
        let leader_of = |ti: usize, pi: usize| {
            (topics.get(ti))
                .and_then(|t| t.partitions.get(pi))
                .and_then(|p| p.leader)
        };
        let mut looked = false;
        while let Some(at) = ahead.queue.pop_front() {
            // A batch sealed, failed or split since it closed is no longer one to compress.
            let Some(bb) = find(topics, at)
                .filter(|b| b.state == BatchState::Ready)
                .and_then(|b| b.builder.as_ref())
            else {
                continue;
            };
            // The budget is shared by the leaders whose batches are held, so that the
            // batches of a leader that cannot take them (gone, slow, unreachable), held
            // until they are sent or expire, do not send every other leader's back to
            // compression at the seal, under the lock (a fairness review).
            let leader = leader_of(at.0, at.1);
            if !ahead.admits(leader, budget) && !looked {
                // Every held batch looked at: one sealed behind another still waiting (its
                // leader gone) counts no more.
                looked = true;
                let held = std::mem::take(&mut ahead.held);
                for h in held {
                    if unsealed(&h) {
                        ahead.held.push_back(h);
                    } else {
                        ahead.release(h.4, h.3);
                    }
                }
            }
            if !ahead.admits(leader, budget) {
                // Compressed at its seal (the list would only grow: it is not charged to
                // `buffer.memory`).
                continue;
            }
            let Some(job) = bb.compression_job() else {
                continue;
            };
            let len = job.len();
            ahead.held.push_back((at.0, at.1, at.2, len, leader));
            ahead.count(leader, len);
            return Some(CompressionTask { at, job });
        }
        None
    }

    /// Takes a [`CompressionTask`]'s result for its batch's seal. Returns whether it was
    /// kept: a batch sealed, failed or changed since the task was handed out keeps nothing
    /// and is (or was) compressed at its seal.
    pub fn take_compressed(&mut self, done: CompressedBatch) -> bool {
        let Some(out) = done.out else {
            return false;
        };
        let Some(b) = find_mut(&mut self.topics, done.at) else {
            return false;
        };
        if b.state != BatchState::Ready {
            return false;
        }
        let Some(bb) = b.builder.as_mut() else {
            return false;
        };
        let (raw, compressed) = (out.raw_len(), out.compressed_len());
        if !bb.set_precompressed(out) {
            return false;
        }
        // The topic's ratio estimate learns from it now rather than at its seal (which then
        // does not count it again): a producer handed records faster than batches are sealed
        // would otherwise keep sizing its batches by an estimate batches behind.
        self.topics[done.at.0].ratio.observe(compressed, raw);
        self.stats.0.batches_compressed_ahead += 1;
        true
    }
}

/// Batch `id` of partition `(ti, pi)`, if it is still there.
fn find(topics: &[super::Topic], (ti, pi, id): (usize, usize, u64)) -> Option<&Batch> {
    let p = topics.get(ti)?.partitions.get(pi)?;
    // A batch just closed is at or near the back.
    p.batches.iter().rev().find(|b| b.id == id)
}

fn find_mut(topics: &mut [super::Topic], (ti, pi, id): (usize, usize, u64)) -> Option<&mut Batch> {
    let p = topics.get_mut(ti)?.partitions.get_mut(pi)?;
    p.batches.iter_mut().rev().find(|b| b.id == id)
}

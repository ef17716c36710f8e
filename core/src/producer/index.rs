//! Derived indexes over the partitions, so that a drain touches only the partitions that have
//! work instead of walking every partition of every topic (issue 12: at 10,000 partitions the
//! walks cost 31× the CPU per record of one partition).
//!
//! Every index here is derived: it is rebuilt from the partitions by `sync(ti, pi)` after
//! each change to partition `(ti, pi)` (and wholesale after a change of producer identity),
//! and nothing the producer decides depends on it except *which* partitions it looks at. A
//! partition the indexes leave out is one that the old walk would have visited without
//! effect. [`Producer::check_index`] (debug builds: every unit test and every state of the
//! model check, at the end of every drain) proves both halves: the exact indexes equal a
//! recomputation from scratch, and a partition missing from `sendable` would pick nothing.
//!
//! The whole index is wrapped in [`Derived`], whose `PartialEq` and `Hash` ignore it: it is
//! bookkeeping, not behaviour, so the model checker's state deduplication (by `Hash`/`Eq` of
//! the real `Producer`) sees exactly the states it saw before the index existed.

use std::collections::BTreeSet;
use std::ops::Bound::{Excluded, Included, Unbounded};
use std::time::{Duration, Instant};

use crate::partition::{BatchState, Partition};
use crate::types::ProducerIdentity;

use super::Producer;

/// A wrapper whose equality and hash ignore its content: for derived indexes and scratch
/// space that are a function of the rest of the state (or do not influence behaviour).
#[derive(Debug, Clone, Default)]
pub(super) struct Derived<T>(pub(super) T);

impl<T> PartialEq for Derived<T> {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl<T> Eq for Derived<T> {}

impl<T> std::hash::Hash for Derived<T> {
    fn hash<H: std::hash::Hasher>(&self, _: &mut H) {}
}

/// What the exact indexes hold for one partition: a pure function of the partition, the
/// producer's identity and the configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) struct Entry {
    /// The partition holds batches: its leader.
    queued: Option<Option<i32>>,
    /// Creation time of its oldest batch (the first to reach `delivery.timeout.ms`).
    oldest: Option<Instant>,
    /// When it may start an idle probe (it was acknowledged before and is not probing).
    idle: Option<Instant>,
    /// The producer has an identity and this partition is bound to another one.
    unbound: bool,
    /// The deadlines [`Producer::next_deadline`] considers for it: the head retry's backoff,
    /// the open batch's linger, and the delivery timeout of the first batch not in flight.
    timers: [Option<Instant>; 3],
}

impl Entry {
    fn of(
        p: &Partition,
        identity: Option<ProducerIdentity>,
        linger: Duration,
        delivery_timeout: Duration,
        idle_expiry: Duration,
    ) -> Self {
        let mut timers = [None; 3];
        for (slot, d) in timers.iter_mut().zip(p.deadlines(linger)) {
            *slot = Some(d);
        }
        timers[2] = p
            .batches
            .iter()
            .find(|b| b.state != BatchState::InFlight)
            .and_then(|b| b.created.checked_add(delivery_timeout));
        Self {
            queued: (!p.batches.is_empty()).then_some(p.leader),
            oldest: p.batches.front().map(|b| b.created),
            idle: if p.probe {
                None
            } else {
                p.last_write.and_then(|t| t.checked_add(idle_expiry))
            },
            unbound: identity.is_some() && p.bound != identity,
            timers,
        }
    }
}

type Tp = (usize, usize);

/// The indexes (see the module documentation).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Index {
    /// Per topic, per partition: what the sets below hold for it.
    entries: Vec<Vec<Entry>>,
    /// Partitions holding batches, by leader.
    pub(super) queued: BTreeSet<(Option<i32>, usize, usize)>,
    /// Partitions holding batches, by their oldest batch's creation.
    pub(super) oldest: BTreeSet<(Instant, usize, usize)>,
    /// Partitions that may start an idle probe, by when.
    pub(super) idle: BTreeSet<(Instant, usize, usize)>,
    /// Partitions bound to another identity than the producer's.
    pub(super) unbound: BTreeSet<Tp>,
    /// Deadlines of partitions (`Entry::timers`, with their slot).
    pub(super) timers: BTreeSet<(Instant, u8, usize, usize)>,
    /// Not exact, a superset: by leader, every partition that a Produce request to that
    /// leader could take a batch from now (or that would start an idle probe). A partition
    /// leaves it when a visit picks nothing, and comes back when it changes (`sync`), when
    /// one of its timers passes, or when something every partition depends on changes
    /// (identity, flush, close).
    pub(super) sendable: BTreeSet<(i32, usize, usize)>,
    /// Timers up to this instant have put their partitions back into `sendable`.
    pub(super) timers_through: Option<Instant>,
    /// Scratch space for the partitions of one request (kept to avoid an allocation each).
    pub(super) scratch: Vec<Tp>,
}

impl Index {
    fn entry(&self, ti: usize, pi: usize) -> Entry {
        self.entries
            .get(ti)
            .and_then(|t| t.get(pi))
            .copied()
            .unwrap_or_default()
    }

    fn set(&mut self, ti: usize, pi: usize, leader: Option<i32>, new: Entry) {
        if let Some(l) = leader {
            if new.queued.is_some() || new.idle.is_some() {
                self.sendable.insert((l, ti, pi));
            }
        }
        let old = self.entry(ti, pi);
        if old == new {
            return;
        }
        if self.entries.len() <= ti {
            self.entries.resize_with(ti + 1, Vec::new);
        }
        let row = &mut self.entries[ti];
        if row.len() <= pi {
            row.resize(pi + 1, Entry::default());
        }
        row[pi] = new;
        if old.queued != new.queued {
            if let Some(l) = old.queued {
                self.queued.remove(&(l, ti, pi));
            }
            if let Some(l) = new.queued {
                self.queued.insert((l, ti, pi));
            }
        }
        if old.oldest != new.oldest {
            if let Some(t) = old.oldest {
                self.oldest.remove(&(t, ti, pi));
            }
            if let Some(t) = new.oldest {
                self.oldest.insert((t, ti, pi));
            }
        }
        if old.idle != new.idle {
            if let Some(t) = old.idle {
                self.idle.remove(&(t, ti, pi));
            }
            if let Some(t) = new.idle {
                self.idle.insert((t, ti, pi));
            }
        }
        if old.unbound != new.unbound {
            if new.unbound {
                self.unbound.insert((ti, pi));
            } else {
                self.unbound.remove(&(ti, pi));
            }
        }
        for (k, (o, n)) in old.timers.iter().zip(new.timers.iter()).enumerate() {
            if o != n {
                if let Some(t) = o {
                    self.timers.remove(&(*t, k as u8, ti, pi));
                }
                if let Some(t) = n {
                    self.timers.insert((*t, k as u8, ti, pi));
                }
            }
        }
    }

    /// The earliest partition deadline after `now`.
    pub(super) fn next_timer(&self, now: Instant) -> Option<Instant> {
        self.timers
            .range((Excluded((now, u8::MAX, usize::MAX, usize::MAX)), Unbounded))
            .next()
            .map(|t| t.0)
    }

    /// Partitions whose oldest batch was created at or before `at`.
    pub(super) fn oldest_through(&self, at: Instant) -> impl Iterator<Item = Tp> + '_ {
        self.oldest
            .range(..=(at, usize::MAX, usize::MAX))
            .map(|&(_, ti, pi)| (ti, pi))
    }

    /// Partitions holding batches whose leader is `leader`.
    pub(super) fn queued_for(&self, leader: Option<i32>) -> impl Iterator<Item = Tp> + '_ {
        self.queued
            .range((leader, 0, 0)..=(leader, usize::MAX, usize::MAX))
            .map(|&(_, ti, pi)| (ti, pi))
    }

    /// The distinct leaders of partitions holding batches.
    pub(super) fn queued_leaders(&self) -> impl Iterator<Item = Option<i32>> + '_ {
        let mut next = self.queued.first().map(|e| e.0);
        std::iter::from_fn(move || {
            let l = next?;
            next = self
                .queued
                .range((Excluded((l, usize::MAX, usize::MAX)), Unbounded))
                .next()
                .map(|e| e.0);
            Some(l)
        })
    }

    /// Puts back into `sendable` every partition whose timer (or idle probe time) passed
    /// since the last call.
    pub(super) fn fire_timers(&mut self, now: Instant, leader_of: impl Fn(Tp) -> Option<i32>) {
        let from = match self.timers_through {
            Some(t) if t >= now => return,
            Some(t) => Excluded(t),
            None => Unbounded,
        };
        let mut due: Vec<Tp> = std::mem::take(&mut self.scratch);
        due.clear();
        let upto = Included(now);
        due.extend(
            self.timers
                .range((
                    from.map(|t| (t, u8::MAX, usize::MAX, usize::MAX)),
                    upto.map(|t| (t, u8::MAX, usize::MAX, usize::MAX)),
                ))
                .map(|&(_, _, ti, pi)| (ti, pi)),
        );
        due.extend(
            self.idle
                .range((
                    from.map(|t| (t, usize::MAX, usize::MAX)),
                    upto.map(|t| (t, usize::MAX, usize::MAX)),
                ))
                .map(|&(_, ti, pi)| (ti, pi)),
        );
        for &tp in &due {
            if let Some(l) = leader_of(tp) {
                self.sendable.insert((l, tp.0, tp.1));
            }
        }
        due.clear();
        self.scratch = due;
        self.timers_through = Some(now);
    }
}

impl Producer {
    fn entry_of(&self, ti: usize, pi: usize) -> Entry {
        Entry::of(
            &self.topics[ti].partitions[pi],
            self.identity,
            self.cfg.linger,
            self.cfg.delivery_timeout,
            self.cfg.producer_state_expiry(),
        )
    }

    /// Brings the indexes up to date after a change to partition `(ti, pi)`, and marks it for
    /// a visit by the next Produce request to its leader.
    pub(super) fn sync(&mut self, ti: usize, pi: usize) {
        let e = self.entry_of(ti, pi);
        let leader = self.topics[ti].partitions[pi].leader;
        self.index.0.set(ti, pi, leader, e);
    }

    /// Every partition: after a change of identity (which binds them all), a flush or close
    /// (which makes open batches sendable), or a fatal stop.
    pub(super) fn sync_all(&mut self) {
        for ti in 0..self.topics.len() {
            for pi in 0..self.topics[ti].partitions.len() {
                self.sync(ti, pi);
            }
        }
    }

    /// A flush or close: every open batch may go now.
    pub(super) fn mark_all_sendable(&mut self) {
        let Index {
            queued, sendable, ..
        } = &mut self.index.0;
        sendable.extend(queued.iter().filter_map(|&(l, ti, pi)| Some((l?, ti, pi))));
    }

    /// Sets the producer's identity; every partition's binding is re-indexed.
    pub(super) fn set_identity(&mut self, identity: Option<ProducerIdentity>) {
        if self.identity != identity {
            self.identity = identity;
            self.sync_all();
        }
    }

    /// Debug builds: the exact indexes equal a recomputation from the partitions, and no
    /// partition left out of `sendable` would pick a batch (or change at all) if a Produce
    /// request to its leader visited it now.
    #[cfg(debug_assertions)]
    pub(super) fn check_index(&self) {
        let idx = &self.index.0;
        let mut fresh = Index::default();
        for (ti, t) in self.topics.iter().enumerate() {
            for pi in 0..t.partitions.len() {
                let e = self.entry_of(ti, pi);
                assert_eq!(idx.entry(ti, pi), e, "index entry of {ti}/{pi}");
                fresh.set(ti, pi, None, e);
            }
        }
        assert_eq!(idx.queued, fresh.queued, "queued index");
        assert_eq!(idx.oldest, fresh.oldest, "oldest index");
        assert_eq!(idx.idle, fresh.idle, "idle index");
        assert_eq!(idx.unbound, fresh.unbound, "unbound index");
        assert_eq!(idx.timers, fresh.timers, "timer index");
        if self.fatal.is_some() {
            return;
        }
        assert!(
            idx.timers_through.is_none_or(|t| t <= self.now),
            "timers fired ahead of time"
        );
        for (ti, t) in self.topics.iter().enumerate() {
            for (pi, p) in t.partitions.iter().enumerate() {
                let Some(node) = p.leader else { continue };
                if idx.sendable.contains(&(node, ti, pi)) {
                    continue;
                }
                let Some(&conn) = self.node_conns.get(&node) else {
                    continue;
                };
                let mut probe = p.clone();
                let ctx = self.send_context(conn);
                assert_eq!(
                    probe.next_to_send(&ctx),
                    None,
                    "partition {ti}/{pi} is not sendable per the index but would send"
                );
                assert_eq!(&probe, p, "partition {ti}/{pi} changed on a visit");
            }
        }
    }
}

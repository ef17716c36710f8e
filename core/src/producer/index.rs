//! Derived indexes over the partitions, so that a drain touches only the partitions that have
//! work instead of walking every partition of every topic (issue 12: at 10,000 partitions the
//! walks cost 31× the CPU per record of one partition).
//!
//! Every index here is derived: it is rebuilt from the partitions by `sync(ti, pi)` after
//! each change to partition `(ti, pi)` (and wholesale after a change of producer identity),
//! and nothing the producer decides depends on it except *which* partitions it looks at. A
//! partition the indexes leave out is one that the old walk would have visited without
//! effect. [`Producer::check_index`] (debug builds: every state of the model check and every
//! unit test, at the end of every drain, up to 256 partitions unless the test asks for it
//! beyond, as `core/tests/scale.rs` does) proves both halves: the exact indexes equal a
//! recomputation from scratch, and a partition missing from `sendable` would pick nothing.
//!
//! The whole index is wrapped in [`Derived`], whose `PartialEq` and `Hash` ignore it: it is
//! bookkeeping, not behaviour, so the model checker's state deduplication (by `Hash`/`Eq` of
//! the real `Producer`) sees exactly the states it saw before the index existed.

use std::collections::{BTreeMap, BTreeSet};

use smallvec::SmallVec;
use std::ops::Bound::{self, Excluded, Included, Unbounded};
use std::time::{Duration, Instant};

use crate::partition::{BatchState, Partition};
use crate::types::ProducerIdentity;

use super::Producer;

/// A wrapper whose equality and hash ignore its content: for derived indexes and scratch
/// space that are a function of the rest of the state (or do not influence behaviour).
#[derive(Debug, Clone)]
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

/// What the indexes hold for one partition: a pure function of the partition, the
/// producer's identity and the configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) struct Entry {
    /// The partition holds batches: its leader.
    queued: Option<Option<i32>>,
    /// Creation time of its oldest batch whose records are not yet reported (the next to
    /// reach `delivery.timeout.ms`).
    oldest: Option<Instant>,
    /// When it may start an idle probe (it was acknowledged before and is not probing).
    idle: Option<Instant>,
    /// The producer has an identity, this partition is bound to another one, and it is
    /// drained (nothing in flight, no retry that may be in the log): ready to move to the
    /// producer's identity. (Not while batches are in flight: every drain after a change of
    /// identity then looked at every partition with answers still to come, until they came,
    /// a review finding: about P²/64 looks at P busy partitions per bump.)
    unbound: bool,
    /// Its last batch is open and holds records (it is lingering, or about to go), and
    /// `linger.ms` is not 0.
    lingering: bool,
    /// The deadlines [`Producer::next_deadline`] considers for it: the head retry's backoff,
    /// the open batch's linger, and the delivery timeout of the first batch whose records
    /// are not yet reported (in flight or not).
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
        // The first batch whose records are not yet reported: the next to reach the delivery
        // timeout (the batches before it are in flight, waiting only for their answers).
        let oldest = p.first_unreported().map(|b| b.created);
        timers[2] = oldest.and_then(|c| c.checked_add(delivery_timeout));
        Self {
            queued: (!p.batches.is_empty()).then_some(p.leader),
            oldest,
            idle: if p.probe {
                None
            } else {
                p.last_write.and_then(|t| t.checked_add(idle_expiry))
            },
            unbound: identity.is_some() && p.bound != identity && p.is_drained(),
            // Only a linger lets an open batch wait (without one, nothing is taken early).
            lingering: !linger.is_zero()
                && (p.batches.back())
                    .is_some_and(|b| b.state == BatchState::Open && !b.records.is_empty()),
            timers,
        }
    }

    /// Its key in the open-batch index: its leader, if its last batch is open and holds
    /// records.
    fn lingering_on(&self) -> Option<i32> {
        self.queued.flatten().filter(|_| self.lingering)
    }
}

/// One partition's place in the indexes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct Slot {
    entry: Entry,
    /// The leader it is marked sendable to, if any.
    sendable: Option<i32>,
    /// Its key in `oldest`: at most its oldest unreported batch's creation (see `oldest`).
    oldest: Option<Instant>,
    /// Its key in `idle`: at most its idle-probe time, and not yet fired (see `idle`).
    idle: Option<Instant>,
}

/// `(topic, partition)`.
pub(super) type Tp = (usize, usize);

/// `(topic, partition)` packed into one integer (cheaper keys for the sorted sets).
fn pack(ti: usize, pi: usize) -> u64 {
    ((ti as u64) << 32) | (pi as u64 & 0xffff_ffff)
}

fn unpack(k: u64) -> Tp {
    ((k >> 32) as usize, (k & 0xffff_ffff) as usize)
}

/// Up to `limit` partitions of `set` (keyed by leader) led by `leader`, appended to `out`, in
/// (topic, partition) order from `start`, wrapping around; after `after` (the last one an
/// earlier call gave) if given. Costs what it gives, not what the set holds, so that a walk
/// that stops early never copies every partition of a node.
fn led_by(
    set: &BTreeSet<(i32, u64)>,
    leader: i32,
    (start, after): (Option<Tp>, Option<Tp>),
    limit: usize,
    out: &mut Vec<Tp>,
) {
    let from = start.map_or(0, |(ti, pi)| pack(ti, pi));
    let mut left = limit;
    let mut run = |lo: Bound<u64>, hi: Bound<u64>| {
        // A run that cannot give anything is not searched for (two descents of the tree
        // each): the wrap-around part of a walk from the first partition, or any part after
        // the limit was reached.
        let empty = match (lo, hi) {
            (Included(l) | Excluded(l), Excluded(h)) => l >= h,
            _ => false,
        };
        if left == 0 || empty {
            return;
        }
        let range = (lo.map(|k| (leader, k)), hi.map(|k| (leader, k)));
        let before = out.len();
        out.extend(set.range(range).take(left).map(|&(_, k)| unpack(k)));
        left -= out.len() - before;
    };
    match after.map(|(ti, pi)| pack(ti, pi)) {
        None => {
            run(Included(from), Included(u64::MAX));
            run(Included(0), Excluded(from));
        }
        Some(a) if a >= from => {
            run(Excluded(a), Included(u64::MAX));
            run(Included(0), Excluded(from));
        }
        Some(a) => run(Excluded(a), Excluded(from)),
    }
}

/// The indexes (see the module documentation). Times are keys as they are (until
/// 2026-12-05 as nanoseconds since the producer's creation: a conversion that cost about a
/// twentieth of the encode bench's instructions per batch at 1 KiB).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Index {
    /// Per topic, per partition.
    slots: Vec<Vec<Slot>>,
    /// Exact: how many partitions hold batches, by leader.
    queued: BTreeMap<Option<i32>, usize>,
    /// Exact: drained partitions bound to another identity than the producer's.
    unbound: BTreeSet<u64>,
    /// Exact: the partitions' deadlines (`Entry::timers`), with their slot.
    timers: BTreeSet<(Instant, u64, u8)>,
    /// Lazy: each partition holding unreported batches under a time at most its oldest such
    /// batch's creation (batches leave from the front and are reported from the front, so it
    /// only grows; `expire_deliveries` moves the key up when it passes). A partition left out
    /// has not reached its delivery timeout.
    oldest: BTreeSet<(Instant, u64)>,
    /// Lazy: each partition with an idle-probe time under a time at most that, until
    /// `fire_timers` passes it (then the partition is made sendable, or moved up).
    idle: BTreeSet<(Instant, u64)>,
    /// A superset: by leader, every partition that a Produce request to that leader could
    /// take a batch from now (or that would start an idle probe). A partition leaves it when
    /// a visit picks nothing, and comes back when it changes (`sync`), when one of its timers
    /// passes, or when something every partition depends on changes (identity, flush).
    sendable: BTreeSet<(i32, u64)>,
    /// Partitions whose last batch is open and holds records, by leader (exact): a Produce
    /// request to that leader may take such a batch before its linger is over, as Java's
    /// sender drains the first batch of every partition of a node it sends to.
    lingering: BTreeSet<(i32, u64)>,
    /// Timers up to this time have put their partitions back into `sendable`.
    timers_through: Option<Instant>,
}

impl Index {
    pub(super) fn new() -> Self {
        Self {
            slots: Vec::new(),
            queued: BTreeMap::new(),
            unbound: BTreeSet::new(),
            timers: BTreeSet::new(),
            oldest: BTreeSet::new(),
            idle: BTreeSet::new(),
            sendable: BTreeSet::new(),
            lingering: BTreeSet::new(),
            timers_through: None,
        }
    }

    fn slot(&self, ti: usize, pi: usize) -> Slot {
        self.slots
            .get(ti)
            .and_then(|t| t.get(pi))
            .copied()
            .unwrap_or_default()
    }

    fn slot_mut(&mut self, ti: usize, pi: usize) -> &mut Slot {
        if self.slots.len() <= ti {
            self.slots.resize_with(ti + 1, Vec::new);
        }
        let row = &mut self.slots[ti];
        if row.len() <= pi {
            row.resize(pi + 1, Slot::default());
        }
        &mut row[pi]
    }

    fn mark_sendable(&mut self, leader: i32, ti: usize, pi: usize) {
        let k = pack(ti, pi);
        let slot = self.slot_mut(ti, pi);
        match slot.sendable.replace(leader) {
            Some(l) if l == leader => {}
            Some(l) => {
                self.sendable.remove(&(l, k));
                self.sendable.insert((leader, k));
            }
            None => {
                self.sendable.insert((leader, k));
            }
        }
    }

    /// A visit to `(ti, pi)` for `leader` picked nothing (or it is led elsewhere).
    pub(super) fn unmark_sendable(&mut self, leader: i32, ti: usize, pi: usize) {
        let slot = self.slot_mut(ti, pi);
        if slot.sendable == Some(leader) {
            slot.sendable = None;
            self.sendable.remove(&(leader, pack(ti, pi)));
        }
    }

    fn set(&mut self, ti: usize, pi: usize, leader: Option<i32>, new: Entry) {
        let k = pack(ti, pi);
        let old = self.slot(ti, pi);
        if let Some(l) = leader {
            if (new.queued.is_some() || new.idle.is_some()) && old.sendable != Some(l) {
                self.mark_sendable(l, ti, pi);
            }
        }
        let old = self.slot(ti, pi);
        // The lazy keys: keep one while it is at most the true time (and, for idle, still to
        // fire); otherwise move it to the true time.
        let oldest = new.oldest;
        let oldest_key = match (old.oldest, oldest) {
            (Some(r), Some(c)) if r <= c => Some(r),
            (Some(r), None) => Some(r),
            (o, c) => {
                if let Some(r) = o {
                    self.oldest.remove(&(r, k));
                }
                if let Some(c) = c {
                    self.oldest.insert((c, k));
                }
                c
            }
        };
        let idle = new.idle;
        let pending = |r: Instant| self.timers_through.is_none_or(|f| r > f);
        let idle_key = match (old.idle, idle) {
            (Some(r), Some(t)) if r <= t && pending(r) => Some(r),
            (Some(r), None) => Some(r),
            (o, t) => {
                if let Some(r) = o {
                    self.idle.remove(&(r, k));
                }
                if let Some(t) = t {
                    self.idle.insert((t, k));
                }
                t
            }
        };
        if old.entry == new && old.oldest == oldest_key && old.idle == idle_key {
            return;
        }
        if old.entry.queued != new.queued {
            if let Some(l) = old.entry.queued {
                if let Some(n) = self.queued.get_mut(&l) {
                    *n -= 1;
                    if *n == 0 {
                        self.queued.remove(&l);
                    }
                }
            }
            if let Some(l) = new.queued {
                *self.queued.entry(l).or_insert(0) += 1;
            }
        }
        if old.entry.lingering_on() != new.lingering_on() {
            if let Some(l) = old.entry.lingering_on() {
                self.lingering.remove(&(l, k));
            }
            if let Some(l) = new.lingering_on() {
                self.lingering.insert((l, k));
            }
        }
        if old.entry.unbound != new.unbound {
            if new.unbound {
                self.unbound.insert(k);
            } else {
                self.unbound.remove(&k);
            }
        }
        for (i, (o, n)) in old.entry.timers.iter().zip(new.timers.iter()).enumerate() {
            if o != n {
                if let Some(t) = o {
                    self.timers.remove(&(*t, k, i as u8));
                }
                if let Some(t) = n {
                    self.timers.insert((*t, k, i as u8));
                }
            }
        }
        let slot = self.slot_mut(ti, pi);
        slot.entry = new;
        slot.oldest = oldest_key;
        slot.idle = idle_key;
    }

    /// The earliest partition deadline after `now`.
    pub(super) fn next_timer(&self, now: Instant) -> Option<Instant> {
        self.timers
            .range((Excluded((now, u64::MAX, u8::MAX)), Unbounded))
            .next()
            .map(|t| t.0)
    }

    /// Partitions that may have a batch created at or before `at` (a superset).
    pub(super) fn oldest_through(&self, at: Instant) -> impl Iterator<Item = Tp> + '_ {
        self.oldest
            .range(..=(at, u64::MAX))
            .map(|&(_, k)| unpack(k))
    }

    /// The partitions whose last batch is open and holds records, waiting for its linger
    /// (exact).
    pub(super) fn lingering(&self) -> impl Iterator<Item = Tp> + '_ {
        self.lingering.iter().map(|&(_, k)| unpack(k))
    }

    /// Whether some partition led by `leader` holds batches.
    pub(super) fn leads_batches(&self, leader: Option<i32>) -> bool {
        self.queued.contains_key(&leader)
    }

    /// The distinct leaders of partitions holding batches.
    pub(super) fn queued_leaders(&self) -> impl Iterator<Item = Option<i32>> + '_ {
        self.queued.keys().copied()
    }

    /// The partitions bound to another identity than the producer's.
    pub(super) fn unbound(&self) -> impl Iterator<Item = Tp> + '_ {
        self.unbound.iter().map(|&k| unpack(k))
    }

    /// Up to `limit` of the partitions marked sendable to `leader`, in (topic, partition)
    /// order from `from.0` (the first at or after it), wrapping around to those before it;
    /// after `from.1`, the last of them an earlier call gave, if given.
    pub(super) fn sendable_to(
        &self,
        leader: i32,
        from: (Option<Tp>, Option<Tp>),
        limit: usize,
        out: &mut Vec<Tp>,
    ) {
        led_by(&self.sendable, leader, from, limit, out);
    }

    /// Up to `limit` of the partitions led by `leader` whose last batch is open and holds
    /// records, in (topic, partition) order from `start`, wrapping around.
    pub(super) fn lingering_on(
        &self,
        leader: i32,
        start: Option<Tp>,
        limit: usize,
        out: &mut Vec<Tp>,
    ) {
        led_by(&self.lingering, leader, (start, None), limit, out);
    }

    /// Whether `(ti, pi)` is marked sendable to `leader`.
    pub(super) fn is_sendable(&self, leader: i32, ti: usize, pi: usize) -> bool {
        self.slot(ti, pi).sendable == Some(leader)
    }

    /// Marks sendable every partition whose timer (or idle probe time) passed since the last
    /// call; an idle key that was below the true time moves up to it.
    fn fire_timers(&mut self, now: Instant, entry: impl Fn(Tp) -> (Option<i32>, Entry)) {
        let from = match self.timers_through {
            Some(t) if t >= now => return,
            Some(t) => Excluded(t),
            None => Unbounded,
        };
        let due: SmallVec<[(Instant, u64); 8]> = self
            .timers
            .range((
                from.map(|t| (t, u64::MAX, u8::MAX)),
                Included((now, u64::MAX, u8::MAX)),
            ))
            .map(|&(t, k, _)| (t, k))
            .collect();
        self.timers_through = Some(now);
        for (_, k) in due {
            let (ti, pi) = unpack(k);
            if let Some(l) = entry((ti, pi)).0 {
                self.mark_sendable(l, ti, pi);
            }
        }
        let idle: SmallVec<[(Instant, u64); 8]> = self
            .idle
            .range((from.map(|t| (t, u64::MAX)), Included((now, u64::MAX))))
            .copied()
            .collect();
        for (r, k) in idle {
            let (ti, pi) = unpack(k);
            self.idle.remove(&(r, k));
            self.slot_mut(ti, pi).idle = None;
            let (leader, e) = entry((ti, pi));
            match e.idle {
                Some(t) if t <= now => {
                    if let Some(l) = leader {
                        self.mark_sendable(l, ti, pi);
                    }
                }
                Some(t) => {
                    self.idle.insert((t, k));
                    self.slot_mut(ti, pi).idle = Some(t);
                }
                None => {}
            }
        }
    }

    /// After `expire_deliveries` looked at `(ti, pi)`: its `oldest` key moves up to its true
    /// oldest unreported batch (or goes, if it has none).
    fn reset_oldest(&mut self, ti: usize, pi: usize, oldest: Option<Instant>) {
        let k = pack(ti, pi);
        let c = oldest;
        let slot = self.slot(ti, pi);
        if slot.oldest != c {
            if let Some(r) = slot.oldest {
                self.oldest.remove(&(r, k));
            }
            if let Some(c) = c {
                self.oldest.insert((c, k));
            }
            self.slot_mut(ti, pi).oldest = c;
        }
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
        // Without idempotence there is no rebind to end a cut: it ends once nothing sent
        // before it is unresolved.
        let p = &mut self.topics[ti].partitions[pi];
        if p.cutting && !self.cfg.enable_idempotence && p.is_drained() {
            p.cutting = false;
        }
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

    /// A flush or close: every open batch may go now. Visits only the partitions whose open
    /// batch waits for its linger (the exact `lingering` index): a flush changes nothing for
    /// any other (a batch sealed, in flight or backing off is as sendable as it was). Before,
    /// it visited every partition that held a batch in the last delivery timeout (the lazy
    /// `oldest` index), and a full `buffer.memory` flushes on about every answer: at 10,000
    /// partitions, a walk of all of them per Produce answer (a review finding).
    pub(super) fn mark_all_sendable(&mut self) {
        // Listed in the scratch space first (no allocation per flush).
        let mut lingering = std::mem::take(&mut self.scratch.0);
        lingering.clear();
        lingering.extend(self.index.0.lingering());
        for &(ti, pi) in &lingering {
            if let Some(l) = self.topics[ti].partitions[pi].leader {
                self.index.0.mark_sendable(l, ti, pi);
            }
        }
        lingering.clear();
        self.scratch.0 = lingering;
    }

    /// Sets the producer's identity; every partition's binding is re-indexed.
    pub(super) fn set_identity(&mut self, identity: Option<ProducerIdentity>) {
        if self.identity != identity {
            self.identity = identity;
            // A bump waiting for its backoff was of the identity left.
            self.bump_at = None;
            self.sync_all();
        }
    }

    /// Marks sendable the partitions whose timers passed (before a round of Produce
    /// requests).
    pub(super) fn fire_timers(&mut self) {
        let Self {
            index, topics, cfg, ..
        } = self;
        let identity = self.identity;
        index.0.fire_timers(self.now, |(ti, pi)| {
            let p = &topics[ti].partitions[pi];
            let e = Entry::of(
                p,
                identity,
                cfg.linger,
                cfg.delivery_timeout,
                cfg.producer_state_expiry(),
            );
            (p.leader, e)
        });
    }

    /// `expire_deliveries` looked at `(ti, pi)`: its delivery-timeout key moves up, past the
    /// batches in flight whose records it reported.
    pub(super) fn expired_through(&mut self, ti: usize, pi: usize) {
        let oldest = self.topics[ti].partitions[pi]
            .first_unreported()
            .map(|b| b.created);
        self.index.0.reset_oldest(ti, pi, oldest);
    }

    /// Debug builds: the exact indexes equal a recomputation from the partitions, every lazy
    /// key is at most its true time (and an idle key is still to fire), and no partition left
    /// out of `sendable` would pick a batch (or change at all) if a Produce request to its
    /// leader visited it now.
    #[cfg(debug_assertions)]
    pub(super) fn check_index(&self) {
        let idx = &self.index.0;
        let mut queued: BTreeMap<Option<i32>, usize> = BTreeMap::new();
        let (mut unbound, mut timers, mut lingering) = (0, 0, 0);
        for (ti, t) in self.topics.iter().enumerate() {
            for pi in 0..t.partitions.len() {
                let e = self.entry_of(ti, pi);
                let slot = idx.slot(ti, pi);
                assert_eq!(slot.entry, e, "index entry of {ti}/{pi}");
                let k = pack(ti, pi);
                if let Some(l) = e.queued {
                    *queued.entry(l).or_insert(0) += 1;
                }
                if let Some(l) = e.lingering_on() {
                    lingering += 1;
                    assert!(
                        idx.lingering.contains(&(l, k)),
                        "lingering index of {ti}/{pi}"
                    );
                }
                if e.unbound {
                    unbound += 1;
                    assert!(idx.unbound.contains(&k), "unbound index of {ti}/{pi}");
                }
                for (i, d) in e.timers.iter().enumerate() {
                    if let Some(d) = d {
                        timers += 1;
                        let key = (*d, k, i as u8);
                        assert!(idx.timers.contains(&key), "timer index of {ti}/{pi}");
                    }
                }
                if let Some(c) = e.oldest {
                    let r = slot
                        .oldest
                        .expect("a partition with unreported batches has an oldest key");
                    assert!(r <= c && idx.oldest.contains(&(r, k)));
                }
                if let Some(t) = e.idle {
                    match slot.idle {
                        Some(r) => assert!(r <= t && idx.idle.contains(&(r, k))),
                        None => assert!(idx.timers_through.is_some_and(|f| t <= f)),
                    }
                }
                if let Some(l) = slot.sendable {
                    assert!(idx.sendable.contains(&(l, k)));
                }
            }
        }
        assert_eq!(idx.queued, queued, "queued index");
        assert_eq!(idx.unbound.len(), unbound, "unbound index");
        assert_eq!(idx.lingering.len(), lingering, "lingering index");
        assert_eq!(idx.timers.len(), timers, "timer index");
        if self.fatal.is_some() {
            return;
        }
        assert!(
            idx.timers_through.is_none_or(|t| t <= self.now),
            "timers fired ahead of time"
        );
        // The delivery-timeout walk left no partition due: one whose key stayed at or before
        // the timeout (a batch in flight whose records were reported, waiting for its
        // answer) would be visited again by every drain until that answer (a review
        // finding: every partition of a slow broker, at every drain). (Not once closed: no
        // drain does any work then, and every batch is gone. Nor while timeouts wait after
        // a stalled driver, `late_wake_grace`: the walk comes at the grace's end.)
        if let Some(created_by) = (self.now.checked_sub(self.cfg.delivery_timeout))
            .filter(|_| !self.closed && !self.grace_holds())
        {
            let due: Vec<Tp> = idx.oldest_through(created_by).collect();
            assert!(
                due.is_empty(),
                "partitions due again at every drain: {due:?}"
            );
        }
        for (ti, t) in self.topics.iter().enumerate() {
            for (pi, p) in t.partitions.iter().enumerate() {
                let Some(node) = p.leader else { continue };
                if idx.sendable.contains(&(node, pack(ti, pi))) {
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

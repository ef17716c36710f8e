//! Where the outcomes of records sent with [`crate::ProducerHandle::enqueue`] wait for their
//! [`crate::DeliveryFuture`]s.
//!
//! A oneshot channel per record cost an allocation, a handful of atomic read-modify-writes
//! and a cache line that crossed between the producer's task and the application's several
//! times per record: about a third of kprod's CPU per record at 100 B (`bench-e2e`, client
//! `kprod` at 0.44 µs per record against `kprod-callback` at 0.30). Here the outcomes of 16
//! consecutive record ids share one allocation, a [`Slab`]: the producer's task writes an
//! acknowledgement with plain stores under the core's lock (no allocation, no atomic
//! read-modify-write, no reference count touched) and wakes only the futures that wait. Each
//! future holds the slab (one reference count, touched only by the threads that make and drop
//! futures) and reads its slot; an outcome that does not fit a slot (a failure, a log append
//! time, a record of another topic than the slab's first) is kept whole beside the slots.
//!
//! The registry ([`Slabs`], in the core's state) holds each slab while a record bound to it
//! is unresolved, and the producer's task closes them all when it stops, so that every
//! future still waiting resolves as `DriverStopped` rather than never.
//!
//! Wake-ups: a future that finds its slot empty stores its waker in the slot, raises the
//! slot's `waiting` flag and looks again; the producer's task writes a run of slots, then
//! (after one `SeqCst` fence) reads their flags and takes the wakers of those raised. One of
//! the two sees the other's write (a store, then a load of the other's location, with the
//! fence or `SeqCst` between), so no wake-up is lost; and each waiting future has a lock of
//! its own, so that futures waiting side by side never contend.

use std::collections::VecDeque;
use std::sync::atomic::{fence, AtomicBool, AtomicI32, AtomicI64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};
use std::task::Waker;

use crate::{Acknowledgement, Delivery, DeliveryError, Outcome, TimestampType};

/// Record ids per slab: enough to share the allocation, few enough that a slab kept for one
/// unresolved record (the others resolved) holds little (see [`Slabs::uncharged`]).
pub(crate) const SLAB: usize = 16;

/// What a slab occupies: the struct and the `Arc`'s counts.
pub(crate) const SLAB_BYTES: usize = size_of::<Slab>() + 2 * size_of::<usize>();

/// Each record's share of its slab, charged against `buffer.memory` with the record.
pub(crate) const SHARE: usize = SLAB_BYTES.div_ceil(SLAB);

// A slot is 40 bytes where std's `Mutex` is one futex word (Linux; elsewhere a pointer to a
// pthread mutex, say, makes it larger); the slab's lock, topic and flag add a fraction.
#[cfg(all(target_os = "linux", target_pointer_width = "64"))]
const _: () = assert!(size_of::<Slot>() == 40 && SHARE <= 48);

// A slot's state: its kind in the low bits, and the acknowledgement (`ack_bits`) above.
/// No outcome yet.
const EMPTY: u8 = 0;
/// Delivered at `offset`, to the slab's topic, partition `partition`, in the record's create
/// time.
const AT_OFFSET: u8 = 1;
/// Delivered without an offset (`acks=0`, or a duplicate confirmed without one).
const NO_OFFSET: u8 = 2;
/// The whole outcome waits in [`Slab::outcomes`].
const WHOLE: u8 = 3;
const KIND: u8 = 0x0f;

fn ack_bits(ack: Acknowledgement) -> u8 {
    match ack {
        Acknowledgement::InSyncReplicas => 0x00,
        Acknowledgement::Leader => 0x10,
        Acknowledgement::Unacknowledged => 0x20,
    }
}

fn ack_of(state: u8) -> Acknowledgement {
    match state & 0x30 {
        0x10 => Acknowledgement::Leader,
        0x20 => Acknowledgement::Unacknowledged,
        _ => Acknowledgement::InSyncReplicas,
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Nothing panics while these locks are held; if something did, the data is still whole.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

#[derive(Default)]
struct Slot {
    state: AtomicU8,
    /// The future was dropped without its outcome: a whole outcome is not kept for it.
    abandoned: AtomicBool,
    /// The future stored a waker in `waker` and waits.
    waiting: AtomicBool,
    partition: AtomicI32,
    offset: AtomicI64,
    waker: Mutex<Option<Waker>>,
}

impl Slot {
    /// The waker of a future that waits on this slot, taken (after the writer's fence).
    fn waiting_waker(&self) -> Option<Waker> {
        if self.waiting.load(Ordering::SeqCst) {
            lock(&self.waker).take()
        } else {
            None
        }
    }
}

/// The outcomes of [`SLAB`] consecutive record ids.
pub(crate) struct Slab {
    slots: [Slot; SLAB],
    /// The topic of the first record delivered through a slot: a later record of it takes a
    /// slot too (compared by pointer: the core hands every record of a topic the same name).
    topic: OnceLock<Arc<str>>,
    /// Outcomes that do not fit a slot, by slot index.
    outcomes: Mutex<Vec<(u8, Outcome)>>,
    /// The producer's task stopped: an empty slot stays empty.
    closed: AtomicBool,
}

impl Slab {
    fn new() -> Self {
        Self {
            slots: std::array::from_fn(|_| Slot::default()),
            topic: OnceLock::new(),
            outcomes: Mutex::new(Vec::new()),
            closed: AtomicBool::new(false),
        }
    }

    /// Slot `idx`'s outcome for a record created at `timestamp`, if it has one; with
    /// `closing`, `DriverStopped` if it never will.
    fn take(
        &self,
        idx: u8,
        timestamp: i64,
        closing: bool,
    ) -> Option<Result<Delivery, DeliveryError>> {
        let slot = &self.slots[usize::from(idx)];
        let mut state = slot.state.load(Ordering::SeqCst);
        if state & KIND == EMPTY {
            #[cfg(test)]
            tests::between_reads();
            if !(closing && self.closed.load(Ordering::SeqCst)) {
                return None;
            }
            // The driver writes every slot it resolves before it closes the slab: one
            // written after the first look (a thread paused between the two) is seen now,
            // and is its outcome, not "stopped".
            state = slot.state.load(Ordering::SeqCst);
        }
        match state & KIND {
            EMPTY => Some(Err(crate::stopped())),
            AT_OFFSET | NO_OFFSET => {
                let topic = self
                    .topic
                    .get()
                    .expect("set before a slot names it")
                    .clone();
                let offset =
                    (state & KIND == AT_OFFSET).then(|| slot.offset.load(Ordering::Relaxed));
                Some(Ok(Delivery {
                    topic,
                    partition: slot.partition.load(Ordering::Relaxed),
                    offset,
                    timestamp,
                    timestamp_type: TimestampType::CreateTime,
                    acknowledgement: ack_of(state),
                }))
            }
            _ => {
                let mut outcomes = lock(&self.outcomes);
                let at = outcomes.iter().position(|(i, _)| *i == idx)?;
                let (_, outcome) = outcomes.swap_remove(at);
                drop(outcomes);
                Some(crate::delivery(outcome, timestamp))
            }
        }
    }

    /// Slot `idx`'s outcome, or `None` after storing `waker` to be woken when it comes.
    /// `stored` is the identity of the waker the future stored last: a poll with the same
    /// waker (a task polling its future again before the outcome) only looks at the slot.
    pub(crate) fn poll(
        &self,
        idx: u8,
        timestamp: i64,
        waker: &Waker,
        stored: &mut Option<WakerId>,
    ) -> Option<Result<Delivery, DeliveryError>> {
        if let Some(outcome) = self.take(idx, timestamp, true) {
            return Some(outcome);
        }
        let id = WakerId::of(waker);
        if *stored == Some(id) {
            return None; // stored already, and taken only when the slot is written
        }
        let slot = &self.slots[usize::from(idx)];
        let replaced = {
            let mut w = lock(&slot.waker);
            match w.as_ref() {
                Some(old) if old.will_wake(waker) => None,
                _ => w.replace(waker.clone()),
            }
        };
        // A waker is dropped outside the slot's lock: its task's destructor may run.
        drop(replaced);
        *stored = Some(id);
        if !slot.waiting.load(Ordering::Relaxed) {
            slot.waiting.store(true, Ordering::SeqCst);
        } else {
            // Raised already (and perhaps seen, its waker taken before this one was stored):
            // the look below must still follow this store in the `SeqCst` order.
            fence(Ordering::SeqCst);
        }
        self.take(idx, timestamp, true)
    }

    /// The future of slot `idx` is dropped without its outcome: an outcome kept whole (a
    /// failure holds its record) is let go now or when it comes, not when the slab goes.
    pub(crate) fn abandon(&self, idx: u8) {
        let slot = &self.slots[usize::from(idx)];
        slot.abandoned.store(true, Ordering::SeqCst);
        if slot.state.load(Ordering::SeqCst) & KIND == WHOLE {
            self.drop_whole(idx);
        }
        // Its task need not be kept until the outcome comes (dropped outside the lock).
        let waker = lock(&slot.waker).take();
        drop(waker);
    }

    fn drop_whole(&self, idx: u8) {
        let mut outcomes = lock(&self.outcomes);
        if let Some(at) = outcomes.iter().position(|(i, _)| *i == idx) {
            let gone = outcomes.swap_remove(at);
            drop(outcomes);
            drop(gone);
        }
    }
}

/// Which waker a future stored ([`Slab::poll`]): the address of its data and of its
/// vtable, as [`Waker::will_wake`] compares them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct WakerId(usize, usize);

impl WakerId {
    fn of(w: &Waker) -> Self {
        Self(w.data() as usize, std::ptr::from_ref(w.vtable()) as usize)
    }
}

/// A record's slot, for its future. Dropped before its outcome was taken (the future never
/// made, or dropped), it abandons the slot.
pub(crate) struct Bound {
    pub(crate) slab: Arc<Slab>,
    pub(crate) idx: u8,
    /// The outcome was taken.
    pub(crate) taken: bool,
}

impl Drop for Bound {
    fn drop(&mut self) {
        if !self.taken {
            self.slab.abandon(self.idx);
        }
    }
}

impl std::fmt::Debug for Bound {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bound")
            .field("idx", &self.idx)
            .finish_non_exhaustive()
    }
}

struct Entry {
    /// The first record id of the slab (a multiple of [`SLAB`]).
    base: u64,
    /// `None` once let go: every record bound to it resolved and it takes no new ids. Such
    /// an entry stays until it reaches the front or [`Slabs::publish`] compacts, so that
    /// letting a slab go in the middle costs no shift of the entries after it.
    slab: Option<Arc<Slab>>,
    /// Records bound to it and not yet resolved.
    unresolved: u32,
}

/// The slabs holding unresolved records, by first id (kept under the core's lock).
#[derive(Default)]
pub(crate) struct Slabs {
    /// Ascending by `base`; the last one takes the new ids (and is never let go).
    live: VecDeque<Entry>,
    /// Entries of `live` whose slab was let go.
    gone: usize,
    /// The slots written since the last [`Self::publish`]: entry index and slot index.
    written: Vec<(usize, u8)>,
    /// The sum of the entries' `unresolved`.
    unresolved: u64,
}

impl Slabs {
    /// Binds accepted record `id` to its slot. Ids only grow.
    pub(crate) fn bind(&mut self, id: u64) -> Bound {
        let base = id - id % SLAB as u64;
        if self.live.back().is_none_or(|e| e.base != base) {
            debug_assert!(
                self.live.back().is_none_or(|e| e.base < base),
                "ids only grow"
            );
            debug_assert!(
                self.written.is_empty(),
                "published before anything is bound"
            );
            // The previous last slab takes no more ids: kept only while it holds records.
            if (self.live.back()).is_some_and(|e| e.unresolved == 0) {
                self.live.pop_back();
            }
            self.live.push_back(Entry {
                base,
                slab: Some(Arc::new(Slab::new())),
                unresolved: 0,
            });
        }
        let e = self.live.back_mut().expect("just ensured");
        e.unresolved += 1;
        self.unresolved += 1;
        Bound {
            slab: Arc::clone(e.slab.as_ref().expect("the last slab is kept")),
            idx: (id % SLAB as u64) as u8,
            taken: false,
        }
    }

    fn find(&self, id: u64) -> Option<usize> {
        let base = id - id % SLAB as u64;
        let at = self.live.partition_point(|e| e.base < base);
        (self.live.get(at)?.base == base).then_some(at)
    }

    /// The slot of bound record `id`, noted as written (its entry counts one record fewer).
    fn resolve(&mut self, id: u64) -> Option<(&Slab, &Slot)> {
        let at = self.find(id)?;
        let idx = (id % SLAB as u64) as u8;
        let e = &mut self.live[at];
        let slab = e.slab.as_ref()?;
        e.unresolved -= 1;
        self.unresolved -= 1;
        self.written.push((at, idx));
        let slot = &slab.slots[usize::from(idx)];
        Some((slab, slot))
    }

    /// Record `id` was delivered: its outcome goes into its slot if it fits one.
    pub(crate) fn deliver(
        &mut self,
        id: u64,
        topic: &Arc<str>,
        partition: i32,
        offset: Option<i64>,
        log_append_time: Option<i64>,
        ack: Acknowledgement,
    ) {
        let Some((slab, slot)) = self.resolve(id) else {
            debug_assert!(false, "record {id} was bound");
            return;
        };
        let same_topic = Arc::ptr_eq(slab.topic.get_or_init(|| Arc::clone(topic)), topic);
        if log_append_time.is_none() && same_topic {
            slot.partition.store(partition, Ordering::Relaxed);
            let kind = match offset {
                Some(o) => {
                    slot.offset.store(o, Ordering::Relaxed);
                    AT_OFFSET
                }
                None => NO_OFFSET,
            };
            slot.state.store(kind | ack_bits(ack), Ordering::Release);
        } else {
            let outcome = Ok((Arc::clone(topic), partition, offset, log_append_time, ack));
            Self::keep_whole(slab, slot, id, outcome);
        }
    }

    /// Record `id` resolved with `outcome` (a failure, say), kept whole.
    pub(crate) fn resolve_whole(&mut self, id: u64, outcome: Outcome) {
        let Some((slab, slot)) = self.resolve(id) else {
            debug_assert!(false, "record {id} was bound");
            return;
        };
        Self::keep_whole(slab, slot, id, outcome);
    }

    fn keep_whole(slab: &Slab, slot: &Slot, id: u64, outcome: Outcome) {
        let idx = (id % SLAB as u64) as u8;
        if slot.abandoned.load(Ordering::SeqCst) {
            // Nobody will read it: dropped here (its record with it).
            slot.state.store(WHOLE, Ordering::SeqCst);
            return;
        }
        lock(&slab.outcomes).push((idx, outcome));
        slot.state.store(WHOLE, Ordering::SeqCst);
        // The future may have been dropped in between: one of the two lets the outcome go.
        if slot.abandoned.load(Ordering::SeqCst) {
            slab.drop_whole(idx);
        }
    }

    /// The memory of the slabs kept for unresolved records beyond what those records are
    /// charged against `buffer.memory` ([`SHARE`] each), not counting the slab that takes
    /// new ids: about nothing while records resolve in the order they were sent, up to a
    /// slab per record when a few records keep slabs whose others resolved (one partition
    /// without a leader among many, say). The driver counts it against `buffer.memory` too.
    pub(crate) fn uncharged(&self) -> usize {
        let Some(last) = self.live.back() else {
            return 0;
        };
        let kept = (self.live.len() - 1 - self.gone) * SLAB_BYTES;
        let charged = (self.unresolved - u64::from(last.unresolved)) as usize * SHARE;
        kept.saturating_sub(charged)
    }

    /// After slots were written: the wakers of the futures waiting on them go to `wake` (wake
    /// them outside the core's lock, [`wake_all`]), and slabs with no unresolved record that
    /// take no new ids are let go.
    pub(crate) fn publish(&mut self, wake: &mut Vec<Waker>) {
        if self.written.is_empty() {
            return;
        }
        // The other half of `Slab::poll`'s store and look.
        fence(Ordering::SeqCst);
        for &(at, idx) in &self.written {
            if let Some(slab) = &self.live[at].slab {
                wake.extend(slab.slots[usize::from(idx)].waiting_waker());
            }
        }
        // Then (every waiting slot seen) the slabs whose records all resolved are let go.
        let last = self.live.len() - 1;
        for &(at, _) in &self.written {
            let e = &mut self.live[at];
            if e.unresolved == 0 && at != last && e.slab.take().is_some() {
                self.gone += 1;
            }
        }
        self.written.clear();
        while self.live.front().is_some_and(|e| e.slab.is_none()) {
            self.live.pop_front();
            self.gone -= 1;
        }
        // Entries let go in the middle (records resolved out of order, around a stuck
        // partition's) are dropped once they are half of all: a pass per as many let go.
        if self.gone > 64 && 2 * self.gone > self.live.len() {
            self.live.retain(|e| e.slab.is_some());
            self.gone = 0;
        }
    }

    /// The producer's task stops: every slab is closed (an empty slot resolves as
    /// `DriverStopped`), and the wakers of the futures still waiting go to `wake`.
    pub(crate) fn close(&mut self, wake: &mut Vec<Waker>) {
        self.publish(wake);
        self.unresolved = 0;
        self.gone = 0;
        let slabs: Vec<Arc<Slab>> = self.live.drain(..).filter_map(|e| e.slab).collect();
        for slab in &slabs {
            slab.closed.store(true, Ordering::SeqCst);
        }
        for slab in &slabs {
            wake.extend(slab.slots.iter().filter_map(Slot::waiting_waker));
        }
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.live.len() - self.gone
    }
}

/// Wakes the futures whose wakers `publish` or `close` took.
pub(crate) fn wake_all(wakers: &mut Vec<Waker>) {
    for w in wakers.drain(..) {
        w.wake();
    }
}

#[cfg(test)]
mod tests {
    use std::future::Future;
    use std::sync::atomic::AtomicUsize;
    use std::task::{Context, Poll, Wake};

    use super::*;
    use crate::{DeliveryFuture, ErrorKind, FailureReason};
    use kprod_core::Persistence;

    /// Counts its wake-ups; unparks a thread if it has one.
    #[derive(Default)]
    struct Count {
        woken: AtomicUsize,
        thread: Mutex<Option<std::thread::Thread>>,
    }

    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.wake_by_ref();
        }
        fn wake_by_ref(self: &Arc<Self>) {
            self.woken.fetch_add(1, Ordering::SeqCst);
            if let Some(t) = lock(&self.thread).as_ref() {
                t.unpark();
            }
        }
    }

    thread_local! {
        /// What runs between `Slab::take`'s look at an empty slot and its look at whether
        /// the slab is closed: a test puts the driver's work there, as if the polling
        /// thread were paused between the two.
        static BETWEEN_READS: std::cell::RefCell<Option<Box<dyn FnOnce()>>> =
            const { std::cell::RefCell::new(None) };
    }

    pub(super) fn between_reads() {
        if let Some(f) = BETWEEN_READS.with(|h| h.borrow_mut().take()) {
            f();
        }
    }

    /// A record delivered, and its slab closed, between a poll's look at the empty slot and
    /// its look at the slab's `closed` flag (its thread paused there): the poll gives the
    /// delivery, not `DriverStopped` (a review found it gave "stopped", a delivered record
    /// reported possibly persisted, and a failed one's record lost).
    #[test]
    fn a_slot_written_just_before_its_slab_closed_gives_its_outcome() {
        let slabs = std::rc::Rc::new(std::cell::RefCell::new(Slabs::default()));
        let mut f: Vec<_> = (0..2)
            .map(|id| future(&mut slabs.borrow_mut(), id, 7))
            .collect();
        let count = Arc::new(Count::default());
        let w = Waker::from(count.clone());
        let driver = std::rc::Rc::clone(&slabs);
        BETWEEN_READS.with(|h| {
            *h.borrow_mut() = Some(Box::new(move || {
                let mut slabs = driver.borrow_mut();
                let topic: Arc<str> = Arc::from("t");
                slabs.deliver(
                    0,
                    &topic,
                    2,
                    Some(40),
                    None,
                    Acknowledgement::InSyncReplicas,
                );
                let cut = ErrorKind::Failed(FailureReason::PartitionCut);
                let err = DeliveryError::new(cut, Persistence::NotPersisted);
                slabs.resolve_whole(1, Err(err));
                let mut wake = Vec::new();
                slabs.publish(&mut wake);
                slabs.close(&mut wake);
            }))
        });
        let Poll::Ready(Ok(d)) = poll(&mut f[0], &w) else {
            panic!("record 0 was delivered before its slab closed")
        };
        assert_eq!((d.partition, d.offset), (2, Some(40)));
        let Poll::Ready(Err(e)) = poll(&mut f[1], &w) else {
            panic!("record 1 failed")
        };
        assert!(
            matches!(e.kind, ErrorKind::Failed(FailureReason::PartitionCut)),
            "{e:?}"
        );
        assert_eq!(e.persisted, Persistence::NotPersisted);
    }

    fn poll(f: &mut DeliveryFuture, w: &Waker) -> Poll<Result<Delivery, DeliveryError>> {
        std::pin::Pin::new(f).poll(&mut Context::from_waker(w))
    }

    fn future(slabs: &mut Slabs, id: u64, timestamp: i64) -> DeliveryFuture {
        DeliveryFuture::new(slabs.bind(id), timestamp)
    }

    #[test]
    fn outcomes_come_out_of_their_slots_as_delivered() {
        let mut slabs = Slabs::default();
        let topic: Arc<str> = Arc::from("t");
        let other: Arc<str> = Arc::from("u");
        let mut f: Vec<_> = (0..5)
            .map(|id| future(&mut slabs, id, 100 + id as i64))
            .collect();
        let count = Arc::new(Count::default());
        let w = Waker::from(count.clone());
        assert!(poll(&mut f[0], &w).is_pending());
        let isr = Acknowledgement::InSyncReplicas;
        slabs.deliver(0, &topic, 3, Some(42), None, isr);
        slabs.deliver(1, &topic, 3, None, None, Acknowledgement::Unacknowledged);
        slabs.deliver(2, &topic, 3, Some(44), Some(9_000), isr);
        slabs.deliver(3, &other, 1, Some(7), None, Acknowledgement::Leader);
        let err = DeliveryError::new(ErrorKind::DriverStopped, Persistence::NotPersisted);
        slabs.resolve_whole(4, Err(err));
        let mut wake = Vec::new();
        slabs.publish(&mut wake);
        assert_eq!(wake.len(), 1, "one future waits");
        wake_all(&mut wake);
        assert_eq!(count.woken.load(Ordering::SeqCst), 1);
        let Poll::Ready(Ok(d)) = poll(&mut f[0], &w) else {
            panic!("delivered")
        };
        assert_eq!(
            (&*d.topic, d.partition, d.offset, d.timestamp),
            ("t", 3, Some(42), 100)
        );
        assert_eq!(d.timestamp_type, TimestampType::CreateTime);
        assert_eq!(d.acknowledgement, isr);
        let Poll::Ready(Ok(d)) = poll(&mut f[1], &w) else {
            panic!("sent")
        };
        assert_eq!(
            (d.offset, d.acknowledgement),
            (None, Acknowledgement::Unacknowledged)
        );
        let Poll::Ready(Ok(d)) = poll(&mut f[2], &w) else {
            panic!("delivered")
        };
        assert_eq!((d.offset, d.timestamp), (Some(44), 9_000));
        assert_eq!(d.timestamp_type, TimestampType::LogAppendTime);
        let Poll::Ready(Ok(d)) = poll(&mut f[3], &w) else {
            panic!("delivered")
        };
        assert_eq!((&*d.topic, d.partition, d.offset), ("u", 1, Some(7)));
        assert_eq!(d.acknowledgement, Acknowledgement::Leader);
        let Poll::Ready(Err(e)) = poll(&mut f[4], &w) else {
            panic!("failed")
        };
        assert!(matches!(e.kind, ErrorKind::DriverStopped));
        assert_eq!(e.persisted, Persistence::NotPersisted);
    }

    /// A slab is let go once its records resolved and it takes no new ids; the one taking new
    /// ids stays. Closing resolves every empty slot as "stopped", and keeps written ones.
    #[test]
    fn slabs_are_let_go_when_resolved_and_closed_when_the_driver_stops() {
        const S: u64 = SLAB as u64;
        let mut slabs = Slabs::default();
        let topic: Arc<str> = Arc::from("t");
        let isr = Acknowledgement::InSyncReplicas;
        let mut f: Vec<_> = (0..2 * S + 2).map(|id| future(&mut slabs, id, 1)).collect();
        assert_eq!(slabs.len(), 3);
        let mut wake = Vec::new();
        for id in 0..S {
            slabs.deliver(id, &topic, 0, Some(id as i64), None, isr);
        }
        slabs.publish(&mut wake);
        assert!(wake.is_empty(), "nobody waits");
        assert_eq!(slabs.len(), 2, "the first slab is resolved");
        slabs.deliver(2 * S, &topic, 0, Some(2 * S as i64), None, isr);
        slabs.deliver(2 * S + 1, &topic, 0, Some(2 * S as i64 + 1), None, isr);
        slabs.publish(&mut wake);
        assert_eq!(slabs.len(), 2, "the last slab takes new ids");
        let count = Arc::new(Count::default());
        let w = Waker::from(count.clone());
        assert!(poll(&mut f[SLAB + 3], &w).is_pending());
        let mut closed = Vec::new();
        slabs.close(&mut closed);
        assert_eq!(slabs.len(), 0);
        wake_all(&mut closed);
        assert_eq!(
            count.woken.load(Ordering::SeqCst),
            1,
            "the waiting future is woken"
        );
        for (id, f) in f.iter_mut().enumerate() {
            match poll(f, &w) {
                Poll::Ready(Ok(d)) if !(SLAB..2 * SLAB).contains(&id) => {
                    assert_eq!(d.offset, Some(id as i64));
                }
                Poll::Ready(Err(e)) if (SLAB..2 * SLAB).contains(&id) => {
                    assert!(matches!(e.kind, ErrorKind::DriverStopped));
                }
                other => panic!("record {id}: {other:?}"),
            }
        }
    }

    /// Every waiting future of a slab resolved whole in one event is woken, the slab let go
    /// only after its wakers are taken.
    #[test]
    fn every_waiting_future_of_a_slab_resolved_at_once_is_woken() {
        const S: u64 = SLAB as u64;
        let mut slabs = Slabs::default();
        let topic: Arc<str> = Arc::from("t");
        let mut f: Vec<_> = (0..S).map(|id| future(&mut slabs, id, 1)).collect();
        let count = Arc::new(Count::default());
        let w = Waker::from(count.clone());
        for f in &mut f {
            assert!(poll(f, &w).is_pending());
        }
        let _next = future(&mut slabs, S, 1); // the first slab takes no more ids
        for id in 0..S {
            slabs.deliver(
                id,
                &topic,
                0,
                Some(id as i64),
                None,
                Acknowledgement::Leader,
            );
        }
        let mut wake = Vec::new();
        slabs.publish(&mut wake);
        assert_eq!(wake.len(), SLAB, "each waiting future's waker");
        assert_eq!(slabs.len(), 1, "the resolved slab is let go");
        wake_all(&mut wake);
        for (id, f) in f.iter_mut().enumerate() {
            assert!(matches!(poll(f, &w), Poll::Ready(Ok(d)) if d.offset == Some(id as i64)));
        }
    }

    /// Slabs resolved out of order (every other one kept by a record still unresolved) are
    /// let go without shifting the others, and the registry is compacted once they are half
    /// of it; its count of kept memory stays exact throughout.
    #[test]
    fn slabs_let_go_out_of_order_are_dropped_and_compacted() {
        const S: u64 = SLAB as u64;
        const N: u64 = 400;
        let mut slabs = Slabs::default();
        let topic: Arc<str> = Arc::from("t");
        let f: Vec<_> = (0..N * S + 1).map(|id| future(&mut slabs, id, 1)).collect();
        let isr = Acknowledgement::InSyncReplicas;
        let mut wake = Vec::new();
        // Every record resolves but the first of each odd slab.
        for id in 0..N * S {
            if !((id / S) % 2 == 1 && id % S == 0) {
                slabs.deliver(id, &topic, 0, Some(0), None, isr);
                slabs.publish(&mut wake);
            }
        }
        assert_eq!(slabs.len(), N as usize / 2 + 1);
        assert!(slabs.gone <= 64 || 2 * slabs.gone <= slabs.live.len());
        let kept = N as usize / 2;
        assert_eq!(slabs.uncharged(), kept * (SLAB_BYTES - SHARE));
        // The stuck records resolve, the last first: the entries let go pile up behind the
        // first kept one until a compaction drops them.
        let mut compacted = false;
        for k in (0..N / 2).rev() {
            let entries = slabs.live.len();
            slabs.resolve_whole(
                (2 * k + 1) * S,
                Ok((Arc::clone(&topic), 0, None, None, isr)),
            );
            slabs.publish(&mut wake);
            compacted |= slabs.live.len() + 1 < entries;
            assert!(slabs.gone <= 64 || 2 * slabs.gone <= slabs.live.len());
            assert_eq!(slabs.uncharged(), k as usize * (SLAB_BYTES - SHARE));
        }
        assert!(compacted, "entries let go in the middle are dropped");
        assert_eq!(slabs.len(), 1);
        assert_eq!(slabs.live.len(), 1);
        assert_eq!(slabs.uncharged(), 0);
        drop(f);
    }

    /// A slot whose future is never made (its caller went away after the record was taken)
    /// is abandoned all the same: a failure kept whole for it is let go.
    #[test]
    fn a_bound_slot_dropped_without_its_future_is_abandoned() {
        let mut slabs = Slabs::default();
        let bound = slabs.bind(0);
        let slab = Arc::clone(&bound.slab);
        drop(bound);
        let err = DeliveryError::new(ErrorKind::DriverStopped, Persistence::NotPersisted);
        slabs.resolve_whole(0, Err(err));
        assert!(lock(&slab.outcomes).is_empty(), "nobody will read it");
    }

    /// A slab kept for one unresolved record holds memory its record is not charged for:
    /// counted, beside the slab taking new ids (which is not).
    #[test]
    fn slabs_kept_for_few_records_count_what_their_charges_miss() {
        const S: u64 = SLAB as u64;
        let mut slabs = Slabs::default();
        let topic: Arc<str> = Arc::from("t");
        let isr = Acknowledgement::InSyncReplicas;
        let _f: Vec<_> = (0..4 * S).map(|id| future(&mut slabs, id, 1)).collect();
        let dense = (3 * SLAB_BYTES).saturating_sub(3 * SLAB * SHARE);
        assert_eq!(
            slabs.uncharged(),
            dense,
            "dense: each record's share covers its slab"
        );
        assert_eq!(dense, 0);
        // All but the first record of each slab resolve.
        for id in (0..4 * S).filter(|id| id % S != 0) {
            slabs.deliver(id, &topic, 0, Some(id as i64), None, isr);
        }
        slabs.publish(&mut Vec::new());
        assert_eq!(slabs.len(), 4);
        assert_eq!(slabs.uncharged(), 3 * (SLAB_BYTES - SHARE));
        for id in [0, S, 2 * S, 3 * S] {
            slabs.deliver(id, &topic, 0, Some(id as i64), None, isr);
        }
        slabs.publish(&mut Vec::new());
        assert_eq!((slabs.len(), slabs.uncharged()), (1, 0));
    }

    /// A failure's outcome (which holds its record) is not kept for a future already
    /// dropped, and is let go when its future is dropped unread.
    #[test]
    fn outcomes_kept_whole_go_with_their_futures() {
        let mut slabs = Slabs::default();
        let f0 = future(&mut slabs, 0, 1);
        let f1 = future(&mut slabs, 1, 1);
        let slab = Arc::clone(&f0.slot.slab);
        let failed = || {
            Err(DeliveryError::new(
                ErrorKind::DriverStopped,
                Persistence::NotPersisted,
            ))
        };
        drop(f0);
        slabs.resolve_whole(0, failed());
        assert_eq!(lock(&slab.outcomes).len(), 0, "dropped before: not kept");
        slabs.resolve_whole(1, failed());
        assert_eq!(lock(&slab.outcomes).len(), 1);
        drop(f1);
        assert_eq!(lock(&slab.outcomes).len(), 0, "dropped after: let go");
    }

    /// A future polled again with another waker (moved to another task, say) wakes that one
    /// only; polled again with the same one, it is woken once.
    #[test]
    fn the_waker_of_the_last_poll_is_woken() {
        let mut slabs = Slabs::default();
        let topic: Arc<str> = Arc::from("t");
        let mut f = future(&mut slabs, 0, 1);
        let (a, b) = (Arc::new(Count::default()), Arc::new(Count::default()));
        let (wa, wb) = (Waker::from(a.clone()), Waker::from(b.clone()));
        assert!(poll(&mut f, &wa).is_pending());
        assert!(poll(&mut f, &wb).is_pending());
        assert!(poll(&mut f, &wb).is_pending());
        slabs.deliver(0, &topic, 0, Some(5), None, Acknowledgement::InSyncReplicas);
        let mut wake = Vec::new();
        slabs.publish(&mut wake);
        wake_all(&mut wake);
        let woken = |c: &Arc<Count>| c.woken.load(Ordering::SeqCst);
        assert_eq!((woken(&a), woken(&b)), (0, 1));
        assert!(matches!(poll(&mut f, &wb), Poll::Ready(Ok(ref d)) if d.offset == Some(5)));
    }

    /// Futures awaited on other threads while the writer fills their slots, in batches as
    /// the driver does: none is left waiting (a lost wake-up would hang the test).
    #[test]
    fn no_wake_up_is_lost_between_threads() {
        const N: u64 = 20_000;
        let mut slabs = Slabs::default();
        let topic: Arc<str> = Arc::from("t");
        let futures: Vec<_> = (0..N).map(|id| future(&mut slabs, id, 1)).collect();
        // Hand each reader its futures.
        let mut by_reader: Vec<Vec<(u64, DeliveryFuture)>> = (0..4).map(|_| Vec::new()).collect();
        for (id, f) in futures.into_iter().enumerate() {
            by_reader[id % 4].push((id as u64, f));
        }
        let handles: Vec<_> = by_reader
            .into_iter()
            .map(|mine| {
                std::thread::spawn(move || {
                    let count = Arc::new(Count::default());
                    *lock(&count.thread) = Some(std::thread::current());
                    let w = Waker::from(count.clone());
                    for (id, mut f) in mine {
                        loop {
                            match poll(&mut f, &w) {
                                Poll::Ready(Ok(d)) => {
                                    assert_eq!(d.offset, Some(id as i64));
                                    break;
                                }
                                Poll::Ready(Err(e)) => panic!("record {id}: {e}"),
                                // Woken (or, rarely, spuriously): poll again. The writer
                                // is done within milliseconds, so a park that lasts the
                                // whole bound was never woken.
                                Poll::Pending => {
                                    let parked = std::time::Instant::now();
                                    let bound = std::time::Duration::from_secs(10);
                                    std::thread::park_timeout(bound);
                                    assert!(parked.elapsed() < bound, "record {id}: wake-up lost");
                                }
                            }
                        }
                    }
                })
            })
            .collect();
        let isr = Acknowledgement::InSyncReplicas;
        let mut wake = Vec::new();
        for batch in 0..N / 50 {
            for id in batch * 50..(batch + 1) * 50 {
                slabs.deliver(id, &topic, 0, Some(id as i64), None, isr);
            }
            slabs.publish(&mut wake);
            wake_all(&mut wake);
            std::thread::yield_now();
        }
        for h in handles {
            h.join().expect("every future resolved");
        }
        assert_eq!(slabs.len(), 1, "only the last slab is kept");
    }
}

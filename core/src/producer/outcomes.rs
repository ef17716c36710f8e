//! Outcomes: the one place a batch or record is resolved. Acknowledged (`Delivered` with its
//! offsets; a later acknowledgement marks earlier batches overtaken, P11), retried (backoff,
//! the same bytes, P2), or failed with a truthful persistence (an earlier unanswered attempt
//! makes it possibly persisted, P10, S4; a sequenced batch leaves a gap and asks for a bump,
//! P9). Also the delivery timeout (§B.3; a batch in flight has its records reported then and
//! waits, uncharged, for its answer) and the fatal stop (every unresolved record fails).

use smallvec::SmallVec;

use super::accumulator::PendingRecord;
use super::connections::ConnState;
use super::requests::BatchRef;
use super::Target;
use super::{BackoffFor, Producer};
use crate::partition::{Batch, BatchState};
use crate::protocol::ErrorCode;
use crate::types::{
    ConnId, Delivered, DeliveryError, Diagnostic, Event, FatalError, Output, Persistence,
};
use crate::RecordId;

impl Producer {
    pub(super) fn expire_deliveries(&mut self) {
        let now = self.now;
        let timeout = self.cfg.delivery_timeout;
        // Only partitions whose oldest unreported batch may have reached the timeout (the
        // index keeps them sorted by it), visited in the order of a walk over every partition.
        let mut due: SmallVec<[(usize, usize); 8]> = match now.checked_sub(timeout) {
            Some(created_by) => self.index.0.oldest_through(created_by).collect(),
            None => SmallVec::new(),
        };
        due.sort_unstable();
        // The topics to look at: those with records waiting for metadata, and those with a
        // partition due, in index order.
        let mut topics: SmallVec<[usize; 8]> = due.iter().map(|d| d.0).collect();
        if !self.awaiting.is_empty() {
            topics.extend(self.awaiting.iter().copied());
            topics.sort_unstable();
        }
        topics.dedup();
        let mut due = due.into_iter().peekable();
        for ti in topics {
            while let Some(p) = self.topics[ti].pending.front() {
                // A record waits for its topic's metadata at most `max.block.ms` (as the
                // Java client's `send` blocks in `waitOnMetadata`) and at most its delivery
                // timeout, whatever holds the answer back: before, only a topic said missing
                // was held to `max.block.ms`, and a record for an unreachable cluster waited
                // its whole delivery timeout (a review of the settings against Java's).
                let waited_enough = p.enqueued + timeout <= now
                    || p.enqueued + self.cfg.max_block <= now && self.topics[ti].missing.is_none();
                let error = if waited_enough {
                    // What metadata last said of the topic, if it said it is missing; else,
                    // when no connection to any broker is past its ApiVersions exchange (an
                    // unreachable, unresolvable or silent bootstrap server), that the
                    // network held it back.
                    let unreached = (self.conns.values())
                        .all(|c| matches!(c.state, ConnState::Connecting | ConnState::Negotiating));
                    // (Or the refusal a handshake drew, if one did.)
                    let refused = self.backoff.values().find_map(|b| b.refused);
                    let network = unreached.then(|| refused.unwrap_or(ErrorCode::NetworkException));
                    DeliveryError::DeliveryTimeout {
                        last_error: self.topics[ti].missing.or(network),
                    }
                } else if let (Some(code), true) = (
                    self.topics[ti].missing,
                    p.enqueued + self.cfg.max_block <= now,
                ) {
                    DeliveryError::UnknownTopic(code)
                } else {
                    break;
                };
                let p = self.pop_pending(ti).expect("front exists");
                self.resolve_pending(p, error);
            }
            while let Some((_, pi)) = due.next_if(|d| d.0 == ti) {
                // Batches are in creation order: stop at the first one not yet expired.
                // A batch in flight has its records reported now, and stays until its
                // request resolves (`report_in_flight`).
                let mut i = 0;
                while i < self.topics[ti].partitions[pi].batches.len() {
                    let b = &self.topics[ti].partitions[pi].batches[i];
                    if b.created + timeout > now {
                        break;
                    }
                    if b.state == BatchState::InFlight {
                        if !b.reported {
                            self.report_in_flight(ti, pi, i);
                        }
                        i += 1;
                        continue;
                    }
                    // `fail_batch` reports it possibly persisted if an attempt went unanswered.
                    let persisted = Persistence::NotPersisted;
                    if mutated!(self.cfg, TimeoutForgetsAttempts) {
                        self.topics[ti].partitions[pi].batches[i].maybe_persisted = false;
                    }
                    // A batch never answered: what metadata last said of its topic, if it
                    // said it is missing (deleted while the batch waited); else what held it
                    // back, if nothing was ever sent of it.
                    let last_error = (self.topics[ti].partitions[pi].batches[i].last_error.0)
                        .or(self.topics[ti].missing)
                        .or_else(|| self.held_back(ti, pi));
                    let error = DeliveryError::DeliveryTimeout { last_error };
                    self.fail_batch(ti, pi, i, error, persisted);
                }
                self.expired_through(ti, pi);
            }
        }
    }

    /// Why partition `(ti, pi)` sends nothing, for a batch that expires without an error of
    /// its own: no leader known (LEADER_NOT_AVAILABLE), or no connection to its leader past
    /// the handshake (NETWORK_EXCEPTION: refused, unreachable or silent). `None` if a
    /// connection is ready (then the partition waited for its turn: a full in-flight window,
    /// a retry's order). Only what a user reads: no decision depends on it.
    fn held_back(&self, ti: usize, pi: usize) -> Option<ErrorCode> {
        // Waiting for a producer id the brokers refused so far.
        if self.identity.is_none() && self.pid_refused.0.is_some() {
            return self.pid_refused.0;
        }
        let Some(node) = self.topics[ti].partitions[pi].leader else {
            return Some(ErrorCode::LeaderNotAvailable);
        };
        let ready = (self.conns.values())
            .any(|c| c.target == Target::Node(node) && c.state == ConnState::Ready);
        // A leader that refused the handshake says so (credentials revoked, a certificate
        // or token expired): the records report why, not a network error.
        let refused = (self.backoff.get(&Target::Node(node))).and_then(|b| b.refused);
        (!ready).then(|| refused.unwrap_or(ErrorCode::NetworkException))
    }

    /// Batch `i`, in flight, reached its delivery timeout: its records fail now, possibly
    /// persisted (the attempt on the wire may be written), with their records handed back,
    /// as the Java client fails an in-flight batch at its delivery timeout. The batch itself
    /// stays, uncharged, until its request resolves: it keeps its place in the partition's
    /// sequence (nothing is re-sequenced over it, P9 waits for it), and its answer then
    /// settles the sequence state without reporting anything (`ack_batch`; any other outcome
    /// fails it silently through `fail_batch`, a gap like any failed sequenced batch). The
    /// connection is kept: the other requests on it are not disturbed (P8 still holds, as
    /// the answer is read and acted on).
    fn report_in_flight(&mut self, ti: usize, pi: usize, i: usize) {
        let b = &mut self.topics[ti].partitions[pi].batches[i];
        b.reported = true;
        let mut size = std::mem::take(&mut b.size);
        let copy = b.clone();
        let last_error = copy.last_error.0.or(self.topics[ti].missing);
        let error = DeliveryError::DeliveryTimeout { last_error };
        let persisted = Persistence::PossiblyPersisted;
        self.sync(ti, pi);
        self.pending_records -= copy.records.len();
        self.on_batch_failed(ti, pi, &copy, &error, persisted);
        let topic = self.topics[ti].name.clone();
        for (id, record) in copy.into_failed_records(&topic, pi as i32) {
            let event = Event::Failed {
                id,
                error: error.clone(),
                persisted,
                record,
                detail: None,
            };
            // The batch's charge goes with its first record's outcome.
            self.emit_in_order(ti, pi, id, event, std::mem::take(&mut size));
        }
        self.release_held(ti, pi);
    }

    /// The first record of partition `(ti, pi)` whose outcome is still to come.
    fn first_unresolved(&self, ti: usize, pi: usize) -> Option<RecordId> {
        let p = &self.topics[ti].partitions[pi];
        p.first_unreported()
            .and_then(|b| b.records.first().copied())
    }

    /// Emits the outcome `event` of a record of partition `(ti, pi)` whose first record is
    /// `first`, or holds it while an earlier record of the partition is unresolved: a
    /// partition's outcomes go out in send order, as the Java client documents for its
    /// callbacks. A later batch is answered first when an earlier one is retried after an
    /// answer that leaves it possibly written (NOT_ENOUGH_REPLICAS_AFTER_APPEND), waits
    /// for a producer id, or stays in flight while a cut fails what follows it (a review
    /// finding: its records were reported first, Java's Sender does so too).
    ///
    /// `charge` is the part of `buffer.memory` the outcome's records still hold: it is given
    /// back when the outcome goes out, not while it is held (a failed record is handed back
    /// with its outcome, so it is in memory until then).
    fn emit_in_order(
        &mut self,
        ti: usize,
        pi: usize,
        first: RecordId,
        event: Event,
        charge: usize,
    ) {
        let held = self.first_unresolved(ti, pi).is_some_and(|u| u < first);
        if held && !mutated!(self.cfg, OutcomesAsLearned) {
            self.topics[ti].partitions[pi].held.push((event, charge));
        } else {
            self.buffered_bytes -= charge;
            self.emit(event);
        }
    }

    /// Emits the held outcomes of partition `(ti, pi)` no unresolved record precedes, in
    /// send order.
    fn release_held(&mut self, ti: usize, pi: usize) {
        if self.topics[ti].partitions[pi].held.is_empty() {
            return;
        }
        let until = self.first_unresolved(ti, pi);
        let mut held = std::mem::take(&mut self.topics[ti].partitions[pi].held);
        held.sort_by_key(|(e, _)| first_record(e));
        let keep = held
            .split_off(held.partition_point(|(e, _)| until.is_none_or(|u| first_record(e) < u)));
        self.topics[ti].partitions[pi].held = keep;
        for (event, charge) in held {
            self.buffered_bytes -= charge;
            self.emit(event);
        }
    }

    pub(super) fn resolve_pending(&mut self, p: PendingRecord, error: DeliveryError) {
        self.buffered_bytes -= p.size;
        self.pending_records -= 1;
        self.emit_not_persisted(p.id, p.record, error);
    }

    /// Record `id`, never sent, failed with `error`: not persisted, handed back.
    pub(super) fn emit_not_persisted(
        &mut self,
        id: RecordId,
        record: crate::types::Record,
        error: DeliveryError,
    ) {
        self.emit(Event::Failed {
            id,
            error,
            persisted: Persistence::NotPersisted,
            record: Some(Box::new(record)),
            detail: None,
        });
    }

    /// Removes batch `i` of a partition and reports every record as failed. A sequenced batch
    /// of the bound identity leaves a gap: the partition must rebase (P9, P10).
    pub(super) fn fail_batch(
        &mut self,
        ti: usize,
        pi: usize,
        i: usize,
        error: DeliveryError,
        persisted: Persistence,
    ) {
        let p = &mut self.topics[ti].partitions[pi];
        let Some(b) = p.batches.remove(i) else { return };
        // Whatever the last attempt drew, an earlier attempt with no verdict may have
        // written the batch (P10): the report must say so.
        let persisted = if b.maybe_persisted {
            Persistence::PossiblyPersisted
        } else {
            persisted
        };
        // Without idempotence there is no sequence to leave a gap in.
        if b.is_sequenced_under(p.bound) && self.cfg.enable_idempotence {
            p.gap = true;
            p.needs_rebase = true;
        }
        p.update_inflight_conn();
        self.sync(ti, pi);
        if b.reported {
            // Its records were reported at their delivery timeout: only the gap is left.
            self.request_bump_for(ti, pi);
            return;
        }
        let mut charge = b.size;
        self.pending_records -= b.records.len();
        self.on_batch_failed(ti, pi, &b, &error, persisted);
        let topic = self.topics[ti].name.clone();
        let refusal = self.broker_refusal.clone();
        let batch = b.id;
        for (k, (id, record)) in b.into_failed_records(&topic, pi as i32).enumerate() {
            let detail = refusal.as_ref().and_then(|r| r.detail(batch, k));
            let event = Event::Failed {
                id,
                error: error.clone(),
                persisted,
                record,
                detail,
            };
            self.emit_in_order(ti, pi, id, event, std::mem::take(&mut charge));
        }
        self.release_held(ti, pi);
        self.request_paced_bump(ti, pi);
    }

    /// Removes batch `i` and reports its records delivered at `base_offset..` (written at
    /// `log_append_time`, on a LogAppendTime topic).
    pub(super) fn ack_batch(
        &mut self,
        ti: usize,
        pi: usize,
        i: usize,
        base_offset: Option<i64>,
        log_append_time: Option<i64>,
    ) {
        let topic = self.topics[ti].name.clone();
        let p = &mut self.topics[ti].partitions[pi];
        let Some(b) = p.batches.remove(i) else { return };
        // A producer id the broker took (the current one, or the one last given up, whose
        // batches can be answered after the refusal that gave it up): refusals of earlier
        // ones no longer slow the next, and a new id waiting for that backoff is asked for
        // now (the first new id after an acknowledged one goes at once).
        if self.refused_ids > 0
            && b.seq.is_some_and(|(id, _)| {
                Some(id.producer_id) == self.identity.map(|i| i.producer_id)
                    || Some(id.producer_id) == self.given_up
            })
        {
            self.refused_ids = 0;
            self.given_up = None;
            if self.identity.is_none() && self.pid_request.is_none() && self.pid_failures == 0 {
                self.pid_retry_at = None;
            }
        }
        // Acknowledged under the current identity: the broker takes its epoch on this
        // partition, so its next bump goes at once.
        if b.seq.is_some_and(|(id, _)| Some(id) == self.identity) {
            p.fruitless_bumps = 0;
        }
        if let Some((identity, base)) = b.seq {
            if Some(identity) == p.bound {
                let last_seq =
                    crate::partition::seq_add(base, b.count() - 1, self.cfg.max_sequence);
                // The highest offset known to be acknowledged (Java keeps the maximum): an
                // overtaken batch acknowledged after a later one does not move it back, and
                // a duplicate (no offset) keeps the one known before. (It was -1 after a
                // duplicate, which made every later head-of-line refusal look benign to the
                // data-loss test in `on_out_of_order`.)
                let this = base_offset.map(|o| (last_seq, o + i64::from(b.count()) - 1));
                p.last_acked = match (p.last_acked, this) {
                    (Some(known), Some(new)) if known.1 > new.1 => Some(known),
                    (Some(known), None) if known.1 >= 0 => Some(known),
                    (_, new) => Some(new.unwrap_or((last_seq, -1))),
                };
                p.probe = false;
                p.last_write = Some(b.created);
                p.id_mapping_refused = None;
            }
            // P11: a later acknowledgement proves nothing about earlier batches, and makes
            // them impossible to re-sequence without reordering.
            for earlier in p.batches.iter_mut().take(i) {
                if earlier.is_sequenced_under(Some(identity)) {
                    earlier.overtaken = true;
                }
            }
        }
        p.update_inflight_conn();
        self.sync(ti, pi);
        self.on_batch_acked(ti, pi, &b, base_offset);
        let reported = b.reported;
        self.buffered_bytes -= b.size;
        if !reported {
            self.pending_records -= b.records.len();
        }
        let Batch { records, wire, .. } = b;
        // The batch's buffer serves the next batches.
        let pool = &mut self.batch_pool.0;
        if let Some(wire) = wire {
            pool.put_wire(wire, super::accumulator::pooled_capacities(&self.cfg));
        }
        if reported {
            // Written after all, but its records were reported at their delivery timeout
            // (possibly persisted, which was true): nothing more to say.
            return;
        }
        // One event for the batch: its record list goes with it (the next batch takes a new
        // one), the topic's name is shared once.
        let first = records[0];
        let event = Event::Delivered(Delivered {
            topic,
            partition: pi as i32,
            base_offset,
            log_append_time,
            ids: records,
        });
        self.emit_in_order(ti, pi, first, event, 0);
        self.release_held(ti, pi);
        if mutated!(self.cfg, ImplicitAckOvertaken) {
            // librdkafka's implicit acknowledgement: the earlier batches count as delivered.
            let p = &self.topics[ti].partitions[pi];
            if let Some(k) = p
                .batches
                .iter()
                .take(i)
                .position(|e| e.overtaken && e.state != BatchState::InFlight)
            {
                self.ack_batch(ti, pi, k, None, None);
            }
        }
    }

    pub(super) fn retry_batch(&mut self, r: BatchRef, error: ErrorCode, possibly_persisted: bool) {
        let Some(p) = self
            .topics
            .get_mut(r.topic)
            .and_then(|t| t.partitions.get_mut(r.partition))
        else {
            return;
        };
        let Some(i) = p.position(r.batch) else { return };
        let b = &mut p.batches[i];
        if b.state != BatchState::InFlight {
            return;
        }
        if b.reported {
            // Never sent again: its records were reported (as possibly persisted), so
            // nothing about this attempt is reported either.
            let error = DeliveryError::Broker(error);
            self.fail_batch(
                r.topic,
                r.partition,
                i,
                error,
                Persistence::PossiblyPersisted,
            );
            return;
        }
        let retries = b.retries;
        let delay = self.backoff(
            self.cfg.retry_backoff,
            self.cfg.retry_backoff_max,
            retries,
            BackoffFor::Retry(r.topic, r.partition),
        );
        let p = &mut self.topics[r.topic].partitions[r.partition];
        let b = &mut p.batches[i];
        b.retries = b.retries.saturating_add(1);
        b.maybe_persisted |= possibly_persisted;
        if !self.cfg.enable_idempotence && p.cutting {
            // Sent before a cut (§B.4) and refused: it belongs to the cut series.
            self.fail_batch(
                r.topic,
                r.partition,
                i,
                DeliveryError::PartitionCut,
                Persistence::NotPersisted,
            );
            return;
        }
        let p = &mut self.topics[r.topic].partitions[r.partition];
        let b = &mut p.batches[i];
        b.last_error.0 = Some(error);
        b.state = BatchState::Retry {
            at: self.now + delay,
        };
        p.update_inflight_conn();
        self.sync(r.topic, r.partition);
        let topic = self.topics[r.topic].name.clone();
        self.diag(Diagnostic::Retry {
            topic,
            partition: r.partition as i32,
            batch: r.batch,
            error,
        });
    }

    /// Stops the producer because batch `i` drew a refusal: that attempt was definitively not
    /// written, so the batch is no longer in flight and is reported not persisted (unless an
    /// earlier attempt was ambiguous).
    pub(super) fn fail_fatal_on_refusal(
        &mut self,
        ti: usize,
        pi: usize,
        i: usize,
        err: FatalError,
    ) {
        self.topics[ti].partitions[pi].batches[i].state = BatchState::AwaitRebase;
        self.sync(ti, pi);
        self.fail_fatal(err);
    }

    /// Stops the producer: every unresolved record fails with a truthful status.
    pub(super) fn fail_fatal(&mut self, err: FatalError) {
        if self.fatal.is_some() {
            return;
        }
        self.fatal = Some(err.clone());
        self.emit(Event::Fatal(err.clone()));
        for ti in 0..self.topics.len() {
            while let Some(p) = self.pop_pending(ti) {
                self.resolve_pending(p, DeliveryError::Fatal(err.clone()));
            }
            for pi in 0..self.topics[ti].partitions.len() {
                while !self.topics[ti].partitions[pi].batches.is_empty() {
                    let b = &self.topics[ti].partitions[pi].batches[0];
                    // An attempt on the wire has no answer yet; `fail_batch` covers the
                    // earlier unanswered ones.
                    let persisted = if b.state == BatchState::InFlight {
                        Persistence::PossiblyPersisted
                    } else {
                        Persistence::NotPersisted
                    };
                    self.fail_batch(ti, pi, 0, DeliveryError::Fatal(err.clone()), persisted);
                }
            }
        }
        let conns: Vec<ConnId> = self.conns.keys().copied().collect();
        for c in conns {
            self.out.push_back(Output::Close {
                conn: c,
                flush: false,
            });
        }
        self.conns.clear();
        self.node_conns.clear();
    }
}

/// The first record an outcome event is about (`Delivered` and `Failed` only).
fn first_record(event: &Event) -> RecordId {
    match event {
        Event::Delivered(d) => d.ids[0],
        Event::Failed { id, .. } => *id,
        _ => RecordId(u64::MAX),
    }
}

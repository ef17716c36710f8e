//! Producer identity: getting a producer id (InitProducerId, its errors per §B.3), epoch
//! bumps (local, KIP-360, when a partition's sequence state is spent), a new producer id when
//! the epoch is exhausted or the broker refuses a bump (Tansu), and the rebase: a partition
//! moves to the current identity only once drained, restarting at sequence 0 (P9, P13, S8,
//! KAFKA-12152); batches a later one overtook, and those of a cut partition, fail instead of
//! being re-sequenced (P11, §B.4).

use super::requests::RequestKind;
use super::{BackoffFor, Producer};
use crate::partition::BatchState;
use crate::protocol::init_producer_id::InitProducerIdRequest;
use crate::protocol::ErrorCode;
use crate::types::{DeliveryError, Diagnostic, FatalError, Persistence, ProducerIdentity};
use crate::GapPolicy;

impl Producer {
    pub(super) fn maybe_request_producer_id(&mut self) {
        if self.identity.is_some() || self.pid_request.is_some() {
            return;
        }
        if self.pid_retry_at.is_some_and(|t| t > self.now) {
            return;
        }
        let Some(conn) = self.any_ready_conn(None) else {
            return;
        };
        let version = self.conns[&conn].versions.init_producer_id;
        self.pid_request = Some(conn);
        self.transmit(
            conn,
            &InitProducerIdRequest::default(),
            version,
            RequestKind::InitProducerId,
        );
    }

    /// An InitProducerId answer. One that claims success without a producer id is a broken
    /// answer, an error on its connection (closed by the caller), and the request is made
    /// again after the backoff, as after a retriable error.
    pub(super) fn on_init_producer_id(
        &mut self,
        code: i16,
        producer_id: i64,
        epoch: i16,
    ) -> Result<(), &'static str> {
        let code = ErrorCode::from_i16(code);
        let valid = producer_id >= 0 && epoch >= 0;
        match code {
            ErrorCode::None if valid => {
                // A broker that lost its state may hand out an id and epoch that partitions
                // are still bound to (Tansu restarted on memory storage numbers its ids from 1
                // again): the answer is a new identity all the same, told apart by `issue`.
                let issue = (self.topics.iter())
                    .flat_map(|t| t.partitions.iter().filter_map(|p| p.bound))
                    .filter(|b| b.producer_id == producer_id && b.epoch == epoch)
                    .map(|b| b.issue.wrapping_add(1))
                    .max()
                    .unwrap_or(0);
                let id = ProducerIdentity {
                    producer_id,
                    epoch,
                    issue,
                };
                self.set_identity(Some(id));
                self.pid_refused.0 = None;
                self.pid_failures = 0;
                self.pid_retry_at = None;
                self.diag(Diagnostic::ProducerId(id));
            }
            // Asked again after the backoff: a retriable error, an answer without an id, and
            // also an error the broker could not name (UNKNOWN_SERVER_ERROR: Kafka's id
            // allocation failed, its ZooKeeper or controller unreachable) or one this client
            // does not know, as librdkafka does, rather than stopping the producer for good
            // (the Java client's and the spec's choice): a producer running for months asks
            // for ids during its life (a bump refused, an epoch run out, Tansu at every gap),
            // and one hiccup of the broker's id storage failed every record it held (a review
            // against librdkafka). Records waiting for an id meanwhile fail at their delivery
            // timeout, with the error. So is POLICY_VIOLATION (retriable), Redpanda's answer in
            // recovery mode (maintenance), which stopped the producer for good (a review of
            // Kafka-compatible brokers).
            c if c.is_retriable()
                || matches!(
                    c,
                    ErrorCode::None | ErrorCode::UnknownServerError | ErrorCode::Unknown(_)
                ) =>
            {
                if c == ErrorCode::None {
                    // An answer without an id: its connection is closed as broken.
                    self.producer_id_request_lost(ErrorCode::NetworkException);
                } else {
                    self.pid_refused.0 = Some(c);
                    self.retry_producer_id_later();
                }
            }
            ErrorCode::ClusterAuthorizationFailed => {
                // Not authorized to produce idempotently (no IdempotentWrite, no Write on
                // any topic): ACLs can be granted later, so the producer is not stopped
                // (unless the gap policy is `Fatal` and a record fails here). The
                // records that wait for an identity fail now with the refusal, not
                // persisted (unless an earlier attempt of theirs went unanswered), and
                // the producer asks again after the backoff, as the Java client does since
                // KAFKA-13668 (3.4). Batches in flight under an earlier identity wait for
                // their answers.
                self.fail_waiting_for_identity(code);
                self.retry_producer_id_later();
            }
            c => self.fail_fatal(FatalError::Broker(c)),
        }
        if code == ErrorCode::None && !valid {
            return Err("InitProducerId answer without a producer id");
        }
        Ok(())
    }

    /// The InitProducerId request was lost (`code`: with its connection, or to an answer
    /// that could not be used, which closes it): asked again after the backoff. Records
    /// waiting for the id report `code` at their delivery timeout (`held_back`); they named
    /// no cause, as if they had waited their turn (a review of recovery without restart).
    pub(super) fn producer_id_request_lost(&mut self, code: ErrorCode) {
        self.pid_refused.0 = Some(code);
        self.retry_producer_id_later();
    }

    /// The next InitProducerId after the backoff, which grows with each failure in a row.
    pub(super) fn retry_producer_id_later(&mut self) {
        self.pid_failures = self.pid_failures.saturating_add(1);
        self.pid_retry_at = Some(
            self.now
                + self.backoff(
                    self.cfg.retry_backoff,
                    self.cfg.retry_backoff_max,
                    self.pid_failures,
                    BackoffFor::ProducerId,
                ),
        );
    }

    /// Fails with `code` every batch that cannot go without a producer identity: every batch
    /// not in flight (a batch sequenced under an earlier identity needs the new one to be
    /// sent again, P9). A sequenced one leaves a gap, so the gap policy applies as for any
    /// refusal for good (a cut fails the partition's later batches too, `Fatal` stops the
    /// producer). Records still waiting for metadata are left to wait: they meet the next
    /// answer.
    fn fail_waiting_for_identity(&mut self, code: ErrorCode) {
        for ti in 0..self.topics.len() {
            for pi in 0..self.topics[ti].partitions.len() {
                let mut i = 0;
                while i < self.topics[ti].partitions[pi].batches.len() {
                    if self.fatal.is_some() {
                        return;
                    }
                    let p = &self.topics[ti].partitions[pi];
                    let b = &p.batches[i];
                    if b.state == BatchState::InFlight {
                        i += 1;
                        continue;
                    }
                    if b.is_sequenced_under(p.bound) {
                        self.fail_permanently(ti, pi, i, code);
                    } else {
                        let error = DeliveryError::Broker(code);
                        self.fail_batch(ti, pi, i, error, Persistence::NotPersisted);
                        // Records sent later may land: a gap under `Fatal` (under
                        // `CutPartition` every batch buffered here fails with them).
                        if self.gap_policy() == GapPolicy::Fatal {
                            self.fail_fatal(FatalError::Gap(code));
                        }
                    }
                }
            }
        }
    }

    /// Moves drained partitions to the producer's current identity (P9). A batch that a
    /// later one overtook cannot be re-sequenced without reordering the log, and a cut
    /// partition's spent batches belong to the cut: they fail, definitively not persisted (a
    /// drained partition has no ambiguous batch left).
    pub(super) fn rebind_partitions(&mut self) {
        let identity = self.identity;
        if identity.is_none() {
            return;
        }
        // Only the drained partitions bound to another identity (the index keeps them).
        let unbound: Vec<(usize, usize)> = self.index.0.unbound().collect();
        for (ti, pi) in unbound {
            {
                let p = &self.topics[ti].partitions[pi];
                if p.bound == identity || !p.is_drained() {
                    continue;
                }
                // Under a cut (§B.4) every spent batch belongs to the cut series, including one
                // that came back from the wire with a retriable error after the cut: it fails
                // rather than being re-sequenced after the gap.
                loop {
                    let p = &self.topics[ti].partitions[pi];
                    let cutting = p.cutting;
                    let Some(i) = p
                        .batches
                        .iter()
                        .position(|b| b.seq.is_some() && (b.overtaken || cutting))
                    else {
                        break;
                    };
                    if cutting {
                        let error = DeliveryError::PartitionCut;
                        self.fail_batch(ti, pi, i, error, Persistence::NotPersisted);
                        continue;
                    }
                    // Overtaken: a later batch is in the log, so this failure is a gap
                    // and the gap policy applies (a cut fails the rest as above).
                    self.fail_permanently(ti, pi, i, ErrorCode::OutOfOrderSequenceNumber);
                    if self.fatal.is_some() {
                        return;
                    }
                }
                let p = &mut self.topics[ti].partitions[pi];
                let (old, old_seq) = (p.bound, p.next_seq);
                if p.maybe_rebind(identity)
                    && mutated!(self.cfg, NewPidKeepsSequence)
                    && old.is_some_and(|o| identity.is_some_and(|n| n.producer_id != o.producer_id))
                {
                    p.next_seq = old_seq;
                }
                self.sync(ti, pi);
            }
        }
    }

    /// Marks that the partition's identity is spent. If the partition is still bound to the
    /// producer's current identity, the producer bumps its epoch (locally, KIP-360), or asks
    /// for a new producer id when the epoch is exhausted or the broker refused a bump.
    pub(super) fn request_bump_for(&mut self, ti: usize, pi: usize) {
        self.request_bump(ti, pi, false);
    }

    /// As `request_bump_for`, for a refused batch that waits to be sent again under the next
    /// identity, or a batch failed for good (a gap). Such a bump (local, or a new producer
    /// id) is paced: the
    /// partition's first since one of its batches was acknowledged under the current
    /// identity goes at once, the next ones after a backoff that grows from
    /// `retry.backoff.ms` to its maximum (`bump_at`). A broker refusing every epoch on a
    /// partition (INVALID_PRODUCER_EPOCH or INVALID_PRODUCER_ID_MAPPING to every batch) had
    /// Produce and its refusal go round at the speed of the network until the delivery
    /// timeout; a partition refusing every batch for good (INVALID_RECORD) had the producer
    /// bump once per round trip while the application sent there, each bump making every
    /// healthy partition drain and start over with one batch in flight. The partitions that
    /// are not spent keep sending meanwhile. (A paced bump that takes a new producer id
    /// waits the longer of this backoff and `give_up_identity`'s, which grows while ids are
    /// spent with nothing acknowledged; a bump at once waits the latter.)
    pub(super) fn request_paced_bump(&mut self, ti: usize, pi: usize) {
        self.request_bump(ti, pi, true);
    }

    fn request_bump(&mut self, ti: usize, pi: usize, paced: bool) {
        // A stopped producer bumps nothing: its batches failed in flight would otherwise log
        // and count a bump after the fatal error (a review finding).
        if self.fatal.is_some() {
            return;
        }
        let p = &self.topics[ti].partitions[pi];
        if !p.needs_rebase || p.bound.is_none() || p.bound != self.identity {
            return;
        }
        // Paced whichever the bump is, the next epoch or a new producer id: where every bump
        // takes a new id (a broker without KIP-360 met once, Tansu), a partition refused
        // every batch beside a healthy one (whose acknowledgements reset the new-id backoff)
        // took a new id per refusal, every partition draining for each (a review finding).
        if paced {
            let identity = self.identity;
            let p = &mut self.topics[ti].partitions[pi];
            if p.bump_asked_under == identity {
                // Another batch of this partition refused under the same epoch: the bump it
                // asked for is already waiting, and is counted once.
                return;
            }
            p.bump_asked_under = identity;
            let spent = p.fruitless_bumps;
            p.fruitless_bumps = spent.saturating_add(1);
            if spent > 0 {
                let mut wait = self.backoff(
                    self.cfg.retry_backoff,
                    self.cfg.retry_backoff_max,
                    spent - 1,
                    BackoffFor::Bump,
                );
                // A bump that takes a new id waits the new-id backoff too, as the longer of
                // the two (`paced_bump` asks for the id at once): a partition newly refused
                // beside one refused for long, whose ids have grown that backoff, would
                // otherwise take ids at its own short steps (the review of the change).
                let spent_ids = self.refused_ids;
                if spent_ids > 0 && !self.next_bump_is_local() {
                    wait = wait.max(self.backoff(
                        self.cfg.retry_backoff,
                        self.cfg.retry_backoff_max,
                        spent_ids,
                        BackoffFor::ProducerId,
                    ));
                }
                let at = self.now + wait;
                // One bump serves every partition waiting for it: the earliest due decides.
                self.bump_at = Some(self.bump_at.map_or(at, |b| b.min(at)));
                return;
            }
        }
        self.bump();
    }

    /// Whether the next bump keeps the producer id (the next epoch, KIP-360), rather than
    /// taking a new one (the broker refused a bump, or the epoch is exhausted). `false`
    /// without an identity or without idempotence, where `bump` does nothing.
    fn next_bump_is_local(&self) -> bool {
        !self.bump_refused
            && self.cfg.enable_idempotence
            && (self.identity)
                .is_some_and(|id| id.epoch < self.cfg.max_epoch || mutated!(self.cfg, EpochPastMax))
    }

    /// Moves to the next identity: the next epoch (a local bump), or a new producer id.
    pub(super) fn bump(&mut self) {
        self.bump_after(Waited::No);
    }

    /// `bump`, for a bump that was paced (`bump_at`): a new producer id is then asked for at
    /// once. It waited the new-id backoff on top of the bump's, two backoffs per id for a
    /// partition refused over and over (about 2 s apart at maxima of 1 s).
    pub(super) fn paced_bump(&mut self) {
        self.bump_after(Waited::Backoff);
    }

    fn bump_after(&mut self, waited: Waited) {
        let Some(id) = self.identity.filter(|_| self.cfg.enable_idempotence) else {
            return;
        };
        if !self.next_bump_is_local() {
            // A new producer id. If the one given up on had nothing acknowledged either,
            // the next is asked for after the backoff, which grows while ids keep being
            // spent so: a broker that refuses every batch (Tansu with its storage failing,
            // where each refusal is a bump and a bump a new id) is not asked for a new
            // producer id per batch. A bump that waited its own backoff asks at once.
            self.give_up_identity(id, waited);
        } else {
            let next = ProducerIdentity {
                producer_id: id.producer_id,
                epoch: id.epoch + 1,
                issue: id.issue,
            };
            self.set_identity(Some(next));
            self.bumped_locally = Some(next);
            self.diag(Diagnostic::EpochBumped(next));
        }
    }

    /// Gives up the current identity `id` for a new producer id: at once if the identities
    /// given up before it had an acknowledgement since, else after the backoff, which grows
    /// while ids keep being spent without one; at once after a paced bump, which waited for
    /// it already (`request_bump`).
    fn give_up_identity(&mut self, id: ProducerIdentity, waited: Waited) {
        let spent = self.refused_ids;
        self.set_identity(None);
        self.refused_ids = spent.saturating_add(1);
        self.given_up = Some(id.producer_id);
        if spent > 0 && waited == Waited::No {
            let delay = self.backoff(
                self.cfg.retry_backoff,
                self.cfg.retry_backoff_max,
                spent,
                BackoffFor::ProducerId,
            );
            self.pid_retry_at = Some(self.now + delay);
        }
    }

    /// Drops the current identity and asks for a new producer id after the backoff (which
    /// grows while identities keep being refused, so that a broker refusing each of them is
    /// not asked in a tight loop).
    pub(super) fn retake_producer_id(&mut self) {
        self.given_up = self.identity.map(|id| id.producer_id);
        self.set_identity(None);
        self.refused_ids = self.refused_ids.saturating_add(1);
        self.pid_retry_at = Some(
            self.now
                + self.backoff(
                    self.cfg.retry_backoff,
                    self.cfg.retry_backoff_max,
                    self.refused_ids,
                    BackoffFor::ProducerId,
                ),
        );
    }

    /// INVALID_PRODUCER_ID_MAPPING on a Produce answer: Kafka sends it to transactional
    /// producers only, and the first is taken as INVALID_PRODUCER_EPOCH is (a bump, the
    /// spec's table). A later epoch of the same producer id refused so too means the broker
    /// does not know the id at all (Event Hubs after a restart, which refuses every batch of
    /// it; Azure/azure-event-hubs-for-kafka#261): the producer takes a new id, where each
    /// bump was refused in turn, one a second, for the 32,767 epochs of the id (a review of
    /// Kafka-compatible brokers). Local bumps stay on for later gaps.
    pub(super) fn on_id_mapping_refused(&mut self, ti: usize, pi: usize, i: usize) {
        let p = &mut self.topics[ti].partitions[pi];
        let Some(refused) = p.batches[i].seq.map(|s| s.0) else {
            return;
        };
        let again = p.id_mapping_refused.is_some_and(|earlier| {
            earlier.producer_id == refused.producer_id && earlier.epoch != refused.epoch
        });
        p.id_mapping_refused = Some(refused);
        if again && Some(refused) == self.identity {
            self.give_up_identity(refused, Waited::No);
        }
    }

    /// PRODUCER_FENCED for batch `i`: Tansu refuses a client-side epoch bump, so from now on
    /// the producer takes a new id instead of bumping, and drops the identity the batch was
    /// refused under if it is still the current one.
    pub(super) fn on_bump_refused(&mut self, ti: usize, pi: usize, i: usize) {
        // Tansu refuses a client-side epoch bump: from now on take a new id.
        self.bump_refused = true;
        // The new id is asked for as a bump that takes one would ask (`give_up_identity`):
        // at once the first time, after a growing backoff while ids keep being fenced with
        // nothing acknowledged. (It was asked for at once every time: a broker fencing every
        // batch had InitProducerId, Produce and PRODUCER_FENCED go round at the speed of the
        // network until the delivery timeout.)
        let b = &self.topics[ti].partitions[pi].batches[i];
        if let Some(id) = b.seq.map(|s| s.0).filter(|&id| Some(id) == self.identity) {
            self.give_up_identity(id, Waited::No);
        }
    }
}

/// Whether a bump already waited a backoff of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Waited {
    No,
    Backoff,
}

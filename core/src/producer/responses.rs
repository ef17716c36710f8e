//! Responses: matching a frame to the oldest request in flight on its connection (a mismatch
//! or an undecodable answer closes the connection), and the Produce error table (§B.3):
//! each partition's answer becomes an outcome: acknowledged, deduplicated,
//! OUT_OF_ORDER_SEQUENCE_NUMBER / UNKNOWN_PRODUCER_ID (head or not, benign or data loss,
//! KIP-360), fencing and epoch errors (rebase), MESSAGE_TOO_LARGE (split reusing the
//! sequence range, P3, KAFKA-8325), CORRUPT_MESSAGE, retriable, possibly persisted, and
//! permanent errors with the gap policy (§B.4).

use std::sync::Arc;

use bytes::Bytes;
use smallvec::SmallVec;

use super::accumulator::{batch_charge, encoded_len, reserve_for};
use super::requests::{BatchRef, RequestKind};
use super::Producer;
use crate::config::{DataLossPolicy, GapPolicy};
use crate::partition::{Batch, BatchState};
use crate::protocol::init_producer_id::InitProducerIdRequest;
use crate::protocol::metadata::MetadataRequest;
use crate::protocol::produce::{BatchIndexAndErrorMessage, PartitionResult, ProduceResponseReader};
use crate::protocol::record_batch::{record_payload_len, RecordBatch, RecordBatchBuilder};
use crate::protocol::{decode_response, ErrorCode, ResponseHeader};
use crate::types::{
    BrokerDetail, ConnId, DeliveryError, Diagnostic, FatalError, Persistence, RecordId,
};

/// How often CORRUPT_MESSAGE is retried before it counts as a permanent failure.
pub(super) const MAX_CORRUPT_RETRIES: u8 = 3;

impl Producer {
    pub(super) fn handle_frame(&mut self, conn: ConnId, frame: Bytes) -> Result<(), &'static str> {
        let correlation_id =
            ResponseHeader::peek_correlation_id(&frame).map_err(|_| "short response")?;
        let c = self.conns.get_mut(&conn).ok_or("unknown connection")?;
        match c.inflight.front() {
            Some(r) if r.correlation_id == correlation_id => {}
            // An answer to an acks=0 request (Kafka sends none): nothing waits for it.
            _ if c.answers_unacknowledged(correlation_id) => return Ok(()),
            _ => return Err("unexpected correlation id"),
        }
        let req = c.inflight.pop_front().expect("front checked");
        // An answer is traffic (`connections.max.idle.ms`), one read while the connection
        // re-authenticates too (`handle_read` counts no read then); a SASL exchange is not.
        if !req.kind.is_sasl() {
            c.touch(self.now);
        }
        let versions = c.versions;
        let from = c.target.node();
        match req.kind {
            RequestKind::ApiVersions(v) => self.on_api_versions(conn, v, frame),
            RequestKind::SaslHandshake => self.on_sasl_handshake(conn, frame),
            RequestKind::SaslAuthenticate => self.on_sasl_authenticate(conn, frame),
            RequestKind::Metadata => {
                self.metadata.in_flight = false;
                let r = decode_response::<MetadataRequest>(versions.metadata, frame);
                match r {
                    Ok((_, mut m)) => {
                        // KIP-219: Metadata v6+ throttles are the client's to keep.
                        let kip219 = versions.metadata >= 6;
                        self.on_throttle(conn, kip219, m.throttle_time_ms, false);
                        if versions.metadata < 9 {
                            // Leader epochs in Metadata v7 and v8 are not to be trusted:
                            // brokers before Kafka 2.4 could propagate stale ones
                            // (KAFKA-9212), and a topic recreated without topic ids starts
                            // again at epoch 0, below what the producer keeps, so every later
                            // answer looked stale and the partition never had a leader again
                            // (review finding, 2026-12-06). The Java client keeps epochs from
                            // v9 on only (`MetadataResponse.hasReliableLeaderEpochs`).
                            for p in m.topics.iter_mut().flat_map(|t| t.partitions.iter_mut()) {
                                p.leader_epoch = -1;
                            }
                        }
                        self.on_metadata(conn, m);
                        Ok(())
                    }
                    Err(_) => {
                        self.on_unusable_metadata(conn);
                        Err("bad metadata response")
                    }
                }
            }
            RequestKind::InitProducerId => {
                self.pid_request = None;
                let Ok(r) =
                    decode_response::<InitProducerIdRequest>(versions.init_producer_id, frame)
                else {
                    // As a request lost with its connection (closed by the caller): asked
                    // again after the backoff, not at once on the next ready connection.
                    self.producer_id_request_lost(ErrorCode::NetworkException);
                    return Err("bad InitProducerId response");
                };
                // KIP-219: InitProducerId v1+ throttles are the client's to keep (a request
                // quota throttles every API, not only Produce; a review finding).
                let kip219 = versions.init_producer_id >= 1;
                self.on_throttle(conn, kip219, r.1.throttle_time_ms, false);
                self.on_init_producer_id(r.1.error_code, r.1.producer_id, r.1.producer_epoch)
            }
            RequestKind::Produce(refs) => {
                // Read in place (no allocation); checked whole before anything is acted on.
                match ProduceResponseReader::from_frame(versions.produce, frame) {
                    Ok(resp) => {
                        let took = self.now.saturating_duration_since(req.sent_at.0);
                        let s = &mut self.stats.0;
                        s.produce_answers += 1;
                        s.produce_latency_total = s.produce_latency_total.saturating_add(took);
                        s.produce_latency_max = s.produce_latency_max.max(took);
                        let kip219 = versions.produce >= 6;
                        self.on_throttle(conn, kip219, resp.throttle_time_ms(), true);
                        self.on_produce(from, refs, &resp);
                        Ok(())
                    }
                    Err(_) => {
                        for r in refs {
                            self.retry_batch(r, ErrorCode::NetworkException, true);
                        }
                        Err("bad produce response")
                    }
                }
            }
        }
    }

    /// A Produce answer's `throttle_time_ms`: from v6 (KIP-219) the broker answers at once
    /// and leaves the wait to the client (before, it held the answer back itself), and it
    /// reads nothing more from the connection until the time has passed. So the connection
    /// carries no new request until then, and every request still in flight on it has its
    /// `request.timeout.ms` deadline pushed back by the throttle (the broker reads it that
    /// much later; several throttled answers add up, as the broker's mutes do). The wait is
    /// the broker's, in full, even beyond `request.timeout.ms` (quotas ask for many seconds);
    /// only a hostile value is bounded, by `delivery.timeout.ms`, past which every record
    /// waiting for the connection has failed anyway.
    /// The same for the other answers whose version leaves the wait to the client (KIP-219:
    /// Metadata v6+, InitProducerId v1+, ApiVersions v2+): under a request quota (`request_percentage`) the
    /// broker mutes the connection after any of them.
    pub(super) fn on_throttle(
        &mut self,
        conn: ConnId,
        kip219: bool,
        throttle_ms: i32,
        produce: bool,
    ) {
        if !kip219 || throttle_ms <= 0 {
            return;
        }
        let wait =
            std::time::Duration::from_millis(throttle_ms as u64).min(self.cfg.delivery_timeout);
        self.stats.0.throttle_time_total = self.stats.0.throttle_time_total.saturating_add(wait);
        if produce {
            self.stats.0.produce_throttled += 1;
        }
        let now = self.now;
        if let Some(c) = self.conns.get_mut(&conn) {
            let until = now.checked_add(wait);
            c.throttled_until = c.throttled_until.max(until);
            for r in c.inflight.iter_mut() {
                r.deadline = r.deadline.checked_add(wait).unwrap_or(r.deadline);
            }
        }
    }

    /// A Produce answer from node `from` (`None`: a bootstrap connection).
    pub(super) fn on_produce(
        &mut self,
        from: Option<i32>,
        refs: SmallVec<[BatchRef; 4]>,
        resp: &ProduceResponseReader,
    ) {
        // Each batch's answer: the first entry for its topic and partition. A request with
        // many batches looks them up in a table sorted (stably) by topic and partition, built
        // in one walk of the answer, rather than walking the answer once per batch.
        let mut table: Vec<(Bytes, i32, PartitionResult)> = Vec::new();
        let mut decoded = None;
        if refs.len() > 8 {
            resp.for_each(|t, p| {
                table.push((t.clone(), p.index, *p));
                true
            });
            table.sort_by(|a, b| (&a.0, a.1).cmp(&(&b.0, b.1)));
        }
        self.log_start_known = resp.version() >= 5;
        for r in refs {
            let name = &*self.topics[r.topic].name;
            let index = r.partition as i32;
            let result = if table.is_empty() {
                resp.find(name, index)
            } else {
                let key = (name.as_bytes(), index);
                let at = table.partition_point(|e| (&e.0[..], e.1) < key);
                table
                    .get(at)
                    .filter(|e| (&e.0[..], e.1) == key)
                    .map(|e| e.2)
            };
            match result {
                Some(pr) if may_fail_records(pr.error_code) => {
                    // A refusal that may fail the batch: what the broker said beyond the code
                    // (v8+), for the failed records. The answer is decoded whole once, and
                    // only on this rare path.
                    let whole = decoded.get_or_insert_with(|| resp.decode_whole());
                    self.broker_refusal = (whole.as_ref())
                        .and_then(|w| w.error_detail(name, index))
                        .and_then(|(errors, message)| Refusal::new(r.batch, errors, message));
                    self.on_partition_result(r, &pr, from);
                    self.broker_refusal = None;
                }
                Some(pr) => self.on_partition_result(r, &pr, from),
                // A response that leaves a partition out tells us nothing about it.
                None => self.retry_batch(r, ErrorCode::NetworkException, true),
            }
        }
        self.log_start_known = false;
    }

    pub(super) fn on_partition_result(
        &mut self,
        r: BatchRef,
        pr: &PartitionResult,
        from: Option<i32>,
    ) {
        let (ti, pi) = (r.topic, r.partition);
        let Some(i) = self.topics[ti].partitions[pi].position(r.batch) else {
            return;
        };
        if self.topics[ti].partitions[pi].batches[i].state != BatchState::InFlight {
            return;
        }
        let code = ErrorCode::from_i16(pr.error_code);
        if code != ErrorCode::None {
            self.topics[ti].partitions[pi].batches[i].last_error.0 = Some(code);
        }
        // Without topic ids, a leader saying the topic is gone arms the same belief in
        // restarted leader epochs as a metadata answer saying so (`gone_without_id`): the
        // topic may have been deleted and created again between two refreshes, and no
        // metadata answer may ever say it was gone. Before, the new topic's epochs looked
        // stale beside the old ones for the producer's life (a review finding). Already armed,
        // its `lower_epochs_since` runs on (it is `None` whenever the flag is not set).
        let topic = &mut self.topics[ti];
        if code == ErrorCode::UnknownTopicOrPartition && topic.id == [0; 16] {
            topic.gone_without_id = true;
        }
        // The indexes follow every change to the partition. A plain success leaves it to
        // `ack_batch` (one sync per acknowledged batch instead of two); every other answer
        // syncs here, as before.
        let p = &self.topics[ti].partitions[pi];
        let leader_before = (p.leader, p.leader_epoch);
        let moved = self.learn_leadership_from_produce(ti, pi, code, pr);
        let p = &mut self.topics[ti].partitions[pi];
        let leader_moved = p.leader.is_some() && p.leader_epoch > leader_before.1;
        if leader_moved {
            p.skip_retry_backoff(self.now);
        }
        if moved || code != ErrorCode::None {
            self.sync(ti, pi);
        }
        // A batch whose records were reported at their delivery timeout is never sent again:
        // an answer that would retry or split it ends it here instead, a gap like any failed
        // sequenced batch (the partition rebases); one that would re-sequence it ends it in
        // `reject_for_rebase`. Every other answer takes its usual course (a success or a
        // duplicate moves the sequence state on, OUT_OF_ORDER_SEQUENCE_NUMBER is classified
        // as usual, data loss included, a refusal for good applies the gap policy, a fatal
        // one stops the producer), and reports nothing more for it (`ack_batch`,
        // `fail_batch`).
        let b = &self.topics[ti].partitions[pi].batches[i];
        if b.reported && (code.is_retriable() || is_too_large(code) && b.count() > 1) {
            let error = DeliveryError::Broker(code);
            self.fail_batch(ti, pi, i, error, Persistence::PossiblyPersisted);
            return;
        }
        if !self.cfg.enable_idempotence
            && self.on_identity_error_without_idempotence(ti, pi, i, code)
        {
            return;
        }
        match code {
            ErrorCode::None => self.on_success(r, i, pr),
            ErrorCode::DuplicateSequenceNumber => {
                let offset = mutated!(self.cfg, DuplicateAtMinusOne).then_some(-1);
                let stamp = self.log_append_time_of(ti, pi, i, pr);
                self.ack_batch(ti, pi, i, offset, stamp)
            }
            ErrorCode::OutOfOrderSequenceNumber | ErrorCode::UnknownProducerId => {
                self.on_out_of_order(ti, pi, i, code, pr.log_start_offset)
            }
            ErrorCode::InvalidProducerEpoch
            | ErrorCode::ProducerFenced
            | ErrorCode::InvalidProducerIdMapping => {
                if code == ErrorCode::ProducerFenced {
                    self.on_bump_refused(ti, pi, i);
                } else if code == ErrorCode::InvalidProducerIdMapping {
                    self.on_id_mapping_refused(ti, pi, i);
                }
                self.reject_for_rebase(ti, pi, i, code);
            }
            c if is_too_large(c) && self.topics[ti].partitions[pi].batches[i].count() > 1 => {
                self.split_batch(ti, pi, i, c)
            }
            ErrorCode::NotEnoughReplicasAfterAppend
            | ErrorCode::RequestTimedOut
            | ErrorCode::NotLeaderOrFollower
                if pr.base_offset >= 0 && mutated!(self.cfg, AfterAppendDelivered) =>
            {
                self.ack_batch(ti, pi, i, Some(pr.base_offset), None)
            }
            c if c.is_fatal() => self.fail_fatal_on_refusal(ti, pi, i, FatalError::Broker(c)),
            c @ (ErrorCode::NotEnoughReplicasAfterAppend
            | ErrorCode::UnknownServerError
            | ErrorCode::NotLeaderOrFollower
            | ErrorCode::KafkaStorageError)
                if mutated!(self.cfg, AfterAppendNotPersisted) =>
            {
                if c.is_retriable() {
                    self.retry_batch(r, c, false)
                } else {
                    self.fail_permanently(ti, pi, i, c)
                }
            }
            ErrorCode::CorruptMessage => self.on_corrupt_message(r, i),
            c if c.is_retriable() => {
                // Under acks=all a refusal may also come after the append (leadership moved
                // while the batch waited for its followers, which may hold it). Under acks=1
                // KAFKA_STORAGE_ERROR may too: a log flushed every `log.flush.interval.messages`
                // fails its flush after the append (Kafka's `UnifiedLog.append`), and a
                // follower may already hold the batch (a review finding).
                let after_append = (self.cfg.acks == -1 && c.may_follow_append())
                    || (self.cfg.acks == 1 && c == ErrorCode::KafkaStorageError);
                self.retry_batch(r, c, c.is_possibly_persisted() || after_append)
            }
            c if c.is_possibly_persisted() => {
                self.fail_refused(ti, pi, i, c, Persistence::PossiblyPersisted);
            }
            c => self.fail_permanently(ti, pi, i, c),
        }
        // The answer named a new leader (KIP-951): the batch it refused goes there without
        // its backoff, as the retries already waiting do.
        if leader_moved {
            self.topics[ti].partitions[pi].skip_retry_backoff(self.now);
            self.sync(ti, pi);
        }
        self.retry_at_once_if_led_elsewhere(r, from);
    }

    /// Batch `r`, refused by node `from` or lost with its connection to it, goes again
    /// without its backoff when its partition already follows another leader (a known leader
    /// epoch, not stale): the attempt went to the old one, as the Java client compares the
    /// batch's leader epoch with the partition's. Before, only the batch whose answer
    /// brought the news skipped it; the others of a full window, refused by the old leader
    /// just after, each waited `retry.backoff.ms` in turn (a review finding).
    pub(super) fn retry_at_once_if_led_elsewhere(&mut self, r: BatchRef, from: Option<i32>) {
        let now = self.now;
        let p = &mut self.topics[r.topic].partitions[r.partition];
        let elsewhere = from.is_some()
            && p.leader.is_some()
            && p.leader != from
            && !p.stale_leader
            && p.leader_epoch >= 0;
        if !elsewhere {
            return;
        }
        let Some(i) = p.position(r.batch) else { return };
        if let BatchState::Retry { at } = &mut p.batches[i].state {
            if *at > now {
                *at = now;
                self.sync(r.topic, r.partition);
            }
        }
    }

    /// A success for batch `i` (`r`): acknowledged at `base_offset`, or without an offset
    /// when the broker says -1 (brokers that find a retry already written without knowing
    /// where: Java takes it as success with the offset unknown, as kprod takes
    /// DUPLICATE_SEQUENCE_NUMBER), unless the offset is impossible.
    fn on_success(&mut self, r: BatchRef, i: usize, pr: &PartitionResult) {
        let (ti, pi) = (r.topic, r.partition);
        let base_offset = pr.base_offset;
        let count = i64::from(self.topics[ti].partitions[pi].batches[i].count());
        if base_offset == -1 {
            let stamp = self.log_append_time_of(ti, pi, i, pr);
            self.ack_batch(ti, pi, i, None, stamp);
        } else if base_offset < 0 || base_offset.checked_add(count).is_none() {
            // A success with an impossible offset is corrupt: its truth is unknown.
            self.sync(ti, pi);
            self.retry_batch(r, ErrorCode::CorruptMessage, true);
        } else {
            let stamp = self.log_append_time_of(ti, pi, i, pr);
            self.ack_batch(ti, pi, i, Some(base_offset), stamp);
        }
    }

    /// The log append time an answer gives batch `i`, if it is one. Kafka answers an attempt
    /// it appends with the time on a LogAppendTime topic and -1 on a CreateTime one, but a
    /// retry it finds already written (a duplicate) with the stored batch's largest
    /// timestamp, on either kind of topic. So the answer to an attempt that cannot be a
    /// duplicate's (no earlier attempt may have been written, or without idempotence, where
    /// the broker deduplicates nothing) is believed and tells whether the topic stamps
    /// appends; the answer to a retry that may be a duplicate's is believed only for a topic
    /// known to. (Before, only a first attempt's answer was believed: on a new topic, whose
    /// first batches are often refused UNKNOWN_TOPIC_OR_PARTITION and retried, the log's
    /// append time was reported as the create time; a review finding.)
    fn log_append_time_of(
        &mut self,
        ti: usize,
        pi: usize,
        i: usize,
        pr: &PartitionResult,
    ) -> Option<i64> {
        let stamp = log_append_time(pr);
        let b = &self.topics[ti].partitions[pi].batches[i];
        let fresh = !b.maybe_persisted || !self.cfg.enable_idempotence;
        if fresh {
            // A topic switched back to CreateTime is seen so too.
            self.topics[ti].stamps_appends = stamp.is_some();
        }
        let trusted = mutated!(self.cfg, DuplicateTimeTrusted);
        (self.topics[ti].stamps_appends || trusted)
            .then_some(stamp)
            .flatten()
    }

    /// CORRUPT_MESSAGE for batch `i` (`r`): retried `MAX_CORRUPT_RETRIES` times, then a
    /// permanent failure.
    fn on_corrupt_message(&mut self, r: BatchRef, i: usize) {
        let (ti, pi) = (r.topic, r.partition);
        let code = ErrorCode::CorruptMessage;
        let b = &mut self.topics[ti].partitions[pi].batches[i];
        if b.corrupt_retries < MAX_CORRUPT_RETRIES {
            b.corrupt_retries += 1;
            self.retry_batch(r, code, false);
        } else {
            self.fail_permanently(ti, pi, i, code);
        }
    }

    /// This attempt was rejected and the batch's sequence is spent: it waits for a rebase,
    /// unless it may already be in the log (then it can only fail as possibly persisted) or
    /// a later batch overtook it (then it fails, not persisted).
    pub(super) fn reject_for_rebase(&mut self, ti: usize, pi: usize, i: usize, code: ErrorCode) {
        let p = &mut self.topics[ti].partitions[pi];
        p.needs_rebase = true;
        let b = &mut p.batches[i];
        if b.reported {
            // Its records were reported at their delivery timeout: never re-sequenced, it
            // ends here (silently, `fail_batch`).
            let error = DeliveryError::Broker(code);
            self.fail_batch(ti, pi, i, error, Persistence::PossiblyPersisted);
        } else if b.maybe_persisted {
            self.fail_refused(ti, pi, i, code, Persistence::PossiblyPersisted);
        } else if p.cutting {
            let error = DeliveryError::PartitionCut;
            self.fail_batch(ti, pi, i, error, Persistence::NotPersisted);
        } else if b.overtaken {
            // A later batch is in the log: this one's failure is a gap, which the gap
            // policy decides about (it went on under every policy before, a review finding).
            self.fail_permanently(ti, pi, i, code);
        } else {
            b.state = BatchState::AwaitRebase;
            p.update_inflight_conn();
            // Sent again once the partition is re-sequenced: a retry for `Metrics::retries`
            // (before, only retries under the same identity counted).
            self.stats.0.retries += 1;
            self.sync(ti, pi);
            self.request_paced_bump(ti, pi);
        }
    }

    /// OUT_OF_ORDER_SEQUENCE_NUMBER or UNKNOWN_PRODUCER_ID for batch `i` (§B.3).
    pub(super) fn on_out_of_order(
        &mut self,
        ti: usize,
        pi: usize,
        i: usize,
        code: ErrorCode,
        log_start: i64,
    ) {
        let p = &self.topics[ti].partitions[pi];
        let identity = p.batches[i].seq.map(|s| s.0);
        let earlier = p
            .batches
            .iter()
            .take(i)
            .filter(|b| b.is_sequenced_under(identity));
        let mut waiting = false;
        let mut explained = p.gap;
        for b in earlier {
            match b.state {
                // Once the partition waits for a rebase, a retry that was never written goes
                // only under the next identity (`head_retry`): a gap, like AwaitRebase, not
                // an earlier attempt still to come. (Counted as one, a later possibly
                // written batch was retried on OUT_OF_ORDER until the earlier one expired.)
                BatchState::Retry { .. } if p.needs_rebase && !b.maybe_persisted => {
                    explained = true
                }
                BatchState::InFlight | BatchState::Retry { .. } => waiting = true,
                BatchState::AwaitRebase => explained = true,
                _ => {}
            }
        }
        if waiting && !mutated!(self.cfg, NonHeadTreatedAsHead) {
            // Not the head: an earlier batch is unresolved. Retry after it, no bump.
            let r = BatchRef {
                topic: ti,
                partition: pi,
                batch: p.batches[i].id,
            };
            self.retry_batch(r, code, false);
            return;
        }
        if code == ErrorCode::UnknownProducerId {
            // The broker holds no state for this producer on this partition. That does not
            // say an earlier attempt whose answer was lost did not land: brokers before 2.4
            // forget a producer whose last batch falls below the log start (retention,
            // DeleteRecords: Kafka Streams purging a repartition topic it has read, KAFKA-7190),
            // and a broker that reloads its state from a snapshot (or Tansu restarted on
            // durable storage) may hold the batch but not the producer. So a batch that may be
            // in the log stays so, and fails possibly persisted below rather than being
            // written again under the next identity, a duplicate (a review finding; it was
            // taken as not written). Unless the log itself explains the lost state: it
            // starts right after the last acknowledged record, so a log start moved past this
            // batch would be beyond the batch's own offsets, and the deletion that dropped
            // the state came before it, and so did the refusal of its first attempt.
            // (Idling past the brokers' expiry explains nothing: it was taken as proof that
            // the broker forgot the producer before the first attempt, but a broker that
            // loses its producer state after the write keeps the batch: one restarted
            // without its state on durable storage, or any Kafka, which dates a producer's
            // state by its batches' own timestamps, so old timestamps expire it at the next
            // check after the append; Kafka before 2.5 then answers UNKNOWN_PRODUCER_ID. The
            // batch then failed not persisted, or was written twice: a review finding.)
            let p = &mut self.topics[ti].partitions[pi];
            // The offset right after the last acknowledged record, where the answer says
            // where the log starts.
            // (Not known when the acknowledgements came without offsets: -1.)
            let next = (p.last_acked)
                .filter(|&(_, offset)| self.log_start_known && offset >= 0)
                .map(|(_, offset)| offset.saturating_add(1));
            if next == Some(log_start) {
                p.batches[i].maybe_persisted = false;
            }
            // Refused at sequence 0, the start of an identity on the partition: the broker
            // takes no batch under this producer id at all (Tansu, restarted without its
            // state, answers so to every epoch of it; Kafka accepts an unknown producer at
            // sequence 0), so a local epoch bump cannot help and only met the same answer,
            // thousands of times a second until the epoch ran out. A new producer id is
            // asked for instead, after the backoff.
            // (Sequence 0 after the sequences wrapped past `i32::MAX` is no start: something
            // was acknowledged before it.)
            let p = &self.topics[ti].partitions[pi];
            if let (Some((id, 0)), None) = (p.batches[i].seq, p.last_acked) {
                if self.identity == Some(id) {
                    self.retake_producer_id();
                }
            }
        }
        let p = &self.topics[ti].partitions[pi];
        if explained || p.batches[i].maybe_persisted || p.batches[i].overtaken {
            self.reject_for_rebase(ti, pi, i, code);
            return;
        }
        if mutated!(self.cfg, HeadRejectionRetried) {
            let r = BatchRef {
                topic: ti,
                partition: pi,
                batch: p.batches[i].id,
            };
            self.retry_batch(r, code, false);
            return;
        }
        // A broker that answers v5+ with a log start of -1 does not know it: it is no longer
        // the partition's leader (Kafka answers so for a partition it just stopped leading),
        // and the refusal says nothing about our state. Asked again of the leader metadata
        // names, not judged (before, it was taken as data loss: a spurious signal, and the
        // producer stopped under the fatal data-loss policy). As the Java client did before
        // KIP-360. Once: a broker that never reports its log start (Redpanda answers -1 in
        // every Produce answer) refuses the retry alike, and the batch was asked again until
        // its delivery timeout, its partition stalled (a review finding against franz-go).
        // The second such refusal cannot be judged either: the partition starts a new epoch
        // and the batch goes again, as the Java client does for any such refusal, without a
        // data-loss signal (none can be told from an unknown log start).
        //
        // So is a refusal at sequence 0 of an epoch this producer bumped itself (the first
        // batch under it here): refused again, the broker does not take local bumps
        // (Redpanda before 24.1.15 and 24.2.2 keeps a producer's sequence across epochs and
        // answers so, with its log start of -1; Apache Kafka 2.5+ takes sequence 0 at any
        // higher epoch), and from then on a bump takes a new producer id, as after Tansu's
        // PRODUCER_FENCED: each local bump met the same refusal, every partition stalled
        // behind it, until the id's 32,767 epochs ran out (a review of Kafka-compatible
        // brokers). (Asked again first: a Kafka broker that just stopped leading answers -1
        // as well.)
        let b = &p.batches[i];
        let first_of_local_epoch = matches!(b.seq, Some((id, 0))
            if p.last_acked.is_none()
                && Some(id) == self.identity
                && Some(id) == self.bumped_locally);
        if code == ErrorCode::OutOfOrderSequenceNumber
            && self.log_start_known
            && log_start < 0
            && (p.last_acked.is_some() || first_of_local_epoch)
        {
            let b = &mut self.topics[ti].partitions[pi].batches[i];
            if std::mem::replace(&mut b.asked_without_log_start, true) {
                if first_of_local_epoch {
                    self.on_bump_refused(ti, pi, i);
                }
                self.reject_for_rebase(ti, pi, i, code);
                return;
            }
            let r = BatchRef {
                topic: ti,
                partition: pi,
                batch: b.id,
            };
            self.want_fresh_metadata();
            self.retry_batch(r, code, false);
            return;
        }
        // The true head of line was refused. Benign if the broker lost our state because the
        // log start moved past our last acknowledgement (KIP-360); otherwise acknowledged data
        // was lost.
        // UNKNOWN_PRODUCER_ID says the broker lost our state (expiry, an old broker after
        // retention): benign by definition. OUT_OF_ORDER_SEQUENCE_NUMBER is benign only if
        // the log start moved past our last acknowledgement (KIP-360).
        let benign = (code == ErrorCode::UnknownProducerId
            && !mutated!(self.cfg, UnknownPidAsDataLoss))
            || match p.last_acked {
                None => true,
                Some((_, offset)) => log_start > offset,
            };
        if !benign {
            let topic = self.topics[ti].name.clone();
            self.diag(Diagnostic::DataLoss {
                topic,
                partition: pi as i32,
            });
            if self.cfg.data_loss_policy == DataLossPolicy::Fatal {
                self.fail_fatal_on_refusal(ti, pi, i, FatalError::DataLoss);
                return;
            }
        }
        self.reject_for_rebase(ti, pi, i, code);
    }

    /// A permanent, record-level rejection: the batch is not in the log. The gap policy
    /// decides what else happens (§B.4).
    pub(super) fn fail_permanently(&mut self, ti: usize, pi: usize, i: usize, code: ErrorCode) {
        self.fail_refused(ti, pi, i, code, Persistence::NotPersisted);
    }

    /// Batch `i`, refused for good (`code`), fails `persisted`, and the gap policy applies.
    fn fail_refused(
        &mut self,
        ti: usize,
        pi: usize,
        i: usize,
        code: ErrorCode,
        persisted: Persistence,
    ) {
        let error = DeliveryError::Broker(code);
        self.fail_batch(ti, pi, i, error, persisted);
        self.apply_gap_policy(ti, pi, code);
    }

    /// The gap policy in force (`ContinueWithGap` under the planted `GapPolicyIgnored`).
    pub(super) fn gap_policy(&self) -> GapPolicy {
        if mutated!(self.cfg, GapPolicyIgnored) {
            GapPolicy::ContinueWithGap
        } else {
            self.cfg.gap_policy
        }
    }

    /// A batch of partition `(ti, pi)` failed for good (`code`), so the partition's log may
    /// miss it: the gap policy decides what else happens (§B.4). Also for a batch failed
    /// possibly persisted (UNKNOWN_SERVER_ERROR, an ambiguous retry refused): if it is not in
    /// the log, later records landing would leave the very gap `CutPartition` and `Fatal`
    /// forbid (a review finding: only refusals not persisted applied the policy). A delivery
    /// timeout is not a refusal and applies none, as in librdkafka's gapless guarantee.
    fn apply_gap_policy(&mut self, ti: usize, pi: usize, code: ErrorCode) {
        match self.gap_policy() {
            GapPolicy::ContinueWithGap
                if code.refuses_the_topic() && self.refused_again(ti, pi) =>
            {
                // Refused so again under a new epoch, nothing acknowledged between: any batch
                // of the topic would be (Write revoked, Describe kept, so metadata is clean),
                // and what the partition holds unsent fails with it now. Sent one per paced
                // bump, about one a second, its backlog grew with what the application sent
                // there until `buffer.memory` was full and every topic's sends waited (a
                // review of recovery without restart). A first refusal fails its batch
                // alone: one during an ACL's propagation, gone a moment later, would fail
                // everything the partition held. Batches in flight get their own answers;
                // one retried after a possible write keeps its place.
                self.fail_unsent(ti, pi, &DeliveryError::Broker(code), false);
            }
            GapPolicy::ContinueWithGap => {}
            GapPolicy::Fatal => self.fail_fatal(FatalError::Gap(code)),
            GapPolicy::CutPartition => {
                self.topics[ti].partitions[pi].cutting = true;
                let without_idempotence = !self.cfg.enable_idempotence;
                self.fail_unsent(ti, pi, &DeliveryError::PartitionCut, without_idempotence);
            }
        }
    }

    /// Whether partition `(ti, pi)` has asked for a second bump since one of its batches was
    /// last acknowledged under the current identity (the refusal just handled asked for one).
    fn refused_again(&self, ti: usize, pi: usize) -> bool {
        self.topics[ti].partitions[pi].fruitless_bumps > 1
    }

    /// Fails, not persisted, with `error`, each batch of partition `(ti, pi)` not on the
    /// wire: never sent, or refused and waiting to go again; one waiting to be retried after
    /// a possible write only if `retried_too` (without idempotence, where a retry is no
    /// safer than a cut).
    fn fail_unsent(&mut self, ti: usize, pi: usize, error: &DeliveryError, retried_too: bool) {
        let mut k = 0;
        while k < self.topics[ti].partitions[pi].batches.len() {
            let b = &self.topics[ti].partitions[pi].batches[k];
            let unsent = match b.state {
                BatchState::Open | BatchState::Ready | BatchState::AwaitRebase => true,
                BatchState::Retry { .. } => !b.maybe_persisted || retried_too,
                BatchState::InFlight => false,
            };
            if unsent {
                self.fail_batch(ti, pi, k, error.clone(), Persistence::NotPersisted);
            } else {
                k += 1;
            }
        }
    }

    /// MESSAGE_TOO_LARGE (or RECORD_LIST_TOO_LARGE, `code`) for a batch of several records:
    /// the batch was rejected whole, so its sequence range is reused by two halves with
    /// contiguous sequences (KAFKA-8325). The records are re-derived from the sent bytes
    /// (decompressed if need be; the uncompressed records are not kept after the seal) and
    /// each half is compressed again.
    pub(super) fn split_batch(&mut self, ti: usize, pi: usize, i: usize, code: ErrorCode) {
        let max_seq = self.cfg.max_sequence;
        let (compression, ratio) = (self.topics[ti].compression, self.topics[ti].ratio);
        let p = &mut self.topics[ti].partitions[pi];
        let b = &p.batches[i];
        if b.maybe_persisted {
            // Its range may be in the log: it cannot be re-sequenced into halves (P3).
            return self.fail_permanently(ti, pi, i, code);
        }
        if !self.cfg.enable_idempotence && p.cutting {
            let error = DeliveryError::PartitionCut;
            return self.fail_batch(ti, pi, i, error, Persistence::NotPersisted);
        }
        let (Some(wire), Some((identity, base))) = (b.wire.clone(), b.seq) else {
            return self.fail_permanently(ti, pi, i, code);
        };
        let Ok(batch) = RecordBatch::decode_own(wire) else {
            return self.fail_permanently(ti, pi, i, code);
        };
        let half = batch.records.len() / 2;
        let old = p.batches.remove(i).expect("index valid");
        let mut pieces = Vec::new();
        let mut seq = base;
        for (k, chunk) in [&batch.records[..half], &batch.records[half..]]
            .iter()
            .enumerate()
        {
            let mut builder = RecordBatchBuilder::with_capacity(0);
            builder.set_compression(compression, ratio);
            for r in chunk.iter() {
                builder.push(
                    batch.base_timestamp + r.timestamp_delta,
                    r.key.as_deref(),
                    r.value.as_deref(),
                    &r.headers,
                );
            }
            let ids: Vec<RecordId> = if k == 0 {
                old.records[..half].to_vec()
            } else {
                old.records[half..].to_vec()
            };
            let count = ids.len() as i32;
            let wire = builder.seal(
                identity.producer_id,
                identity.epoch,
                identity.wire_sequence(seq),
            );
            // A piece is charged as a new batch of its records would be, and the batch it
            // replaces is released.
            let first = chunk.first().map_or(0, |r| {
                encoded_len(record_payload_len(
                    r.key.as_deref(),
                    r.value.as_deref(),
                    &r.headers,
                ))
            });
            let mut piece = Batch {
                id: self.next_batch,
                records: ids,
                builder: None,
                wire: Some(wire),
                seq: Some((identity, seq)),
                size: 0,
                created: old.created,
                joinable_until: old.joinable_until,
                state: BatchState::Retry { at: self.now },
                maybe_persisted: false,
                overtaken: old.overtaken,
                asked_without_log_start: false,
                reported: false,
                retries: old.retries,
                corrupt_retries: 0,
                reserve: reserve_for(&self.cfg, first),
                last_error: old.last_error,
            };
            piece.size = batch_charge(&piece, self.cfg.record_overhead);
            pieces.push(piece);
            self.next_batch += 1;
            seq = crate::partition::seq_add(seq, count, max_seq);
        }
        self.buffered_bytes -= old.size;
        for (k, piece) in pieces.into_iter().enumerate() {
            self.buffered_bytes += piece.size;
            p.batches.insert(i + k, piece);
        }
        p.update_inflight_conn();
        self.sync(ti, pi);
    }
}

/// A Produce answer's `log_append_time_ms`: the time the broker wrote the batch on a
/// LogAppendTime topic, -1 (or any negative value) otherwise.
fn log_append_time(pr: &PartitionResult) -> Option<i64> {
    (pr.log_append_time_ms >= 0).then_some(pr.log_append_time_ms)
}

/// What a broker said about a refused batch beyond the error code (Produce v8+, KIP-467).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) struct Refusal {
    /// The batch refused.
    batch: u64,
    message: Option<Arc<str>>,
    /// The records the broker named invalid, by their index in the batch, sorted.
    named: Vec<(i32, Option<Arc<str>>)>,
}

impl Refusal {
    /// `None` when the broker said nothing more than the code.
    fn new(
        batch: u64,
        errors: Vec<BatchIndexAndErrorMessage>,
        message: Option<String>,
    ) -> Option<Self> {
        if errors.is_empty() && message.is_none() {
            return None;
        }
        let mut named: Vec<(i32, Option<Arc<str>>)> = (errors.into_iter())
            .map(|e| (e.batch_index, e.batch_index_error_message.map(Arc::from)))
            .collect();
        named.sort_by_key(|e| e.0);
        Some(Self {
            batch,
            message: message.map(Arc::from),
            named,
        })
    }

    /// The detail for the `k`-th record of batch `batch`, if this refusal is of that batch.
    pub(super) fn detail(&self, batch: u64, k: usize) -> Option<Box<BrokerDetail>> {
        if batch != self.batch {
            return None;
        }
        let found = (self
            .named
            .binary_search_by_key(&(k as i64), |e| i64::from(e.0)))
        .ok()
        .map(|at| self.named[at].1.clone());
        Some(Box::new(BrokerDetail {
            message: self.message.clone(),
            named: (!self.named.is_empty()).then_some(found.is_some()),
            record_message: found.flatten(),
        }))
    }
}

/// Whether a Produce answer's `code` may fail its batch's records for good (rather than
/// retry them or move the partition to a new identity): then what the broker said beyond
/// the code goes with them.
fn may_fail_records(code: i16) -> bool {
    let code = ErrorCode::from_i16(code);
    code != ErrorCode::None
        && !code.is_retriable()
        && !matches!(
            code,
            ErrorCode::DuplicateSequenceNumber
                | ErrorCode::OutOfOrderSequenceNumber
                | ErrorCode::UnknownProducerId
                | ErrorCode::InvalidProducerEpoch
                | ErrorCode::ProducerFenced
                | ErrorCode::InvalidProducerIdMapping
        )
}

/// A refusal for size that splitting a batch of several records answers: MESSAGE_TOO_LARGE
/// (the batch passed `message.max.bytes`), and RECORD_LIST_TOO_LARGE (it passed the log's
/// `segment.bytes`), which failed such a batch whole before, as Java does (a review finding).
fn is_too_large(code: ErrorCode) -> bool {
    matches!(
        code,
        ErrorCode::MessageTooLarge | ErrorCode::RecordListTooLarge
    )
}

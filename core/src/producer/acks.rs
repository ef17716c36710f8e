//! `acks` 0 and 1 and `enable.idempotence=false`: what changes when the producer gives up
//! idempotence for throughput.
//!
//! Without idempotence the producer has the fixed identity [`ProducerIdentity::NONE`] from
//! the start (no InitProducerId): every batch carries producer id -1, epoch -1 and base
//! sequence -1, so the broker checks nothing. The partition machinery is unchanged (retries
//! head-first with the same bytes, the in-flight bound, truthful persistence), but a failed
//! batch leaves no gap to rebase over and nothing is ever bumped. A retry after a lost answer
//! may write a record twice, and with `max_in_flight > 1` a retried batch may land after a
//! later one: that is what idempotence prevents.
//!
//! `acks=0`: Kafka sends no Produce response at all (a broker that refuses such a request
//! closes the connection instead). So the request gets no in-flight entry and no request
//! timeout; its batches resolve as soon as its bytes are handed to the driver, as
//! [`Event::Sent`] (after the request's `Transmit`s), never as delivered at an offset. A frame
//! that answers such a request anyway is dropped without harm.

use smallvec::SmallVec;

use super::connections::Conn;
use super::requests::BatchRef;
use super::Producer;
use crate::protocol::produce::ProduceRequest;
use crate::protocol::ErrorCode;
use crate::types::{ConnId, DeliveryError, Event, Persistence, Sent};

#[cfg(doc)]
use crate::types::ProducerIdentity;

/// Whether `id` lies in the wrapping range `first..=last` of correlation ids (which count up
/// modulo 2^31).
fn in_wrapping_range(id: i32, (first, last): (i32, i32)) -> bool {
    let span = last.wrapping_sub(first) & i32::MAX;
    let offset = id.wrapping_sub(first) & i32::MAX;
    id >= 0 && offset <= span
}

impl Conn {
    /// Whether a frame with `correlation_id` answers an `acks=0` Produce request sent on this
    /// connection (and no request still waiting for its answer): Kafka never sends one, and a
    /// broker that does must not cost the connection.
    pub(super) fn answers_unacknowledged(&self, correlation_id: i32) -> bool {
        self.unacknowledged
            .is_some_and(|range| in_wrapping_range(correlation_id, range))
            && !self
                .inflight
                .iter()
                .any(|r| r.correlation_id == correlation_id)
    }
}

impl Producer {
    /// Writes an `acks=0` Produce request: no in-flight entry, no timeout, no answer awaited.
    /// Its batches resolve at once as [`Event::Sent`], queued after the request's bytes.
    pub(super) fn transmit_unacknowledged(
        &mut self,
        conn: ConnId,
        req: &ProduceRequest,
        version: i16,
        refs: SmallVec<[BatchRef; 4]>,
        framing: &mut bytes::BytesMut,
    ) {
        let correlation_id = self.next_correlation_id();
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        c.unacknowledged = Some(match c.unacknowledged {
            Some((first, _)) => (first, correlation_id),
            None => (correlation_id, correlation_id),
        });
        let client_id = self.cfg.client_id.as_deref();
        let chunks = req.encode_chunks_into(version, correlation_id, client_id, framing);
        c.transmit(&mut self.out, conn, chunks, self.cfg.write_reports);
        for r in refs {
            self.sent_batch(r);
        }
    }

    /// Removes a batch handed to the driver under `acks=0` and reports its records sent.
    fn sent_batch(&mut self, r: BatchRef) {
        let topic = self.topics[r.topic].name.clone();
        let p = &mut self.topics[r.topic].partitions[r.partition];
        let Some(b) = p.position(r.batch).and_then(|i| p.batches.remove(i)) else {
            return;
        };
        p.update_inflight_conn();
        self.sync(r.topic, r.partition);
        self.buffered_bytes -= b.size;
        self.pending_records -= b.records.len();
        self.emit(Event::Sent(Sent {
            topic,
            partition: r.partition as i32,
            ids: b.records,
        }));
    }

    /// Idempotence off: a batch without a producer id cannot draw the errors about producer
    /// ids, epochs and sequences, and there is no identity to rebase to. A broker that answers
    /// one anyway refused the batch (DUPLICATE_SEQUENCE_NUMBER: claims to hold it), so it
    /// fails. Returns whether `code` was one of them.
    pub(super) fn on_identity_error_without_idempotence(
        &mut self,
        ti: usize,
        pi: usize,
        i: usize,
        code: ErrorCode,
    ) -> bool {
        let persisted = match code {
            ErrorCode::DuplicateSequenceNumber => Persistence::PossiblyPersisted,
            ErrorCode::OutOfOrderSequenceNumber
            | ErrorCode::UnknownProducerId
            | ErrorCode::InvalidProducerEpoch
            | ErrorCode::ProducerFenced
            | ErrorCode::InvalidProducerIdMapping => Persistence::NotPersisted,
            _ => return false,
        };
        self.fail_batch(ti, pi, i, DeliveryError::Broker(code), persisted);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::in_wrapping_range;

    #[test]
    fn correlation_ranges_wrap_like_the_ids() {
        assert!(in_wrapping_range(5, (5, 5)));
        assert!(in_wrapping_range(7, (5, 9)));
        assert!(!in_wrapping_range(4, (5, 9)));
        assert!(!in_wrapping_range(10, (5, 9)));
        // Ids wrap from i32::MAX to 0.
        assert!(in_wrapping_range(i32::MAX, (i32::MAX - 1, 2)));
        assert!(in_wrapping_range(1, (i32::MAX - 1, 2)));
        assert!(!in_wrapping_range(3, (i32::MAX - 1, 2)));
        assert!(!in_wrapping_range(-1, (0, 2)));
    }
}

//! Writing requests: correlation ids, the per-connection table of requests in flight (each
//! with its `request.timeout.ms` deadline, P8), and assembling Produce requests: for each
//! ready connection to a leader, up to `max_in_flight` requests (S7), each with at most one
//! batch per partition the node leads, as the partition picks it (`Partition::next_to_send`:
//! P1, P2, P4, P5, P7), within `max.request.size`. Batches travel as uncopied chunks (§E.3).

use std::time::Instant;

use bytes::Bytes;
use smallvec::SmallVec;

use super::accumulator::{first_unsealed, fit_sealed, observe_compression};
use super::connections::ConnState;
use super::Producer;
use crate::metrics::Observed;
use crate::partition::{BatchState, SendContext};
use crate::protocol::produce::{PartitionProduceData, ProduceRequest, TopicProduceData};
use crate::protocol::{self, encode_request};
use crate::types::{ConnId, RecordId};

/// Bytes a Produce request spends outside its record batches, per request and per partition
/// (a generous bound: header, tagged fields; the client id and topic names are counted
/// besides).
const REQUEST_OVERHEAD: usize = 128;

const PARTITION_OVERHEAD: usize = 16;

/// What a Produce request takes before its batches: the fixed bound and the header's client
/// id (up to 32,767 bytes).
#[inline]
pub(super) fn request_base(cfg: &crate::ProducerConfig) -> usize {
    REQUEST_OVERHEAD + cfg.client_id.as_deref().map_or(0, str::len)
}

/// What a batch of `wire` bytes of topic `name` adds to a Produce request, as both walks
/// count it when they check its room and when they take it, and as `send` counts a record's
/// batch alone in a request (the name once per batch: a generous bound).
#[inline]
pub(super) fn request_share(wire: usize, name: &str) -> usize {
    wire + PARTITION_OVERHEAD + name.len()
}

/// A batch inside a Produce request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) struct BatchRef {
    pub(super) topic: usize,
    pub(super) partition: usize,
    pub(super) batch: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) enum RequestKind {
    ApiVersions(i16),
    Metadata,
    InitProducerId,
    Produce(SmallVec<[BatchRef; 4]>),
    SaslHandshake,
    SaslAuthenticate,
}

impl RequestKind {
    /// A SASL exchange: not traffic for `connections.max.idle.ms`.
    pub(super) fn is_sasl(&self) -> bool {
        matches!(self, Self::SaslHandshake | Self::SaslAuthenticate)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) struct InFlight {
    pub(super) correlation_id: i32,
    pub(super) kind: RequestKind,
    pub(super) deadline: Instant,
    /// Where the request's bytes begin in its connection's stream (`Conn::sent` then); 0
    /// unless the driver reports its writes ([`crate::ProducerConfig::write_reports`]).
    pub(super) start: u64,
    /// When it was handed to the driver (for `Metrics::produce_latency_total`; not state).
    pub(super) sent_at: Observed<Instant>,
}

impl Producer {
    pub(super) fn next_correlation_id(&mut self) -> i32 {
        let c = self.next_correlation;
        self.next_correlation = self.next_correlation.wrapping_add(1) & i32::MAX;
        c
    }

    pub(super) fn transmit<R: protocol::Request>(
        &mut self,
        conn: ConnId,
        req: &R,
        version: i16,
        kind: RequestKind,
    ) {
        let correlation_id = self.next_correlation_id();
        let bytes = encode_request(req, version, correlation_id, self.cfg.client_id.as_deref());
        self.track_and_send(conn, correlation_id, kind, std::iter::once(bytes));
    }

    /// A Produce request goes out as chunks: its record batches are not copied (§E.3); its
    /// framing is written into `framing`'s spare capacity.
    pub(super) fn transmit_produce(
        &mut self,
        conn: ConnId,
        req: &ProduceRequest,
        version: i16,
        kind: RequestKind,
        framing: &mut bytes::BytesMut,
    ) {
        let correlation_id = self.next_correlation_id();
        let chunks = req.encode_chunks_into(
            version,
            correlation_id,
            self.cfg.client_id.as_deref(),
            framing,
        );
        self.track_and_send(conn, correlation_id, kind, chunks);
    }

    pub(super) fn track_and_send(
        &mut self,
        conn: ConnId,
        correlation_id: i32,
        kind: RequestKind,
        chunks: impl IntoIterator<Item = Bytes>,
    ) {
        let now = self.now;
        if let Some(c) = self.conns.get_mut(&conn) {
            // On a throttled connection the broker reads the request only when the throttle
            // ends (KIP-219): its time starts then.
            let deadline = c.after_throttle(now) + self.cfg.request_timeout;
            // A SASL re-authentication is not traffic (see `handle_read`).
            if !kind.is_sasl() {
                c.touch(now);
            }
            c.inflight.push_back(InFlight {
                correlation_id,
                kind,
                deadline,
                start: c.sent,
                sent_at: Observed(now),
            });
            c.transmit(&mut self.out, conn, chunks, self.cfg.write_reports);
        }
    }

    pub(super) fn send_produce_requests(&mut self) {
        self.fire_timers();
        let ready: SmallVec<[(ConnId, i32); 8]> = self
            .node_conns
            .iter()
            .filter(|(_, c)| {
                self.conns.get(c).is_some_and(|c| {
                    c.state == ConnState::Ready && c.throttled_until.is_none_or(|t| t <= self.now)
                })
            })
            .map(|(n, c)| (*c, *n))
            .collect();
        let bound = if mutated!(self.cfg, InflightOffByOne) {
            self.cfg.max_in_flight + 1
        } else {
            self.cfg.max_in_flight
        };
        for (conn, node) in ready {
            while self.conns[&conn].produce_inflight() < bound {
                if !self.send_one_produce(conn, node) {
                    break;
                }
            }
        }
    }

    /// What a partition needs to know to pick (and sequence) its next batch for `conn`.
    pub(super) fn send_context(&self, conn: ConnId) -> SendContext {
        // A broker that speaks Produce v3 at most is Kafka 0.11, which deduplicates against a
        // producer's last batch on a partition only (spec §A.3; the five-batch window came
        // with 1.0): a retry of a written batch with a later one behind it would draw
        // OUT_OF_ORDER_SEQUENCE_NUMBER instead of its duplicate's success, and fail
        // possibly persisted. So one batch at a time per partition there, as KIP-98 asked
        // of 0.11's producers and franz-go does.
        let last_batch_only = (self.conns.get(&conn)).is_some_and(|c| c.versions.produce <= 3)
            && !mutated!(self.cfg, FullWindowOnKafka011);
        SendContext {
            now: self.now,
            identity: self.identity,
            conn,
            max_in_flight: if last_batch_only {
                1
            } else {
                self.cfg.max_in_flight
            },
            linger: self.cfg.linger,
            batch_size: self.cfg.batch_fill(),
            flush_upto: if self.closing {
                Some(RecordId(u64::MAX))
            } else {
                self.flush_upto
            },
            max_sequence: self.cfg.max_sequence,
            idle_expiry: self.cfg.producer_state_expiry(),
            #[cfg(feature = "mutations")]
            mutation: self.cfg.mutation,
        }
    }

    /// Partition `(ti, pi)`'s next batch for a request on `ctx`'s connection, its id and
    /// bytes, or `None` if it has none to send now (a probe that started instead is noted in
    /// `probed`, to be re-indexed once the request is built). A batch sealed just now gives
    /// back what its buffer held beyond its bytes and tells the topic's compression estimate
    /// how well it compressed.
    fn pick_batch(
        &mut self,
        ti: usize,
        pi: usize,
        ctx: &SendContext,
        probed: &mut SmallVec<[(usize, usize); 4]>,
    ) -> Option<(u64, Bytes)> {
        let Self {
            topics,
            buffered_bytes,
            cfg,
            batch_pool,
            ..
        } = self;
        let t = &mut topics[ti];
        let p = &mut t.partitions[pi];
        // The first unsealed batch's id and raw size, before the pick may seal it.
        let unsealed = first_unsealed(p);
        let probe = p.probe;
        let Some(pick) = p.next_to_send(ctx) else {
            if p.probe != probe {
                probed.push((ti, pi));
            }
            return None;
        };
        let b = &mut p.batches[pick.index];
        if let Some((_, raw, _)) = unsealed.filter(|(id, ..)| *id == b.id) {
            *buffered_bytes -= fit_sealed(b, raw, cfg, &mut batch_pool.0);
        }
        let wire = b.wire.clone().expect("a picked batch is sequenced");
        observe_compression(t.compression, &mut t.ratio, unsealed, b.id, &wire);
        Some((b.id, wire))
    }

    /// Builds one Produce request for `conn` with at most one batch per partition led by
    /// `node`. Returns whether a request was sent.
    ///
    /// Only the partitions the index holds as sendable to `node` are visited (`index.rs`: the
    /// others would pick nothing), in (topic, partition) order from the one the previous
    /// request to `node` left out for lack of room, wrapping around; a visit that picks
    /// nothing takes the partition out until it changes or a timer of its passes.
    pub(super) fn send_one_produce(&mut self, conn: ConnId, node: i32) -> bool {
        let ctx = self.send_context(conn);
        let mut picked: SmallVec<[(usize, usize, u64, Bytes); 4]> = SmallVec::new();
        let mut probed: SmallVec<[(usize, usize); 4]> = SmallVec::new();
        let mut total = request_base(&self.cfg);
        let mut left_out = None;
        let mut visit = std::mem::take(&mut self.scratch.0);
        visit.clear();
        // From where the last request to this node ran out of room, wrapping around (Java's
        // `drainIndex`): a partition late in the order, or with a large batch, is not left
        // behind for ever while earlier ones keep batches ready.
        let start = self.drain_start.get(&node).copied();
        let most = self.cfg.max_batches_per_request();
        // The partitions come a chunk at a time, so that a request costs what it visits,
        // not every partition marked for the node.
        let chunk = most.saturating_add(1).max(16);
        let mut after = None;
        'walk: loop {
            visit.clear();
            self.index
                .0
                .sendable_to(node, (start, after), chunk, &mut visit);
            let Some(&last) = visit.last() else { break };
            after = Some(last);
            for &(ti, pi) in &visit {
                // The rest wait for the next request, which starts with the first of them.
                if picked.len() >= most {
                    left_out.get_or_insert((ti, pi));
                    break 'walk;
                }
                let t = &mut self.topics[ti];
                let p = &mut t.partitions[pi];
                if p.leader != Some(node) {
                    self.index.0.unmark_sendable(node, ti, pi);
                    continue;
                }
                // Leave room: a batch that does not fit waits for the next request, which starts
                // with it. The walk stops there, as Java's drain does: walking on for a smaller
                // batch cost every request a visit to each partition marked for the node once
                // requests filled by bytes (a review finding), and the next request starts here.
                if let Some(b) = p.batches.iter().find(|b| b.state != BatchState::InFlight) {
                    if !picked.is_empty()
                        && total + request_share(b.wire_len(), &t.name) > self.cfg.max_request_size
                    {
                        left_out.get_or_insert((ti, pi));
                        break 'walk;
                    }
                }
                let Some((id, wire)) = self.pick_batch(ti, pi, &ctx, &mut probed) else {
                    self.index.0.unmark_sendable(node, ti, pi);
                    continue;
                };
                total += request_share(wire.len(), &self.topics[ti].name);
                picked.push((ti, pi, id, wire));
            }
            if visit.len() < chunk {
                break;
            }
        }
        // A request goes anyway: it also takes the open batches of the node's other
        // partitions (their first batch, as if flushed), up to the same limits, as Java's
        // sender drains the first batch of every partition of a node it sends to. Without
        // it, with a few records a millisecond over several partitions, each partition's
        // batch waited its own linger and went in a request of its own.
        if !picked.is_empty() && left_out.is_none() && !self.cfg.linger.is_zero() {
            visit.clear();
            // From where the last such walk to this node stopped, wrapping around, so that
            // the partitions beyond the first `most` take their turn too. One more than it
            // visits: where the next walk starts if this one stops short.
            let from = self.linger_start.get(&node).copied();
            self.index
                .0
                .lingering_on(node, from, most.saturating_add(1), &mut visit);
            let mut ctx = self.send_context(conn);
            ctx.flush_upto = Some(RecordId(u64::MAX));
            let mut next = None;
            // At most `most` visits: a request never walks every partition of the node.
            for (k, &(ti, pi)) in visit.iter().enumerate() {
                if k >= most || picked.len() >= most {
                    next = Some((ti, pi));
                    break;
                }
                // Marked sendable: the walk above visited it and picked its batch (a partition
                // it picked nothing from is unmarked), so it is in this request already.
                if self.index.0.is_sendable(node, ti, pi) {
                    continue;
                }
                let t = &mut self.topics[ti];
                let p = &mut t.partitions[pi];
                if p.leader != Some(node) {
                    continue;
                }
                let Some(b) = p.batches.iter().find(|b| b.state != BatchState::InFlight) else {
                    continue;
                };
                if total + request_share(b.wire_len(), &t.name) > self.cfg.max_request_size {
                    continue;
                }
                let Some((id, wire)) = self.pick_batch(ti, pi, &ctx, &mut probed) else {
                    continue;
                };
                total += request_share(wire.len(), &self.topics[ti].name);
                picked.push((ti, pi, id, wire));
            }
            match next {
                Some(tp) => self.linger_start.insert(node, tp),
                None => self.linger_start.remove(&node),
            };
        }
        visit.clear();
        self.scratch.0 = visit;
        match left_out {
            Some(tp) => self.drain_start.insert(node, tp),
            // Everything that could go went: the next walk may start from the beginning.
            None => self.drain_start.remove(&node),
        };
        for (ti, pi) in probed {
            self.sync(ti, pi);
            self.index.0.unmark_sendable(node, ti, pi);
        }
        if picked.is_empty() {
            return false;
        }
        // On the wire in (topic, partition) order, one entry per topic, whatever the walk's
        // start. The request's lists and topic names reuse the previous requests' (no
        // allocation per request in steady state).
        if !picked.is_sorted_by_key(|&(ti, pi, ..)| (ti, pi)) {
            picked.sort_unstable_by_key(|&(ti, pi, ..)| (ti, pi));
        }
        let mut pool = std::mem::take(&mut self.request_pool.0);
        let mut topic_data = std::mem::take(&mut pool.list);
        let mut current: Option<(usize, TopicProduceData)> = None;
        let mut refs: SmallVec<[BatchRef; 4]> = SmallVec::new();
        for (ti, pi, batch, wire) in picked {
            self.stats.0.batch_bytes_sent += wire.len() as u64;
            if current.as_ref().is_none_or(|c| c.0 != ti) {
                if let Some((_, done)) = current.take() {
                    pool.put(&mut topic_data, done);
                }
                current = Some((ti, pool.take(&self.topics[ti].name)));
            }
            let parts = &mut current.as_mut().expect("just set").1.partition_data;
            parts.push(PartitionProduceData {
                index: pi as i32,
                records: Some(wire),
            });
            refs.push(BatchRef {
                topic: ti,
                partition: pi,
                batch,
            });
        }
        if let Some((_, done)) = current.take() {
            pool.put(&mut topic_data, done);
        }
        for r in &refs {
            self.sync(r.topic, r.partition);
        }
        let req = ProduceRequest {
            transactional_id: None,
            acks: self.cfg.acks,
            timeout_ms: self.cfg.request_timeout.as_millis().min(i32::MAX as u128) as i32,
            topic_data,
        };
        let version = self.conns[&conn].versions.produce;
        self.on_batches_sent(conn, &refs);
        if self.cfg.acks == 0 {
            // No answer will come: nothing waits in flight (acks.rs).
            self.transmit_unacknowledged(conn, &req, version, refs, &mut pool.framing);
            pool.recycle(req.topic_data);
            self.request_pool.0 = pool;
            return true;
        }
        let kind = RequestKind::Produce(refs);
        self.transmit_produce(conn, &req, version, kind, &mut pool.framing);
        pool.recycle(req.topic_data);
        self.request_pool.0 = pool;
        true
    }
}

/// Lists, topic names and framing space of earlier Produce requests, kept for the next ones.
#[derive(Clone, Default)]
pub(super) struct RequestPool {
    list: Vec<TopicProduceData>,
    spare: Vec<TopicProduceData>,
    /// Where the requests' framing is written (`ProduceRequest::encode_chunks_into`).
    framing: bytes::BytesMut,
}

/// Sizes only: the framing space holds earlier requests' bytes.
impl std::fmt::Debug for RequestPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RequestPool")
            .field("lists", &(self.list.len(), self.spare.len()))
            .field("framing_capacity", &self.framing.capacity())
            .finish()
    }
}

impl RequestPool {
    /// An empty entry for topic `name`.
    fn take(&mut self, name: &str) -> TopicProduceData {
        let mut t = self.spare.pop().unwrap_or_else(|| TopicProduceData {
            name: String::new(),
            partition_data: Vec::new(),
        });
        t.name.clear();
        t.name.push_str(name);
        t
    }

    /// A finished entry joins the request if it holds a batch.
    fn put(&mut self, list: &mut Vec<TopicProduceData>, t: TopicProduceData) {
        if t.partition_data.is_empty() {
            self.spare.push(t);
        } else {
            list.push(t);
        }
    }

    /// The request was written: its entries (emptied, the batches released) and its list
    /// are kept.
    fn recycle(&mut self, mut list: Vec<TopicProduceData>) {
        for mut t in list.drain(..) {
            t.partition_data.clear();
            self.spare.push(t);
        }
        self.list = list;
    }
}

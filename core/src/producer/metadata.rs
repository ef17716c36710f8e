//! Metadata and leadership: when to ask (a new topic, an error that means the leader moved,
//! a failed connect to a leader, `metadata.max.age.ms`), applying an answer (brokers,
//! partition counts, leaders, stale answers refused by leader epoch, KIP-320), a topic that
//! flaps keeps its partitions and sequence state (P12), unknown topics wait up to
//! `max.block.ms`, and leader moves learned from Produce answers (KIP-951). A partition moves
//! to its new leader only once drained (P7, enforced in `partition.rs`).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::connections::Target;
use super::requests::RequestKind;
use super::Producer;
use crate::partition::{BatchState, Partition};
use crate::protocol::metadata::{MetadataRequest, MetadataRequestTopic};
use crate::protocol::produce::PartitionResult;
use crate::protocol::{self, ErrorCode};

/// More partitions than this in one topic make a metadata answer corrupt (ignored, and asked
/// again): Kafka's own guidance stops far below it (a KRaft cluster of a few million
/// partitions in all), and each partition costs the producer about 200 bytes for its life.
pub(crate) const MAX_PARTITIONS_PER_TOPIC: usize = 1 << 20;

/// The ids of a topic deleted and created again that are remembered (to know an answer
/// naming one for a lagging broker's).
const MAX_RETIRED_IDS: usize = 8;
use crate::types::{ConnId, DeliveryError, Persistence};

#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub(super) struct MetadataState {
    pub(super) in_flight: bool,
    pub(super) needed: bool,
    /// The last answer, or request lost: what paces the next request.
    pub(super) last_refresh: Option<Instant>,
    /// The last answer (or request lost) of a request naming every topic in use: the
    /// periodic refresh (`metadata.max.age.ms`) counts from it. A partial answer (the new
    /// topics alone) does not postpone it: a producer asking about a missing topic every
    /// second never refreshed the others, and a topic's added partitions went unseen (a
    /// review finding, 2026-12-07; Java's `lastSuccessfulRefreshMs` moves only on full
    /// updates too).
    pub(super) full_refresh: Option<Instant>,
    pub(super) retry_at: Option<Instant>,
    /// The connection whose last answer was incomplete or stale: the next request goes to
    /// another ready connection if there is one, since a lagging broker keeps answering
    /// stale (librdkafka also moves on to another broker).
    pub(super) avoid: Option<ConnId>,
    /// A node that let a request time out and has not answered anything since: a hung broker
    /// (paused, a stalled disk) still completes TCP connects from its kernel, so a request any
    /// broker can answer goes to another node while one is known (the Java client too asks the
    /// cluster's nodes, not a bootstrap connection that may reach the hung one).
    pub(super) hung: Option<i32>,
    /// The address whose last answer was stale (a leader epoch below one already known,
    /// KIP-320, or a retired topic id): a lagging broker. Until an answer that is not stale,
    /// a Metadata request goes to a node at another address while one is known, a connection opened
    /// to it if need be (`metadata_conn`): every ready connection may reach the lagging broker
    /// (its node's and a bootstrap one), and `avoid` alone then alternated between them for
    /// ever (a review finding).
    pub(super) lagging: Option<Arc<str>>,
    /// When the next sweep for idle topics is due (`metadata.max.idle.ms`), once a request
    /// has scheduled one.
    pub(super) idle_sweep_at: Option<Instant>,
    /// Incomplete answers in a row that changed nothing (no leader, leader epoch, partition
    /// count, topic error or broker address moved): each doubles the wait before the next
    /// request, from `retry.backoff.ms` up to `retry.backoff.max.ms`, so a partition that stays
    /// leaderless (or a topic that stays missing while records wait) is not polled every
    /// `retry.backoff.ms` for as long as it lasts. Any change, or a complete answer, starts
    /// over (the Java client's rule for equivalent answers, KIP-951). Not raised once the wait
    /// has reached the maximum, so it stays 0 when the two settings are equal.
    pub(super) unchanged: u32,
    /// When the first connect failure or request timeout since the last answer came: from
    /// then the known brokers may be out of reach
    /// (`ProducerConfig::metadata_recovery_rebootstrap_trigger`, counted from it, as Java
    /// counts from its first attempt that found no broker; kept only when that is set). A
    /// producer merely idle, its connections closed, dials its known brokers again, not the
    /// bootstrap servers.
    pub(super) failing_since: Option<Instant>,
    /// The next request must name every topic in use: something wants fresh metadata about
    /// a topic already described (a refusal, a lost connection, an incomplete answer), not
    /// only about topics no answer has described yet. Kept only once a topic has been
    /// described (`Topic::described`).
    pub(super) full: bool,
    /// The request in flight names only the topics no answer has described yet (Java's
    /// partial update for new topics): its answer leaves the others as they are.
    pub(super) partial: bool,
}

impl Producer {
    /// Another metadata request after the backoff, which doubles with each answer in a row
    /// that changed nothing (`MetadataState::unchanged`), from `retry.backoff.ms` up to
    /// `retry.backoff.max.ms`; a change starts it over.
    /// `partial`: the request named the new topics alone (it does not move the periodic
    /// refresh).
    pub(super) fn metadata_again_after_backoff(&mut self, changed: bool, partial: bool) {
        let n = if changed { 0 } else { self.metadata.unchanged };
        let max = self.cfg.retry_backoff_max;
        let delay = super::backoff_delay(self.cfg.retry_backoff, max, n);
        self.metadata.unchanged = if delay < max { n.saturating_add(1) } else { n };
        let delay = self.backoff(self.cfg.retry_backoff, max, n, super::BackoffFor::Metadata);
        self.metadata.needed = true;
        self.metadata.retry_at = Some(self.now + delay);
        // This attempt (an answer that changed nothing, or a request lost or unusable) is the
        // last one: a later need for fresh metadata (`want_fresh_metadata`) goes no sooner
        // than `retry.backoff.ms` after it, as Java's `failedUpdate` sets `lastRefreshMs`.
        // Before, that need brought the request forward to the backoff after the last
        // *answer*, long past, so a fault losing every Metadata request lost one per trigger
        // (a review finding).
        self.metadata.last_refresh = Some(self.now);
        if !partial {
            self.metadata.full_refresh = Some(self.now);
        }
    }

    /// A metadata answer on `conn` that could not be decoded (its connection is closed): as
    /// an answer that changed nothing, the next request waits for the backoff and goes to
    /// another connection if one is ready (Java's `Metadata.failedUpdate` backs off too).
    /// Before, it was asked again at once, on the next ready connection: a broker (or every
    /// broker) answering so had a connection closed, with its Produce requests in flight,
    /// on every answer (a review finding).
    pub(super) fn on_unusable_metadata(&mut self, conn: ConnId) {
        let partial = std::mem::take(&mut self.metadata.partial);
        self.need_metadata_after(partial);
        self.metadata_again_after_backoff(false, partial);
        self.metadata.avoid = Some(conn);
    }

    /// When the bootstrap servers are dialled again: `metadata.recovery.rebootstrap.trigger.ms`
    /// after the first connect failure or request timeout since the last metadata answer,
    /// while no connection is ready to ask and none to a bootstrap server is being set up;
    /// `None` when that does not apply.
    pub(super) fn rebootstrap_at(&self) -> Option<Instant> {
        let trigger = self.cfg.metadata_recovery_rebootstrap_trigger?;
        let since = self.metadata.failing_since?;
        let ready_or_bootstrapping = self.conns.values().any(|c| {
            c.state == super::connections::ConnState::Ready
                || matches!(c.target, Target::Bootstrap(_))
        });
        if ready_or_bootstrapping || self.topics.is_empty() {
            return None;
        }
        since.checked_add(trigger)
    }

    pub(super) fn metadata_wanted(&self) -> bool {
        if self.topics.is_empty() {
            return false;
        }
        if self.metadata.needed {
            return true;
        }
        match self.metadata.full_refresh {
            None => true,
            Some(t) => t + self.refresh_period() <= self.now,
        }
    }

    /// How long an answer stays fresh: `metadata.max.age.ms`, but never less than
    /// `retry.backoff.ms` (Java's floor too) nor 1 ms: at 0 the producer otherwise asked
    /// again the moment each answer came, thousands of times a second with nothing to send
    /// (and for ever at a clock that does not move).
    pub(super) fn refresh_period(&self) -> Duration {
        (self.cfg.metadata_max_age)
            .max(self.cfg.retry_backoff)
            .max(Duration::from_millis(1))
    }

    /// Metadata is wanted for something new (a topic named for the first time or back from
    /// idleness, a refusal or a lost connection that says a leader moved): the backoff that
    /// answers telling nothing new grew is not this request's, so it starts over, and the
    /// request goes no later than `retry.backoff.ms` after the last answer. (Needs that
    /// recur without news, such as a partition still leaderless, keep the grown backoff.)
    pub(super) fn want_fresh_metadata(&mut self) {
        self.need_metadata(None);
        self.restart_metadata_backoff();
    }

    /// [`Self::want_fresh_metadata`] for a topic named for the first time: only it needs
    /// describing, so the request may name the new topics alone (Java's
    /// `requestUpdateForNewTopics`). Before (a review finding, 2026-12-06), every request
    /// named every topic in use, so a producer adding topics one by one asked about 1, 2,
    /// ..., n topics: quadratic in the number of topics on the wire and in the work of each
    /// answer.
    pub(super) fn want_metadata_for_new_topic(&mut self) {
        self.metadata.needed = true;
        self.restart_metadata_backoff();
    }

    /// Metadata is wanted about topic `ti` (or, `None`, about anything): the next request
    /// names every topic in use unless `ti` is still undescribed.
    pub(super) fn need_metadata(&mut self, ti: Option<usize>) {
        self.metadata.needed = true;
        let described = match ti {
            Some(ti) => self.topics[ti].described(),
            None => self.topics.iter().any(|t| t.described()),
        };
        self.metadata.full |= described;
    }

    /// A request lost, or an answer unusable or incomplete: the next one names every topic
    /// unless this one was partial.
    pub(super) fn need_metadata_after(&mut self, partial: bool) {
        if partial {
            self.metadata.needed = true;
        } else {
            self.need_metadata(None);
        }
    }

    fn restart_metadata_backoff(&mut self) {
        self.metadata.unchanged = 0;
        if let (Some(at), Some(last)) = (self.metadata.retry_at, self.metadata.last_refresh) {
            self.metadata.retry_at = Some(at.min(last + self.cfg.retry_backoff));
        }
    }

    pub(super) fn maybe_request_metadata(&mut self) {
        if self.metadata.in_flight || !self.metadata_wanted() {
            return;
        }
        if self.metadata.retry_at.is_some_and(|t| t > self.now) {
            return;
        }
        if self.rebootstrap_at().is_some_and(|t| t <= self.now) {
            self.open_bootstrap();
        }
        let Some(conn) = self.metadata_conn(self.metadata.avoid) else {
            return;
        };
        let version = self.conns[&conn].versions.metadata;
        self.sweep_idle_topics();
        // Only the topics no answer has described yet, when nothing else is wanted and the
        // periodic refresh is not due (and they are not all there is).
        let periodic =
            (self.metadata.full_refresh).is_none_or(|t| t + self.refresh_period() <= self.now);
        let in_use = || self.topics.iter().filter(|t| !t.idle);
        let partial = !self.metadata.full
            && !periodic
            && in_use().any(|t| !t.described())
            && in_use().any(|t| t.described());
        let req = MetadataRequest {
            topics: Some(
                in_use()
                    .filter(|t| !partial || !t.described())
                    .map(|t| MetadataRequestTopic {
                        topic_id: [0; 16],
                        name: Some(t.name.to_string()),
                    })
                    .collect(),
            ),
            allow_auto_topic_creation: self.cfg.allow_auto_topic_creation,
            include_cluster_authorized_operations: false,
            include_topic_authorized_operations: false,
        };
        self.metadata.in_flight = true;
        self.metadata.needed = false;
        self.metadata.full = false;
        self.metadata.partial = partial;
        self.stats.0.metadata_requests += 1;
        self.transmit(conn, &req, version, RequestKind::Metadata);
    }

    /// `metadata.max.idle.ms`, swept when a metadata request is built: a topic not sent to
    /// since the last sweep, holding no record, is left out of requests from now on (until
    /// its next record); every other topic starts a new period.
    fn sweep_idle_topics(&mut self) {
        let Some(period) = self.cfg.metadata_max_idle else {
            return;
        };
        match self.metadata.idle_sweep_at {
            Some(at) if at > self.now => return,
            Some(_) => {
                for t in &mut self.topics {
                    let holds = t.holds_records();
                    if !t.used && !holds {
                        t.idle = true;
                        t.retired_named = None;
                        // Nothing waits in it: the room its queues grew goes back to the
                        // allocator (a producer writing to ever-new topic names kept about
                        // 1.6 kB per topic it had used once).
                        t.pending.shrink_to_fit();
                        t.partitions
                            .iter_mut()
                            .for_each(|p| p.batches.shrink_to_fit());
                    } else {
                        // A topic in use gives back the room a backlog grew its partitions'
                        // queues to (an outage's thousands of batches, 260 B a slot), which
                        // it kept for the producer's life (a review finding).
                        for p in &mut t.partitions {
                            let keep = 2 * p.batches.len().max(8);
                            if p.batches.capacity() > 2 * keep {
                                p.batches.shrink_to(keep);
                            }
                        }
                    }
                    t.used = holds;
                }
            }
            None => {}
        }
        self.metadata.idle_sweep_at = self.now.checked_add(period);
    }

    /// Whether metadata answer `m` comes from a broker that lags behind what the producer
    /// knows: it names a retired id of a topic (one deleted and created again), or gives a
    /// partition of a topic under the same id a leader epoch below the one known (KIP-320).
    fn answer_lags(&self, m: &protocol::metadata::MetadataResponse) -> bool {
        m.topics.iter().any(|t| {
            let Some(topic) = (t.name.as_deref())
                .and_then(|n| self.topic_index.get(n))
                .map(|&ti| &self.topics[ti])
            else {
                return false;
            };
            if topic.retired.contains(&t.topic_id) {
                return true;
            }
            let same = t.topic_id == [0; 16] || topic.id == [0; 16] || t.topic_id == topic.id;
            same && t.partitions.iter().any(|mp| {
                usize::try_from(mp.partition_index)
                    .ok()
                    .and_then(|i| topic.partitions.get(i))
                    .is_some_and(|p| mp.leader_epoch >= 0 && mp.leader_epoch < p.leader_epoch)
            })
        })
    }

    pub(super) fn on_metadata(&mut self, conn: ConnId, m: protocol::metadata::MetadataResponse) {
        // Something asked for fresh metadata since this request went out (a new topic, one
        // back from idleness): the next request goes at once.
        let wanted_again = self.metadata.needed;
        let partial = std::mem::take(&mut self.metadata.partial);
        // Every answer paces the next request (a partial one too: a topic asked about again
        // and again while it is created must not be asked at the speed of the network);
        // only an answer naming every topic postpones the periodic refresh (`full_refresh`).
        self.metadata.last_refresh = Some(self.now);
        if !partial {
            self.metadata.full_refresh = Some(self.now);
        }
        self.metadata.failing_since = None;
        self.metadata.retry_at = None;
        // The brokers the answer lists, each at its (new) address. An entry without a usable
        // address (a host with characters Kafka never lets a listener advertise, `usable_host`,
        // or a port outside 1..=65535) is left out rather than dialled, and a node listed twice keeps
        // its first address. Known nodes the answer leaves out are dropped once the answer
        // is taken in (below), unless a partition still names them as its leader.
        let mut listed: BTreeMap<i32, Arc<str>> = BTreeMap::new();
        // Whether the answer told anything new (for the backoff after an incomplete one).
        let mut changed = false;
        for b in &m.brokers {
            let usable = usable_host(&b.host) && (1..=65535).contains(&b.port);
            if usable {
                (listed.entry(b.node_id))
                    .or_insert_with(|| Arc::from(format!("{}:{}", b.host, b.port).as_str()));
            }
        }
        // A lagging broker's answer (one it refuses below as stale) may also list a node at an
        // address the node has since left: known nodes keep theirs, so that a working
        // connection is not closed for it (its Produce requests in flight then possibly
        // persisted) and opened at the old address, and again at the next good answer (a
        // review finding: answers alternating between a lagging broker and a good one did
        // so about once a second). New nodes are still learned.
        let lags = self.answer_lags(&m);
        if lags {
            listed.retain(|id, _| !self.brokers.contains_key(id));
        }
        if !listed.is_empty() {
            // A node that moved (a new host or port under its id): its connection reaches
            // whatever now listens at the old address, so it goes, and the next one goes to
            // the new address.
            let moved: Vec<ConnId> = (listed.iter())
                .filter_map(|(id, addr)| {
                    (self.node_conns.get(id))
                        .filter(|c| self.conns.get(c).is_some_and(|c| &c.addr != addr))
                        .copied()
                })
                .collect();
            let mut readdressed: smallvec::SmallVec<[i32; 4]> = smallvec::SmallVec::new();
            for (id, addr) in &listed {
                let old = self.brokers.insert(*id, addr.clone());
                changed |= old.as_ref() != Some(addr);
                if old.is_some_and(|old| old != *addr) {
                    readdressed.push(*id);
                }
            }
            for conn in moved {
                self.close_conn(conn, super::connections::MOVED);
            }
            // The connects that failed were to the old address: the new one is tried at
            // once, without their backoff (a review finding: it waited up to
            // `retry.backoff.max.ms` after failures at the old address).
            for id in readdressed {
                self.backoff.remove(&Target::Node(id));
            }
        }
        let mut incomplete = false;
        let mut answered = vec![false; self.topics.len()];
        for t in m.topics {
            let Some(name) = t.name else { continue };
            let Some(&ti) = self.topic_index.get(name.as_str()) else {
                continue;
            };
            answered[ti] = true;
            // Any answer about the topic that does not list fewer partitions breaks the run.
            let fewer_since = self.topics[ti].fewer_since.take();
            let code = ErrorCode::from_i16(t.error_code);
            if !code.is_ok() {
                // Asked again after the backoff only while records wait for the topic: one
                // that is gone and no longer used is left to the periodic refresh, not polled
                // every `retry.backoff.ms` for the producer's life.
                incomplete |= self.topics[ti].holds_records();
                // P12: a flapping topic keeps its partitions and their sequence state.
                if code.refuses_the_topic() {
                    while let Some(p) = self.pop_pending(ti) {
                        self.resolve_pending(p, DeliveryError::UnknownTopic(code));
                    }
                }
                // An unknown topic may be a flap or still being created: its records wait up
                // to `max.block.ms` (see `expire_deliveries`).
                let now = self.now;
                let topic = &mut self.topics[ti];
                changed |= topic.missing != Some(code);
                topic.missing = Some(code);
                topic.missing_since.get_or_insert(now);
                if code == ErrorCode::UnknownTopicOrPartition && topic.id == [0; 16] {
                    topic.gone_without_id = true;
                    topic.lower_epochs_since = None;
                }
                // Not an answer naming a retired id: a take-back needs them unbroken.
                topic.retired_named = None;
                continue;
            }
            // A partition listed twice makes the answer corrupt (the partition count is the
            // length of the list): ignored, and asked again.
            // So is a topic of more partitions than any Kafka cluster holds: a few bytes each
            // on the wire, it would otherwise make the producer keep a table of millions of
            // partitions (about 200 bytes each) for its life.
            if t.partitions.len() > MAX_PARTITIONS_PER_TOPIC {
                incomplete = true;
                self.topics[ti].retired_named = None;
                continue;
            }
            let mut indexes: Vec<i32> = t.partitions.iter().map(|p| p.partition_index).collect();
            indexes.sort_unstable();
            if indexes.windows(2).any(|w| w[0] == w[1]) {
                incomplete = true;
                self.topics[ti].retired_named = None;
                continue;
            }
            let (now, settle) = (self.now, self.cfg.retry_backoff_max);
            let topic = &mut self.topics[ti];
            changed |= topic.missing.is_some();
            topic.missing = None;
            topic.missing_since = None;
            // An earlier topic of this name: the answer comes from a broker that has not yet
            // learned of the new one, and is stale ...
            if topic.retired.contains(&t.topic_id) {
                // A break in the answers naming the new id: its old partitions beyond the
                // count are not given up yet.
                if topic.beyond_gone_since.is_some() {
                    topic.beyond_gone_since = Some(now);
                }
                if !settled(&mut topic.retired_named, now, settle) {
                    incomplete = true; // ask another connection
                    continue;
                }
                // ... unless every answer has named it for `retry.backoff.max.ms`: then the
                // answer that retired it was the lagging one (ids carry no order: a lagging
                // broker's old id can arrive after the new one). Taken back, and the id it
                // replaced is retired in turn, below; else the topic would be stuck for the
                // producer's life. (While answers keep alternating between the two ids, the
                // one taken first stays: until the lagging broker catches up.)
                topic.retired.retain(|id| *id != t.topic_id);
            }
            topic.retired_named = None;
            topic.stale = false;
            // A topic deleted and created again under its name (a new id) starts over: its
            // leader epochs restart from 0, so the old ones must not make every answer look
            // stale (KIP-320), and its partitions hold no state for this producer, so each
            // rebases (a new epoch, sequences from 0) once drained.
            let recreated = t.topic_id != [0; 16] && topic.id != [0; 16] && topic.id != t.topic_id;
            let idempotent = self.cfg.enable_idempotence;
            if recreated {
                // The last few are enough to know a lagging broker's answer: a broker naming
                // a new id in every answer must not grow the list for ever.
                if topic.retired.len() >= MAX_RETIRED_IDS {
                    topic.retired.remove(0);
                }
                topic.retired.push(topic.id);
            }
            if t.topic_id != [0; 16] {
                topic.id = t.topic_id;
            }
            if recreated {
                for p in &mut topic.partitions {
                    p.leader_epoch = -1;
                    p.stale_leader = false;
                    p.old_topic_in_flight = p.inflight() > 0;
                    // Without idempotence there is no producer id to rebase under (no epoch
                    // to bump), and the broker keeps no sequences: marked, a partition
                    // never sent again (a review finding).
                    if p.bound.is_some() && idempotent {
                        p.needs_rebase = true;
                    }
                }
            }
            // A topic's partitions are numbered 0..n and a response lists all n of them: an
            // index at or beyond the number listed is corrupt and is ignored, so a hostile
            // index cannot make the producer allocate (or overflow computing) a huge table.
            let count = t.partitions.len();
            if count > topic.partitions.len() {
                topic.partitions.resize_with(count, Partition::default);
            }
            // Kafka never takes partitions away: fewer from the same topic is an answer from
            // a broker that has not yet learned of partitions added. It is not believed at
            // once (the answer counts as incomplete: the next request goes to another broker
            // after the backoff), only once every answer has said so for
            // `retry.backoff.max.ms` (one answer that listed too many must not spread records
            // over partitions that do not exist for the producer's life). Then the partitions
            // beyond the count take no new record, and their batches wait for a leader (the
            // count may grow back) or their delivery timeout, as the Java client's do. A
            // topic created again (a new id) with fewer is believed at once, and the batches
            // of its old partitions beyond the count fail below (that partition is gone) once
            // answers have kept naming the new id for `retry.backoff.max.ms`.
            let fewer = !recreated && count > 0 && count < topic.count;
            topic.fewer_since = fewer_since;
            let settled_fewer = fewer && settled(&mut topic.fewer_since, now, settle);
            if !fewer || settled_fewer {
                topic.fewer_since = None;
            }
            incomplete |= fewer && !settled_fewer;
            let shrunk = (recreated || settled_fewer) && count < topic.partitions.len();
            if shrunk {
                topic.beyond_gone_since = recreated.then_some(now);
            }
            if shrunk || count > topic.count {
                changed |= topic.count != count;
                topic.count = count;
            }
            changed |= recreated;
            // Without topic ids, a topic reported gone may have been deleted and created
            // again, its leader epochs starting over from 0 (else its answers would look stale
            // for the producer's life); or the broker that said so had not yet learned of it,
            // and the next answer comes from one that lags. Lower epochs after such an answer
            // are believed only once answers keep reporting them, without a break, for
            // `retry.backoff.max.ms`: then every partition's epochs start over.
            // The same once a leader refused the partition (NOT_LEADER_OR_FOLLOWER): a broker
            // that still knows the deleted topic refuses so rather than saying it is gone,
            // and no answer may ever say so (Kafka 2.4–2.7 give epochs without ids; before,
            // the partition waited for a leader for the producer's life, a review finding).
            let refused = topic.id == [0; 16] && topic.partitions.iter().any(|p| p.stale_leader);
            if topic.gone_without_id || refused {
                let lower = t.partitions.iter().any(|mp| {
                    (usize::try_from(mp.partition_index).ok())
                        .and_then(|i| topic.partitions.get(i))
                        .is_some_and(|p| mp.leader_epoch >= 0 && mp.leader_epoch < p.leader_epoch)
                });
                let confirmed = lower
                    && topic.id == [0; 16]
                    && settled(&mut topic.lower_epochs_since, now, settle);
                if confirmed {
                    for p in &mut topic.partitions {
                        p.leader_epoch = -1;
                    }
                }
                if !lower || confirmed || topic.id != [0; 16] {
                    topic.gone_without_id = false;
                    topic.lower_epochs_since = None;
                }
            }
            let (listed_count, count) = (count, topic.count);
            for mp in &t.partitions {
                let Some(p) = usize::try_from(mp.partition_index)
                    .ok()
                    .filter(|i| *i < count && *i < listed_count)
                    .and_then(|i| topic.partitions.get_mut(i))
                else {
                    incomplete = true;
                    continue;
                };
                if mp.leader_epoch >= 0 && mp.leader_epoch < p.leader_epoch {
                    incomplete = true; // stale metadata (KIP-320): ask again
                    continue;
                }
                // A leader the answer does not list among the brokers (nor any earlier one):
                // no address to connect to, and its epoch is not believed either, since every
                // later answer would look stale beside it if it is wrong. No leader until an
                // answer names one the producer can reach; asked again after the backoff.
                if mp.leader_id >= 0 && !self.brokers.contains_key(&mp.leader_id) {
                    changed |= p.leader.is_some();
                    p.leader = None;
                    incomplete = true;
                    continue;
                }
                let was = (p.leader, p.leader_epoch);
                p.leader_epoch = mp.leader_epoch.max(p.leader_epoch);
                p.stale_leader = false;
                p.leader = (mp.leader_id >= 0).then_some(mp.leader_id);
                if was != (p.leader, p.leader_epoch) {
                    changed = true;
                    // A new leader epoch (known, higher): the retries go without their
                    // backoff. Not on a node change alone (brokers before 2.1 give no
                    // epoch): a lagging broker flipping the leader back and forth would have
                    // them sent at the pace of metadata answers (Java needs an epoch too).
                    if p.leader.is_some() && was.1 >= 0 && p.leader_epoch > was.1 {
                        p.skip_retry_backoff(now);
                    }
                }
                // No leader, or one the answer did not list among the brokers (no address to
                // connect to): ask again after the backoff.
                if p.leader.is_none_or(|l| !self.brokers.contains_key(&l)) {
                    incomplete = true;
                }
            }
            // A partition the response left out (or left leaderless) is retried after the
            // backoff, not at once; so is a topic listed without partitions while records
            // wait for it (nothing else would ask again before `metadata.max.age.ms`).
            if topic.partitions[..count].iter().any(|p| p.leader.is_none())
                || (count == 0 && topic.holds_records())
            {
                incomplete = true;
            }
            // Partitions of a deleted topic beyond the new one's count have no leader any
            // more: nothing is sent to them, and their batches fail once the new id is
            // settled (an attempt in flight fails at the next answer after its own; answers
            // are asked for after the backoff while such batches wait). Should
            // the topic grow back, they start with no leader epoch.
            for p in &mut topic.partitions[count..] {
                p.leader = None;
                p.leader_epoch = -1;
                p.stale_leader = false;
            }
            let adaptive = self.cfg.adaptive_partitioning;
            self.topics[ti].sticky_to_a_leader(adaptive);
            for pi in 0..self.topics[ti].partitions.len() {
                if recreated {
                    self.request_bump_for(ti, pi);
                }
                if pi >= count {
                    let gone = self.topics[ti].beyond_gone_since;
                    if gone.is_some_and(|t| self.now >= t + self.cfg.retry_backoff_max) {
                        self.fail_beyond_count(ti, pi);
                    }
                    // A batch still in flight there: its answer comes, then the next
                    // metadata answer fails it; asked for after the backoff, not at once.
                    if !self.topics[ti].partitions[pi].batches.is_empty() {
                        incomplete = true;
                    }
                }
                self.sync(ti, pi);
            }
            self.route_pending(ti);
        }
        // A topic in use that the answer left out (Kafka answers every topic asked about, but
        // a partial answer must not leave records waiting until `metadata.max.age.ms`): asked
        // again after the backoff while records wait for it, as a topic listed without
        // partitions is. Not when a request is wanted anyway: a topic named only since this
        // request went out is not held back by the backoff.
        // (A partial request asked only about topics still undescribed.)
        let omitted = !wanted_again
            && (self.topics.iter().zip(&answered)).any(|(t, answered)| {
                !answered && !t.idle && (!partial || !t.described()) && t.holds_records()
            });
        incomplete |= omitted;
        if incomplete {
            self.need_metadata_after(partial);
            self.metadata_again_after_backoff(changed, partial);
        } else {
            self.metadata.unchanged = 0;
        }
        self.metadata.avoid = incomplete.then_some(conn);
        // (Every partition refused above as stale is one `answer_lags` found.)
        self.metadata.lagging = lags
            .then(|| self.conns.get(&conn).map(|c| c.addr.clone()))
            .flatten();
        // A node taken out of the cluster is not tried again: known nodes that the answer
        // does not list go, but not one a partition still names as its leader (an answer
        // from a lagging broker is skipped as stale, and its partitions keep their leaders).
        // Not on a lagging broker's answer, whose list is no authority (and was cut to the
        // nodes not known above: a review of the day's diff found every known node leading
        // nothing forgotten when a lagging answer listed one unknown node).
        if !lags && !listed.is_empty() && self.brokers.len() > listed.len() {
            // Not the leaders of idle topics: nothing refreshes them, and such a topic trusts
            // none of them when it is used again.
            let leaders: std::collections::BTreeSet<i32> = (self.topics.iter())
                .filter(|t| !t.idle)
                .flat_map(|t| t.partitions.iter().filter_map(|p| p.leader))
                .collect();
            (self.brokers).retain(|id, _| listed.contains_key(id) || leaders.contains(id));
            // A node gone from the cluster is no longer one to steer around.
            if self
                .metadata
                .hung
                .is_some_and(|n| !self.brokers.contains_key(&n))
            {
                self.metadata.hung = None;
            }
        }
        // A connection to a node no longer known goes once nothing is in flight on it:
        // nothing will be sent to it again (the Java client closes it as idle later).
        let unlisted: Vec<ConnId> = (self.node_conns.iter())
            .filter(|(n, c)| {
                !self.brokers.contains_key(n)
                    && self.conns.get(c).is_some_and(|c| c.inflight.is_empty())
            })
            .map(|(_, c)| *c)
            .collect();
        for conn in unlisted {
            self.close_conn(conn, super::connections::UNLISTED);
        }
        // Nor is a reconnect backoff kept for a node no longer known, nor where its next
        // request would have started (brokers replaced for days left one entry each).
        (self.backoff).retain(|t, _| match t {
            Target::Node(n) => self.brokers.contains_key(n),
            Target::Bootstrap(_) => true,
        });
        let brokers = &self.brokers;
        self.drain_start.retain(|n, _| brokers.contains_key(n));
        self.linger_start.retain(|n, _| brokers.contains_key(n));
    }

    /// Partition `pi` of topic `ti` no longer exists (the topic was created again with fewer
    /// partitions): its batches not in flight fail, `UnknownPartition`, possibly persisted
    /// if an attempt went unanswered (in the deleted topic's log, if anywhere).
    fn fail_beyond_count(&mut self, ti: usize, pi: usize) {
        let mut i = 0;
        while let Some(b) = self.topics[ti].partitions[pi].batches.get(i) {
            if b.state == BatchState::InFlight {
                i += 1;
                continue;
            }
            let error = DeliveryError::UnknownPartition {
                count: self.topics[ti].count,
            };
            self.fail_batch(ti, pi, i, error, Persistence::NotPersisted);
        }
    }

    /// What a Produce answer for partition `pi` of topic `ti` says about leadership: an error
    /// that means the leader moved makes the partition wait for fresh metadata, and a newer
    /// leader named in the answer (KIP-951) is as good as fresh metadata. Whether it changed
    /// the partition: the caller brings the indexes up to date.
    #[must_use]
    pub(super) fn learn_leadership_from_produce(
        &mut self,
        ti: usize,
        pi: usize,
        code: ErrorCode,
        pr: &PartitionResult,
    ) -> bool {
        let mut changed = false;
        if code.needs_metadata_refresh() {
            self.want_fresh_metadata();
            self.topics[ti].partitions[pi].stale_leader = true;
            changed = true;
        }
        // A partition of a deleted topic beyond the new one's count has no leader, whatever
        // the old topic's leader says; nor does the answer to a batch sent to the old topic
        // say anything of the new one's leaders.
        let gone =
            pi >= self.topics[ti].count || self.topics[ti].partitions[pi].old_topic_in_flight;
        if let (Some(l), false) = (pr.current_leader, gone) {
            // KIP-951: a newer leader named in the response is as good as fresh metadata, if
            // it is a broker the producer knows (as the Java client, which also takes the
            // answer's new endpoints; kprod leaves a new broker to the metadata answer). A
            // node nobody lists has no address, and its higher epoch would have every later
            // metadata answer taken for stale: the partition would never send again.
            let known = l.leader_id >= 0 && self.brokers.contains_key(&l.leader_id);
            let p = &mut self.topics[ti].partitions[pi];
            if known && l.leader_epoch > p.leader_epoch {
                p.leader = Some(l.leader_id);
                p.leader_epoch = l.leader_epoch;
                p.stale_leader = false;
                changed = true;
            } else if known
                && l.leader_epoch >= 0
                && l.leader_epoch == p.leader_epoch
                && p.leader == Some(l.leader_id)
                && code.needs_metadata_refresh()
            {
                // The same hint again (a later batch's answer from the old leader): the
                // partition already follows it, so it stays sendable (a review finding: it
                // was marked stale again and waited for a metadata answer, so with several
                // batches in flight the hint saved nothing).
                p.stale_leader = false;
            }
        }
        changed
    }
}

/// Whether a broker's advertised host may be dialled: not empty, and only the characters
/// Kafka lets a listener advertise (`[0-9a-zA-Z-%._:]`, so names, IPv4 and IPv6 with a zone),
/// brackets allowed around an IPv6 address. Anything else (`bad!host`, `broker/1`, a space)
/// could never resolve. (Under TLS the driver also checks that the host can be a server name:
/// a broker that cannot is a connect that fails, not a configuration error.)
fn usable_host(host: &str) -> bool {
    let bare = (host.strip_prefix('['))
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    !bare.is_empty() && (bare.bytes()).all(|c| c.is_ascii_alphanumeric() || b"-%._:".contains(&c))
}

/// Whether answers saying the same thing since `since` (started now if unset) have kept
/// saying it for `settle`: what makes the producer believe an answer that contradicts what
/// it knows (a retired topic id named again, lower leader epochs without topic ids). The
/// caller resets `since` at any answer that breaks the run.
fn settled(since: &mut Option<Instant>, now: Instant, settle: Duration) -> bool {
    now >= *since.get_or_insert(now) + settle
}

#[cfg(test)]
mod tests {
    use super::usable_host;

    #[test]
    fn advertised_hosts_that_can_be_dialled() {
        for h in [
            "b1",
            "broker-1.kafka.svc.cluster.local",
            "kafka_broker_1",
            "Kafka1.Example.COM.",
            "lead-",
            "127.0.0.1",
            "::1",
            "[fe80::1]",
            "fe80::1%eth0",
            "2001:db8::7",
        ] {
            assert!(usable_host(h), "{h}");
        }
        for h in [
            "",
            "[]",
            "bad!host",
            "broker/1",
            "*.example",
            "h@st",
            "a b",
            "b\n1",
            "é",
        ] {
            assert!(!usable_host(h), "{h:?}");
        }
    }
}

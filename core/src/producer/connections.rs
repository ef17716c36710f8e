//! Connections: their states (`Connecting` → `Negotiating` (ApiVersions, KIP-511 fallback,
//! version negotiation) → [`Authenticating`, SASL in `auth.rs`] → `Ready`), which broker to
//! open for a request any broker can answer (a known node, else the bootstrap servers in
//! turn),
//! connections to partition leaders, reconnect backoff, request timeouts that close the
//! connection (P8), and what a lost connection means: every Produce attempt on it may have
//! been written, so its batches go back for a byte-identical retry as possibly persisted
//! (P2, P10), and a leader that cannot be reached triggers a metadata refresh.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use smallvec::SmallVec;

use super::requests::{InFlight, RequestKind};
use super::{auth, BackoffFor, Producer};
use crate::protocol::api_versions::{ApiVersionsRequest, ApiVersionsResponse};
use crate::protocol::compression::CompressionType;
use crate::protocol::{
    self, api_key, decode_response, ErrorCode, FrameDecoder, Message, VersionRange,
};
use crate::types::{ConnId, Diagnostic, FatalError, Output};

/// Why a connection to a node that moved to a new address is closed.
pub(super) const MOVED: &str = "broker address changed";

/// Why a connection to a node that metadata no longer lists is closed.
pub(super) const UNLISTED: &str = "broker no longer listed";

/// Why a connection the driver reports lost (`handle_disconnected`) is dropped.
pub(super) const DISCONNECTED: &str = "disconnected";

/// Why a connection whose connect failed (`handle_connect_failed`) is dropped.
pub(super) const CONNECT_FAILED: &str = Diagnostic::CONNECT_FAILED;

/// Why a connection whose handshake failed for good is closed.
pub(super) const HANDSHAKE_FAILED: &str = "handshake failed";

/// Why a connection whose oldest request went unanswered for `request.timeout.ms` is closed.
pub(super) const REQUEST_TIMEOUT: &str = "request timeout";

/// Why a ready connection with nothing in flight and no traffic for
/// `connections.max.idle.ms` is closed.
pub(super) const IDLE: &str = Diagnostic::IDLE_CLOSE;

/// Which broker a connection goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(super) enum Target {
    Bootstrap(usize),
    Node(i32),
}

impl Target {
    /// The broker node it reaches, if known (`None`: a bootstrap server).
    pub(super) fn node(self) -> Option<i32> {
        match self {
            Target::Node(n) => Some(n),
            Target::Bootstrap(_) => None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum ConnState {
    Connecting,
    Negotiating,
    /// SASL: after ApiVersions, before anything else (`auth.rs`).
    Authenticating,
    /// SASL re-authentication (KIP-368): no new request is written meanwhile.
    Reauthenticating,
    Ready,
}

/// The versions a connection speaks (chosen by [`protocol::negotiate_versions`] under
/// [`crate::ProducerConfig::max_versions`]).
pub(super) type Versions = protocol::NegotiatedVersions;

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) struct Conn {
    pub(super) target: Target,
    pub(super) addr: Arc<str>,
    pub(super) state: ConnState,
    pub(super) versions: Versions,
    pub(super) inflight: VecDeque<InFlight>,
    pub(super) decoder: FrameDecoder,
    pub(super) sasl: Option<auth::SaslConn>,
    /// While `Connecting`: when the connect counts as failed (`connect_timeout`, grown
    /// after failures in a row up to `connect_timeout_max`).
    pub(super) connect_deadline: Option<Instant>,
    /// While `Connecting`: when the connect began.
    pub(super) connect_started: Option<Instant>,
    /// The first and last correlation ids of the `acks=0` Produce requests written on this
    /// connection (`acks.rs`): a frame answering one is dropped, not a protocol error.
    pub(super) unacknowledged: Option<(i32, i32)>,
    /// The broker throttled this client (KIP-219, Produce v6+): no Produce request goes on
    /// this connection before then. The broker mutes the connection meanwhile; what is
    /// written would only wait in its socket, with its request timeout running.
    pub(super) throttled_until: Option<Instant>,
    /// When a request was last written or bytes last read here, kept only with
    /// `connections.max.idle.ms` (`None` otherwise, so that the time is no part of the
    /// state when idle connections are never closed).
    pub(super) last_active: Option<Instant>,
    /// The bytes handed to the driver for this connection in all (`Transmit`s), where the
    /// next request's bytes will begin: 0 unless `write_reports` is on.
    pub(super) sent: u64,
}

impl Conn {
    /// `t`, or the end of a broker's throttle (KIP-219) if later: the broker mutes a throttled
    /// connection, so a request's time and the connection's idleness start only then.
    pub(super) fn after_throttle(&self, t: Instant) -> Instant {
        self.throttled_until.map_or(t, |u| u.max(t))
    }

    /// Hands `chunks` to the driver for this connection (`conn`), counting their bytes in
    /// [`Self::sent`] when the driver reports its writes (`counted`: `write_reports`).
    pub(super) fn transmit(
        &mut self,
        out: &mut VecDeque<Output>,
        conn: ConnId,
        chunks: impl IntoIterator<Item = Bytes>,
        counted: bool,
    ) {
        for bytes in chunks {
            if counted {
                self.sent += bytes.len() as u64;
            }
            out.push_back(Output::Transmit { conn, bytes });
        }
    }

    /// Records traffic on the connection, for `connections.max.idle.ms`.
    pub(super) fn touch(&mut self, now: Instant) {
        if self.last_active.is_some() {
            self.last_active = Some(now);
        }
    }

    /// When the connection counts as idle (`connections.max.idle.ms` after its last traffic,
    /// or after the end of a broker's throttle, which would be forgotten with the
    /// connection), if it is ready with nothing in flight: an answer awaited is traffic to
    /// come.
    ///
    /// A connection that carried `acks=0` Produce requests is never idle here: they await no
    /// answer, so the core cannot tell whether the driver has written them yet, and closing
    /// it could lose them or (flushed beside a new connection) reorder them with later ones.
    pub(super) fn idle_deadline(&self, limit: Duration) -> Option<Instant> {
        if self.state != ConnState::Ready
            || !self.inflight.is_empty()
            || self.unacknowledged.is_some()
        {
            return None;
        }
        let last = self.last_active?;
        self.after_throttle(last).checked_add(limit)
    }

    pub(super) fn produce_inflight(&self) -> usize {
        self.inflight
            .iter()
            .filter(|r| matches!(r.kind, RequestKind::Produce(_)))
            .count()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) struct Backoff {
    pub(super) until: Instant,
    pub(super) failures: u32,
    /// What the last handshake that failed for good said (SASL_AUTHENTICATION_FAILED,
    /// UNSUPPORTED_VERSION), kept through the failed connects after it until a handshake
    /// completes: what a batch held back by it reports at its delivery timeout.
    pub(super) refused: Option<ErrorCode>,
}

impl Producer {
    /// The driver reports `conn` established: negotiate versions (ApiVersions).
    pub(super) fn on_connected(&mut self, conn: ConnId) {
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        if c.state != ConnState::Connecting {
            return;
        }
        c.state = ConnState::Negotiating;
        c.connect_deadline = None;
        c.connect_started = None;
        let first = self.cfg.version_caps().first_api_versions();
        self.send_api_versions(conn, first);
    }

    pub(super) fn send_api_versions(&mut self, conn: ConnId, version: i16) {
        let req = ApiVersionsRequest {
            client_software_name: self.cfg.client_software_name.clone(),
            client_software_version: self.cfg.client_software_version.clone(),
        };
        self.transmit(conn, &req, version, RequestKind::ApiVersions(version));
    }

    pub(super) fn open_conn(&mut self, target: Target, addr: Arc<str>) -> ConnId {
        let timeout = self.connect_timeout_for(target);
        let conn = ConnId(self.next_conn);
        self.next_conn += 1;
        self.conns.insert(
            conn,
            Box::new(Conn {
                target,
                addr: addr.clone(),
                state: ConnState::Connecting,
                versions: Versions::default(),
                inflight: VecDeque::new(),
                decoder: FrameDecoder::new(self.cfg.max_frame_size),
                sasl: None,
                connect_deadline: Some(self.now + timeout),
                connect_started: Some(self.now),
                throttled_until: None,
                sent: 0,
                unacknowledged: None,
                last_active: self.cfg.connections_max_idle.map(|_| self.now),
            }),
        );
        if let Target::Node(n) = target {
            self.node_conns.insert(n, conn);
        }
        self.out.push_back(Output::Connect { conn, addr });
        conn
    }

    /// How long a connect to `target` may take (KIP-601): `connect_timeout` at first, doubling
    /// with each failure in a row since its last handshake, up to `connect_timeout_max`
    /// (spread as the backoffs are), so that a broker whose connection setup takes longer
    /// than `connect_timeout` (distant, overloaded, a slow TLS handshake) is still reached.
    fn connect_timeout_for(&self, target: Target) -> Duration {
        let base = self.cfg.connect_timeout;
        let failures = self.backoff.get(&target).map_or(0, |b| b.failures);
        match self.cfg.connect_timeout_max {
            Some(max) if max > base && failures > 0 => {
                self.backoff(base, max, failures, BackoffFor::Connect(target))
            }
            _ => base,
        }
    }

    /// Closes a connection on our side: a failure (request timeout, protocol error, a
    /// handshake refused), its broker moved or gone, or idleness. Idleness asks the driver to
    /// write what it holds first (`flush`), and so does a broker moved or gone under acks=0
    /// with no Produce answer awaited: the records of what the writer holds were reported
    /// sent, and were thrown away with it (a review finding).
    pub(super) fn close_conn(&mut self, conn: ConnId, reason: &'static str) {
        if let Some(c) = self.conns.get(&conn) {
            let unacknowledged = c.unacknowledged.is_some() && c.produce_inflight() == 0;
            let flush =
                reason == IDLE || (unacknowledged && (reason == MOVED || reason == UNLISTED));
            self.out.push_back(Output::Close { conn, flush });
            self.drop_conn(conn, reason);
        }
    }

    /// Forgets a connection and resolves everything that was in flight on it: every Produce
    /// attempt on it may or may not have been written (P8).
    pub(super) fn drop_conn(&mut self, conn: ConnId, reason: &'static str) {
        let Some(c) = self.conns.remove(&conn) else {
            return;
        };
        if self.metadata.avoid == Some(conn) {
            self.metadata.avoid = None;
        }
        if let Target::Node(n) = c.target {
            if self.node_conns.get(&n) == Some(&conn) {
                self.node_conns.remove(&n);
            }
        }
        // A connection closed because its node moved or left the cluster did not fail: its
        // node's new address is not held back.
        // A refused handshake counts as a failure even on a re-authenticating connection,
        // so that repeated refusals back off.
        let failed = (!matches!(c.state, ConnState::Ready | ConnState::Reauthenticating)
            || reason == CONNECT_FAILED
            || reason == HANDSHAKE_FAILED)
            && reason != MOVED
            && reason != UNLISTED;
        // A leader that cannot be reached, or that let a request time out, may no longer
        // lead: ask who does (as the Java client does after a failed connect or a request
        // timeout). A paused or hung leader (SIGSTOP, a stalled disk) still completes TCP
        // connects from its kernel, so waiting for the reconnect to fail would cost a second
        // request timeout. A ready connection merely reset is opened again without asking:
        // if the node is gone the connect fails, and if it no longer leads it says so
        // (NOT_LEADER_OR_FOLLOWER); asking on every reset grew the model's state space by
        // 60 % and more for one saved round trip.
        // Under acks=0 a broker that refuses a request closes the connection instead of
        // answering, so that the client refreshes its metadata (Kafka's KafkaApis).
        let refused_unacknowledged = c.unacknowledged.is_some() && reason == DISCONNECTED;
        if let (Target::Node(n), true) = (
            c.target,
            failed || reason == REQUEST_TIMEOUT || refused_unacknowledged,
        ) {
            // (Under acks=0 the batches left when their bytes were handed over.)
            let leads_something = self.index.0.leads_batches(Some(n)) || refused_unacknowledged;
            if leads_something {
                self.want_fresh_metadata();
            }
        }
        if let (Target::Node(n), REQUEST_TIMEOUT) = (c.target, reason) {
            self.metadata.hung = Some(n);
        }
        if (failed || reason == REQUEST_TIMEOUT)
            && self.cfg.metadata_recovery_rebootstrap_trigger.is_some()
        {
            self.metadata.failing_since.get_or_insert(self.now);
        }
        // A connection closed for idleness is opened again as soon as it is needed.
        if reason != IDLE {
            let failures = (self.backoff.get(&c.target))
                .map_or(0, |b| b.failures)
                .saturating_add(u32::from(failed));
            // Doubling up to `retry.backoff.max.ms`; a `reconnect.backoff.ms` above that is
            // kept as it is, every time: what the user asked for. (The Java client's
            // `ExponentialBackoff` waits its maximum instead, `reconnect.backoff.max.ms`.) It
            // was cut down to the maximum, silently (a review finding).
            let what = match c.target {
                Target::Node(n) => BackoffFor::Node(n),
                Target::Bootstrap(i) => BackoffFor::Bootstrap(i),
            };
            let until = self.now
                + self.backoff(
                    self.cfg.reconnect_backoff,
                    self.cfg
                        .reconnect_backoff_cap()
                        .max(self.cfg.reconnect_backoff),
                    failures.saturating_sub(1),
                    what,
                );
            let refused = (self.backoff.get(&c.target)).and_then(|b| b.refused);
            let entry = Backoff {
                until,
                failures,
                refused,
            };
            self.backoff.insert(c.target, entry);
        }
        if let Target::Bootstrap(i) = c.target {
            // A bootstrap server that lost a request it took (it let it time out, or closed
            // the connection on it) is passed over too, as one that failed: the next connect
            // tries the next server. A half-working server (one that completes the handshake
            // and drops Metadata, or a proxy in front of a dead broker) was dialled again
            // after every backoff, for ever, and a healthy second server never tried (a
            // review finding; Java's `leastLoadedNode` takes the node tried least recently).
            let lost_request = c
                .inflight
                .iter()
                .any(|r| matches!(r.kind, RequestKind::Metadata | RequestKind::InitProducerId));
            if failed || lost_request {
                self.bootstrap_next = (i + 1) % self.cfg.bootstrap_servers.len();
            }
        }
        let mut touched: Vec<(usize, usize)> = Vec::new();
        // What a batch in flight here learns: its request timed out on this side, or the
        // connection was lost.
        let lost = if reason == REQUEST_TIMEOUT {
            ErrorCode::RequestTimedOut
        } else {
            ErrorCode::NetworkException
        };
        for req in c.inflight {
            match req.kind {
                RequestKind::ApiVersions(_)
                | RequestKind::SaslHandshake
                | RequestKind::SaslAuthenticate => {}
                // A request lost with its connection is a failed attempt, asked again after
                // the backoff (Java's `Metadata.failedUpdate`; InitProducerId waits its
                // backoff too), unless the connection closed because its node moved or left
                // (no failure). Before, it went again at once on the next ready connection:
                // a fault resetting whichever connection carried it (a proxy, a broker
                // closing on the request) reset every connection in turn, each with its
                // Produce requests, as fast as they reconnected (a review finding). (An
                // answer already found unusable has scheduled its backoff.)
                RequestKind::Metadata => {
                    self.metadata.in_flight = false;
                    let partial = std::mem::take(&mut self.metadata.partial);
                    self.need_metadata_after(partial);
                    let scheduled = self.metadata.retry_at.is_some_and(|t| t > self.now);
                    if reason != MOVED && reason != UNLISTED && !scheduled {
                        self.metadata_again_after_backoff(false, partial);
                    }
                }
                RequestKind::InitProducerId => {
                    self.pid_request = None;
                    if reason != MOVED && reason != UNLISTED {
                        self.producer_id_request_lost(lost);
                    }
                }
                RequestKind::Produce(refs) => {
                    let from = c.target.node();
                    for r in refs {
                        self.retry_batch(r, lost, true);
                        self.retry_at_once_if_led_elsewhere(r, from);
                        touched.push((r.topic, r.partition));
                    }
                }
            }
        }
        // Only the partitions that had a batch in flight here can name this connection (a
        // partition's `inflight_conn` is set when a batch goes out on it and cleared when its
        // last in-flight batch resolves): no walk over every partition.
        for (ti, pi) in touched {
            let Some(p) = self
                .topics
                .get_mut(ti)
                .and_then(|t| t.partitions.get_mut(pi))
            else {
                continue;
            };
            if p.inflight_conn == Some(conn) {
                p.inflight_conn = None;
                self.sync(ti, pi);
            }
        }
        #[cfg(debug_assertions)]
        for t in &self.topics {
            for p in &t.partitions {
                debug_assert_ne!(
                    p.inflight_conn,
                    Some(conn),
                    "a partition outlived its connection"
                );
            }
        }
        if self.fatal.is_none() {
            self.diag(Diagnostic::Disconnected {
                conn,
                addr: c.addr.clone(),
                node: c.target.node(),
                reason,
            });
        }
        // A bootstrap server unreachable after another refused: the refusal may now be all
        // there is to say.
        if failed && matches!(c.target, Target::Bootstrap(_)) {
            self.stop_if_every_bootstrap_server_failed();
        }
    }

    /// [`Self::any_ready_conn`] while a node is suspected (hung, or lagging): a ready
    /// connection to a node `away` takes (the least busy, never `avoid`, the broker whose
    /// last answer was stale), or `None` while one is set up, opened here if need be (to
    /// such a node without a connection); `None` from this function (no such node known and
    /// reachable) falls back to the usual choice.
    fn conn_away_from(
        &mut self,
        away: impl Fn(i32, &str) -> bool,
        avoid: Option<ConnId>,
    ) -> Option<Option<ConnId>> {
        let elsewhere = |id: &ConnId, c: &Conn| {
            matches!(c.target, Target::Node(n) if away(n, &c.addr)) && Some(*id) != avoid
        };
        if let Some(ready) = self.least_busy(elsewhere) {
            return Some(Some(ready));
        }
        if self.conns.iter().any(|(id, c)| elsewhere(id, c)) {
            return Some(None); // one is being set up
        }
        self.open_to_node(|p, n| {
            !p.node_conns.contains_key(&n) && p.brokers.get(&n).is_some_and(|a| away(n, a))
        })
        .then_some(None)
    }

    /// The ready connection among those `keep` takes: an idle one (nothing in flight) to a
    /// known node first, then an idle one to a bootstrap server, then the one with the fewest
    /// requests in flight, a node's before a bootstrap server's.
    ///
    /// A bootstrap connection reaches a node kprod cannot name, so nothing it learns about
    /// nodes (a hung leader, one the cluster no longer lists) keeps requests off it: as it is
    /// usually idle it won every tie, and a Metadata request went to a broker that had just
    /// paused and hung there for `request.timeout.ms` while another node's connection was
    /// idle (review finding, 2026-12-06). An idle bootstrap connection still goes before a
    /// busy node one: Kafka answers one request of a connection at a time, so a request
    /// behind a node's Produce requests (acks=all, waiting for replication) waits for them
    /// all (the Java client, which asks only nodes metadata lists, prefers a node with
    /// nothing in flight too). A bootstrap connection left unused closes once idle for
    /// `connections.max.idle.ms`.
    fn least_busy(&self, keep: impl Fn(&ConnId, &Conn) -> bool) -> Option<ConnId> {
        (self.conns.iter())
            .filter(|(id, c)| c.state == ConnState::Ready && keep(id, c))
            // A throttled connection (KIP-219) is read again only when its throttle ends.
            .min_by_key(|(_, c)| {
                (
                    c.throttled_until.is_some_and(|t| t > self.now),
                    // A connection that carried acks=0 requests is never seen busy (nothing
                    // awaits an answer there), but its writer may hold up to `buffer.memory`
                    // of them: a Metadata request behind that backlog timed out, and the
                    // close threw away records already reported sent (a review finding).
                    !c.inflight.is_empty() || c.unacknowledged.is_some(),
                    matches!(c.target, Target::Bootstrap(_)),
                    c.inflight.len(),
                )
            })
            .map(|(id, _)| *id)
    }

    /// Opens a connection to the first known node that `keep` takes and that is past its
    /// reconnect backoff; whether there was one.
    fn open_to_node(&mut self, keep: impl Fn(&Self, i32) -> bool) -> bool {
        let node = (self.brokers.iter())
            .find(|(n, _)| keep(self, **n) && self.target_ready(Target::Node(**n)))
            .map(|(n, a)| (*n, a.clone()));
        let Some((n, addr)) = node else {
            return false;
        };
        self.open_conn(Target::Node(n), addr);
        true
    }

    pub(super) fn target_ready(&self, target: Target) -> bool {
        self.backoff
            .get(&target)
            .is_none_or(|b| b.until <= self.now)
    }

    /// A ready connection for a Metadata request: [`Self::any_ready_conn`], but after a stale
    /// answer (`lagging`) one to a node at another address while one is known, a connection
    /// opened to it if need be. (Not for InitProducerId, which a broker with stale metadata
    /// answers as well: it would wait for a new connection.)
    pub(super) fn metadata_conn(&mut self, avoid: Option<ConnId>) -> Option<ConnId> {
        if let (None, Some(lagging)) = (self.metadata.hung, self.metadata.lagging.clone()) {
            if let Some(away) = self.conn_away_from(|_, a| *a != *lagging, avoid) {
                return away;
            }
        }
        self.any_ready_conn(avoid)
    }

    /// A ready connection for a request any broker can answer (the least busy, other than
    /// `avoid` if another is ready), or `None` after arranging one.
    pub(super) fn any_ready_conn(&mut self, avoid: Option<ConnId>) -> Option<ConnId> {
        if let Some(hung) = self.metadata.hung {
            if let Some(away) = self.conn_away_from(|n, _| n != hung, avoid) {
                return away;
            }
        }
        let ready =
            (self.least_busy(|id, _| Some(*id) != avoid)).or_else(|| self.least_busy(|_, _| true));
        if ready.is_some() {
            return ready;
        }
        if !self.conns.is_empty() {
            // One is being set up. A bootstrap server that takes the connection and never
            // answers it would hold everything for `request.timeout.ms`: once every setup
            // has lasted `bootstrap_patience` (`bootstrap_patience_ends`), the next
            // bootstrap server is tried alongside.
            if self
                .bootstrap_patience_ends()
                .is_some_and(|t| t <= self.now)
            {
                self.open_bootstrap();
            }
            return None;
        }
        if self.open_to_node(|_, _| true) {
            return None;
        }
        self.open_bootstrap();
        None
    }

    /// When the bootstrap connections being set up (none ready, no other connection) have
    /// all waited long enough for another bootstrap server to be tried alongside, for their
    /// TCP (and TLS) connect or for their ApiVersions answer: the latest of their connects'
    /// or requests' start plus `bootstrap_patience`. `None` when there is another
    /// connection, a ready one, no other bootstrap server, or no patience set.
    pub(super) fn bootstrap_patience_ends(&self) -> Option<Instant> {
        let patience = self.cfg.bootstrap_patience?;
        let len = self.cfg.bootstrap_servers.len();
        if len < 2 || self.conns.is_empty() || self.conns.len() >= len {
            return None;
        }
        let mut latest: Option<Instant> = None;
        for c in self.conns.values() {
            // A server that drops the connect (a firewall, a blackholed address) is waited
            // for as one that takes it and never answers: its connect has its own bound
            // (`socket.connection.setup.timeout.ms`, 10 s), which every start of a producer
            // whose first bootstrap server is down paid in full (a review finding).
            let started = match (c.target, c.state) {
                (Target::Bootstrap(_), ConnState::Connecting) => c.connect_started?,
                (Target::Bootstrap(_), ConnState::Negotiating) => c
                    .inflight
                    .front()?
                    .deadline
                    .checked_sub(self.cfg.request_timeout)?,
                _ => return None,
            };
            latest = latest.max(Some(started));
        }
        latest?.checked_add(patience)
    }

    /// Opens a connection to the next bootstrap server that has none and is past its
    /// reconnect backoff, if any.
    ///
    /// Not a server at the address of a known node in its reconnect backoff: each target
    /// keeps its own backoff, so a dead broker listed both ways was dialled twice as often
    /// as `reconnect.backoff` allows, the bootstrap connect right after the node's was
    /// refused (a review of wasted work).
    pub(super) fn open_bootstrap(&mut self) {
        let len = self.cfg.bootstrap_servers.len();
        for k in 0..len {
            let i = (self.bootstrap_next + k) % len;
            let busy = (self.conns.values()).any(|c| c.target == Target::Bootstrap(i));
            let addr = self.cfg.bootstrap_servers[i].as_str();
            let node_backing_off = (self.brokers.iter())
                .any(|(&n, a)| **a == *addr && !self.target_ready(Target::Node(n)));
            if !busy && !node_backing_off && self.target_ready(Target::Bootstrap(i)) {
                let addr: Arc<str> = Arc::from(addr);
                self.open_conn(Target::Bootstrap(i), addr);
                return;
            }
        }
    }

    /// Opens connections to leaders that have something to send.
    pub(super) fn connect_to_leaders(&mut self) {
        let mut wanted: Vec<i32> = Vec::new();
        let mut unknown_leader = false;
        // The distinct leaders of partitions holding batches (the index keeps them).
        for leader in self.index.0.queued_leaders() {
            match leader {
                // A leader metadata named but did not list among the brokers: no address to
                // connect to, so ask again.
                Some(n) if !self.brokers.contains_key(&n) => unknown_leader = true,
                Some(n) if !self.node_conns.contains_key(&n) => wanted.push(n),
                None => unknown_leader = true,
                _ => {}
            }
        }
        if unknown_leader && !self.metadata.in_flight {
            self.need_metadata(None);
            self.maybe_request_metadata();
        }
        wanted.sort_unstable();
        wanted.dedup();
        for n in wanted {
            if !self.target_ready(Target::Node(n)) {
                continue;
            }
            if let Some(addr) = self.brokers.get(&n).cloned() {
                self.open_conn(Target::Node(n), addr);
            }
        }
    }

    /// A `Connect` the driver did not answer within `connect_timeout` fails: the connection
    /// is closed like a connect the driver reported failed.
    pub(super) fn expire_connects(&mut self) {
        let now = self.now;
        let expired: Vec<ConnId> = self
            .conns
            .iter()
            .filter(|(_, c)| c.connect_deadline.is_some_and(|d| d <= now))
            .map(|(id, _)| *id)
            .collect();
        for conn in expired {
            self.close_conn(conn, "connect timeout");
        }
    }

    pub(super) fn expire_requests(&mut self) {
        let now = self.now;
        let expired: Vec<ConnId> = self
            .conns
            .iter()
            .filter(|(_, c)| c.inflight.front().is_some_and(|r| r.deadline <= now))
            .map(|(id, _)| *id)
            .collect();
        for conn in expired {
            self.close_conn(conn, REQUEST_TIMEOUT);
        }
    }

    /// Closes the ready connections that have had nothing in flight and no traffic for
    /// `connections.max.idle.ms`, looking only once `idle_check` has passed. The next look
    /// is at the earliest idle deadline, or one limit from now: a connection not idle-eligible
    /// now (a request in flight, not ready) becomes so only with traffic from now on (the
    /// answer read, the handshake done), so not before then; a re-authentication, which is
    /// not traffic, resets the check.
    pub(super) fn expire_idle(&mut self) {
        let now = self.now;
        let Some(limit) = self.cfg.connections_max_idle else {
            return;
        };
        if self.idle_check.0.is_some_and(|t| t > now) {
            return;
        }
        let mut next = now.checked_add(limit);
        let mut idle: SmallVec<[ConnId; 4]> = SmallVec::new();
        for (id, c) in &self.conns {
            match c.idle_deadline(limit) {
                Some(d) if d <= now => idle.push(*id),
                Some(d) => next = Some(next.map_or(d, |n| n.min(d))),
                None => {}
            }
        }
        self.idle_check.0 = next;
        for conn in idle {
            self.close_conn(conn, IDLE);
        }
    }

    pub(super) fn on_api_versions(
        &mut self,
        conn: ConnId,
        version: i16,
        frame: Bytes,
    ) -> Result<(), &'static str> {
        // Read at the version asked; an answer that cannot be read so, or that says
        // UNSUPPORTED_VERSION, is read at v0 (KIP-511). Any other error keeps its code (a
        // review finding: read again at v0, it was lost as a bad response).
        let unsupported = ErrorCode::UnsupportedVersion.as_i16();
        let decoded = decode_response::<ApiVersionsRequest>(version, frame.clone())
            .ok()
            .filter(|(_, r)| r.error_code != unsupported)
            .or_else(|| decode_response::<ApiVersionsRequest>(0, frame.clone()).ok());
        let Some((_, resp)) = decoded else {
            // KIP-511 says an unsupported version is answered at v0 with the broker's range;
            // a broker whose answer cannot be read at all but whose error code (the first
            // field after the v0 header) says UNSUPPORTED_VERSION gets asked again at v0,
            // which every broker speaks (librdkafka's mock cluster answers v3 this way).
            let code = frame.get(4..6).map(|b| i16::from_be_bytes([b[0], b[1]]));
            if code == Some(ErrorCode::UnsupportedVersion.as_i16()) && version > 0 {
                self.send_api_versions(conn, 0);
                return Ok(());
            }
            return Err("bad ApiVersions response");
        };
        let resp: ApiVersionsResponse = resp;
        let code = ErrorCode::from_i16(resp.error_code);
        if code == ErrorCode::UnsupportedVersion {
            // KIP-511: retry at the highest version both sides support.
            let theirs = resp
                .range_of(api_key::API_VERSIONS)
                .unwrap_or(VersionRange::new(0, 0));
            match ApiVersionsRequest::VERSIONS.intersect(&theirs) {
                Some(r) if r.max < version => {
                    self.send_api_versions(conn, r.max);
                    return Ok(());
                }
                _ => return Err("no common ApiVersions version"),
            }
        }
        if code == ErrorCode::InvalidRequest {
            // Kafka 2.4+ refuses a client software name or version outside its pattern.
            return Err("ApiVersions refused as INVALID_REQUEST (Kafka checks \
                        client.software.name and client.software.version)");
        }
        if !code.is_ok() {
            return Err("ApiVersions error");
        }
        // KIP-219: from v2 an ApiVersions answer's throttle is the client's to keep (Kafka
        // throttles it like any other request; Java's `shouldClientThrottle`): the broker
        // reads nothing on the connection until it passes, so the requests written next
        // count their timeouts from its end (a review finding: they timed out under it).
        self.on_throttle(conn, version >= 2, resp.throttle_time_ms, false);
        let idempotent = self.cfg.enable_idempotence;
        let versions =
            protocol::negotiate_versions_for(&resp, version, &self.cfg.version_caps(), idempotent)
                .and_then(|v| {
                    // zstd batches need Produce v7+ (older versions draw
                    // UNSUPPORTED_COMPRESSION_TYPE).
                    let zstd = std::iter::once(&self.cfg.compression)
                        .chain(self.cfg.topic_compression.values())
                        .any(|c| c.codec == CompressionType::Zstd);
                    if zstd && v.produce < 7 {
                        Err("Produce v7+ (zstd compression)")
                    } else {
                        Ok(v)
                    }
                });
        match versions {
            Ok(v) => {
                if !v.kip360() && !mutated!(self.cfg, LocalBumpWithoutKip360) {
                    // A broker without KIP-360 (InitProducerId below v3: Apache Kafka before
                    // 2.5): never bump the epoch locally; a bump takes a new producer id, and
                    // every partition re-sequences from 0 under it once drained (spec §B P9).
                    self.bump_refused = true;
                }
                let c = self.conns.get_mut(&conn).ok_or("unknown connection")?;
                c.versions = v;
                if self.cfg.sasl.is_some() {
                    return self.start_sasl(conn, &resp);
                }
                c.state = ConnState::Ready;
                let addr = c.addr.clone();
                let target = c.target;
                self.handshake_done(target);
                self.diag(Diagnostic::Connected {
                    conn,
                    addr,
                    versions: v,
                });
                Ok(())
            }
            Err(api) => {
                self.handshake_failed(conn, FatalError::UnsupportedVersions(api));
                Ok(())
            }
        }
    }

    /// A connection finished its handshake (ApiVersions, and SASL if configured).
    pub(super) fn handshake_done(&mut self, target: Target) {
        self.backoff.remove(&target);
        // A bootstrap server's refusal from before the cluster was reached is old news (it
        // may never be tried again): a later outage must not be reported as it.
        for (t, b) in self.backoff.iter_mut() {
            if matches!(t, Target::Bootstrap(_)) {
                b.refused = None;
            }
        }
        self.reached = true;
        self.bootstrap_refused = Vec::new();
        self.refusal = None;
    }

    /// Before any connection completed its handshake, once a bootstrap server refused for
    /// good: if every bootstrap server has now refused or failed to connect (its last
    /// attempt), the producer stops with the refusal. Checked at each refusal and at each
    /// failed connection to a bootstrap server, whichever comes last.
    fn stop_if_every_bootstrap_server_failed(&mut self) -> bool {
        if self.reached || self.fatal.is_some() {
            return false;
        }
        let Some(error) = self.refusal.clone() else {
            return false;
        };
        let failed = |i: usize| {
            self.bootstrap_refused.contains(&i)
                || (self.backoff.get(&Target::Bootstrap(i))).is_some_and(|b| b.failures > 0)
        };
        if !(0..self.cfg.bootstrap_servers.len()).all(failed) {
            return false;
        }
        self.fail_fatal(error);
        true
    }

    /// `conn`'s handshake failed for a reason no retry of that connection fixes (`error`: no
    /// common version, SASL refused). Once a connection has completed its handshake, one
    /// broker failing so, or one attempt (a token provider's hiccup, a re-authentication
    /// refused once), is an error on that connection only, as in the Java client: it is
    /// closed and its broker tried again after the reconnect backoff, and the producer goes
    /// on with the others. Before that, it is the configuration speaking (a wrong password,
    /// a cluster too old): once every bootstrap server has refused so or failed to connect,
    /// the producer stops with `error`, at once rather than at the records' timeouts.
    pub(super) fn handshake_failed(&mut self, conn: ConnId, error: FatalError) {
        let Some(c) = self.conns.get(&conn) else {
            return;
        };
        let (target, addr) = (c.target, c.addr.clone());
        if !self.reached {
            if let Target::Bootstrap(i) = target {
                if !self.bootstrap_refused.contains(&i) {
                    self.bootstrap_refused.push(i);
                }
            }
            self.refusal = Some(error.clone());
            if self.stop_if_every_bootstrap_server_failed() {
                return;
            }
        }
        let code = match &error {
            FatalError::Authentication { .. } => Some(ErrorCode::SaslAuthenticationFailed),
            FatalError::UnsupportedVersions(_) => Some(ErrorCode::UnsupportedVersion),
            _ => None,
        };
        self.diag(Diagnostic::HandshakeFailed { conn, addr, error });
        self.close_conn(conn, HANDSHAKE_FAILED);
        if let Some(b) = self.backoff.get_mut(&target) {
            b.refused = code.or(b.refused);
        }
    }
}

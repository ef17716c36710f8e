//! The fault-proxy scenarios, written once and run against any proxied broker set: one Tansu
//! broker behind one proxy (`tests/faults_tansu.rs`), or a 3-node Apache Kafka cluster behind
//! one proxy per node (`tests/kafka_faults_proxy.rs`).
//!
//! An [`Env`] is "a proxied broker set with a fresh topic": the proxies (each broker
//! advertises its proxy's address in Metadata, so every connection kprod opens goes through a
//! proxy), which proxy fronts the leader of each partition, where the independent reader reads
//! (unproxied on Kafka), and how the broker answers a retry of a batch it already wrote
//! ([`RetryAnswer`]). A scenario applies its faults on the proxy in front of the leader of
//! the partition under test ([`Target::LeaderOf`]) or on every proxy ([`Target::All`]); with
//! one broker both are the same proxy, so the Tansu assertions are unchanged. Counts that
//! scale with the number of proxies are asserted as ranges that are exact for one proxy.
//!
//! After each scenario the proxies are healed and the reader reads every partition;
//! [`Ledger::check`] then asserts per partition: no record duplicated, send order kept, every
//! acknowledged record at its reported offset (present when the offset is `None`), every
//! `NotPersisted` failure absent; and every future resolved within a bound. On a broker that
//! answers retries with the original offset, [`Env::check`] also asserts that every
//! acknowledgement carries its offset.
//!
//! Each scenario is a [`Scenario`]: a name, a topic, the partitions it needs, and its body,
//! which returns the final [`Summary`].

use std::collections::BTreeMap;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kprod_core::protocol::api_key;
use kprod_core::{DeliveryError as CoreError, ProducerConfig};
use kprod_tokio::{Connector, ErrorKind, ProducerHandle, TcpConnector};
use tokio::net::TcpStream;

use crate::kafka::{Kafka, KafkaOptions};
use crate::ledger::{Ledger, Summary};
use crate::proxy::{Fault, Proxy, Refusal, Rule, Stats};
use crate::Tansu;

/// Bound on resolving every record of a scenario.
pub const RESOLVE: Duration = Duration::from_secs(30);
/// Bound on waiting for a fault to happen.
pub const WAIT: Duration = Duration::from_secs(10);

/// Byte offsets in a response frame after its size prefix (flexible response header v1:
/// correlation id, then an empty tagged-field section).
const CORRELATION_ID: usize = 0;
/// Produce v9+ response body: the first byte is the compact length of the topic array.
const PRODUCE_TOPICS_LEN: usize = 5;
/// Metadata v9+ response body: throttle_time_ms (4 bytes), then the broker array's length.
const METADATA_BROKERS_LEN: usize = 9;

/// How a broker answers a retry of a batch it already wrote (same producer id, epoch and
/// sequence, within its five-batch window).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetryAnswer {
    /// DUPLICATE_SEQUENCE_NUMBER (46), without the offset: kprod acknowledges the records
    /// without one (Tansu).
    WithoutOffset,
    /// NONE with the original batch's offset: every acknowledgement carries its offset
    /// (Apache Kafka).
    WithOffset,
}

/// Which proxies a fault goes on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// Every proxy.
    All,
    /// The proxy in front of the leader of this partition (as it was when the topic was
    /// created; nothing in these scenarios moves leaders).
    LeaderOf(i32),
}

/// A proxied broker set with a fresh topic, for one scenario.
pub struct Env {
    proxies: Arc<Vec<Proxy>>,
    /// Each proxy's stats when the scenario started: counters are reported since then.
    base: Vec<Stats>,
    /// Partition → index of the proxy in front of its leader.
    leaders: BTreeMap<i32, usize>,
    topic: String,
    partitions: i32,
    /// Where the independent reader reads.
    reader: String,
    answer: RetryAnswer,
    // Keeps a broker that belongs to this scenario alive.
    _tansu: Option<Tansu>,
}

impl Env {
    /// A proxy, a Tansu broker advertising the proxy's address, and a topic.
    pub async fn tansu(topic: &str, partitions: i32) -> Self {
        let proxy = Proxy::bind().await.expect("bind proxy");
        let port = proxy.port();
        let tansu = tokio::task::block_in_place(|| {
            let t = Tansu::start_advertising(port);
            t.create_topic(topic, partitions as u32);
            t
        });
        proxy.set_upstream(tansu.addr());
        let reader = proxy.bootstrap();
        let leaders = (0..partitions).map(|p| (p, 0)).collect();
        let mut env = Self::new(
            Arc::new(vec![proxy]),
            leaders,
            topic,
            partitions,
            reader,
            RetryAnswer::WithoutOffset,
        );
        env._tansu = Some(tansu);
        env
    }

    fn new(
        proxies: Arc<Vec<Proxy>>,
        leaders: BTreeMap<i32, usize>,
        topic: &str,
        partitions: i32,
        reader: String,
        answer: RetryAnswer,
    ) -> Self {
        let base = proxies.iter().map(Proxy::stats).collect();
        Self {
            proxies,
            base,
            leaders,
            topic: topic.to_owned(),
            partitions,
            reader,
            answer,
            _tansu: None,
        }
    }

    /// The topic.
    pub fn topic(&self) -> &str {
        &self.topic
    }

    /// The topic's partitions.
    pub fn partitions(&self) -> i32 {
        self.partitions
    }

    /// How the broker answers a retry of a written batch.
    pub fn retry_answer(&self) -> RetryAnswer {
        self.answer
    }

    fn indices(&self, target: Target) -> Vec<usize> {
        match target {
            Target::All => (0..self.proxies.len()).collect(),
            Target::LeaderOf(p) => vec![*self
                .leaders
                .get(&p)
                .unwrap_or_else(|| panic!("no partition {p} in {}", self.topic))],
        }
    }

    /// The proxies `target` names.
    pub fn proxies(&self, target: Target) -> Vec<&Proxy> {
        self.indices(target)
            .into_iter()
            .map(|i| &self.proxies[i])
            .collect()
    }

    /// How many proxies `target` names.
    pub fn count(&self, target: Target) -> usize {
        self.indices(target).len()
    }

    /// Adds `rule` to every proxy `target` names (each counts its own matches).
    pub fn add_rule(&self, target: Target, rule: Rule) {
        for p in self.proxies(target) {
            p.add_rule(rule.clone());
        }
    }

    /// The stats of the proxies `target` names, added up, since the scenario started.
    pub fn stats(&self, target: Target) -> Stats {
        let mut sum = Stats::default();
        for i in self.indices(target) {
            add_stats(&mut sum, &since(&self.proxies[i].stats(), &self.base[i]));
        }
        sum
    }

    /// Faults applied to `api` responses on the proxies `target` names that satisfy `pred`.
    pub fn faults(&self, target: Target, api: i16, pred: impl Fn(&Fault) -> bool) -> usize {
        self.stats(target).faults_where(|k, f| k == api && pred(f))
    }

    /// Waits until `cond` holds for the added-up stats of `target`, checking every 5 ms, for
    /// at most `timeout`.
    pub async fn wait_for(
        &self,
        what: &str,
        timeout: Duration,
        target: Target,
        cond: impl Fn(&Stats) -> bool,
    ) {
        let deadline = Instant::now() + timeout;
        loop {
            let s = self.stats(target);
            if cond(&s) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "timed out after {timeout:?} waiting for {what}; stats {s:?}"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// Refuses new connections on every proxy.
    pub fn refuse(&self, how: Refusal) {
        self.proxies.iter().for_each(|p| p.refuse(how));
    }

    /// Accepts connections again on every proxy.
    pub async fn accept(&self) {
        for p in self.proxies.iter() {
            p.accept().await;
        }
    }

    /// Closes every established connection on every proxy; returns how many.
    pub fn cut_all(&self) -> usize {
        self.proxies.iter().map(Proxy::cut_all).sum()
    }

    /// Clears every rule and accepts again on every proxy.
    pub async fn heal(&self) {
        heal(&self.proxies).await;
    }

    /// Sends every request held by a [`Fault::Zombie`] on the proxies `target` names to its
    /// broker now. Returns how many.
    pub fn release_zombies(&self, target: Target) -> usize {
        (self.indices(target).into_iter())
            .map(|i| self.proxies[i].release_zombies())
            .sum()
    }

    /// Connections a producer opens when nothing fails: one to bootstrap, one to each broker
    /// that leads a partition of the topic.
    pub fn baseline_connections(&self) -> u64 {
        let mut leaders: Vec<usize> = self.leaders.values().copied().collect();
        leaders.sort_unstable();
        leaders.dedup();
        1 + leaders.len() as u64
    }

    /// A producer configuration bootstrapping through every proxy, with short timeouts and
    /// small batches so that faults hit many requests.
    pub fn config(&self) -> ProducerConfig {
        ProducerConfig {
            bootstrap_servers: self.proxies.iter().map(Proxy::bootstrap).collect(),
            linger: Duration::from_millis(2),
            batch_size: 300,
            request_timeout: Duration::from_millis(800),
            delivery_timeout: Duration::from_secs(25),
            retry_backoff: Duration::from_millis(10),
            retry_backoff_max: Duration::from_millis(100),
            reconnect_backoff: Duration::from_millis(10),
            allow_auto_topic_creation: false,
            ..Default::default()
        }
    }

    /// An empty ledger for the topic.
    pub fn ledger(&self) -> Ledger {
        Ledger::new(&self.topic, self.partitions)
    }

    /// Heals the proxies and checks the log with the independent reader (see the module
    /// docs); on a broker that answers retries with the original offset, also asserts that
    /// every acknowledgement carries its offset.
    pub async fn check(&self, ledger: &Ledger) -> Summary {
        self.heal().await;
        let s = ledger.read_and_check(&self.reader).await;
        eprintln!(
            "{}: {s:?}; faults {:?}",
            self.topic,
            self.stats(Target::All).faults
        );
        if self.answer == RetryAnswer::WithOffset {
            assert_eq!(
                s.delivered_without_offset, 0,
                "the broker answers an in-window duplicate with its offset: {s:?}"
            );
        }
        s
    }

    /// Asserts what the acknowledgements of retried, already written batches looked like:
    /// without an offset (some) on Tansu, with one (all) on Kafka.
    pub fn assert_retries_answered(&self, s: &Summary) {
        match self.answer {
            RetryAnswer::WithoutOffset => assert!(
                s.delivered_without_offset > 0,
                "a retry of a written batch is answered 46: {s:?}"
            ),
            RetryAnswer::WithOffset => assert_eq!(
                s.delivered_without_offset, 0,
                "a retry of a written batch is answered with its offset: {s:?}"
            ),
        }
    }
}

/// Clears the rules of every proxy and accepts connections again.
async fn heal(proxies: &[Proxy]) {
    for p in proxies {
        p.heal().await;
    }
}

/// `now`'s counters minus `base`'s (the faults applied after `base`).
fn since(now: &Stats, base: &Stats) -> Stats {
    let minus = |a: &BTreeMap<i16, u64>, b: &BTreeMap<i16, u64>| {
        a.iter()
            .map(|(k, v)| (*k, v - b.get(k).copied().unwrap_or(0)))
            .collect()
    };
    Stats {
        accepted: now.accepted - base.accepted,
        reset_on_accept: now.reset_on_accept - base.reset_on_accept,
        upstream_failed: now.upstream_failed - base.upstream_failed,
        requests: minus(&now.requests, &base.requests),
        responses: minus(&now.responses, &base.responses),
        faults: now.faults[base.faults.len()..].to_vec(),
        cut_by_hand: now.cut_by_hand - base.cut_by_hand,
        zombies_held: now.zombies_held - base.zombies_held,
        zombies_sent: now.zombies_sent - base.zombies_sent,
        zombies_answered: now.zombies_answered - base.zombies_answered,
    }
}

/// Adds `b`'s counters to `a`'s.
fn add_stats(a: &mut Stats, b: &Stats) {
    a.accepted += b.accepted;
    a.reset_on_accept += b.reset_on_accept;
    a.upstream_failed += b.upstream_failed;
    for (k, v) in &b.requests {
        *a.requests.entry(*k).or_insert(0) += v;
    }
    for (k, v) in &b.responses {
        *a.responses.entry(*k).or_insert(0) += v;
    }
    a.faults.extend_from_slice(&b.faults);
    a.cut_by_hand += b.cut_by_hand;
    a.zombies_held += b.zombies_held;
    a.zombies_sent += b.zombies_sent;
    a.zombies_answered += b.zombies_answered;
}

/// An Apache Kafka cluster with one fault proxy in front of each node's client listener;
/// brokers replicate directly. Scenarios run one after another, each on its own topic.
pub struct ProxiedKafka {
    /// The cluster.
    pub kafka: Kafka,
    proxies: Arc<Vec<Proxy>>,
}

impl ProxiedKafka {
    /// Binds `nodes` proxies and starts a cluster of `nodes` nodes advertising them.
    ///
    /// # Panics
    /// If a proxy cannot bind, or Kafka cannot start (with the harness's message).
    pub async fn start(nodes: usize) -> Self {
        Self::start_with(KafkaOptions::new(nodes)).await
    }

    /// [`Self::start`] with `opts` (its node count; the advertised ports are the proxies').
    ///
    /// # Panics
    /// As [`Self::start`].
    pub async fn start_with(opts: KafkaOptions) -> Self {
        let nodes = opts.brokers;
        let mut proxies = Vec::new();
        for _ in 0..nodes {
            proxies.push(Proxy::bind().await.expect("bind proxy"));
        }
        let ports = proxies.iter().map(Proxy::port).collect();
        let kafka = tokio::task::block_in_place(|| Kafka::start_with(opts.advertise(ports)));
        for (i, p) in proxies.iter().enumerate() {
            p.set_upstream(kafka.client_addr(i));
        }
        Self {
            kafka,
            proxies: Arc::new(proxies),
        }
    }

    /// Heals every proxy, closes the connections left from an earlier scenario, and creates
    /// `topic` with at least `partitions` partitions and at least one per node (so that every
    /// node leads one), replication factor 3 (at most the nodes) and min.insync.replicas 2.
    pub async fn env(&self, topic: &str, partitions: i32) -> Env {
        heal(&self.proxies).await;
        for p in self.proxies.iter() {
            p.cut_all();
        }
        let nodes = self.kafka.len() as i32;
        let partitions = partitions.max(nodes);
        let replication = nodes.min(3);
        let leaders = tokio::task::block_in_place(|| {
            self.kafka
                .create_topic(topic, partitions, replication, Some(replication.min(2)));
            self.kafka.leaders(topic)
        });
        let leaders: BTreeMap<i32, usize> = leaders
            .into_iter()
            .map(|(p, node)| (p, self.kafka.index_of(node)))
            .collect();
        let mut led: Vec<usize> = leaders.values().copied().collect();
        led.sort_unstable();
        led.dedup();
        assert_eq!(
            led.len(),
            self.kafka.len(),
            "{topic}: every node leads a partition ({leaders:?})"
        );
        Env::new(
            self.proxies.clone(),
            leaders,
            topic,
            partitions,
            self.kafka.bootstrap(),
            RetryAnswer::WithOffset,
        )
    }
}

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

fn producer(cfg: ProducerConfig) -> ProducerHandle {
    ProducerHandle::connect(cfg).expect("valid config")
}

/// A TCP connector that counts connect attempts and failures.
#[derive(Clone, Default)]
struct Counting {
    attempts: Arc<AtomicU64>,
    failures: Arc<AtomicU64>,
}

impl Connector for Counting {
    type Stream = TcpStream;
    async fn connect(&self, addr: &str) -> io::Result<TcpStream> {
        self.attempts.fetch_add(1, Ordering::SeqCst);
        let r = TcpConnector::default().connect(addr).await;
        if r.is_err() {
            self.failures.fetch_add(1, Ordering::SeqCst);
        }
        r
    }
}

/// Waits until `cond` holds, checking every 5 ms, for at most `timeout`.
async fn wait_until(what: &str, timeout: Duration, cond: impl Fn() -> bool) {
    let deadline = Instant::now() + timeout;
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Sends waves of `n` records, each wave flushed and resolved before the next, until `done`
/// holds (at most 40 waves).
async fn waves_until(l: &mut Ledger, p: &ProducerHandle, n: usize, done: impl Fn() -> bool) {
    for _ in 0..40 {
        if done() {
            return;
        }
        l.enqueue_n(p, n).await;
        p.flush().await;
        l.resolve(RESOLVE).await;
    }
    assert!(
        done(),
        "the planned faults did not all happen in 40 waves: {:?}",
        l.outcomes()
    );
}

/// Puts `rules` on the proxy in front of the leader of partition 0, sends waves of `wave`
/// records (max.in.flight 1 if `in_flight_1`) until `planned` Produce faults that `hit`
/// selects have happened, closes the producer, and asserts that exactly those happened and
/// that every record is acknowledged and in the log once.
async fn produce_faults_on_leader(
    env: &Env,
    in_flight_1: bool,
    rules: Vec<Rule>,
    wave: usize,
    planned: usize,
    hit: fn(&Fault) -> bool,
) -> Summary {
    let t = Target::LeaderOf(0);
    for r in rules {
        env.add_rule(t, r);
    }
    let mut cfg = env.config();
    if in_flight_1 {
        cfg.max_in_flight = 1;
    }
    let p = producer(cfg);
    let mut l = env.ledger();
    let hits = || env.faults(t, api_key::PRODUCE, hit);
    waves_until(&mut l, &p, wave, || hits() >= planned).await;
    p.close().await;
    assert_eq!(hits(), planned);
    let s = env.check(&l).await;
    assert!(s.all_delivered(), "{s:?}");
    assert_eq!(s.in_log, s.sent);
    s
}

// ---------------------------------------------------------------------------------------------
// The scenarios
// ---------------------------------------------------------------------------------------------

/// A scenario's body: takes its environment, returns the final summary (panics on a failed
/// assertion).
pub type Body = fn(Env) -> Pin<Box<dyn Future<Output = Summary> + Send>>;

/// One fault scenario.
#[derive(Clone, Copy)]
pub struct Scenario {
    /// Its name (the Tansu test's name).
    pub name: &'static str,
    /// Its topic.
    pub topic: &'static str,
    /// Partitions it needs (a Kafka environment may give more: one per node at least).
    pub partitions: i32,
    /// Its body.
    pub run: Body,
}

impl std::fmt::Debug for Scenario {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scenario")
            .field("name", &self.name)
            .field("topic", &self.topic)
            .field("partitions", &self.partitions)
            .finish_non_exhaustive()
    }
}

impl Scenario {
    /// Runs it on a Tansu broker of its own.
    pub async fn run_on_tansu(&self) -> Summary {
        (self.run)(Env::tansu(self.topic, self.partitions).await).await
    }
}

macro_rules! scenarios {
    ($($konst:ident = $name:ident($topic:literal, $partitions:literal)),* $(,)?) => {
        $(
            #[doc = concat!("The scenario [`", stringify!($name), "`].")]
            pub const $konst: Scenario = Scenario {
                name: stringify!($name),
                topic: $topic,
                partitions: $partitions,
                run: |env| Box::pin($name(env)),
            };
        )*
        /// Every scenario, in the order of `faults_tansu.rs`.
        pub const ALL: &[Scenario] = &[$($konst),*];
    };
}

scenarios! {
    CUT_IN_FLIGHT_1 = cut_after_processed_produce_in_flight_1("cut-inflight-1", 3),
    CUT_IN_FLIGHT_5 = cut_after_processed_produce_in_flight_5("cut-inflight-5", 4),
    REPEATED_CUTS = repeated_cuts("repeated-cuts", 3),
    DELAY_BELOW = delay_below_request_timeout("delay-below", 2),
    DELAY_BEYOND = delay_beyond_request_timeout("delay-beyond", 2),
    BLACKHOLE = blackhole_forces_request_timeout("blackhole", 2),
    DELIVERY_TIMEOUT = delivery_timeout_while_blackholed("delivery-timeout", 1),
    TRUNCATED = truncated_produce_response("truncated", 2),
    SHORT_FRAME = short_frame_produce_response("short-frame", 2),
    FLIP_PRODUCE = bit_flip_in_produce_response("flip-produce", 2),
    FLIP_METADATA = bit_flip_in_metadata_response("flip-metadata", 2),
    GARBAGE_SIZE = garbage_size_prefix("garbage-size", 2),
    REFUSED_AT_START = refused_at_start_then_recovery("refused-start", 2),
    REFUSED_DURING_RUN = refused_during_run("refused-run", 3),
    CUT_HANDSHAKE = cut_during_handshake("cut-handshake", 2),
    CLOSE_BLACKHOLED = close_while_blackholed("close-blackhole", 2),
    CLOSE_DURING_CUTS = close_during_cuts("close-cuts", 3),
    ZOMBIE_PRODUCE = zombie_produce_after_its_retry("zombie-produce", 2),
}

// Responses of processed requests lost ---------------------------------------------------------

/// max.in.flight 1: three Produce responses of one leader are lost after the broker wrote
/// the batch. Each retry resends the same bytes and is answered as a duplicate (46 without
/// an offset on Tansu, NONE with the original offset on Kafka): present once, in order.
pub async fn cut_after_processed_produce_in_flight_1(env: Env) -> Summary {
    let cut = Rule::on(api_key::PRODUCE, Fault::Cut)
        .skip(2)
        .times(3)
        .every(3);
    let s = produce_faults_on_leader(&env, true, vec![cut], 30, 3, |f| *f == Fault::Cut).await;
    env.assert_retries_answered(&s);
    s
}

/// max.in.flight 5: a response is lost while four more requests are pipelined behind it
/// (some processed, some perhaps not). Every batch in flight is retried in order.
pub async fn cut_after_processed_produce_in_flight_5(env: Env) -> Summary {
    let t = Target::LeaderOf(0);
    env.add_rule(t, Rule::on(api_key::PRODUCE, Fault::Cut).skip(1));
    let p = producer(env.config());
    let mut l = env.ledger();
    l.enqueue_n(&p, 400).await;
    l.resolve(RESOLVE).await;
    p.close().await;
    assert_eq!(env.faults(t, api_key::PRODUCE, |f| *f == Fault::Cut), 1);
    let s = env.check(&l).await;
    assert!(s.all_delivered(), "{s:?}");
    env.assert_retries_answered(&s);
    assert_eq!(s.in_log, 400);
    s
}

/// Every other Produce response of one leader is lost, eight times, with five requests in
/// flight.
pub async fn repeated_cuts(env: Env) -> Summary {
    let cut = Rule::on(api_key::PRODUCE, Fault::Cut)
        .skip(1)
        .every(1)
        .times(8);
    let s = produce_faults_on_leader(&env, false, vec![cut], 120, 8, |f| *f == Fault::Cut).await;
    assert!(
        env.stats(Target::LeaderOf(0)).accepted >= 9,
        "a new connection after each cut"
    );
    s
}

// Delays and blackholes -----------------------------------------------------------------------

/// Latency below request.timeout on every response of every proxy: nothing is retried, no
/// connection is opened twice, every record gets its offset.
pub async fn delay_below_request_timeout(env: Env) -> Summary {
    env.add_rule(
        Target::All,
        Rule::any(Fault::Delay(Duration::from_millis(150))).forever(),
    );
    let p = producer(env.config());
    let mut l = env.ledger();
    let start = Instant::now();
    l.enqueue_n(&p, 100).await;
    l.resolve(RESOLVE).await;
    p.close().await;
    assert!(
        start.elapsed() >= Duration::from_millis(150 * 4),
        "handshake and produce delayed"
    );
    assert_eq!(
        env.stats(Target::All).accepted,
        env.baseline_connections(),
        "no reconnect: bootstrap and one per leader"
    );
    let s = env.check(&l).await;
    assert_eq!(s.delivered, 100, "every record with its offset: {s:?}");
    s
}

/// Produce responses of one leader delayed beyond request.timeout (twice): kprod closes the
/// connection, the late response is never read, and the retry of the written batch is
/// answered as a duplicate.
pub async fn delay_beyond_request_timeout(env: Env) -> Summary {
    let cfg = env.config();
    env.add_rule(
        Target::LeaderOf(0),
        Rule::on(
            api_key::PRODUCE,
            Fault::Delay(cfg.request_timeout + Duration::from_millis(700)),
        )
        .times(2),
    );
    let p = producer(cfg.clone());
    let mut l = env.ledger();
    let start = Instant::now();
    l.enqueue_n(&p, 40).await;
    l.resolve(RESOLVE).await;
    let took = start.elapsed();
    p.close().await;
    assert!(
        took >= cfg.request_timeout,
        "resolved after a request timeout: {took:?}"
    );
    assert!(
        env.stats(Target::All).accepted > env.baseline_connections(),
        "reconnected after the timeout"
    );
    let s = env.check(&l).await;
    assert!(s.all_delivered(), "{s:?}");
    env.assert_retries_answered(&s);
    s
}

/// A connection to one leader that forwards requests but never answers: kprod's request
/// timeout closes it and the retries go out on a new connection.
pub async fn blackhole_forces_request_timeout(env: Env) -> Summary {
    let t = Target::LeaderOf(0);
    let cfg = env.config();
    env.add_rule(t, Rule::on(api_key::PRODUCE, Fault::Blackhole).skip(1));
    let p = producer(cfg.clone());
    let mut l = env.ledger();
    let start = Instant::now();
    l.enqueue_n(&p, 60).await;
    l.resolve(RESOLVE).await;
    let took = start.elapsed();
    p.close().await;
    assert_eq!(
        env.faults(t, api_key::PRODUCE, |f| *f == Fault::Blackhole),
        1
    );
    assert!(took >= cfg.request_timeout, "{took:?}");
    let s = env.check(&l).await;
    assert!(s.all_delivered(), "{s:?}");
    env.assert_retries_answered(&s);
    s
}

/// delivery.timeout.ms expires while Produce responses are blackholed on every proxy
/// (max.in.flight 1; each proxy lets its first Produce through, which carries the first
/// three records): the batches that went out fail PossiblyPersisted (and the
/// broker did write them), the batches that never went out fail NotPersisted (and are
/// absent). After healing, the same producer delivers new records to the same partitions
/// (Tansu refuses the local epoch bump, so kprod gets a fresh producer id there).
pub async fn delivery_timeout_while_blackholed(env: Env) -> Summary {
    let cfg = ProducerConfig {
        max_in_flight: 1,
        request_timeout: Duration::from_millis(400),
        delivery_timeout: Duration::from_millis(1500),
        batch_size: 200,
        ..env.config()
    };
    env.add_rule(
        Target::All,
        Rule::on(api_key::PRODUCE, Fault::Blackhole)
            .skip(1)
            .forever(),
    );
    let p = producer(cfg);
    let mut l = env.ledger();
    // Three records, round robin: one request to Tansu, one per leader on a 3-node cluster.
    let first = 3;
    l.enqueue_n(&p, first).await;
    p.flush().await; // the first request to each leader goes through
    l.enqueue_n(&p, 40).await;
    l.resolve(RESOLVE).await;
    let before = l.outcomes();
    assert_eq!(before.delivered, first, "{before:?}");
    assert!(before.failed_possibly_persisted > 0, "{before:?}");
    assert!(before.failed_not_persisted > 0, "{before:?}");
    for k in l.errors() {
        assert!(
            matches!(k, ErrorKind::Failed(CoreError::DeliveryTimeout { .. })),
            "{k:?}"
        );
    }
    // Every failed record comes back as sent, the sealed (possibly persisted) ones included.
    assert_eq!(
        l.assert_failed_records_returned(),
        before.failed_possibly_persisted + before.failed_not_persisted
    );
    env.heal().await;
    l.enqueue_n(&p, 20).await;
    l.resolve(RESOLVE).await;
    p.close().await;
    let s = env.check(&l).await;
    assert_eq!(
        s.delivered + s.delivered_without_offset,
        first + 20,
        "{s:?}"
    );
    assert!(
        s.possibly_persisted_present > 0,
        "blackholed requests were written: {s:?}"
    );
    s
}

// Truncated and corrupted responses -----------------------------------------------------------

/// Produce responses of one leader cut in the middle of a frame (10 bytes, then 2 bytes:
/// inside the size prefix), then the connection closes.
pub async fn truncated_produce_response(env: Env) -> Summary {
    let rules = vec![
        Rule::on(api_key::PRODUCE, Fault::Truncate(10)).skip(1),
        Rule::on(api_key::PRODUCE, Fault::Truncate(2)).skip(2),
    ];
    let s = produce_faults_on_leader(&env, false, rules, 40, 2, |f| {
        matches!(f, Fault::Truncate(_))
    })
    .await;
    env.assert_retries_answered(&s);
    s
}

/// Well-framed but truncated Produce responses of one leader (the size prefix matches the
/// shortened body): the decode fails, kprod closes the connection and retries.
pub async fn short_frame_produce_response(env: Env) -> Summary {
    let short = Rule::on(api_key::PRODUCE, Fault::ShortFrame(3))
        .skip(1)
        .times(2)
        .every(2);
    let s = produce_faults_on_leader(&env, false, vec![short], 40, 2, |f| {
        matches!(f, Fault::ShortFrame(_))
    })
    .await;
    env.assert_retries_answered(&s);
    s
}

/// Bit flips in Produce responses of one leader that a parser can detect: one in the
/// correlation id, one in the topic array's length (1 topic becomes 65). Each is refused,
/// the connection closed, the batches retried.
pub async fn bit_flip_in_produce_response(env: Env) -> Summary {
    let flip = |offset, mask| Fault::Flip { offset, mask };
    let rules = vec![
        Rule::on(api_key::PRODUCE, flip(CORRELATION_ID + 3, 0x01)).skip(1),
        Rule::on(api_key::PRODUCE, flip(PRODUCE_TOPICS_LEN, 0x40)).skip(2),
    ];
    let s = produce_faults_on_leader(&env, false, rules, 40, 2, |f| {
        matches!(f, Fault::Flip { .. })
    })
    .await;
    assert!(
        env.stats(Target::All).accepted >= env.baseline_connections() + 2,
        "both corrupt responses closed the connection"
    );
    env.assert_retries_answered(&s);
    s
}

/// Bit flips in Metadata responses (the broker array's length, then the correlation id) on
/// every proxy at start: kprod drops each and asks again; the records wait and are then
/// delivered. (Each proxy flips its own first two; with one proxy exactly two.)
pub async fn bit_flip_in_metadata_response(env: Env) -> Summary {
    env.add_rule(
        Target::All,
        Rule::on(
            api_key::METADATA,
            Fault::Flip {
                offset: METADATA_BROKERS_LEN,
                mask: 0x40,
            },
        ),
    );
    env.add_rule(
        Target::All,
        Rule::on(
            api_key::METADATA,
            Fault::Flip {
                offset: CORRELATION_ID + 2,
                mask: 0x80,
            },
        ),
    );
    let p = producer(env.config());
    let mut l = env.ledger();
    l.enqueue_n(&p, 60).await;
    l.resolve(RESOLVE).await;
    p.close().await;
    let st = env.stats(Target::All);
    let flips = st.faults_where(|k, _| k == api_key::METADATA);
    assert!(
        (2..=2 * env.count(Target::All)).contains(&flips),
        "{flips} flips: {st:?}"
    );
    assert!(st.requests(api_key::METADATA) >= 3, "{st:?}");
    let s = env.check(&l).await;
    assert_eq!(
        s.delivered, 60,
        "nothing was sent before good metadata: {s:?}"
    );
    s
}

/// Garbage size prefixes on Produce responses of one leader: above the maximum frame size,
/// negative, and large but allowed (kprod then waits for bytes that never come, until
/// request.timeout).
pub async fn garbage_size_prefix(env: Env) -> Summary {
    let rules = [(1, i32::MAX), (2, -7), (3, 1_000_000)]
        .into_iter()
        .map(|(skip, size)| Rule::on(api_key::PRODUCE, Fault::Size(size)).skip(skip))
        .collect();
    let s =
        produce_faults_on_leader(&env, false, rules, 40, 3, |f| matches!(f, Fault::Size(_))).await;
    env.assert_retries_answered(&s);
    s
}

// Refused connections and the handshake --------------------------------------------------------

/// Every port refuses connections (ECONNREFUSED) when the producer starts; the records wait,
/// kprod keeps trying with backoff, and once the ports accept, everything is delivered.
pub async fn refused_at_start_then_recovery(env: Env) -> Summary {
    env.refuse(Refusal::Closed);
    let counting = Counting::default();
    let p = ProducerHandle::with_connector(env.config(), counting.clone()).expect("config");
    let mut l = env.ledger();
    l.enqueue_n(&p, 50).await;
    wait_until("three refused connects", WAIT, || {
        counting.failures.load(Ordering::SeqCst) >= 3
    })
    .await;
    assert!(counting.attempts.load(Ordering::SeqCst) >= 3);
    assert_eq!(env.stats(Target::All).requests(api_key::PRODUCE), 0);
    env.accept().await;
    l.resolve(RESOLVE).await;
    p.close().await;
    let s = env.check(&l).await;
    assert_eq!(s.delivered, 50, "{s:?}");
    s
}

/// Mid-run, every connection is cut and new ones are reset on accept, on every proxy; kprod
/// retries with backoff and delivers everything once connections are accepted again.
pub async fn refused_during_run(env: Env) -> Summary {
    let p = producer(env.config());
    let mut l = env.ledger();
    l.enqueue_n(&p, 60).await;
    l.resolve(RESOLVE).await;
    env.refuse(Refusal::Reset);
    assert!(env.cut_all() >= 1);
    l.enqueue_n(&p, 60).await;
    env.wait_for("three reset connects", WAIT, Target::All, |s| {
        s.reset_on_accept >= 3
    })
    .await;
    env.accept().await;
    l.resolve(RESOLVE).await;
    p.close().await;
    let s = env.check(&l).await;
    assert!(s.all_delivered(), "{s:?}");
    assert_eq!(s.in_log, 120);
    s
}

/// The handshake breaks on every proxy: an ApiVersions response is lost twice per proxy
/// (after the broker answered), an InitProducerId request is dropped before the broker sees
/// it, and an InitProducerId response is lost after the broker handed out a producer id.
/// kprod reconnects and asks again each time. Every proxy fronts a leader, so each loses
/// exactly two ApiVersions responses; InitProducerId goes wherever kprod asks, so its faults
/// number two at least (exactly two with one proxy).
pub async fn cut_during_handshake(env: Env) -> Summary {
    env.add_rule(
        Target::All,
        Rule::on(api_key::API_VERSIONS, Fault::Cut).times(2),
    );
    env.add_rule(Target::All, Rule::on(api_key::INIT_PRODUCER_ID, Fault::Cut));
    env.add_rule(
        Target::All,
        Rule::on(api_key::INIT_PRODUCER_ID, Fault::Reset),
    );
    let p = producer(env.config());
    let mut l = env.ledger();
    l.enqueue_n(&p, 60).await;
    l.resolve(RESOLVE).await;
    p.close().await;
    let n = env.count(Target::All);
    let st = env.stats(Target::All);
    assert_eq!(
        st.faults_where(|k, _| k == api_key::API_VERSIONS),
        2 * n,
        "{st:?}"
    );
    let init = st.faults_where(|k, _| k == api_key::INIT_PRODUCER_ID);
    assert!((2..=2 * n).contains(&init), "{st:?}");
    assert!(st.requests(api_key::INIT_PRODUCER_ID) >= 2, "{st:?}");
    let s = env.check(&l).await;
    assert_eq!(s.delivered, 60, "{s:?}");
    s
}

// close() during faults -----------------------------------------------------------------------

/// close() while every Produce response is blackholed on every proxy: close() returns within
/// the delivery timeout plus one request timeout, and every record has a truthful outcome.
pub async fn close_while_blackholed(env: Env) -> Summary {
    let cfg = ProducerConfig {
        max_in_flight: 1,
        request_timeout: Duration::from_millis(400),
        delivery_timeout: Duration::from_millis(1200),
        ..env.config()
    };
    env.add_rule(
        Target::All,
        Rule::on(api_key::PRODUCE, Fault::Blackhole).forever(),
    );
    let p = producer(cfg.clone());
    let mut l = env.ledger();
    l.enqueue_n(&p, 80).await;
    env.wait_for("a blackholed Produce", WAIT, Target::All, |s| {
        s.faults_where(|k, _| k == api_key::PRODUCE) >= 1
    })
    .await;
    let start = Instant::now();
    tokio::time::timeout(RESOLVE, p.close())
        .await
        .expect("close() returned");
    let took = start.elapsed();
    // Generous slack for a loaded machine: a close that waits for the blackholed requests
    // beyond the delivery timeout (or hangs) takes much longer, or trips the timeout above.
    assert!(
        took <= cfg.delivery_timeout + 2 * cfg.request_timeout + Duration::from_secs(10),
        "{took:?}"
    );
    l.resolve(Duration::from_secs(1)).await;
    let s = env.check(&l).await;
    assert_eq!(s.delivered + s.delivered_without_offset, 0, "{s:?}");
    assert!(s.failed_possibly_persisted > 0, "{s:?}");
    assert!(s.failed_not_persisted > 0, "{s:?}");
    // The send after close is refused, the record handed back.
    let r = l.next_record(0);
    match p.enqueue(r.clone()).await {
        Err(e) => match e.kind {
            ErrorKind::Refused(se) => assert_eq!(se.into_record().value, r.value),
            other => panic!("{other:?}"),
        },
        Ok(_) => panic!("accepted after close"),
    }
    s
}

/// close() right after the records were handed over, while Produce responses of one leader
/// are being lost: close() waits for the retries, and every record is delivered once.
pub async fn close_during_cuts(env: Env) -> Summary {
    let t = Target::LeaderOf(0);
    env.add_rule(t, Rule::on(api_key::PRODUCE, Fault::Cut).every(1).times(4));
    let p = producer(ProducerConfig {
        batch_size: 100,
        ..env.config()
    });
    let mut l = env.ledger();
    l.enqueue_n(&p, 300).await;
    tokio::time::timeout(RESOLVE, p.close())
        .await
        .expect("close() returned");
    l.resolve(Duration::from_secs(1)).await;
    assert_eq!(env.faults(t, api_key::PRODUCE, |f| *f == Fault::Cut), 4);
    let s = env.check(&l).await;
    assert!(s.all_delivered(), "{s:?}");
    assert_eq!(s.in_log, 300);
    s
}

// Requests acted on late ----------------------------------------------------------------------

/// A zombie request (the model's `Stall`): the second Produce to the leader of partition 0,
/// and every later request of its connection, are held by the proxy until kprod gave the
/// connection up at its request timeout and had every record delivered through retries on
/// a new one; then the broker acts on the old requests (a duplicate, or a sequence behind
/// its last: never appended). Every record is in the log once, in order, at its offset.
pub async fn zombie_produce_after_its_retry(env: Env) -> Summary {
    let t = Target::LeaderOf(0);
    env.add_rule(t, Rule::on(api_key::PRODUCE, Fault::Zombie).skip(1));
    let p = producer(env.config());
    let mut l = env.ledger();
    l.enqueue_n(&p, 60).await;
    l.resolve(RESOLVE).await;
    let outcomes = l.outcomes();
    assert_eq!(
        outcomes.delivered, 60,
        "delivered through the retries: {outcomes:?}"
    );
    // kprod closed the held connection at its request timeout, before it retried.
    env.wait_for("the zombie requests held", WAIT, t, |s| s.zombies_held > 0)
        .await;
    let released = env.release_zombies(t);
    assert!(released > 0);
    env.wait_for("the zombie requests answered", WAIT, t, |s| {
        s.zombies_answered == released as u64
    })
    .await;
    p.close().await;
    assert_eq!(env.faults(t, api_key::PRODUCE, |f| *f == Fault::Zombie), 1);
    let s = env.check(&l).await;
    assert!(s.all_delivered(), "{s:?}");
    s
}

//! A TCP fault proxy (tokio) between a Kafka client and a broker, controlled from the test.
//!
//! Every connection accepted on the proxy's port is forwarded to the upstream broker. The
//! proxy reads both directions as Kafka frames (a 4-byte big-endian size, then the frame), so
//! it acts on whole requests and responses: each request's API key is read from its header,
//! and since a Kafka broker answers the requests of a connection in order, the response that
//! comes back next is the one to the oldest unanswered request.
//!
//! Faults are [`Rule`]s: the first rule that matches a request decides what happens to that
//! request's response ([`Fault`]). Connections can also be refused ([`Proxy::refuse`]) or cut
//! all at once ([`Proxy::cut_all`]). [`Proxy::stats`] counts what passed and what was done, so
//! a test waits for a fault to have happened ([`Proxy::wait_for`]) instead of sleeping.
//!
//! Point the client's bootstrap list at [`Proxy::addr`], and make the broker advertise the
//! proxy's address in Metadata (`Tansu::start_advertising`), so that connections directed by
//! metadata go through the proxy as well.

use std::collections::BTreeMap;
use std::io;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::sync::mpsc;
use tokio::task::{AbortHandle, JoinHandle};

/// Largest frame the proxy forwards; a larger size prefix closes the connection.
const MAX_FRAME: usize = 64 * 1024 * 1024;
/// How long [`Proxy::accept`] keeps trying to bind the port again.
const REBIND_TIMEOUT: Duration = Duration::from_secs(10);

/// What happens to the response of a request a [`Rule`] matched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Forward the request; when the broker's response arrives (so the broker has processed
    /// the request), drop it and close both sides.
    Cut,
    /// Drop the request without forwarding it and close both sides: the broker never sees it.
    Reset,
    /// Forward the request, and from its response on forward nothing back on this connection,
    /// which stays open: the client's request timeout must fire.
    Blackhole,
    /// Hold the response until this long after it arrived from the broker (later responses
    /// wait behind it, as they do on a TCP stream).
    Delay(Duration),
    /// Forward only the first `n` bytes of the response frame (its size prefix included),
    /// then close both sides.
    Truncate(usize),
    /// Remove the last `n` bytes of the response and rewrite its size prefix to match: a
    /// well-framed but truncated response. The connection stays open.
    ShortFrame(usize),
    /// XOR the byte at `offset` of the response frame (counted after the size prefix: bytes
    /// 0..4 are the correlation id) with `mask`. Offsets past the end change nothing.
    Flip {
        /// Byte offset after the size prefix.
        offset: usize,
        /// Bits to flip.
        mask: u8,
    },
    /// Replace the response's size prefix with this value and forward the body unchanged.
    Size(i32),
    /// A zombie request: hold the request, and every later one of its connection, without
    /// forwarding them, until the client gives the connection up; then keep them until
    /// [`Proxy::release_zombies`] sends them to the broker on a connection of the proxy's own
    /// (the answers are dropped). The broker acts on the request after the client retried it
    /// elsewhere, as Kafka does with a request it read before it noticed the client's close.
    Zombie,
}

/// Which requests a [`Rule`] applies to, and how often.
///
/// A [`Fault::Reset`] or [`Fault::Zombie`] rule counts requests as they arrive from the
/// client; every other rule
/// counts responses as they arrive from the broker (a response that never comes, because its
/// connection closed first, does not count).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    /// The API key to match, or `None` for every request.
    pub api_key: Option<i16>,
    /// Matching requests to let pass before the fault applies (counted across connections).
    pub skip: u64,
    /// How many times the fault applies; `u64::MAX` for ever.
    pub times: u64,
    /// After each application, let this many matching requests pass before the next one.
    pub every: u64,
    /// The fault.
    pub fault: Fault,
}

impl Rule {
    /// A rule that applies `fault` once, to the next request with `api_key`.
    pub fn on(api_key: i16, fault: Fault) -> Self {
        Self {
            api_key: Some(api_key),
            skip: 0,
            times: 1,
            every: 0,
            fault,
        }
    }

    /// A rule that applies `fault` to the next request of any API.
    pub fn any(fault: Fault) -> Self {
        Self {
            api_key: None,
            ..Self::on(0, fault)
        }
    }

    /// Lets `n` matching requests pass first.
    pub fn skip(mut self, n: u64) -> Self {
        self.skip = n;
        self
    }

    /// Applies the fault `n` times.
    pub fn times(mut self, n: u64) -> Self {
        self.times = n;
        self
    }

    /// Applies the fault to every matching request from now on.
    pub fn forever(mut self) -> Self {
        self.times = u64::MAX;
        self
    }

    /// Lets `n` matching requests pass between two applications.
    pub fn every(mut self, n: u64) -> Self {
        self.every = n;
        self
    }
}

/// How [`Proxy::refuse`] refuses connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The listening socket is closed: a connect fails with `ECONNREFUSED`.
    Closed,
    /// Connections are accepted and reset at once (`SO_LINGER` 0): the client sees its
    /// connect succeed and then the connection fail before any response.
    Reset,
}

/// What the proxy has seen and done. Counters only grow.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stats {
    /// Connections accepted and forwarded.
    pub accepted: u64,
    /// Connections accepted and reset by [`Refusal::Reset`].
    pub reset_on_accept: u64,
    /// Connections whose upstream connect failed.
    pub upstream_failed: u64,
    /// Requests forwarded to the broker, by API key.
    pub requests: BTreeMap<i16, u64>,
    /// Responses forwarded to the client (possibly altered), by API key of the request.
    pub responses: BTreeMap<i16, u64>,
    /// Every fault applied, in order, with the API key of the request it hit.
    pub faults: Vec<(i16, Fault)>,
    /// Connections closed by [`Proxy::cut_all`].
    pub cut_by_hand: u64,
    /// Requests a [`Fault::Zombie`] holds, their client gone, until released.
    pub zombies_held: u64,
    /// Requests a [`Fault::Zombie`] sent to the broker late.
    pub zombies_sent: u64,
    /// Answers the broker gave to zombie requests (dropped).
    pub zombies_answered: u64,
}

impl Stats {
    /// Requests forwarded with this API key.
    pub fn requests(&self, api_key: i16) -> u64 {
        self.requests.get(&api_key).copied().unwrap_or(0)
    }

    /// Responses forwarded for this API key.
    pub fn responses(&self, api_key: i16) -> u64 {
        self.responses.get(&api_key).copied().unwrap_or(0)
    }

    /// Faults applied that satisfy `f`.
    pub fn faults_where(&self, f: impl Fn(i16, &Fault) -> bool) -> usize {
        self.faults.iter().filter(|(k, fault)| f(*k, fault)).count()
    }
}

#[derive(Debug, Default)]
struct State {
    upstream: Option<SocketAddr>,
    rules: Vec<Rule>,
    refusal: Option<Refusal>,
    next_conn: u64,
    /// Live connections: the tasks of both directions.
    conns: BTreeMap<u64, [AbortHandle; 2]>,
    /// Requests of zombie connections whose client left, waiting for `release_zombies`.
    zombies: Vec<(SocketAddr, Vec<Vec<u8>>)>,
    stats: Stats,
}

impl State {
    /// The fault for a request with `api_key` (when `on_request`: only [`Fault::Reset`] and
    /// [`Fault::Zombie`] rules apply) or for its response (every other rule), consuming the
    /// first rule that matches.
    fn fault_for(&mut self, api_key: i16, on_request: bool) -> Option<Fault> {
        for rule in &mut self.rules {
            if rule.times == 0
                || rule.api_key.is_some_and(|k| k != api_key)
                || matches!(rule.fault, Fault::Reset | Fault::Zombie) != on_request
            {
                continue;
            }
            if rule.skip > 0 {
                rule.skip -= 1;
                return None;
            }
            if rule.times != u64::MAX {
                rule.times -= 1;
            }
            rule.skip = rule.every;
            return Some(rule.fault);
        }
        None
    }
}

#[derive(Debug, Default)]
struct Shared {
    state: Mutex<State>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The proxy. Dropping it stops accepting and closes every connection.
#[derive(Debug)]
pub struct Proxy {
    shared: Arc<Shared>,
    port: u16,
    acceptor: Mutex<Option<JoinHandle<()>>>,
}

impl Proxy {
    /// Binds a free 127.0.0.1 port and starts accepting. Connections accepted before
    /// [`Self::set_upstream`] are closed.
    pub async fn bind() -> io::Result<Self> {
        let listener = listen(0)?;
        let port = listener.local_addr()?.port();
        let shared = Arc::new(Shared::default());
        let acceptor = tokio::spawn(accept_loop(shared.clone(), listener));
        Ok(Self {
            shared,
            port,
            acceptor: Mutex::new(Some(acceptor)),
        })
    }

    /// Binds a free port forwarding to `upstream`.
    pub async fn start(upstream: SocketAddr) -> io::Result<Self> {
        let p = Self::bind().await?;
        p.set_upstream(upstream);
        Ok(p)
    }

    /// Where new connections are forwarded.
    pub fn set_upstream(&self, upstream: SocketAddr) {
        self.shared.lock().upstream = Some(upstream);
    }

    /// The proxy's address.
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::LOCALHOST, self.port))
    }

    /// The proxy's port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `127.0.0.1:port`, for a bootstrap list.
    pub fn bootstrap(&self) -> String {
        self.addr().to_string()
    }

    /// Adds a fault rule after the existing ones.
    pub fn add_rule(&self, rule: Rule) {
        self.shared.lock().rules.push(rule);
    }

    /// Removes every fault rule. Responses already held by a fault keep it.
    pub fn clear_rules(&self) {
        self.shared.lock().rules.clear();
    }

    /// Refuses new connections until [`Self::accept`]. Established connections stay.
    pub fn refuse(&self, how: Refusal) {
        self.shared.lock().refusal = Some(how);
        if how == Refusal::Closed {
            let task = self
                .acceptor
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .take();
            if let Some(t) = task {
                t.abort(); // drops the listener: the port now refuses
            }
        }
    }

    /// Accepts connections again, binding the port again if it was closed.
    ///
    /// # Panics
    /// If the port cannot be bound again within 10 s (another socket took it).
    pub async fn accept(&self) {
        self.shared.lock().refusal = None;
        let listening = self
            .acceptor
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .is_some_and(|t| !t.is_finished());
        if listening {
            return;
        }
        let deadline = Instant::now() + REBIND_TIMEOUT;
        let listener = loop {
            match listen(self.port) {
                Ok(l) => break l,
                // The old listener may not be dropped yet: try again shortly.
                Err(_) if Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                Err(e) => panic!("cannot bind proxy port {} again: {e}", self.port),
            }
        };
        let task = tokio::spawn(accept_loop(self.shared.clone(), listener));
        *self.acceptor.lock().unwrap_or_else(|e| e.into_inner()) = Some(task);
    }

    /// Closes every established connection now. Returns how many were closed.
    pub fn cut_all(&self) -> usize {
        let mut s = self.shared.lock();
        let conns = std::mem::take(&mut s.conns);
        s.stats.cut_by_hand += conns.len() as u64;
        for tasks in conns.values() {
            tasks.iter().for_each(AbortHandle::abort);
        }
        conns.len()
    }

    /// Clears every rule and accepts connections again: the proxy forwards faithfully.
    pub async fn heal(&self) {
        self.clear_rules();
        self.accept().await;
    }

    /// Sends every request a [`Fault::Zombie`] holds (their clients gone) to the broker now,
    /// each connection's on a connection of the proxy's own. Returns how many requests.
    pub fn release_zombies(&self) -> usize {
        let held = std::mem::take(&mut self.shared.lock().zombies);
        let n = held.iter().map(|h| h.1.len()).sum();
        for (upstream, frames) in held {
            tokio::spawn(send_zombies(self.shared.clone(), upstream, frames));
        }
        n
    }

    /// Connections currently established.
    pub fn open_connections(&self) -> usize {
        self.shared.lock().conns.len()
    }

    /// A snapshot of the counters.
    pub fn stats(&self) -> Stats {
        self.shared.lock().stats.clone()
    }

    /// Waits until `cond` holds for the stats, checking every 5 ms, for at most `timeout`.
    /// Returns the stats that satisfied it.
    ///
    /// # Panics
    /// On timeout, with `what` and the last stats.
    pub async fn wait_for(
        &self,
        what: &str,
        timeout: Duration,
        cond: impl Fn(&Stats) -> bool,
    ) -> Stats {
        let deadline = Instant::now() + timeout;
        loop {
            let s = self.stats();
            if cond(&s) {
                return s;
            }
            assert!(
                Instant::now() < deadline,
                "proxy: timed out after {timeout:?} waiting for {what}; stats {s:?}"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        if let Some(t) = self
            .acceptor
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
        {
            t.abort();
        }
        let conns = std::mem::take(&mut self.shared.lock().conns);
        for tasks in conns.values() {
            tasks.iter().for_each(AbortHandle::abort);
        }
    }
}

fn listen(port: u16) -> io::Result<TcpListener> {
    let socket = TcpSocket::new_v4()?;
    socket.set_reuseaddr(true)?;
    socket.bind(SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::LOCALHOST, port)))?;
    socket.listen(128)
}

async fn accept_loop(shared: Arc<Shared>, listener: TcpListener) {
    loop {
        let Ok((client, _)) = listener.accept().await else {
            // Out of descriptors or the like: do not spin.
            tokio::time::sleep(Duration::from_millis(1)).await;
            continue;
        };
        let (refusal, upstream) = {
            let s = shared.lock();
            (s.refusal, s.upstream)
        };
        if refusal.is_some() {
            // Closed refusals drop the listener; one accepted in between is reset as well.
            let _ = client.set_zero_linger();
            shared.lock().stats.reset_on_accept += 1;
            continue;
        }
        let Some(upstream) = upstream else {
            continue; // no upstream yet: close
        };
        let shared = shared.clone();
        tokio::spawn(async move {
            let Ok(server) = TcpStream::connect(upstream).await else {
                shared.lock().stats.upstream_failed += 1;
                let _ = client.set_zero_linger();
                return;
            };
            let _ = client.set_nodelay(true);
            let _ = server.set_nodelay(true);
            start_conn(&shared, client, server);
        });
    }
}

/// A request whose response has not come back yet.
struct Pending {
    api_key: i16,
}

fn start_conn(shared: &Arc<Shared>, client: TcpStream, server: TcpStream) {
    let (cr, cw) = client.into_split();
    let (sr, sw) = server.into_split();
    let (tx, rx) = mpsc::unbounded_channel();
    let mut s = shared.lock();
    let id = s.next_conn;
    s.next_conn += 1;
    s.stats.accepted += 1;
    // Each direction ends the whole connection when it stops: its halves are dropped, and
    // it aborts the other direction, whose halves are then dropped too.
    let up = tokio::spawn(requests(shared.clone(), id, cr, sw, tx));
    let down = tokio::spawn(responses(shared.clone(), id, sr, cw, rx));
    s.conns.insert(id, [up.abort_handle(), down.abort_handle()]);
}

/// Ends connection `id`: aborts both directions.
fn end_conn(shared: &Shared, id: u64) {
    if let Some(tasks) = shared.lock().conns.remove(&id) {
        tasks.iter().for_each(AbortHandle::abort);
    }
}

/// Reads one frame (size prefix included); `None` on EOF, an error or an absurd size.
async fn read_frame(r: &mut OwnedReadHalf) -> Option<Vec<u8>> {
    let mut size = [0u8; 4];
    r.read_exact(&mut size).await.ok()?;
    let n = i32::from_be_bytes(size);
    let n = usize::try_from(n).ok().filter(|n| *n <= MAX_FRAME)?;
    let mut frame = vec![0u8; 4 + n];
    frame[..4].copy_from_slice(&size);
    r.read_exact(&mut frame[4..]).await.ok()?;
    Some(frame)
}

async fn requests(
    shared: Arc<Shared>,
    id: u64,
    mut from_client: OwnedReadHalf,
    mut to_server: OwnedWriteHalf,
    pending: mpsc::UnboundedSender<Pending>,
) {
    while let Some(frame) = read_frame(&mut from_client).await {
        let api_key = match frame.get(4..6) {
            Some(b) => i16::from_be_bytes([b[0], b[1]]),
            None => -1,
        };
        let zombie = {
            let mut s = shared.lock();
            match s.fault_for(api_key, true) {
                Some(Fault::Reset) => {
                    s.stats.faults.push((api_key, Fault::Reset));
                    break;
                }
                Some(Fault::Zombie) => {
                    s.stats.faults.push((api_key, Fault::Zombie));
                    Some(s.upstream)
                }
                _ => {
                    *s.stats.requests.entry(api_key).or_insert(0) += 1;
                    None
                }
            }
        };
        if let Some(upstream) = zombie {
            // Nothing more is forwarded on this connection: every later request is held
            // with this one until the client gives the connection up.
            let mut held = vec![frame];
            while let Some(f) = read_frame(&mut from_client).await {
                held.push(f);
            }
            if let Some(upstream) = upstream {
                let mut s = shared.lock();
                s.stats.zombies_held += held.len() as u64;
                s.zombies.push((upstream, held));
            }
            break;
        }
        // Announce the request before forwarding it: its response cannot overtake it.
        if pending.send(Pending { api_key }).is_err() {
            break;
        }
        if to_server.write_all(&frame).await.is_err() {
            break;
        }
    }
    end_conn(&shared, id);
}

/// Sends held requests to `upstream` on a connection of the proxy's own, reads and drops
/// their answers (for at most 30 s), and counts both.
async fn send_zombies(shared: Arc<Shared>, upstream: SocketAddr, held: Vec<Vec<u8>>) {
    let Ok(server) = TcpStream::connect(upstream).await else {
        shared.lock().stats.upstream_failed += 1;
        return;
    };
    let (mut r, mut w) = server.into_split();
    for f in &held {
        if w.write_all(f).await.is_err() {
            return;
        }
    }
    shared.lock().stats.zombies_sent += held.len() as u64;
    for _ in &held {
        match tokio::time::timeout(Duration::from_secs(30), read_frame(&mut r)).await {
            Ok(Some(_)) => shared.lock().stats.zombies_answered += 1,
            _ => return,
        }
    }
}

async fn responses(
    shared: Arc<Shared>,
    id: u64,
    mut from_server: OwnedReadHalf,
    mut to_client: OwnedWriteHalf,
    mut pending: mpsc::UnboundedReceiver<Pending>,
) {
    // Frames are read as they arrive, each with its arrival time, so that a delay holds a
    // response relative to its own arrival (pipelined responses do not add their delays up).
    let (arrived_tx, mut arrived) = mpsc::unbounded_channel();
    let reader = async move {
        while let Some(frame) = read_frame(&mut from_server).await {
            if arrived_tx
                .send((tokio::time::Instant::now(), frame))
                .is_err()
            {
                break;
            }
        }
        drop(arrived_tx);
        std::future::pending::<()>().await;
    };
    let writer = async move {
        let mut blackhole = false;
        while let Some((at, mut frame)) = arrived.recv().await {
            let Some(p) = pending.recv().await else { break };
            if blackhole {
                continue;
            }
            let fault = {
                let mut s = shared.lock();
                let fault = s.fault_for(p.api_key, false);
                if let Some(f) = fault {
                    s.stats.faults.push((p.api_key, f));
                }
                fault
            };
            match fault {
                None => {}
                // (Request faults never come here.)
                Some(Fault::Cut | Fault::Reset | Fault::Zombie) => break,
                Some(Fault::Blackhole) => {
                    blackhole = true;
                    continue;
                }
                Some(Fault::Delay(d)) => tokio::time::sleep_until(at + d).await,
                Some(Fault::Truncate(n)) => {
                    frame.truncate(n);
                    let _ = to_client.write_all(&frame).await;
                    break;
                }
                Some(Fault::ShortFrame(n)) => {
                    let keep = frame.len().saturating_sub(n).max(4);
                    frame.truncate(keep);
                    let size = (keep - 4) as i32;
                    frame[..4].copy_from_slice(&size.to_be_bytes());
                }
                Some(Fault::Flip { offset, mask }) => {
                    if let Some(b) = frame.get_mut(4 + offset) {
                        *b ^= mask;
                    }
                }
                Some(Fault::Size(size)) => frame[..4].copy_from_slice(&size.to_be_bytes()),
            }
            if to_client.write_all(&frame).await.is_err() {
                break;
            }
            *shared.lock().stats.responses.entry(p.api_key).or_insert(0) += 1;
        }
        shared
    };
    let shared = tokio::select! {
        () = reader => unreachable!("the reader never ends"),
        shared = writer => shared,
    };
    end_conn(&shared, id);
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU64, Ordering};

    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    /// A fake broker: answers each request frame with `[correlation id]["resp"]`, and counts
    /// the requests it read.
    async fn fake_broker() -> (SocketAddr, Arc<AtomicU64>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let seen = Arc::new(AtomicU64::new(0));
        let counter = seen.clone();
        tokio::spawn(async move {
            while let Ok((s, _)) = listener.accept().await {
                let counter = counter.clone();
                tokio::spawn(async move {
                    let (mut r, mut w) = s.into_split();
                    while let Some(frame) = read_frame(&mut r).await {
                        counter.fetch_add(1, Ordering::SeqCst);
                        let mut resp = 8i32.to_be_bytes().to_vec();
                        resp.extend_from_slice(&frame[8..12]);
                        resp.extend_from_slice(b"resp");
                        if w.write_all(&resp).await.is_err() {
                            return;
                        }
                    }
                });
            }
        });
        (addr, seen)
    }

    /// A request frame: api key, version 0, correlation id, nothing else.
    fn request(api_key: i16, correlation_id: i32) -> Vec<u8> {
        let mut f = 8i32.to_be_bytes().to_vec();
        f.extend_from_slice(&api_key.to_be_bytes());
        f.extend_from_slice(&0i16.to_be_bytes());
        f.extend_from_slice(&correlation_id.to_be_bytes());
        f
    }

    async fn setup(rule: Option<Rule>) -> (Proxy, TcpStream, Arc<AtomicU64>) {
        let (broker, seen) = fake_broker().await;
        let proxy = Proxy::start(broker).await.expect("proxy");
        if let Some(r) = rule {
            proxy.add_rule(r);
        }
        let c = TcpStream::connect(proxy.addr()).await.expect("connect");
        (proxy, c, seen)
    }

    /// Reads until the connection ends (EOF, or an error such as a reset): what came before.
    /// `None` if it is still open after 10 s.
    async fn read_to_end(c: &mut TcpStream) -> Option<Vec<u8>> {
        let mut buf = Vec::new();
        let ended = tokio::time::timeout(Duration::from_secs(10), c.read_to_end(&mut buf)).await;
        ended.is_ok().then_some(buf)
    }

    async fn response(c: &mut TcpStream) -> Vec<u8> {
        let mut buf = vec![0u8; 12];
        tokio::time::timeout(Duration::from_secs(2), c.read_exact(&mut buf))
            .await
            .expect("in time")
            .expect("read");
        buf
    }

    const EXPECTED: [u8; 12] = [0, 0, 0, 8, 0, 0, 0, 7, b'r', b'e', b's', b'p'];

    #[tokio::test]
    async fn forwards_faithfully_and_counts() {
        let (proxy, mut c, seen) = setup(None).await;
        for _ in 0..3 {
            c.write_all(&request(3, 7)).await.expect("write");
            assert_eq!(response(&mut c).await, EXPECTED);
        }
        assert_eq!(seen.load(Ordering::SeqCst), 3);
        let st = proxy.stats();
        assert_eq!((st.accepted, st.requests(3), st.responses(3)), (1, 3, 3));
    }

    #[tokio::test]
    async fn cut_lets_the_broker_process_then_closes() {
        let (proxy, mut c, seen) = setup(Some(Rule::on(0, Fault::Cut).skip(1))).await;
        c.write_all(&request(0, 7)).await.expect("write");
        assert_eq!(response(&mut c).await, EXPECTED, "the first one passes");
        c.write_all(&request(0, 7)).await.expect("write");
        assert_eq!(
            read_to_end(&mut c).await,
            Some(vec![]),
            "closed, no response"
        );
        assert_eq!(seen.load(Ordering::SeqCst), 2, "the broker processed both");
        assert_eq!(proxy.stats().faults, vec![(0, Fault::Cut)]);
    }

    #[tokio::test]
    async fn reset_drops_the_request() {
        let (_proxy, mut c, seen) = setup(Some(Rule::on(22, Fault::Reset))).await;
        c.write_all(&request(22, 7)).await.expect("write");
        assert_eq!(
            read_to_end(&mut c).await,
            Some(vec![]),
            "reset, no response"
        );
        assert_eq!(seen.load(Ordering::SeqCst), 0);
    }

    #[tokio::test]
    async fn blackhole_answers_nothing_more_on_the_connection() {
        let (proxy, mut c, seen) = setup(Some(Rule::on(0, Fault::Blackhole))).await;
        c.write_all(&request(0, 7)).await.expect("write");
        c.write_all(&request(3, 7)).await.expect("write");
        proxy
            .wait_for("both processed", Duration::from_secs(2), |s| {
                s.requests(0) + s.requests(3) == 2
            })
            .await;
        let mut buf = [0u8; 1];
        let r = tokio::time::timeout(Duration::from_millis(300), c.read(&mut buf)).await;
        assert!(
            r.is_err(),
            "nothing comes back, and the connection stays open"
        );
        assert_eq!(seen.load(Ordering::SeqCst), 2);
        assert_eq!(proxy.open_connections(), 1);
        assert_eq!(proxy.cut_all(), 1);
        assert_eq!(read_to_end(&mut c).await, Some(vec![]), "cut, no response");
    }

    #[tokio::test]
    async fn zombie_reaches_the_broker_after_the_client_left() {
        let (proxy, mut c, seen) = setup(Some(Rule::on(0, Fault::Zombie).skip(1))).await;
        c.write_all(&request(0, 7)).await.expect("write");
        assert_eq!(response(&mut c).await, EXPECTED, "the first one passes");
        c.write_all(&request(0, 7)).await.expect("write");
        c.write_all(&request(3, 7)).await.expect("write");
        let mut buf = [0u8; 1];
        let r = tokio::time::timeout(Duration::from_millis(50), c.read(&mut buf)).await;
        assert!(r.is_err(), "nothing comes back while held");
        assert_eq!(seen.load(Ordering::SeqCst), 1, "held, not forwarded");
        drop(c); // the client gives the connection up
        proxy
            .wait_for("both held", Duration::from_secs(2), |s| s.zombies_held == 2)
            .await;
        assert_eq!(seen.load(Ordering::SeqCst), 1, "still held");
        assert_eq!(proxy.release_zombies(), 2);
        let st = proxy
            .wait_for("the zombies answered", Duration::from_secs(2), |s| {
                s.zombies_answered == 2
            })
            .await;
        assert_eq!(
            seen.load(Ordering::SeqCst),
            3,
            "the broker acted on both, late"
        );
        assert_eq!((st.zombies_sent, st.faults.len()), (2, 1));
    }

    #[tokio::test]
    async fn delay_holds_a_response() {
        let d = Duration::from_millis(200);
        let (_proxy, mut c, _) = setup(Some(Rule::any(Fault::Delay(d)))).await;
        let start = Instant::now();
        c.write_all(&request(0, 7)).await.expect("write");
        assert_eq!(response(&mut c).await, EXPECTED);
        assert!(start.elapsed() >= d);
    }

    #[tokio::test]
    async fn frame_faults_alter_the_response() {
        let cases: Vec<(Fault, Vec<u8>)> = vec![
            (Fault::Truncate(6), EXPECTED[..6].to_vec()),
            (Fault::ShortFrame(2), {
                let mut v = vec![0, 0, 0, 6, 0, 0, 0, 7, b'r', b'e'];
                v.truncate(10);
                v
            }),
            (Fault::Flip { offset: 3, mask: 1 }, {
                let mut v = EXPECTED.to_vec();
                v[7] ^= 1;
                v
            }),
            (Fault::Size(i32::MAX), {
                let mut v = EXPECTED.to_vec();
                v[..4].copy_from_slice(&i32::MAX.to_be_bytes());
                v
            }),
        ];
        for (fault, expected) in cases {
            let (proxy, mut c, _) = setup(Some(Rule::on(0, fault))).await;
            c.write_all(&request(0, 7)).await.expect("write");
            let mut got = vec![0u8; expected.len()];
            tokio::time::timeout(Duration::from_secs(2), c.read_exact(&mut got))
                .await
                .expect("in time")
                .expect("read");
            assert_eq!(got, expected, "{fault:?}");
            assert_eq!(proxy.stats().faults, vec![(0, fault)]);
        }
    }

    #[tokio::test]
    async fn refusals_and_recovery() {
        let (proxy, mut c, _) = setup(None).await;
        c.write_all(&request(3, 7)).await.expect("write");
        assert_eq!(response(&mut c).await, EXPECTED, "established");
        proxy.refuse(Refusal::Closed);
        let deadline = Instant::now() + Duration::from_secs(2);
        // Until the listener is dropped, a connect may still be accepted (and reset).
        loop {
            match TcpStream::connect(proxy.addr()).await {
                Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => break,
                other => assert!(Instant::now() < deadline, "still not refused: {other:?}"),
            }
            tokio::task::yield_now().await;
        }
        assert_eq!(proxy.open_connections(), 1, "established connections stay");
        drop(c);
        proxy.accept().await;
        let mut c = TcpStream::connect(proxy.addr())
            .await
            .expect("accepted again");
        c.write_all(&request(3, 7)).await.expect("write");
        assert_eq!(response(&mut c).await, EXPECTED);

        proxy.refuse(Refusal::Reset);
        let mut r = TcpStream::connect(proxy.addr())
            .await
            .expect("the connect succeeds");
        assert_eq!(
            read_to_end(&mut r).await,
            Some(vec![]),
            "then the connection fails"
        );
        assert_eq!(proxy.stats().reset_on_accept, 1);
    }
}

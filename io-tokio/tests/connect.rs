//! `TcpConnector`'s address choice over real loopback sockets: a name that resolves to
//! several addresses, the first of which drops connection attempts.

use std::net::SocketAddr;
use std::time::Duration;

use kprod_tokio::connect_any;
use tokio::net::{TcpListener, TcpSocket, TcpStream};

/// A loopback address that drops connection attempts (SYNs), as a dead host or a firewall
/// does: a listener that never accepts, its accept queue (backlog 0) filled first by
/// connections kept open. Returns the address and what must stay alive for it.
async fn blackhole() -> (SocketAddr, TcpListener, Vec<TcpStream>) {
    let socket = TcpSocket::new_v4().expect("a socket");
    socket.bind("127.0.0.1:0".parse().unwrap()).expect("bind");
    let addr = socket.local_addr().unwrap();
    let listener = socket.listen(0).expect("listen");
    // Connect until an attempt is dropped: the queue is full from then on.
    let mut queued = Vec::new();
    for _ in 0..16 {
        match tokio::time::timeout(Duration::from_secs(1), TcpStream::connect(addr)).await {
            Ok(Ok(s)) => queued.push(s),
            Ok(Err(e)) => panic!("connecting to the never-accepting listener: {e}"),
            Err(_) => return (addr, listener, queued),
        }
    }
    panic!("16 connections to a listener with backlog 0 were all queued")
}

/// The first address drops the attempt: the connector tries the next one alongside it after
/// a short delay and connects there, instead of waiting for the kernel to give up on the
/// first (about two minutes, beyond the producer's `connect.timeout`, so that before, a
/// bootstrap name listing a dead address first was never connected to).
#[tokio::test]
async fn a_name_whose_first_address_drops_connects_to_the_next() {
    let (dead, _listener, _queued) = blackhole().await;
    let good = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let good_addr = good.local_addr().unwrap();
    let accept = tokio::spawn(async move { good.accept().await.map(|(_, peer)| peer) });
    let stream = tokio::time::timeout(Duration::from_secs(20), connect_any(&[dead, good_addr]))
        .await
        .expect("connected before the first address's attempt gave up")
        .expect("connected");
    assert_eq!(stream.peer_addr().unwrap(), good_addr);
    let peer = accept.await.unwrap().unwrap();
    assert_eq!(peer, stream.local_addr().unwrap());
}

/// Every address refusing: the last error, at once.
#[tokio::test]
async fn every_address_refusing_is_an_error() {
    let closed = |l: std::net::TcpListener| l.local_addr().unwrap();
    let a = closed(std::net::TcpListener::bind("127.0.0.1:0").unwrap());
    let b = closed(std::net::TcpListener::bind("127.0.0.1:0").unwrap());
    let e = connect_any(&[a, b]).await.expect_err("nothing listens");
    assert_eq!(e.kind(), std::io::ErrorKind::ConnectionRefused);
    let none = connect_any(&[]).await.expect_err("no address");
    assert_eq!(none.kind(), std::io::ErrorKind::NotFound);
}

/// A loopback listener's address, and a task that accepts `n` connections and keeps them.
async fn listener_keeping(n: usize) -> (String, tokio::task::JoinHandle<Vec<TcpStream>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let accept = tokio::spawn(async move {
        let mut kept = Vec::new();
        for _ in 0..n {
            kept.push(listener.accept().await.unwrap().0);
        }
        kept
    });
    (addr, accept)
}

/// `TcpConnector` sets its `SocketOptions` on the sockets it opens (`socket.keepalive.enable`,
/// `socket.nagle.disable`, the buffer sizes), and the defaults leave the buffers to the
/// operating system.
#[tokio::test]
async fn the_connector_sets_its_socket_options() {
    use kprod_tokio::{Connector, SocketOptions, TcpConnector};

    let (addr, accept) = listener_keeping(2).await;
    let default = TcpConnector::default().connect(&addr).await.unwrap();
    let mut options = SocketOptions::default();
    options.keepalive = true;
    options.nodelay = false;
    // Below Linux's default caps (net.core.wmem_max, rmem_max: 212,992); Linux reports twice
    // what was set.
    options.send_buffer = Some(100_000);
    options.receive_buffer = Some(100_000);
    let tuned = TcpConnector::new(options).connect(&addr).await.unwrap();
    let _kept = accept.await.unwrap();

    let d = socket2::SockRef::from(&default);
    assert!(default.nodelay().unwrap());
    assert!(!d.keepalive().unwrap());
    let t = socket2::SockRef::from(&tuned);
    assert!(!tuned.nodelay().unwrap());
    assert!(t.keepalive().unwrap());
    let set = [100_000, 200_000];
    assert!(
        set.contains(&t.send_buffer_size().unwrap()),
        "{:?}",
        t.send_buffer_size()
    );
    assert!(
        set.contains(&t.recv_buffer_size().unwrap()),
        "{:?}",
        t.recv_buffer_size()
    );
    assert!(
        !set.contains(&d.send_buffer_size().unwrap())
            && !set.contains(&d.recv_buffer_size().unwrap()),
        "the defaults are the operating system's: {:?} {:?}",
        d.send_buffer_size(),
        d.recv_buffer_size()
    );
}

/// `SocketOptions::address_family` (librdkafka's `broker.address.family`): an IPv4 listener is
/// reached with `Any` and `V4`; with `V6` it is not tried, and the error says why.
#[tokio::test]
async fn the_address_family_chooses_which_addresses_are_tried() {
    use kprod_tokio::{AddressFamily, Connector, SocketOptions, TcpConnector};

    let (addr, accept) = listener_keeping(2).await;
    let with = |family| {
        let mut o = SocketOptions::default();
        o.address_family = family;
        TcpConnector::new(o)
    };
    with(AddressFamily::Any).connect(&addr).await.expect("any");
    with(AddressFamily::V4).connect(&addr).await.expect("IPv4");
    let e = with(AddressFamily::V6).connect(&addr).await.unwrap_err();
    assert!(e.to_string().contains("is an IPv6 address"), "{e}");
    assert_eq!(accept.await.unwrap().len(), 2);
}

/// Review finding (2026-12-05): every connect to a name began at its first address, and on
/// a LAN the first address wins the race, so one that takes TCP connections but is no
/// working broker (hung, shutting down, a TLS failure on that host only) held every
/// reconnect while the name's other brokers were healthy. Each connect to a name now begins
/// at the next address, as the Java client's does.
#[tokio::test]
async fn each_connect_to_a_name_begins_at_its_next_address() {
    use kprod_tokio::TcpConnector;
    let a = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let b = TcpListener::bind("127.0.0.2:0")
        .await
        .expect("127.0.0.2 is loopback on Linux");
    let addrs = vec![a.local_addr().unwrap(), b.local_addr().unwrap()];
    let connector = TcpConnector::default();
    let mut reached = Vec::new();
    for _ in 0..4 {
        let stream = connector
            .connect_resolved("brokers.example:9092", addrs.clone())
            .await
            .expect("connected");
        reached.push(stream.peer_addr().unwrap());
    }
    assert_eq!(reached, [addrs[0], addrs[1], addrs[0], addrs[1]]);
    // Another name has a rotation of its own, and clones share it.
    let clone = connector.clone();
    let other = clone
        .connect_resolved("other.example:9092", addrs.clone())
        .await
        .unwrap();
    assert_eq!(other.peer_addr().unwrap(), addrs[0]);
    let again = clone
        .connect_resolved("brokers.example:9092", addrs.clone())
        .await
        .unwrap();
    assert_eq!(again.peer_addr().unwrap(), addrs[0]);
    drop((a, b));
}

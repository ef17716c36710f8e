//! `Producer::handle_writing`: a request that waited behind others on a slow link has its
//! request timeout run from when the writer reached it (as the Java client's runs from when
//! it hands the connection a request), not from its creation.

mod harness;

use std::time::Duration;

use harness::{respond, Harness, TOPIC};
use kprod_core::Record;

fn record(v: &str) -> Record {
    Record::new(TOPIC, v.to_owned()).with_partition(0)
}

/// Two Produce requests pipelined at `t0` on one connection (a first record acknowledged
/// before, so the partition pipelines), the first's bytes beginning at `first` and the
/// second's at `second`; a request timeout of 10 s. Then `report` runs 8 s later (the writer
/// still busy with the first, say), the first is answered at 9 s, and the function returns
/// whether the requests' connection is still open at 10.5 s, 17.9 s and 18.1 s.
fn open_at(report: impl FnOnce(&mut Harness, u64, u64)) -> [bool; 3] {
    let mut h = Harness::new(|c| {
        c.request_timeout = Duration::from_secs(10);
        c.write_reports = true;
    });
    h.p.send(h.now, record("a")).unwrap();
    h.answer_all();
    let t0 = h.now;
    let first = h.sent;
    h.p.send(h.now, record("b")).unwrap();
    h.drain();
    let second = h.sent;
    h.p.send(h.now, record("c")).unwrap();
    h.drain();
    assert!(h.sent > second, "the second request went out at once");
    let conn = h.conn;
    let fb = h.next_frame().expect("the first request");
    let _fc = h.next_frame().expect("the second request");
    h.now = t0 + Duration::from_secs(8);
    report(&mut h, first, second);
    h.drain();
    h.now = t0 + Duration::from_secs(9);
    let a = respond(&fb, &mut h.next_offset);
    h.feed(a);
    [10_500, 17_900, 18_100].map(|ms| {
        h.now = t0 + Duration::from_millis(ms);
        h.p.handle_timeout(h.now);
        h.drain();
        h.conn == conn
    })
}

fn writing(h: &mut Harness, since: u64) {
    let conn = h.conn.unwrap();
    h.p.handle_writing(h.now, conn, since);
}

#[test]
fn a_request_still_queued_behind_another_times_out_from_the_report() {
    // The writer has been busy since the first request's start: the second, behind it,
    // runs its time from 8 s, to 18 s.
    assert_eq!(
        open_at(|h, first, _| writing(h, first)),
        [true, true, false]
    );
    // So it does once the writer reached it.
    assert_eq!(
        open_at(|h, first, second| writing(h, (first + second) / 2)),
        [true, true, false]
    );
}

#[test]
fn a_request_reached_before_the_stretch_keeps_its_time() {
    // The writer stood at the second request's start when the stretch began: it was
    // reached before, and its time runs from its creation, to 10 s.
    assert_eq!(
        open_at(|h, _, second| writing(h, second)),
        [false, false, false]
    );
}

//! `TopicName`: a record's topic without a `String` per record. One test in this binary: the
//! counting allocator below counts every thread's allocations.

use std::alloc::System;
use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use bytes::Bytes;
use kprod_core::{Record, TopicName};
use stats_alloc::{StatsAlloc, INSTRUMENTED_SYSTEM};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

fn allocations_in(f: impl FnOnce()) -> usize {
    let before = GLOBAL.stats().allocations;
    f();
    GLOBAL.stats().allocations - before
}

/// A static name and clones of a shared one make records without allocating; every form of
/// the same text is the same name (equal, same hash and order, found by `&str` in maps), and
/// it reads as its text.
#[test]
fn names_compare_as_text_and_clone_without_allocating() {
    const ORDERS: TopicName = TopicName::from_static("orders");
    let shared = TopicName::from(String::from("orders"));
    let value = Bytes::from_static(b"v");
    // The allocator counts every thread's allocations, and the test harness's own thread
    // may allocate meanwhile (a CI run on a loaded machine saw 4 in one pass): the fewest of
    // five passes is what the records cost (an allocation per record would show 2,000 in
    // every pass).
    let n = (0..5)
        .map(|_| {
            allocations_in(|| {
                for _ in 0..1_000 {
                    let a = Record::new(ORDERS, value.clone());
                    let b = Record::new(shared.clone(), value.clone());
                    assert_eq!(a.topic, b.topic);
                    drop((a, b));
                }
            })
        })
        .min()
        .unwrap_or(usize::MAX);
    assert_eq!(n, 0, "allocations for 2,000 records");

    let forms = [
        ORDERS,
        shared.clone(),
        TopicName::from("orders"),
        TopicName::from(Arc::<str>::from("orders")),
        TopicName::from(&String::from("orders")),
        TopicName::from(Box::<str>::from("orders")),
        TopicName::from(std::borrow::Cow::Borrowed("orders")),
    ];
    let hashes: HashSet<TopicName> = forms.iter().cloned().collect();
    assert_eq!(hashes.len(), 1, "one name: {hashes:?}");
    assert!(hashes.contains("orders"), "found by &str");
    let mut map = BTreeMap::new();
    map.insert(shared.clone(), 1);
    assert_eq!(map.get("orders"), Some(&1));
    for f in &forms {
        assert_eq!(f, "orders");
        assert_eq!(*f, *"orders");
        assert_eq!(f, &String::from("orders"));
        let owned = String::from("orders");
        assert!("orders" == *f && owned == *f);
        assert_eq!(f.len(), 6, "derefs to str");
        assert_eq!(format!("{f} {f:?}"), "orders \"orders\"");
        assert_eq!(String::from(f.clone()), "orders");
        assert_eq!(&*Arc::<str>::from(f.clone()), "orders");
    }
    let (a, b) = (
        TopicName::from(String::from("a")),
        TopicName::from_static("b"),
    );
    assert!(a < b);
    assert_ne!(TopicName::from("a"), TopicName::from_static("b"));
}

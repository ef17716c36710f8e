//! A short run of the seeded fuzzer (`kprod_tests::fuzz`; the long run is the `fuzz` binary):
//! every response decoder and whole producers fed hostile bytes, nothing panics, every record
//! gets exactly one outcome, faithful runs keep the log truthful.

use std::time::Instant;

use kprod_tests::fuzz::{run, Options};

#[test]
fn twenty_thousand_inputs() {
    let start = Instant::now();
    let report = run(0x6b70_726f_6466_757a, 20_000, Options::default());
    println!("{report}\nin {:?}", start.elapsed());
    assert!(report.inputs() >= 20_000);
    assert!(report.decoders.valid > 0 && report.decoders.accepted > report.decoders.valid);
    let p = &report.producer;
    assert!(
        p.runs > 10 && p.hostile_runs > 0 && p.logs_checked > 0,
        "{report}"
    );
    assert!(p.delivered > 0 && p.attacked_frames > 0, "{report}");
    // Compressed batches handed back in time and too late (sealed, split or failed since).
    let (back, kept) = p.compressed_ahead;
    assert!(kept > 0 && back > kept, "{report}");
    assert_eq!(
        p.delivered + p.failed_not_persisted + p.failed_possibly_persisted,
        p.records,
        "every record exactly one outcome"
    );
}

//! Error paths of the decoders at scale, measured in child processes.
//!
//! Hostile 4 MiB inputs whose length fields claim as many elements as there are bytes are
//! decoded one per fresh child process (this binary re-executed with `KPROD_ALLOC_PROBE` set),
//! which reports how far its peak virtual size (`VmPeak` in `/proc/self/status`) rose during
//! the decode. Blocks this large are above the allocator's `mmap` threshold, so each raises
//! the virtual size in full and the rise bounds the largest block from above. The bound is
//! `64 * N + 4096` bytes plus allocator slack for an `N`-byte input.
//!
//! This target has no libtest harness (`harness = false`), so the parent and the child are the
//! same `main` and no test has to be ignored. Linux only: the test fails where `/proc` is
//! missing rather than pass without measuring.

use std::time::Instant;

use bytes::{BufMut, Bytes, BytesMut};
use kprod_core::protocol::api_versions::ApiVersionsResponse;
use kprod_core::protocol::init_producer_id::InitProducerIdRequest;
use kprod_core::protocol::metadata::{MetadataRequest, MetadataResponse};
use kprod_core::protocol::produce::{ProduceRequest, ProduceResponse};
use kprod_core::protocol::record_batch::RecordBatch;
use kprod_core::protocol::{FrameDecoder, Message, Writer};

/// The allocation bound for an `n`-byte input.
fn alloc_bound(n: usize) -> usize {
    64 * n + 4096
}

const PROBE_LEN: usize = 4 << 20;
const PROBE_ENV: &str = "KPROD_ALLOC_PROBE";
/// Slack for the allocator's own bookkeeping and page rounding.
const PROBE_SLACK: usize = 2 << 20;

/// `prefix`, then an array length claiming as many elements as bytes remain, then zeros up to
/// `PROBE_LEN` bytes.
fn hostile_array(prefix: &[u8], compact: bool) -> Bytes {
    let mut v = BytesMut::with_capacity(PROBE_LEN);
    v.extend_from_slice(prefix);
    let count = PROBE_LEN - prefix.len() - 5;
    if compact {
        v.put_uvarint(count as u32 + 1);
    } else {
        v.put_i32(count as i32);
    }
    v.resize(PROBE_LEN, 0);
    v.freeze()
}

/// A single batch of `PROBE_LEN` bytes whose body (after the header) is `body`, padded with
/// zeros, with a valid CRC.
fn hostile_batch(records_count: i32, body: &[u8]) -> Bytes {
    let mut v = BytesMut::with_capacity(PROBE_LEN);
    v.put_i64(0);
    v.put_i32((PROBE_LEN - 12) as i32);
    v.put_i32(-1);
    v.put_i8(2);
    v.put_u32(0);
    v.put_i16(0);
    v.put_i32(records_count - 1);
    v.put_i64(0);
    v.put_i64(0);
    v.put_i64(1);
    v.put_i16(0);
    v.put_i32(0);
    v.put_i32(records_count);
    v.extend_from_slice(body);
    v.resize(PROBE_LEN, 0);
    let crc = crc32c::crc32c(&v[21..]);
    v[17..21].copy_from_slice(&crc.to_be_bytes());
    v.freeze()
}

type Probe = (&'static str, fn() -> Box<dyn FnOnce()>);

/// Each probe builds its input eagerly and returns the decode to measure.
fn probes() -> Vec<Probe> {
    fn body<M: Message>(version: i16, input: Bytes) -> Box<dyn FnOnce()> {
        Box::new(move || {
            let _ = M::decode_exact(version, input);
        })
    }
    fn compact_str(s: &str) -> Vec<u8> {
        let mut b = BytesMut::new();
        b.put_string(s, true);
        b.to_vec()
    }
    vec![
        ("ApiVersionsResponse.api_keys", || {
            body::<ApiVersionsResponse>(3, hostile_array(&[0, 0], true))
        }),
        ("MetadataRequest.topics", || {
            body::<MetadataRequest>(12, hostile_array(&[], true))
        }),
        ("MetadataResponse.brokers", || {
            body::<MetadataResponse>(12, hostile_array(&[0; 4], true))
        }),
        ("MetadataResponse.topics", || {
            // throttle, no brokers, null cluster id, controller id.
            body::<MetadataResponse>(12, hostile_array(&[0, 0, 0, 0, 1, 0, 0, 0, 0, 0], true))
        }),
        ("MetadataResponse.partitions", || {
            let mut p = vec![0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 2, 0, 0];
            p.extend_from_slice(&compact_str("t"));
            p.extend_from_slice(&[0; 17]);
            body::<MetadataResponse>(12, hostile_array(&p, true))
        }),
        ("MetadataResponse.replica_nodes", || {
            let mut p = vec![0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 2, 0, 0];
            p.extend_from_slice(&compact_str("t"));
            p.extend_from_slice(&[0; 17]);
            p.push(2);
            p.extend_from_slice(&[0; 14]);
            body::<MetadataResponse>(12, hostile_array(&p, true))
        }),
        ("InitProducerIdRequest.transactional_id", || {
            body::<InitProducerIdRequest>(5, hostile_array(&[], true))
        }),
        ("ProduceRequest.topic_data", || {
            body::<ProduceRequest>(12, hostile_array(&[0, 0xff, 0xff, 0, 0, 0x75, 0x30], true))
        }),
        ("ProduceRequest.partition_data", || {
            let mut p = vec![0, 0xff, 0xff, 0, 0, 0x75, 0x30, 2];
            p.extend_from_slice(&compact_str("t"));
            body::<ProduceRequest>(12, hostile_array(&p, true))
        }),
        ("ProduceResponse.responses", || {
            body::<ProduceResponse>(12, hostile_array(&[], true))
        }),
        ("ProduceResponse.partition_responses", || {
            let mut p = vec![2];
            p.extend_from_slice(&compact_str("t"));
            body::<ProduceResponse>(12, hostile_array(&p, true))
        }),
        ("ProduceResponse.record_errors", || {
            let mut p = vec![2];
            p.extend_from_slice(&compact_str("t"));
            p.push(2);
            p.extend_from_slice(&[0; 30]);
            body::<ProduceResponse>(12, hostile_array(&p, true))
        }),
        ("RecordBatch.records", || {
            let input = hostile_batch(((PROBE_LEN - 61) / 7) as i32, &[]);
            Box::new(move || {
                let _ = RecordBatch::decode_all(input);
            })
        }),
        ("RecordBatch.headers", || {
            // One record spanning the batch, with as many headers as fit (all empty).
            let rec_len = PROBE_LEN - 61 - 4;
            let mut b = BytesMut::new();
            b.put_varint(rec_len as i32);
            let n_headers = (rec_len - 5 - 5) / 2;
            b.put_slice(&[0, 0, 0, 1, 1]);
            b.put_varint(n_headers as i32);
            let input = hostile_batch(1, &b);
            Box::new(move || {
                let _ = RecordBatch::decode_all(input);
            })
        }),
        ("FrameDecoder.prefix", || {
            let mut buf = BytesMut::new();
            buf.put_i32(i32::MAX);
            Box::new(move || {
                let _ = FrameDecoder::default().decode(&mut buf);
            })
        }),
    ]
}

/// A value from `/proc/self/status`, in bytes.
fn proc_status_bytes(field: &str) -> Option<usize> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with(field))?;
    let kb: usize = line[field.len()..]
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kb * 1024)
}

/// The child: decodes one probe and prints how far the peak virtual size rose.
fn worker(name: &str) {
    let (_, build) = probes()
        .into_iter()
        .find(|(n, _)| *n == name)
        .unwrap_or_else(|| panic!("no probe {name}"));
    let decode = build();
    let before = proc_status_bytes("VmSize:").expect("VmSize");
    decode();
    let peak = proc_status_bytes("VmPeak:").expect("VmPeak");
    println!("PROBE-RESULT {}", peak.saturating_sub(before));
}

fn main() {
    // `cargo test -- --list` and filters: this target holds one test.
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--list") {
        println!("error_paths_allocate_in_proportion_to_the_input: test");
        return;
    }
    if let Ok(name) = std::env::var(PROBE_ENV) {
        worker(&name);
        return;
    }
    parent();
    println!("test result: ok. 1 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out");
}

fn parent() {
    let started = Instant::now();
    assert!(
        proc_status_bytes("VmPeak:").is_some(),
        "/proc/self/status has no VmPeak: this measurement needs Linux"
    );
    let exe = std::env::current_exe().expect("current_exe");
    let bound = alloc_bound(PROBE_LEN) + PROBE_SLACK;
    let mut failures = Vec::new();
    let mut worst = 0;
    println!("error_paths_allocate_in_proportion_to_the_input: {PROBE_LEN}-byte hostile inputs, bound {bound} B");
    for (name, _) in probes() {
        let out = std::process::Command::new(&exe)
            .env(PROBE_ENV, name)
            // One malloc arena (glibc): a thread arena's 64 MiB reservation would otherwise
            // show up in the peak as noise.
            .env("GLIBC_TUNABLES", "glibc.malloc.arena_max=1")
            .output()
            .expect("run the probe worker");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let grew = stdout
            .lines()
            .find_map(|l| l.split_once("PROBE-RESULT "))
            .and_then(|(_, s)| s.split_whitespace().next()?.parse::<usize>().ok());
        match (out.status.success(), grew) {
            (true, Some(grew)) => {
                println!(
                    "  {name:<40} peak virtual size rose {:>10} B = {:>5.1} x input",
                    grew,
                    grew as f64 / PROBE_LEN as f64
                );
                worst = worst.max(grew);
                if grew > bound {
                    failures.push(format!("{name}: {grew} B for a {PROBE_LEN}-byte input"));
                }
            }
            _ => failures.push(format!(
                "{name}: worker failed ({}):\n{stdout}\n{}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            )),
        }
    }
    println!(
        "error_paths_allocate_in_proportion_to_the_input: {} probes, largest rise {worst} B, in {:.2?}",
        probes().len(),
        started.elapsed()
    );
    assert!(
        failures.is_empty(),
        "allocation above the bound:\n{}",
        failures.join("\n")
    );
}

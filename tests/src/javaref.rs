//! The Java reference producer: Apache Kafka's own producer (`kafka-clients`, the broker's
//! version) run in the same harness as kprod, so that its results can be judged by the same
//! code and printed next to kprod's and librdkafka's.
//!
//! The program lives in `tests/java` (built by `scripts/install-java-ref.sh`); it has four
//! commands:
//!
//! - `ledger`: the fault-scenario ledger of [`crate::ledger`] (values `TOPIC/PARTITION/INDEX`,
//!   round robin over the partitions), optionally paced, printing `SENT k` markers and
//!   pausing at given counts until told to go on, so a test can inject a fault at a known
//!   point ([`JavaRun::wait_sent`], [`JavaRun::wait_paused`], [`JavaRun::resume`]);
//! - `seed`: the seed scenario of [`crate::seed`] (same streams, ticker, bursts, values);
//! - `throughput`: the e2e bench's measurement (records/s, process CPU, latency);
//! - `bench`: the Java producer as a client of `bench-e2e`, one long-lived JVM running one
//!   measured run per request on stdin ([`JavaBench`]).
//!
//! `ledger` and `seed` write one line per record, `ID<TAB>PARTITION<TAB>STATUS<TAB>OFFSET<TAB>ERROR`
//! ([`parse_outcomes`]). The outcomes become client-neutral [`Reported`] values and go
//! through the very checks kprod's results go through: [`crate::ledger::audit`] for a ledger,
//! [`crate::seed::Verdict::compute`] for the seed scenario. Both give a
//! [`crate::ledger::Row`] for a comparison table.
//!
//! The Java producer never says whether a failed record may be in the log, so its failures
//! count as possibly persisted, except a refusal by `send` itself (never accepted).

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use kprod_core::Persistence;

use crate::ledger::{audit, ledger_value, Audit, Checked, Reported};
use crate::reader::ReadRecord;
use crate::seed::{
    burst_stream, encode_value, BurstFigures, Outcome, SeedPlan, SeedReport, Sent, Tag,
    TICKER_STREAM,
};
use crate::temp_dir;

/// The prefix of the error of a record the Java producer's `send` refused outright.
const REFUSED_PREFIX: &str = "refused by send:";
/// The outcome file's name in a run's directory.
const OUT_FILE: &str = "outcomes.tsv";

/// The install folder: `$KPROD_JAVA_REF` if set, else the folder `scripts/install-java-ref.sh`
/// builds for the current sources (`--where`), under `${KPROD_CACHE:-$HOME/.cache/kprod}`.
///
/// # Panics
/// If there is no complete build there (also when the sources changed since the last build),
/// or `java` cannot run.
pub fn install_dir() -> PathBuf {
    let dir = crate::built_dir("KPROD_JAVA_REF", &script());
    assert!(
        dir.join(".complete").is_file() && dir.join("java-ref.jar").is_file(),
        "the Java reference producer is not built at {} (or its sources changed since); \
         run scripts/install-java-ref.sh",
        dir.display()
    );
    let java = Command::new("java").arg("-version").output();
    assert!(
        matches!(&java, Ok(o) if o.status.success()),
        "cannot run `java -version` ({java:?}); the Java reference producer needs Java 17+"
    );
    dir
}

/// `scripts/install-java-ref.sh` of this checkout.
fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("scripts")
        .join("install-java-ref.sh")
}

/// The producer settings every command takes (`None`: the program's default, which is the
/// Java producer's own, except `linger.ms`, which is 5 like the e2e bench's). Idempotence,
/// `acks=all` and no compression are fixed.
#[derive(Debug, Clone, Default)]
pub struct Flags {
    /// `max.in.flight.requests.per.connection` (default 5).
    pub max_in_flight: Option<u32>,
    /// `linger.ms` (default 5).
    pub linger_ms: Option<u64>,
    /// `batch.size` (default 16384).
    pub batch_size: Option<u64>,
    /// `request.timeout.ms` (default 30000).
    pub request_timeout_ms: Option<u64>,
    /// `delivery.timeout.ms` (default 120000).
    pub delivery_timeout_ms: Option<u64>,
    /// `retry.backoff.ms` (default 100).
    pub retry_backoff_ms: Option<u64>,
    /// Any other producer property.
    pub extra: Vec<(String, String)>,
}

impl Flags {
    fn args(&self) -> Vec<String> {
        let mut a = Vec::new();
        let mut flag = |name: &str, v: Option<u64>| {
            if let Some(v) = v {
                a.push(format!("--{name}"));
                a.push(v.to_string());
            }
        };
        flag("max-in-flight", self.max_in_flight.map(u64::from));
        flag("linger-ms", self.linger_ms);
        flag("batch-size", self.batch_size);
        flag("request-timeout-ms", self.request_timeout_ms);
        flag("delivery-timeout-ms", self.delivery_timeout_ms);
        flag("retry-backoff-ms", self.retry_backoff_ms);
        for (k, v) in &self.extra {
            a.push("--set".to_owned());
            a.push(format!("{k}={v}"));
        }
        a
    }
}

// ---------------------------------------------------------------------------------------------
// The process
// ---------------------------------------------------------------------------------------------

/// A running Java reference producer. Its stdout is read line by line on a thread (the
/// `SENT k` / `PAUSED k` markers, the figures), its stderr collected on another. Killed on
/// drop if still running.
#[derive(Debug)]
pub struct JavaRun {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    stdout: Vec<String>,
    stdout_closed: bool,
    stderr: Option<JoinHandle<String>>,
    dir: PathBuf,
    command: String,
}

/// How a finished run ended.
#[derive(Debug)]
pub struct Finished {
    /// The exit status: 0 done, 1 records unresolved within the bound (or, for throughput,
    /// failed), 2 usage error, 3 another failure.
    pub status: ExitStatus,
    /// Every stdout line.
    pub stdout: Vec<String>,
    /// All of stderr.
    pub stderr: String,
    /// The outcome file (`ledger` and `seed`) as read when the program exited, or why it
    /// could not be read. (The run's directory is removed when the [`JavaRun`] is dropped.)
    pub out: Result<String, String>,
}

impl Finished {
    /// `what`, the exit status, stdout and stderr, for a failure message.
    pub fn describe(&self, what: &str) -> String {
        format!(
            "{what}: exit {}\nstdout:\n{}\nstderr:\n{}",
            self.status,
            self.stdout.join("\n"),
            self.stderr
        )
    }

    /// The outcome file, parsed.
    ///
    /// # Panics
    /// If the program failed (exit status 2 or 3, or killed), or the file is missing or
    /// malformed. Exit status 1 (records unresolved) is not a panic: those records are
    /// `unresolved` in the file.
    pub fn outcomes(&self) -> Vec<JavaRecord> {
        let code = self.status.code();
        assert!(
            matches!(code, Some(0 | 1)),
            "{}",
            self.describe("the Java reference producer failed")
        );
        let text = self
            .out
            .as_ref()
            .unwrap_or_else(|e| panic!("{}", self.describe(e)));
        parse_outcomes(text).unwrap_or_else(|e| {
            panic!("{}", self.describe(&format!("malformed outcome file: {e}")))
        })
    }
}

impl JavaRun {
    /// Starts `java -jar java-ref.jar COMMAND ARGS...`, with stdin, stdout and stderr piped.
    /// Every run gets a fresh temporary directory ([`Self::dir`]) for its outcome file.
    ///
    /// # Panics
    /// If the program is not installed or cannot start.
    pub fn spawn(command: &str, args: &[String]) -> Self {
        let jar = install_dir().join("java-ref.jar");
        let mut java = Command::new("java");
        java.args(["-Xmx1g", "-XX:+UseSerialGC", "-jar"])
            .arg(&jar)
            .arg(command)
            .args(args);
        Self::spawn_command(
            java,
            &format!("java -jar {}", jar.display()),
            format!("java-ref {command} {}", args.join(" ")),
        )
    }

    /// Starts `program` (described as `what` if it cannot start, as `label` in reports) the
    /// way [`Self::spawn`] starts the JVM: another program that speaks the same protocol.
    ///
    /// # Panics
    /// If the program cannot start.
    pub fn spawn_command(mut program: Command, what: &str, label: String) -> Self {
        let dir = temp_dir("java-ref");
        let mut child = program
            .current_dir(&dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {what}: {e}"));
        let stdout = child.stdout.take().expect("piped stdout");
        let mut stderr = child.stderr.take().expect("piped stderr");
        let lines = crate::read_lines(stdout);
        let stderr = std::thread::spawn(move || {
            let mut s = String::new();
            let mut bytes = Vec::new();
            if let Err(e) = stderr.read_to_end(&mut bytes) {
                s = format!("(reading stderr failed: {e})\n");
            }
            s.push_str(&String::from_utf8_lossy(&bytes));
            s
        });
        Self {
            stdin: child.stdin.take(),
            child,
            lines,
            stdout: Vec::new(),
            stdout_closed: false,
            stderr: Some(stderr),
            dir,
            command: label,
        }
    }

    /// The run's temporary directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Every stdout line so far.
    pub fn stdout(&self) -> &[String] {
        &self.stdout
    }

    /// The next stdout line, `None` once stdout is closed (the program exited).
    ///
    /// # Panics
    /// If no line comes before `deadline`.
    fn next_line(&mut self, deadline: Instant) -> Option<String> {
        if self.stdout_closed {
            return None;
        }
        let wait = deadline.saturating_duration_since(Instant::now());
        match self.lines.recv_timeout(wait) {
            Ok(line) => {
                self.stdout.push(line.clone());
                Some(line)
            }
            Err(RecvTimeoutError::Disconnected) => {
                self.stdout_closed = true;
                None
            }
            Err(RecvTimeoutError::Timeout) => {
                let _ = self.child.kill();
                let stderr = self.take_stderr();
                panic!(
                    "{}: no output before the deadline; stdout so far:\n{}\nstderr:\n{stderr}",
                    self.command,
                    self.stdout.join("\n"),
                );
            }
        }
    }

    fn take_stderr(&mut self) -> String {
        self.stderr
            .take()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| "(stderr thread panicked)".into())
            })
            .unwrap_or_default()
    }

    /// Waits for the first stdout line `pick` accepts, within `timeout`; returns what `pick`
    /// made of it.
    ///
    /// # Panics
    /// If the program exits or the time is up first.
    pub fn wait_for<T>(&mut self, timeout: Duration, mut pick: impl FnMut(&str) -> Option<T>) -> T {
        let deadline = Instant::now() + timeout;
        loop {
            let Some(line) = self.next_line(deadline) else {
                let _ = self.child.wait();
                let stderr = self.take_stderr();
                panic!(
                    "{}: exited before the line waited for; stdout:\n{}\nstderr:\n{stderr}",
                    self.command,
                    self.stdout.join("\n"),
                );
            };
            if let Some(t) = pick(&line) {
                return t;
            }
        }
    }

    /// Waits for a `SENT n` marker with `n >= k` (the program was given `mark_every`);
    /// returns `n`.
    pub fn wait_sent(&mut self, k: u64, timeout: Duration) -> u64 {
        self.wait_for(timeout, |line| marker(line, "SENT").filter(|&n| n >= k))
    }

    /// Waits for `PAUSED k` (the program was given `pause_at` with `k`): it has sent exactly
    /// `k` records and sends nothing more until [`Self::resume`].
    pub fn wait_paused(&mut self, k: u64, timeout: Duration) {
        self.wait_for(timeout, |line| marker(line, "PAUSED").filter(|&n| n == k));
    }

    /// The JVM's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Writes `line` and a newline to the program's stdin.
    ///
    /// # Panics
    /// If its stdin is closed or the write fails.
    pub fn send_line(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("stdin is open");
        stdin
            .write_all(format!("{line}\n").as_bytes())
            .and_then(|()| stdin.flush())
            .unwrap_or_else(|e| panic!("{}: cannot write to stdin: {e}", self.command));
    }

    /// Lets a paused program go on.
    ///
    /// # Panics
    /// If its stdin is closed.
    pub fn resume(&mut self) {
        let stdin = self.stdin.as_mut().expect("stdin is open");
        stdin
            .write_all(b"go\n")
            .and_then(|()| stdin.flush())
            .unwrap_or_else(|e| panic!("{}: cannot resume: {e}", self.command));
    }

    /// Waits for the program to exit, within `timeout`.
    ///
    /// # Panics
    /// If it has not exited by then (it is killed).
    pub fn finish(mut self, timeout: Duration) -> Finished {
        // Closing stdin resumes a program waiting at a pause: nobody will resume it now.
        drop(self.stdin.take());
        let deadline = Instant::now() + timeout;
        while self.next_line(deadline).is_some() {}
        let status = self
            .child
            .wait()
            .unwrap_or_else(|e| panic!("{}: wait failed: {e}", self.command));
        let stderr = self.take_stderr();
        Finished {
            status,
            stdout: std::mem::take(&mut self.stdout),
            stderr,
            out: {
                let path = self.dir.join(OUT_FILE);
                std::fs::read_to_string(&path)
                    .map_err(|e| format!("cannot read {}: {e}", path.display()))
            },
        }
    }
}

impl Drop for JavaRun {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.dir);
        } else {
            eprintln!("Java reference run kept at {}", self.dir.display());
        }
    }
}

/// `n` if `line` is `WORD n`.
fn marker(line: &str, word: &str) -> Option<u64> {
    let rest = line.strip_prefix(word)?.strip_prefix(' ')?;
    rest.trim().parse().ok()
}

/// The `key=value` words of a line after its first word.
fn fields(line: &str) -> BTreeMap<&str, &str> {
    line.split_whitespace()
        .skip(1)
        .filter_map(|w| w.split_once('='))
        .collect()
}

/// The field `key` of `line`, parsed.
fn field<T: std::str::FromStr>(line: &str, key: &str) -> Result<T, String> {
    fields(line)
        .get(key)
        .ok_or_else(|| format!("no {key}= in {line:?}"))?
        .parse()
        .map_err(|_| format!("{key} in {line:?} does not parse"))
}

// ---------------------------------------------------------------------------------------------
// Outcome files
// ---------------------------------------------------------------------------------------------

/// What the Java producer reported for a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Its callback reported success.
    Delivered,
    /// Its callback (or `send`) reported an exception.
    Failed,
    /// No callback within the bound.
    Unresolved,
}

/// One line of an outcome file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JavaRecord {
    /// The record's index (`ledger`) or `STREAM:SEQ` (`seed`).
    pub id: String,
    /// The partition it was sent to.
    pub partition: i32,
    /// Its status.
    pub status: Status,
    /// The acknowledged offset, if any.
    pub offset: Option<i64>,
    /// The exception's class and message, if it failed.
    pub error: String,
}

impl JavaRecord {
    /// The outcome in client-neutral form; `None` if unresolved. The partition of a delivery
    /// is the one the record was sent to (the Java callback's metadata names the same).
    pub fn reported(&self) -> Option<Reported> {
        match self.status {
            Status::Delivered => Some(Reported::Delivered {
                partition: self.partition,
                offset: self.offset,
            }),
            Status::Failed => {
                let refused = self.error.starts_with(REFUSED_PREFIX);
                Some(Reported::Failed {
                    error: self.error.clone(),
                    // A refused record was never accepted; any other failure makes no promise.
                    persisted: if refused {
                        Persistence::NotPersisted
                    } else {
                        Persistence::PossiblyPersisted
                    },
                    refused,
                })
            }
            Status::Unresolved => None,
        }
    }
}

/// Parses an outcome file: one `ID<TAB>PARTITION<TAB>STATUS<TAB>OFFSET<TAB>ERROR` line per
/// record, STATUS `delivered`, `failed` or `unresolved`, OFFSET -1 for none.
pub fn parse_outcomes(text: &str) -> Result<Vec<JavaRecord>, String> {
    text.lines()
        .enumerate()
        .map(|(n, line)| {
            let bad = |what: &str| format!("line {}: {what}: {line:?}", n + 1);
            let f: Vec<&str> = line.splitn(5, '\t').collect();
            let [id, partition, status, offset, error] = f[..] else {
                return Err(bad("expected 5 tab-separated fields"));
            };
            let status = match status {
                "delivered" => Status::Delivered,
                "failed" => Status::Failed,
                "unresolved" => Status::Unresolved,
                _ => return Err(bad("unknown status")),
            };
            let offset: i64 = offset.parse().map_err(|_| bad("bad offset"))?;
            if offset < -1 || (offset >= 0 && status != Status::Delivered) {
                return Err(bad("offset does not fit the status"));
            }
            if (status == Status::Failed) == error.is_empty() {
                return Err(bad("an error goes with a failure, and only with one"));
            }
            Ok(JavaRecord {
                id: id.to_owned(),
                partition: partition.parse().map_err(|_| bad("bad partition"))?,
                status,
                offset: (offset >= 0).then_some(offset),
                error: error.to_owned(),
            })
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// ledger
// ---------------------------------------------------------------------------------------------

/// What the Java `ledger` command sends.
#[derive(Debug, Clone)]
pub struct LedgerPlan {
    /// The topic.
    pub topic: String,
    /// Record i goes to `partitions[i % len]`.
    pub partitions: Vec<i32>,
    /// Records to send.
    pub records: usize,
    /// At most this many sends per second (`None`: unpaced).
    pub rate: Option<u64>,
    /// Print `SENT k` after every `mark_every` sends.
    pub mark_every: Option<u64>,
    /// After these many sends, print `PAUSED k` and wait for [`JavaRun::resume`].
    pub pause_at: Vec<u64>,
    /// `flush()` before each pause, so that every record sent so far has its outcome (its
    /// acknowledgement received) when `PAUSED k` is printed.
    pub flush_before_pause: bool,
    /// How long the callbacks may take after the last send (`None`: delivery timeout + 30 s).
    pub resolve_timeout: Option<Duration>,
    /// Producer settings.
    pub producer: Flags,
}

impl LedgerPlan {
    /// `records` records round robin over partitions `0..partitions`, unpaced, no markers.
    pub fn new(topic: &str, partitions: i32, records: usize) -> Self {
        Self {
            topic: topic.to_owned(),
            partitions: (0..partitions).collect(),
            records,
            rate: None,
            mark_every: None,
            pause_at: Vec::new(),
            flush_before_pause: false,
            resolve_timeout: None,
            producer: Flags::default(),
        }
    }

    /// The partition of record `i`.
    pub fn partition_of(&self, i: usize) -> i32 {
        self.partitions[i % self.partitions.len()]
    }

    fn args(&self, bootstrap: &str, out: &Path) -> Vec<String> {
        let list = |v: &[i32]| v.iter().map(i32::to_string).collect::<Vec<_>>().join(",");
        let mut a: Vec<String> = vec![
            "--bootstrap".into(),
            bootstrap.into(),
            "--topic".into(),
            self.topic.clone(),
            "--records".into(),
            self.records.to_string(),
            "--partition-list".into(),
            list(&self.partitions),
            "--out".into(),
            out.display().to_string(),
        ];
        let mut opt = |name: &str, v: Option<String>| {
            if let Some(v) = v {
                a.push(format!("--{name}"));
                a.push(v);
            }
        };
        opt("rate", self.rate.map(|r| r.to_string()));
        opt("mark-every", self.mark_every.map(|k| k.to_string()));
        opt(
            "pause-at",
            (!self.pause_at.is_empty()).then(|| {
                self.pause_at
                    .iter()
                    .map(u64::to_string)
                    .collect::<Vec<_>>()
                    .join(",")
            }),
        );
        opt(
            "flush-before-pause",
            self.flush_before_pause.then(|| "1".to_owned()),
        );
        opt(
            "resolve-timeout-ms",
            self.resolve_timeout.map(|t| t.as_millis().to_string()),
        );
        a.extend(self.producer.args());
        a
    }

    /// Starts the Java producer on this plan against `bootstrap`; collect the results with
    /// [`JavaRun::finish`] and [`JavaLedger::from_run`].
    pub fn spawn(&self, bootstrap: &str) -> JavaRun {
        assert!(!self.partitions.is_empty(), "a ledger needs partitions");
        let mut run = JavaRun::spawn_with_out("ledger", |out| self.args(bootstrap, out));
        run.command = format!("java-ref ledger (topic {})", self.topic);
        run
    }

    /// Runs the plan to the end (within `timeout`) and collects the results.
    pub fn run(&self, bootstrap: &str, timeout: Duration) -> JavaLedger {
        JavaLedger::from_run(self, self.spawn(bootstrap).finish(timeout))
    }
}

impl JavaRun {
    /// The outcome file's path, relative to the run's directory (its working directory).
    pub fn out_file() -> &'static Path {
        Path::new(OUT_FILE)
    }

    /// Starts `command` with the arguments `args` makes from the outcome file's path (relative
    /// to the run's directory, its working directory).
    fn spawn_with_out(command: &str, args: impl FnOnce(&Path) -> Vec<String>) -> Self {
        Self::spawn(command, &args(Path::new(OUT_FILE)))
    }
}

/// The results of a Java `ledger` run.
#[derive(Debug)]
pub struct JavaLedger {
    /// What was sent.
    pub plan: LedgerPlan,
    /// One per record, in send order.
    pub records: Vec<JavaRecord>,
    /// How the program ended.
    pub finished: Finished,
}

impl JavaLedger {
    /// Collects the outcomes of a finished run of `plan`.
    ///
    /// # Panics
    /// If the program failed, or the outcome file does not list exactly the plan's records in
    /// order, each with its planned partition.
    pub fn from_run(plan: &LedgerPlan, finished: Finished) -> Self {
        let records = finished.outcomes();
        if let Err(e) = check_ledger_records(plan, &records) {
            panic!("{}", finished.describe(&e));
        }
        Self {
            plan: plan.clone(),
            records,
            finished,
        }
    }

    /// The value of record `i`.
    pub fn value(&self, i: usize) -> Vec<u8> {
        ledger_value(&self.plan.topic, self.plan.partition_of(i), i).into_bytes()
    }

    /// Checks the log against the outcomes with kprod's ledger checks
    /// ([`crate::ledger::audit`]), counting instead of panicking.
    pub fn audit(&self, log: &BTreeMap<i32, Vec<ReadRecord>>) -> Audit {
        let values: Vec<Vec<u8>> = (0..self.records.len()).map(|i| self.value(i)).collect();
        let checked: Vec<Checked<'_>> = self
            .records
            .iter()
            .zip(&values)
            .map(|(r, v)| Checked {
                partition: r.partition,
                value: v,
                outcome: r.reported(),
            })
            .collect();
        audit(&self.plan.topic, &checked, log)
    }
}

fn check_ledger_records(plan: &LedgerPlan, records: &[JavaRecord]) -> Result<(), String> {
    if records.len() != plan.records {
        return Err(format!(
            "{} outcomes for {} records",
            records.len(),
            plan.records
        ));
    }
    for (i, r) in records.iter().enumerate() {
        if r.id != i.to_string() || r.partition != plan.partition_of(i) {
            return Err(format!(
                "outcome {i} is {r:?}, expected id {i} on partition {}",
                plan.partition_of(i)
            ));
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// seed
// ---------------------------------------------------------------------------------------------

/// The arguments of the Java `seed` command for `plan`.
fn seed_args(plan: &SeedPlan, flags: &Flags, bootstrap: &str, out: &Path) -> Vec<String> {
    let mut a = seed_plan_args(plan, bootstrap, out);
    a.extend(flags.args());
    a
}

/// The `seed` command's arguments for `plan` (without producer settings), writing its
/// outcome file to `out`.
pub(crate) fn seed_plan_args(plan: &SeedPlan, bootstrap: &str, out: &Path) -> Vec<String> {
    [
        ("bootstrap", bootstrap.to_owned()),
        ("topic", plan.source.topic.clone()),
        ("run", format!("{:016x}", plan.source.run)),
        ("partitions", plan.source.partitions.to_string()),
        ("ticks", plan.ticks.to_string()),
        ("period-us", plan.period.as_micros().max(1).to_string()),
        ("bursts", plan.bursts.to_string()),
        ("burst-size", plan.burst_size.to_string()),
        ("record-size", plan.source.record_size.to_string()),
        (
            "resolve-timeout-ms",
            plan.resolve_timeout.as_millis().max(1).to_string(),
        ),
        ("out", out.display().to_string()),
    ]
    .into_iter()
    .flat_map(|(k, v)| [format!("--{k}"), v])
    .collect()
}

/// The results of a Java `seed` run.
#[derive(Debug)]
pub struct JavaSeed {
    /// The records and figures, in the form [`crate::seed::run_seed`] gives for kprod, so
    /// [`crate::seed::Verdict::compute`] judges both alike.
    pub report: SeedReport,
    /// How the program ended.
    pub finished: Finished,
}

/// Runs the seed scenario `plan` with the Java producer against `bootstrap`, within
/// `timeout`.
///
/// # Panics
/// If the program fails, or its outcome file or figures do not match the plan.
pub fn run_seed(bootstrap: &str, plan: &SeedPlan, flags: &Flags, timeout: Duration) -> JavaSeed {
    let mut run = JavaRun::spawn_with_out("seed", |out| seed_args(plan, flags, bootstrap, out));
    run.command = format!("java-ref seed (topic {})", plan.source.topic);
    finish_seed(run, plan, timeout)
}

/// Waits for a `seed` run of `plan` (the Java program's, or another speaking its protocol)
/// and reads its outcomes and figures.
///
/// # Panics
/// If the program fails, or its outcome file or figures do not match the plan.
pub fn finish_seed(run: JavaRun, plan: &SeedPlan, timeout: Duration) -> JavaSeed {
    let finished = run.finish(timeout);
    let records = finished.outcomes();
    match seed_report(plan, &records, &finished.stdout) {
        Ok(report) => JavaSeed { report, finished },
        Err(e) => panic!("{}", finished.describe(&e)),
    }
}

/// Builds the [`SeedReport`] of a Java seed run from its outcomes and stdout, checking that
/// the outcomes are exactly the plan's records, stream by stream, each on its partition.
pub fn seed_report(
    plan: &SeedPlan,
    records: &[JavaRecord],
    stdout: &[String],
) -> Result<SeedReport, String> {
    let partitions = u64::from(plan.source.partitions.max(1).unsigned_abs());
    let streams = std::iter::once((TICKER_STREAM, plan.ticks))
        .chain((0..plan.bursts).map(|b| (burst_stream(b), plan.burst_size)));
    let mut expected = Vec::new();
    for (stream, n) in streams {
        expected.extend((0..n).map(|seq| Tag { stream, seq }));
    }
    if records.len() != expected.len() {
        return Err(format!(
            "{} outcomes for {} records",
            records.len(),
            expected.len()
        ));
    }
    let mut sent = Vec::with_capacity(records.len());
    for (r, &tag) in records.iter().zip(&expected) {
        let partition = (tag.seq % partitions) as i32;
        if r.id != format!("{}:{}", tag.stream, tag.seq) || r.partition != partition {
            return Err(format!(
                "outcome {r:?}, expected {tag} on partition {partition}"
            ));
        }
        sent.push(Sent {
            tag,
            partition,
            key: None,
            bytes: encode_value(plan.source.run, tag, plan.source.record_size).len(),
            outcome: r.reported().map_or(Outcome::Unresolved, Outcome::Reported),
        });
    }
    let line = |word: &str| {
        stdout
            .iter()
            .find(|l| l.split_whitespace().next() == Some(word))
            .ok_or_else(|| format!("no {word} line on stdout"))
    };
    let ticker_secs: f64 = field(line("TICKER")?, "seconds")?;
    let elapsed_us: u64 = field(line("DONE")?, "elapsed_us")?;
    let us = Duration::from_micros;
    let mut bursts = Vec::new();
    for l in stdout.iter().filter(|l| l.starts_with("BURST ")) {
        bursts.push(BurstFigures {
            records: field(l, "records")?,
            bytes: field(l, "bytes")?,
            start: us(field(l, "start_us")?),
            enqueue_time: us(field(l, "enqueue_us")?),
            duration: us(field(l, "duration_us")?),
            ticks_at_start: field(l, "ticks_at_start")?,
            ticks_during: field(l, "ticks_during")?,
        });
    }
    if bursts.len() != plan.bursts as usize {
        return Err(format!(
            "{} BURST lines for {} bursts",
            bursts.len(),
            plan.bursts
        ));
    }
    Ok(SeedReport {
        sent,
        ticker_time: Duration::from_secs_f64(ticker_secs.max(0.0)),
        bursts,
        elapsed: us(elapsed_us),
    })
}

/// Send-to-acknowledgement percentiles of one stream kind of a Java `seed` run (its
/// `LATENCY stream=NAME count=N p50_us= p99_us= p999_us= max_us=` line; nearest rank).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SeedLatency {
    /// Delivered records measured.
    pub count: u64,
    /// Median.
    pub p50: Duration,
    /// 99th percentile.
    pub p99: Duration,
    /// 99.9th percentile.
    pub p999: Duration,
    /// Largest.
    pub max: Duration,
    /// Mean.
    pub mean: Duration,
}

/// The `LATENCY` figures of `stream` (`ticker` or `burst`) on a Java seed run's stdout.
pub fn seed_latency(stdout: &[String], stream: &str) -> Result<SeedLatency, String> {
    let line = stdout
        .iter()
        .find(|l| l.starts_with("LATENCY ") && fields(l).get("stream") == Some(&stream))
        .ok_or_else(|| format!("no LATENCY stream={stream} line on stdout"))?;
    let us = |k: &str| field::<u64>(line, k).map(Duration::from_micros);
    Ok(SeedLatency {
        count: field(line, "count")?,
        p50: us("p50_us")?,
        p99: us("p99_us")?,
        p999: us("p999_us")?,
        max: us("max_us")?,
        mean: us("mean_us")?,
    })
}

// ---------------------------------------------------------------------------------------------
// throughput
// ---------------------------------------------------------------------------------------------

/// What the Java `throughput` command measures.
#[derive(Debug, Clone)]
pub struct ThroughputPlan {
    /// The topic (it must exist with `partitions` partitions).
    pub topic: String,
    /// Records per round.
    pub records: u64,
    /// Value size in bytes (at least 8).
    pub size: usize,
    /// Record i goes to partition i mod `partitions`.
    pub partitions: i32,
    /// Rounds in the same JVM.
    pub rounds: u32,
    /// Producer settings (the e2e bench uses linger.ms 5 and batch.size 16384, the defaults).
    pub producer: Flags,
}

/// One round's figures.
#[derive(Debug, Clone, PartialEq)]
pub struct Throughput {
    /// The round, from 1.
    pub round: u32,
    /// Records sent.
    pub records: u64,
    /// Of those, failed.
    pub failed: u64,
    /// From the first send to the last acknowledgement.
    pub seconds: f64,
    /// Records per second.
    pub records_per_sec: f64,
    /// The JVM's CPU time over the round (every thread).
    pub cpu_seconds: f64,
    /// CPU microseconds per record.
    pub cpu_us_per_record: f64,
    /// Send-to-acknowledgement latency percentiles, milliseconds.
    pub p50_ms: f64,
    /// 99th percentile.
    pub p99_ms: f64,
    /// 99.9th percentile.
    pub p999_ms: f64,
    /// Maximum.
    pub max_ms: f64,
}

impl Throughput {
    /// Parses a `THROUGHPUT ...` line.
    pub fn parse(line: &str) -> Result<Self, String> {
        if !line.starts_with("THROUGHPUT ") {
            return Err(format!("not a THROUGHPUT line: {line:?}"));
        }
        Ok(Self {
            round: field(line, "round")?,
            records: field(line, "records")?,
            failed: field(line, "failed")?,
            seconds: field(line, "seconds")?,
            records_per_sec: field(line, "records_per_sec")?,
            cpu_seconds: field(line, "cpu_seconds")?,
            cpu_us_per_record: field(line, "cpu_us_per_record")?,
            p50_ms: field(line, "p50_ms")?,
            p99_ms: field(line, "p99_ms")?,
            p999_ms: field(line, "p999_ms")?,
            max_ms: field(line, "max_ms")?,
        })
    }
}

/// Runs `plan` with the Java producer against `bootstrap` within `timeout`; one entry per
/// round.
///
/// # Panics
/// If the program fails (a record failing included) or prints no line per round.
pub fn run_throughput(
    bootstrap: &str,
    plan: &ThroughputPlan,
    timeout: Duration,
) -> Vec<Throughput> {
    let mut args: Vec<String> = [
        ("bootstrap", bootstrap.to_owned()),
        ("topic", plan.topic.clone()),
        ("records", plan.records.to_string()),
        ("size", plan.size.to_string()),
        ("partitions", plan.partitions.to_string()),
        ("rounds", plan.rounds.to_string()),
    ]
    .into_iter()
    .flat_map(|(k, v)| [format!("--{k}"), v])
    .collect();
    args.extend(plan.producer.args());
    let finished = JavaRun::spawn("throughput", &args).finish(timeout);
    assert!(
        finished.status.success(),
        "{}",
        finished.describe("java-ref throughput failed")
    );
    let rounds: Result<Vec<Throughput>, String> = finished
        .stdout
        .iter()
        .filter(|l| l.starts_with("THROUGHPUT "))
        .map(|l| Throughput::parse(l))
        .collect();
    let rounds = rounds.unwrap_or_else(|e| panic!("{}", finished.describe(&e)));
    assert_eq!(
        rounds.len(),
        plan.rounds as usize,
        "{}",
        finished.describe("wrong number of THROUGHPUT lines")
    );
    rounds
}

// ---------------------------------------------------------------------------------------------
// bench (a client of bench-e2e)
// ---------------------------------------------------------------------------------------------

/// How the Java `bench` command sends: the bench's record shape and producer settings.
#[derive(Debug, Clone)]
pub struct BenchPlan {
    /// Value size in bytes (at least 8).
    pub size: usize,
    /// Record i goes to partition i mod `partitions`...
    pub partitions: i32,
    /// ...unless `keyless`: then the producer's own partitioner picks.
    pub keyless: bool,
    /// Producer settings.
    pub producer: Flags,
}

impl BenchPlan {
    /// The `bench` command's arguments for this plan against `bootstrap`, producer settings
    /// aside (each program takes its own).
    pub(crate) fn args(&self, bootstrap: &str) -> Vec<String> {
        [
            ("bootstrap", bootstrap.to_owned()),
            ("size", self.size.to_string()),
            ("partitions", self.partitions.to_string()),
            (
                "keyless",
                if self.keyless { "yes" } else { "no" }.to_owned(),
            ),
        ]
        .into_iter()
        .flat_map(|(k, v)| [format!("--{k}"), v])
        .collect()
    }
}

/// One run's figures, as the JVM measured them over its timed window (from the first send to
/// the last acknowledgement).
#[derive(Debug, Clone, PartialEq)]
pub struct BenchRun {
    /// Records sent.
    pub records: u64,
    /// Of those, failed.
    pub failed: u64,
    /// Of those, not acknowledged when the run's timeout passed.
    pub unacknowledged: u64,
    /// Wall time of the window.
    pub seconds: f64,
    /// The JVM's CPU time over the window (`getProcessCpuTime`: every thread).
    pub cpu_seconds: f64,
    /// JIT compilation time over the window, ms (-1 when the JVM does not say).
    pub jit_ms: i64,
    /// GC time over the window, ms.
    pub gc_ms: i64,
    /// Collections over the window.
    pub gc_count: u64,
    /// The first failure's description (`none`), spaces as `_`.
    pub first_error: String,
}

impl BenchRun {
    /// Parses a `BENCH ...` line.
    pub fn parse(line: &str) -> Result<Self, String> {
        if !line.starts_with("BENCH ") {
            return Err(format!("not a BENCH line: {line:?}"));
        }
        Ok(Self {
            records: field(line, "records")?,
            failed: field(line, "failed")?,
            unacknowledged: field(line, "unacknowledged")?,
            seconds: field(line, "seconds")?,
            cpu_seconds: field(line, "cpu_seconds")?,
            jit_ms: field(line, "jit_ms")?,
            gc_ms: field(line, "gc_ms")?,
            gc_count: field(line, "gc_count")?,
            first_error: field(line, "first_error")?,
        })
    }

    /// `Err` unless every record was acknowledged.
    pub fn check(&self) -> Result<(), String> {
        if self.failed == 0 && self.unacknowledged == 0 {
            Ok(())
        } else {
            Err(format!(
                "{} of {} failed, {} unacknowledged; first error: {}",
                self.failed, self.records, self.unacknowledged, self.first_error
            ))
        }
    }
}

/// The Java producer as a client of `bench-e2e`: one JVM, started once (its start-up is never
/// timed), that runs one measured run per [`Self::begin`] / [`Self::end`] pair, each with a new
/// producer after one warm-up record, so that its JIT stays warm across runs while the other
/// clients take their turns.
#[derive(Debug)]
pub struct JavaBench {
    run: JavaRun,
}

impl JavaBench {
    /// Starts the JVM and waits until it is ready for runs.
    ///
    /// # Panics
    /// If the program is not built, cannot start, or is not ready within 60 s.
    pub fn start(bootstrap: &str, plan: &BenchPlan) -> Self {
        let mut args = plan.args(bootstrap);
        args.extend(plan.producer.args());
        Self::ready(JavaRun::spawn("bench", &args))
    }

    /// Another program that speaks this protocol (franz-go's: [`crate::franz`]), started.
    ///
    /// # Panics
    /// If it is not ready within 60 s.
    pub fn ready(mut run: JavaRun) -> Self {
        run.wait_for(Duration::from_secs(60), |l| (l == "READY").then_some(()));
        Self { run }
    }

    /// The JVM's process id.
    pub fn pid(&self) -> u32 {
        self.run.pid()
    }

    /// Starts a run of `records` records to `topic` and returns once the JVM is about to
    /// start its timed window (after the producer's creation and warm-up record).
    ///
    /// # Panics
    /// If the JVM exits or the window does not start within `timeout`.
    pub fn begin(&mut self, topic: &str, records: u64, timeout: Duration) {
        self.run.send_line(&format!("RUN {topic} {records}"));
        self.run
            .wait_for(timeout, |l| (l == "MEASURING").then_some(()));
    }

    /// Waits for the figures of the run [`Self::begin`] started.
    ///
    /// # Panics
    /// If the JVM exits or prints no `BENCH` line within `timeout`.
    pub fn end(&mut self, timeout: Duration) -> Result<BenchRun, String> {
        self.run.wait_for(timeout, |l| {
            l.starts_with("BENCH ").then(|| BenchRun::parse(l))
        })
    }

    /// Closes the JVM's stdin and waits for it to exit.
    pub fn finish(self, timeout: Duration) -> Finished {
        self.run.finish(timeout)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::seed::{Source, Verdict};

    #[test]
    fn outcome_lines_parse_and_bad_ones_are_refused() {
        let text = "0\t0\tdelivered\t7\t\n\
                    1\t1\tfailed\t-1\torg.apache.kafka.common.errors.TimeoutException: expired\n\
                    2\t2\tunresolved\t-1\t\n\
                    3\t0\tfailed\t-1\trefused by send: org.apache.kafka.common.KafkaException: x\n\
                    4\t1\tdelivered\t-1\t\n";
        let r = parse_outcomes(text).expect("parses");
        assert_eq!(r.len(), 5);
        assert_eq!(
            r[0].reported(),
            Some(Reported::Delivered {
                partition: 0,
                offset: Some(7)
            })
        );
        assert!(matches!(
            r[1].reported(),
            Some(Reported::Failed {
                persisted: Persistence::PossiblyPersisted,
                refused: false,
                ..
            })
        ));
        assert_eq!(r[2].reported(), None);
        assert!(matches!(
            r[3].reported(),
            Some(Reported::Failed {
                persisted: Persistence::NotPersisted,
                refused: true,
                ..
            })
        ));
        assert_eq!(
            r[4].reported(),
            Some(Reported::Delivered {
                partition: 1,
                offset: None
            })
        );
        for bad in [
            "0\t0\tdelivered\t7",
            "0\t0\tlost\t7\t",
            "0\tx\tdelivered\t7\t",
            "0\t0\tfailed\t-1\t",
            "0\t0\tdelivered\t7\toops",
            "0\t0\tfailed\t3\toops",
            "0\t0\tdelivered\t-2\t",
        ] {
            assert!(parse_outcomes(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn markers_and_fields() {
        assert_eq!(marker("SENT 1000", "SENT"), Some(1000));
        assert_eq!(marker("SENTX 1000", "SENT"), None);
        assert_eq!(marker("PAUSED 5", "SENT"), None);
        let line = "THROUGHPUT round=2 records=10 failed=0 seconds=0.5 records_per_sec=20.0 \
                    cpu_seconds=0.25 cpu_us_per_record=25.0 p50_ms=1.5 p99_ms=2.5 p999_ms=3.0 max_ms=4.0";
        let t = Throughput::parse(line).expect("parses");
        assert_eq!((t.round, t.records, t.failed), (2, 10, 0));
        assert!((t.cpu_us_per_record - 25.0).abs() < 1e-9);
        assert!(Throughput::parse("THROUGHPUT round=1").is_err());
        let line = "BENCH records=10 failed=1 unacknowledged=0 seconds=0.5 cpu_seconds=0.25 \
                    jit_ms=12 gc_ms=3 gc_count=2 first_error=x:_y";
        let b = BenchRun::parse(line).expect("parses");
        assert_eq!((b.records, b.failed, b.jit_ms, b.gc_count), (10, 1, 12, 2));
        assert!(b.check().is_err());
        assert!(BenchRun::parse("BENCH records=1").is_err());
    }

    fn read(offset: i64, value: Vec<u8>) -> ReadRecord {
        ReadRecord {
            offset,
            key: None,
            value: Some(value),
        }
    }

    #[test]
    fn a_java_ledger_goes_through_the_ledger_checks() {
        let plan = LedgerPlan::new("t", 2, 4);
        let line = |i: usize, status: &str, offset: i64, error: &str| {
            format!(
                "{i}\t{}\t{status}\t{offset}\t{error}\n",
                plan.partition_of(i)
            )
        };
        let text = [
            line(0, "delivered", 0, ""),
            line(1, "delivered", 0, ""),
            line(2, "delivered", 1, ""),
            line(
                3,
                "failed",
                -1,
                "org.apache.kafka.common.errors.TimeoutException: x",
            ),
        ]
        .concat();
        let records = parse_outcomes(&text).expect("parses");
        check_ledger_records(&plan, &records).expect("the plan's records");
        let value = |i: usize| ledger_value("t", plan.partition_of(i), i).into_bytes();
        let ledger = JavaLedger {
            plan: plan.clone(),
            records: records.clone(),
            finished: Finished {
                status: success(),
                stdout: Vec::new(),
                stderr: String::new(),
                out: Ok(String::new()),
            },
        };
        // Record 3 failed possibly persisted and is in the log: allowed.
        let clean: BTreeMap<i32, Vec<ReadRecord>> = [
            (0, vec![read(0, value(0)), read(1, value(2))]),
            (1, vec![read(0, value(1)), read(1, value(3))]),
        ]
        .into();
        let a = ledger.audit(&clean);
        assert!(a.is_clean(true), "{:?}", a.problems);
        let row = a.row("java");
        assert_eq!((row.sent, row.acknowledged, row.failed), (4, 3, 1));
        assert!(row.is_clean());
        assert_eq!(a.summary.possibly_persisted_present, 1);

        // Record 0 twice, record 2 missing: counted, not panicking.
        let bad: BTreeMap<i32, Vec<ReadRecord>> = [
            (0, vec![read(0, value(0)), read(1, value(0))]),
            (1, vec![read(0, value(1))]),
        ]
        .into();
        let row = ledger.audit(&bad).row("java");
        assert_eq!((row.duplicates, row.missing, row.wrong_offsets), (1, 1, 1));
        assert!(!row.is_clean());

        // An outcome file that does not follow the plan is refused.
        let mut wrong = records;
        wrong[1].partition = 0;
        assert!(check_ledger_records(&plan, &wrong).is_err());
        assert!(check_ledger_records(&plan, &wrong[..3]).is_err());
    }

    fn success() -> ExitStatus {
        Command::new("true").status().expect("run true")
    }

    #[test]
    fn a_java_seed_run_goes_through_the_seed_verdict() {
        let plan = SeedPlan {
            source: Source {
                topic: "t".into(),
                partitions: 2,
                run: 0xabc,
                record_size: 30,
            },
            ticks: 3,
            period: Duration::from_millis(1),
            bursts: 1,
            burst_size: 2,
            resolve_timeout: Duration::from_secs(1),
        };
        let tags = [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1)];
        let text: String = tags
            .iter()
            .enumerate()
            .map(|(i, (s, q))| format!("{s}:{q}\t{}\tdelivered\t{i}\t\n", q % 2))
            .collect();
        let records = parse_outcomes(&text).expect("parses");
        let stdout: Vec<String> = [
            "TICKER records=3 seconds=0.003",
            "BURST b=0 records=2 bytes=60 start_us=1000 enqueue_us=10 duration_us=500 ticks_at_start=1 ticks_during=1",
            "DONE records=5 delivered=5 failed=0 unresolved=0 elapsed_us=4000",
        ]
        .map(String::from)
        .to_vec();
        let report = seed_report(&plan, &records, &stdout).expect("a report");
        assert_eq!(report.bursts.len(), 1);
        assert_eq!(report.bursts[0].bytes, 60);
        // The log: each record at the offset its outcome names (offset = line number).
        let mut log: BTreeMap<i32, Vec<ReadRecord>> = BTreeMap::new();
        for (i, &(stream, seq)) in tags.iter().enumerate() {
            let v = encode_value(0xabc, Tag { stream, seq }, 30);
            log.entry((seq % 2) as i32)
                .or_default()
                .push(read(i as i64, v));
        }
        let v = Verdict::compute(0xabc, 2, &report.sent, &log);
        assert!(v.is_complete(), "{v}");
        assert!(v.row("java").is_clean());

        // A record on another partition than planned, or one missing, is refused.
        let mut wrong = records.clone();
        wrong[0].partition = 1;
        assert!(seed_report(&plan, &wrong, &stdout).is_err());
        assert!(seed_report(&plan, &records[..4], &stdout).is_err());
        assert!(seed_report(&plan, &records, &stdout[..1]).is_err());
    }
}

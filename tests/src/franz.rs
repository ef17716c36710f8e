//! franz-go (the Go client, github.com/twmb/franz-go) as a client of the e2e bench:
//! `tests/go/franz-bench`, built by `scripts/install-franz-bench.sh`, speaks the Java reference
//! producer's `bench` protocol ([`JavaBench`]), so the bench drives both alike.

use std::path::{Path, PathBuf};
use std::process::Command;

use std::time::Duration;

use crate::javaref::{self, BenchPlan, JavaBench, JavaRun, JavaSeed};
use crate::seed::SeedPlan;

/// The franz-go version `tests/go/franz-bench/go.mod` requires (`?` if it names none).
pub fn version() -> &'static str {
    // `require github.com/twmb/franz-go vX` alone, or the same line in a `require (` block.
    include_str!("../go/franz-bench/go.mod")
        .lines()
        .map(|l| l.trim().trim_start_matches("require "))
        .find_map(|l| l.strip_prefix("github.com/twmb/franz-go "))
        .and_then(|v| v.split_whitespace().next())
        .unwrap_or("?")
}

/// The install folder: `$KPROD_FRANZ_BENCH` if set, else the folder
/// `scripts/install-franz-bench.sh` builds for the current sources (`--where`).
///
/// # Panics
/// If there is no complete build there (also when the sources changed since the last build).
pub fn install_dir() -> PathBuf {
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("scripts")
        .join("install-franz-bench.sh");
    let dir = crate::built_dir("KPROD_FRANZ_BENCH", &script);
    assert!(
        dir.join(".complete").is_file() && dir.join("franz-bench").is_file(),
        "franz-bench is not built at {} (or its sources changed since); run \
         scripts/install-franz-bench.sh",
        dir.display()
    );
    dir
}

/// Starts franz-bench for `plan` and waits until it is ready for runs. franz-go takes the
/// plan's `linger.ms` and `batch.size`; its in-flight limit is its own (5 for an idempotent
/// producer), and the plan's other properties (the Java producer's) do not apply.
/// `max_kafka_version` caps the request versions franz-go tries (`kgo.MaxVersions`): Tansu
/// 0.6.0 closes the connection on an ApiVersions request newer than its v4, where Kafka
/// answers UNSUPPORTED_VERSION.
///
/// # Panics
/// If the program is not built, cannot start, or is not ready within 60 s.
pub fn start_bench(
    bootstrap: &str,
    plan: &BenchPlan,
    max_kafka_version: Option<&str>,
) -> JavaBench {
    let mut args = plan.args(bootstrap);
    if let Some(ms) = plan.producer.linger_ms {
        args.extend(["--linger-ms".into(), ms.to_string()]);
    }
    if let Some(b) = plan.producer.batch_size {
        args.extend(["--batch-size".into(), b.to_string()]);
    }
    if let Some(v) = max_kafka_version {
        args.extend(["--max-kafka-version".into(), v.to_owned()]);
    }
    let label = format!("franz-bench bench {}", args.join(" "));
    JavaBench::ready(spawn("bench", &args, label))
}

/// Starts `franz-bench COMMAND ARGS...` as [`JavaRun::spawn`] starts the JVM.
fn spawn(command: &str, args: &[String], label: String) -> JavaRun {
    let exe = install_dir().join("franz-bench");
    let mut program = Command::new(&exe);
    program.arg(command).args(args);
    JavaRun::spawn_command(program, &exe.display().to_string(), label)
}

/// Runs the seed scenario `plan` with franz-go (`franz-bench seed`, the Java `seed` command's
/// arguments, outcome file and figures) against `bootstrap`, within `timeout`, with
/// `linger.ms` `linger_ms`; `max_kafka_version` as for [`start_bench`].
///
/// # Panics
/// If the program fails, or its outcome file or figures do not match the plan.
pub fn run_seed(
    bootstrap: &str,
    plan: &SeedPlan,
    linger_ms: u64,
    max_kafka_version: Option<&str>,
    timeout: Duration,
) -> JavaSeed {
    let mut args = javaref::seed_plan_args(plan, bootstrap, JavaRun::out_file());
    args.extend(["--linger-ms".into(), linger_ms.to_string()]);
    if let Some(v) = max_kafka_version {
        args.extend(["--max-kafka-version".into(), v.to_owned()]);
    }
    let label = format!("franz-bench seed (topic {})", plan.source.topic);
    javaref::finish_seed(spawn("seed", &args, label), plan, timeout)
}

/// franz-go driven phase by phase (`franz-bench phases`, see `tests/go/franz-bench/phases.go`):
/// each phase sends its records to partition 0 of one topic, the test ledger's values, and
/// waits for every outcome; `DATALOSS` lines come from franz-go's data-loss hook.
#[derive(Debug)]
pub struct Phases {
    run: JavaRun,
    per_phase: usize,
}

impl Phases {
    /// Starts `franz-bench phases` against `bootstrap` and waits until it is ready; `hook`
    /// sets franz-go's data-loss hook (`kgo.ProducerOnDataLossDetected`).
    ///
    /// # Panics
    /// If the program is not built, cannot start, or is not ready within 60 s.
    pub fn start(bootstrap: &str, topic: &str, per_phase: usize, hook: bool) -> Self {
        let args: Vec<String> = vec![
            "--bootstrap".into(),
            bootstrap.into(),
            "--topic".into(),
            topic.into(),
            "--per-phase".into(),
            per_phase.to_string(),
            "--on-data-loss".into(),
            if hook { "yes" } else { "no" }.into(),
        ];
        let label = format!("franz-bench phases {}", args.join(" "));
        let mut run = spawn("phases", &args, label);
        run.wait_for(Duration::from_secs(60), |l| (l == "READY").then_some(()));
        Self { run, per_phase }
    }

    /// Runs phase `k` and returns what franz-go reported for each record, in order: its
    /// offset, or the error's text.
    ///
    /// # Panics
    /// If the phase does not end within `timeout`, or a line is malformed.
    pub fn phase(&mut self, k: usize, timeout: Duration) -> Vec<Result<i64, String>> {
        self.run.send_line(&format!("PHASE {k}"));
        let done = format!("DONE {k}");
        let mut outcomes = Vec::new();
        let deadline = std::time::Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            let line = self.run.wait_for(left, |l| {
                (l == done || l.starts_with("R ")).then(|| l.to_owned())
            });
            if line == done {
                assert_eq!(
                    outcomes.len(),
                    self.per_phase,
                    "franz-bench phases: phase {k}"
                );
                return outcomes;
            }
            let w: Vec<&str> = line.splitn(4, ' ').collect();
            let index = k * self.per_phase + outcomes.len();
            assert_eq!(
                w.get(1).copied(),
                Some(index.to_string().as_str()),
                "franz-bench phases: {line:?} is not record {index}'s outcome"
            );
            let outcome = match w.as_slice() {
                ["R", _, "OK", offset] => Ok(offset
                    .parse()
                    .unwrap_or_else(|_| panic!("franz-bench phases: {line:?}"))),
                ["R", _, "ERR", text] => Err((*text).to_owned()),
                _ => panic!("franz-bench phases: malformed line {line:?}"),
            };
            outcomes.push(outcome);
        }
    }

    /// Ends the program (end of stdin) and returns how many `DATALOSS` lines it printed.
    ///
    /// # Panics
    /// If it does not exit 0 within 30 s.
    pub fn finish(self) -> usize {
        let finished = self.run.finish(Duration::from_secs(30));
        assert!(
            finished.status.success(),
            "{}",
            finished.describe("franz-bench phases failed")
        );
        (finished.stdout.iter())
            .filter(|l| l.starts_with("DATALOSS "))
            .count()
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn go_mod_names_the_franz_go_version() {
        let v = super::version();
        assert!(v.starts_with("v1."), "franz-go version from go.mod: {v:?}");
    }
}

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

#[cfg(test)]
mod tests {
    #[test]
    fn go_mod_names_the_franz_go_version() {
        let v = super::version();
        assert!(v.starts_with("v1."), "franz-go version from go.mod: {v:?}");
    }
}

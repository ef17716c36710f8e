//! franz-go's fake cluster (kfake, github.com/twmb/franz-go/pkg/kfake) as a test broker:
//! `franz-bench kfake` (tests/go/franz-bench/kfake.go, built by
//! `scripts/install-franz-bench.sh`) runs it in a child process and takes commands on stdin.
//!
//! kfake validates idempotent sequences per producer id and partition as Kafka does (the last
//! five batches kept, a duplicate of one answered success at its offset, any other first
//! sequence but the next refused OUT_OF_ORDER_SEQUENCE_NUMBER), over several brokers whose
//! producer state is shared, so a leader move keeps it as replication does in Kafka. Its leader
//! moves are cheap (hundreds a second), and the program injects Produce faults: refusals
//! (nothing written), requests held past the producer's request timeout and then processed
//! (zombies), refusals after the append (written, then answered REQUEST_TIMED_OUT or
//! NOT_ENOUGH_REPLICAS_AFTER_APPEND), dropped connections (nothing written) and lost answers
//! (written, then the connection closed without the answer).

use std::io::Write;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// Longest wait for the cluster to start, and for an answer to a command.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(30);

/// A kfake cluster in a child process, killed on drop.
#[derive(Debug)]
pub struct Kfake {
    child: Child,
    stdin: ChildStdin,
    lines: mpsc::Receiver<String>,
    addrs: Vec<String>,
}

/// Produce faults applied so far (`STATS`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FaultStats {
    /// Produce requests the cluster read (the program's own forwarded ones not counted).
    pub produce: u64,
    /// Answered with an injected error code (for every partition or for one), that
    /// partition's batch unwritten.
    pub failed: u64,
    /// Connection closed, the request unprocessed.
    pub dropped: u64,
    /// Processed, then the connection closed without the answer.
    pub lost: u64,
    /// Of `lost`, those whose every batch the cluster took (success or duplicate).
    pub lost_written: u64,
    /// Held for a while, then processed and answered.
    pub held: u64,
    /// Of `held`, those whose every batch the cluster took or found a duplicate of.
    pub held_taken: u64,
    /// Processed, then answered REQUEST_TIMED_OUT or NOT_ENOUGH_REPLICAS_AFTER_APPEND (for
    /// every partition or for one).
    pub after: u64,
}

impl Kfake {
    /// Starts `brokers` brokers with `topics` (name, partitions) created, and waits until
    /// they listen.
    ///
    /// # Panics
    /// If franz-bench is not built, cannot start, or does not say READY within 30 s.
    pub fn start(brokers: usize, topics: &[(&str, i32)]) -> Self {
        let exe = crate::franz::install_dir().join("franz-bench");
        let spec = (topics.iter())
            .map(|(t, p)| format!("{t}:{p}"))
            .collect::<Vec<_>>()
            .join(",");
        let mut child = Command::new(&exe)
            .args([
                "kfake",
                "--brokers",
                &brokers.to_string(),
                "--topics",
                &spec,
            ])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", exe.display()));
        let stdin = child.stdin.take().expect("piped stdin");
        let lines = crate::read_lines(child.stdout.take().expect("piped stdout"));
        let mut kfake = Self {
            child,
            stdin,
            lines,
            addrs: Vec::new(),
        };
        let ready = kfake.next_line("READY");
        let addrs = ready
            .strip_prefix("READY ")
            .unwrap_or_else(|| panic!("franz-bench kfake said {ready:?}, not READY"));
        kfake.addrs = addrs.split(',').map(str::to_owned).collect();
        assert_eq!(kfake.addrs.len(), brokers, "{ready}");
        kfake
    }

    /// `host:port,…` of every broker, node 0 first.
    pub fn bootstrap(&self) -> String {
        self.addrs.join(",")
    }

    /// Sends one command and returns what follows `OK` in its answer.
    ///
    /// # Panics
    /// If the cluster answers `ERR`, exits, or does not answer within 30 s.
    pub fn command(&mut self, command: &str) -> String {
        writeln!(self.stdin, "{command}")
            .and_then(|()| self.stdin.flush())
            .unwrap_or_else(|e| panic!("franz-bench kfake: cannot send {command:?}: {e}"));
        let answer = self.next_line(command);
        match answer.strip_prefix("OK") {
            Some(rest) => rest.trim().to_owned(),
            None => panic!("franz-bench kfake answered {command:?} with {answer:?}"),
        }
    }

    /// Every partition gets a random leader (possibly the same), its leader epoch bumped.
    pub fn shuffle_leaders(&mut self) {
        self.command("SHUFFLE");
    }

    /// The next `count` Produce requests are answered `code` for every partition, unwritten;
    /// with `only` (topic, partition), the next `count` carrying it are answered `code` for
    /// that partition alone, unwritten, their other partitions processed as usual. Not 7 or
    /// 20, which kfake answers after writing (see [`Self::fail_produce_after_append`]).
    pub fn fail_produce(&mut self, code: i16, count: u32, only: Option<(&str, i32)>) {
        self.command(&format!("FAIL {code} {count}{}", selector(only)));
    }

    /// As [`Self::fail_produce`], but the faulted partitions are processed (written where the
    /// broker takes them) before they are answered `code`: 7 (REQUEST_TIMED_OUT) or 20
    /// (NOT_ENOUGH_REPLICAS_AFTER_APPEND), as Kafka answers when replication did not finish.
    pub fn fail_produce_after_append(&mut self, code: i16, count: u32, only: Option<(&str, i32)>) {
        self.command(&format!("AFTER {code} {count}{}", selector(only)));
    }

    /// The next `count` Produce requests close their connection, unwritten.
    pub fn drop_produce(&mut self, count: u32) {
        self.command(&format!("DROP {count}"));
    }

    /// The next `count` Produce requests are processed, then their connection is closed
    /// without the answer.
    pub fn lose_produce_answers(&mut self, count: u32) {
        self.command(&format!("LOSE {count}"));
    }

    /// The next `count` Produce requests are held `ms` milliseconds, then processed and
    /// answered: a producer that gave up on one meanwhile (its request timeout) meets it late,
    /// a zombie, written if it reaches the broker before the retry, else found a duplicate
    /// (or refused, once the retry's batch left the broker's last five).
    pub fn hold_produce(&mut self, ms: u64, count: u32) {
        self.command(&format!("HOLD {ms} {count}"));
    }

    /// Withdraws every fault still waiting for requests.
    pub fn clear_faults(&mut self) {
        self.command("CLEAR");
    }

    /// The faults applied so far.
    pub fn stats(&mut self) -> FaultStats {
        let text = self.command("STATS");
        let mut s = FaultStats::default();
        for field in text.split_whitespace() {
            let (k, v) = field.split_once('=').unwrap_or((field, ""));
            let v: u64 = v
                .parse()
                .unwrap_or_else(|_| panic!("franz-bench kfake STATS: {text:?}"));
            match k {
                "produce" => s.produce = v,
                "failed" => s.failed = v,
                "dropped" => s.dropped = v,
                "lost" => s.lost = v,
                "lost_written" => s.lost_written = v,
                "after" => s.after = v,
                "held" => s.held = v,
                "held_taken" => s.held_taken = v,
                _ => panic!("franz-bench kfake STATS: unknown field in {text:?}"),
            }
        }
        s
    }

    fn next_line(&mut self, waiting_for: &str) -> String {
        match self.lines.recv_timeout(ANSWER_TIMEOUT) {
            Ok(line) => line,
            Err(e) => {
                let status = self.child.try_wait();
                panic!(
                    "franz-bench kfake: no answer to {waiting_for:?} within {ANSWER_TIMEOUT:?} \
                     ({e}; process status {status:?}; its stderr is the test's)"
                )
            }
        }
    }
}

impl Drop for Kfake {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn selector(only: Option<(&str, i32)>) -> String {
    only.map(|(t, p)| format!(" {t} {p}")).unwrap_or_default()
}

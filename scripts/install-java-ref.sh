#!/usr/bin/env bash
# Builds the Java reference producer (tests/java: Apache Kafka's own producer, kafka-clients,
# driven through the ledger, seed and throughput scenarios) with Maven into
# ${KPROD_CACHE:-$HOME/.cache/kprod}/java-ref-<hash>/: java-ref.jar and libs/ (every runtime
# dependency; the jar's manifest names them, so `java -jar DIR/java-ref.jar` runs it).
# <hash> covers tests/java/pom.xml and every file under tests/java/src, so a changed source
# builds anew and the tests (tests/src/javaref.rs) never run a stale build.
# Needs Java 17+ and Maven. Idempotent: a complete build is reused.
# Prints the folder on its last line (Maven's output goes to stderr).
# `scripts/install-java-ref.sh --where` prints the folder without building anything.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
src="$here/../tests/java"

kafka_version() {
  sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' "$1"
}
broker_version="$(kafka_version "$here/kafka/pom.xml")"
client_version="$(kafka_version "$src/pom.xml")"
if [ -z "$client_version" ] || [ "$client_version" != "$broker_version" ]; then
  echo "install-java-ref: kafka-clients version '$client_version' in tests/java/pom.xml differs from" \
    "the broker's '$broker_version' in scripts/kafka/pom.xml; make them the same" >&2
  exit 1
fi

# The hash of the build's inputs: every file's path and contents, in a fixed order.
hash="$(cd "$src" && find pom.xml src -type f -print0 | LC_ALL=C sort -z \
  | xargs -0 sha256sum | sha256sum | cut -c1-16)"
cache="${KPROD_CACHE:-$HOME/.cache/kprod}"
dest="$cache/java-ref-$hash"

if [ "${1:-}" = "--where" ]; then
  echo "$dest"
  exit 0
fi
[ $# -eq 0 ] || { echo "usage: $0 [--where]" >&2; exit 2; }

if [ -f "$dest/.complete" ] && [ -f "$dest/java-ref.jar" ]; then
  echo "$dest"
  exit 0
fi

command -v java >/dev/null || { echo "install-java-ref: java not found (the Java reference producer needs Java 17+)" >&2; exit 1; }
command -v mvn >/dev/null || { echo "install-java-ref: mvn not found (Maven builds the Java reference producer)" >&2; exit 1; }

# Build from a copy, so that what is built is exactly what was hashed and no stale class of
# an earlier build in tests/java/target slips in.
rm -rf "$dest.tmp"
mkdir -p "$dest.tmp/build" "$dest.tmp/libs"
cp -R "$src/pom.xml" "$src/src" "$dest.tmp/build/"
mvn -q -B -Dstyle.color=never -f "$dest.tmp/build/pom.xml" package >&2
mvn -q -B -Dstyle.color=never -f "$dest.tmp/build/pom.xml" dependency:copy-dependencies \
  -DincludeScope=runtime -DoutputDirectory="$dest.tmp/libs" >&2
cp "$dest.tmp/build/target/java-ref.jar" "$dest.tmp/java-ref.jar"
rm -rf "$dest.tmp/build"
[ -f "$dest.tmp/libs/kafka-clients-$client_version.jar" ] || {
  echo "install-java-ref: kafka-clients-$client_version.jar missing after Maven ran" >&2; exit 1; }
java -jar "$dest.tmp/java-ref.jar" --help >/dev/null || {
  echo "install-java-ref: the built jar does not run" >&2; exit 1; }
echo "$hash" > "$dest.tmp/.complete"
rm -rf "$dest"
mv "$dest.tmp" "$dest"
echo "$dest"

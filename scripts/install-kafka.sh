#!/usr/bin/env bash
# Installs Apache Kafka (broker, KRaft controller and tools) from Maven Central with Maven:
# scripts/kafka/pom.xml names the artifacts, `mvn dependency:copy-dependencies` copies them and
# everything they need at run time into ${KPROD_CACHE:-$HOME/.cache/kprod}/kafka-<version>/libs.
# Needs Java 17+ and Maven. Idempotent: a complete install is reused.
# Prints the install folder on its last line (run the broker with `java -cp 'DIR/libs/*' kafka.Kafka`).
#
# Usage: scripts/install-kafka.sh [POM_DIR]
#   POM_DIR is a folder under scripts/ holding the pom.xml to install: `kafka` (the default,
#   Apache Kafka 4.4.0), `kafka-3` (Apache Kafka 3.9.1), `kafka-2.4` (2.4.1), `kafka-2`
#   (2.3.1) or `kafka-0.11` (0.11.0.3), the last four for the old-broker tests (2.4.1, 2.3.1
#   and 0.11.0.3 run with ZooKeeper, from the same folder).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
pom_dir="${1:-kafka}"
pom="$here/$pom_dir/pom.xml"
[ -f "$pom" ] || { echo "install-kafka: no $pom" >&2; exit 1; }

KAFKA_VERSION="$(sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' "$pom")"
cache="${KPROD_CACHE:-$HOME/.cache/kprod}"
dest="$cache/kafka-$KAFKA_VERSION"
stamp="$dest/.complete"

command -v java >/dev/null || { echo "install-kafka: java not found (Kafka $KAFKA_VERSION needs Java 17+)" >&2; exit 1; }
command -v mvn >/dev/null || { echo "install-kafka: mvn not found (Maven installs Kafka from Maven Central)" >&2; exit 1; }

if [ -f "$stamp" ] && cmp -s "$stamp" "$pom"; then
  echo "$dest"
  exit 0
fi

rm -rf "$dest.tmp"
mkdir -p "$dest.tmp/libs"
mvn -q -B -f "$pom" dependency:copy-dependencies \
  -DincludeScope=runtime -DoutputDirectory="$dest.tmp/libs" >&2
# The broker (kafka_2.13, or kafka_2.12 before 3.x) and the clients; the tools where the pom
# names them (3.x and later).
jars=("kafka-clients-$KAFKA_VERSION.jar")
if grep -q '<artifactId>kafka_2.12</artifactId>' "$pom"; then
  jars+=("kafka_2.12-$KAFKA_VERSION.jar")
else
  jars+=("kafka_2.13-$KAFKA_VERSION.jar")
fi
if grep -q '<artifactId>kafka-tools</artifactId>' "$pom"; then
  jars+=("kafka-tools-$KAFKA_VERSION.jar")
fi
# Releases run with ZooKeeper: the ZooKeeper the pom pins (the one their own clients ask for
# cannot connect on Java 14+) and reload4j for their log.
if grep -q '<artifactId>zookeeper</artifactId>' "$pom"; then
  zk_version="$(grep -A2 '<artifactId>zookeeper</artifactId>' "$pom" | sed -n 's:.*<version>\(.*\)</version>.*:\1:p' | head -n 1)"
  jars+=("zookeeper-$zk_version.jar" "reload4j-1.2.25.jar")
fi
for jar in "${jars[@]}"; do
  [ -f "$dest.tmp/libs/$jar" ] || { echo "install-kafka: $jar missing after Maven ran" >&2; exit 1; }
done
cp "$pom" "$dest.tmp/.complete"
rm -rf "$dest"
mv "$dest.tmp" "$dest"
echo "$dest"

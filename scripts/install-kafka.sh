#!/usr/bin/env bash
# Installs Apache Kafka (broker, KRaft controller and tools) from Maven Central with Maven:
# scripts/kafka/pom.xml names the artifacts, `mvn dependency:copy-dependencies` copies them and
# everything they need at run time into ${KPROD_CACHE:-$HOME/.cache/kprod}/kafka-<version>/libs.
# Needs Java 17+ and Maven. Idempotent: a complete install is reused.
# Prints the install folder on its last line (run the broker with `java -cp 'DIR/libs/*' kafka.Kafka`).
#
# Usage: scripts/install-kafka.sh [POM_DIR]
#   POM_DIR is a folder under scripts/ holding the pom.xml to install: `kafka` (the default,
#   Apache Kafka 4.4.0) or `kafka-3` (Apache Kafka 3.9.1, for the old-protocol-version tests).
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
for jar in "kafka_2.13-$KAFKA_VERSION.jar" "kafka-tools-$KAFKA_VERSION.jar" "kafka-clients-$KAFKA_VERSION.jar"; do
  [ -f "$dest.tmp/libs/$jar" ] || { echo "install-kafka: $jar missing after Maven ran" >&2; exit 1; }
done
cp "$pom" "$dest.tmp/.complete"
rm -rf "$dest"
mv "$dest.tmp" "$dest"
echo "$dest"

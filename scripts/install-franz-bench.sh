#!/usr/bin/env bash
# Builds franz-bench (tests/go/franz-bench: franz-go, the Go client, as a client of the e2e
# bench, and `franz-bench kfake`, franz-go's fake cluster as a test broker) with the machine's
# Go into ${KPROD_CACHE:-$HOME/.cache/kprod}/franz-bench-<hash>/.
# <hash> covers every file of tests/go/franz-bench (go.mod and go.sum pin franz-go), so a
# changed source builds anew. Modules come from the Go module proxy (GOPROXY as set, else
# Go's default). Idempotent: a complete build is reused.
# Prints the folder on its last line (Go's output goes to stderr).
# `scripts/install-franz-bench.sh --where` prints the folder without building anything.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
src="$here/../tests/go/franz-bench"

hash="$(cd "$src" && find . -type f -print0 | LC_ALL=C sort -z \
  | xargs -0 sha256sum | sha256sum | cut -c1-16)"
cache="${KPROD_CACHE:-$HOME/.cache/kprod}"
dest="$cache/franz-bench-$hash"

if [ "${1:-}" = "--where" ]; then
  echo "$dest"
  exit 0
fi
[ $# -eq 0 ] || { echo "usage: $0 [--where]" >&2; exit 2; }

if [ -f "$dest/.complete" ] && [ -x "$dest/franz-bench" ]; then
  echo "$dest"
  exit 0
fi

command -v go >/dev/null || { echo "install-franz-bench: go not found (franz-bench is a Go program)" >&2; exit 1; }

rm -rf "$dest.tmp"
mkdir -p "$dest.tmp/build"
cp -R "$src/." "$dest.tmp/build/"
(cd "$dest.tmp/build" && go build -mod=readonly -trimpath -o "$dest.tmp/franz-bench" . ) >&2
rm -rf "$dest.tmp/build"
# It runs: without arguments it prints its usage and exits 2.
set +e
"$dest.tmp/franz-bench" >/dev/null 2>&1
rc=$?
set -e
[ "$rc" -eq 2 ] || { echo "install-franz-bench: the built program does not run (exit $rc)" >&2; exit 1; }
echo "$hash" > "$dest.tmp/.complete"
rm -rf "$dest"
mv "$dest.tmp" "$dest"
echo "$dest"

#!/usr/bin/env bash
# Runs the whole test suite: installs Tansu if needed, then every test of the workspace.
set -euo pipefail
cd "$(dirname "$0")/.."
KPROD_TANSU="${KPROD_TANSU:-$(./scripts/install-tansu.sh | tail -n 1)}"
export KPROD_TANSU
cargo test --workspace --all-targets "$@"

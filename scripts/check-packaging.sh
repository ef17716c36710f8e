#!/usr/bin/env bash
# Checks that the published crates (kprod-core, kprod-tokio) are ready to publish: their
# manifests validate, they package (the file lists, then a package of both that cargo builds
# from the packaged sources, kprod-tokio against the packaged kprod-core), the docs build
# without a warning, and kprod-tokio's examples compile. kprod-model and kprod-tests are
# `publish = false`.
set -euo pipefail
cd "$(dirname "$0")/.."

# Every manifest parses and the dependency graph resolves.
cargo metadata --format-version 1 --locked >/dev/null

for crate in kprod-core kprod-tokio; do
    echo "== cargo package --list -p $crate"
    cargo package --list -p "$crate" --allow-dirty --locked
done

# Both at once, so that kprod-tokio's kprod-core dependency resolves to the packaged one;
# each is verified by building it from its .crate file.
cargo package -p kprod-core -p kprod-tokio --allow-dirty --locked

RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --locked
cargo build --examples -p kprod-tokio --locked
echo "packaging checks passed"

#!/usr/bin/env bash
# Checks that the published crates (kprod-core, kprod-tokio) are ready to publish: their
# manifests validate, they package (the file lists, then a package of both that cargo builds
# from the packaged sources, kprod-tokio against the packaged kprod-core), the docs build
# without a warning, kprod-tokio's examples compile, and both crates build with the oldest
# Rust their `rust-version` promises (1.85, installed with rustup when missing). kprod-model
# and kprod-tests are `publish = false`.
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
# cargo puts the packaged kprod-core into a temporary registry under the target directory,
# unpacks it into $CARGO_HOME/registry/src/-<hash of that registry's path>/, and builds it as a
# registry crate, which it never rebuilds for a changed source (registry crates cannot change).
# So with a target directory or $CARGO_HOME kept from an earlier run at the same path (as on a
# CI machine with caches), kprod-tokio would be verified against the earlier run's kprod-core.
# The verification therefore builds in a new target directory of its own: its temporary
# registry has a new path, so cargo unpacks and builds the packaged kprod-core afresh.
package_target=$(mktemp -d "${TMPDIR:-/tmp}/kprod-package.XXXXXX")
trap 'rm -rf "$package_target"' EXIT
CARGO_TARGET_DIR="$package_target" \
    cargo package -p kprod-core -p kprod-tokio --allow-dirty --locked

RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --locked
cargo build --examples -p kprod-tokio --locked
# The declared minimum Rust (rust-version in core/Cargo.toml and io-tokio/Cargo.toml), every
# optional feature on, in a target directory of its own so the main build is not disturbed.
msrv=$(sed -n 's/^rust-version = "\(.*\)"/\1/p' core/Cargo.toml)
if [ "$msrv" != "$(sed -n 's/^rust-version = "\(.*\)"/\1/p' io-tokio/Cargo.toml)" ]; then
    echo "kprod-core and kprod-tokio declare different rust-versions" >&2
    exit 1
fi
# Rust's release server is not one of the package registries CI promises; if it cannot be
# reached the check is reported as not done (loudly), rather than failing the whole run.
if rustup toolchain install "$msrv" --profile minimal --no-self-update; then
    CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}/msrv" \
        cargo "+$msrv" check -p kprod-core -p kprod-tokio --all-features --lib --locked
    echo "packaging checks passed (rust-version $msrv checked)"
else
    echo "packaging checks passed; WARNING: rust-version $msrv NOT checked: rustup could not install that toolchain" >&2
fi

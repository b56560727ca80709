#!/usr/bin/env bash
# Writes the runner's release archive: an optimised build of dra-e2e and
# dra-e2e-agent (the agent beside the runner, where the runner looks for it),
# with the README, the driver guides and the shipped profiles, as
# target/dist/dra-e2e-VERSION-ARCH-linux.tar.gz and its SHA-256 beside it
# (`sha256sum -c` checks it). The runner carries its scenarios and the build
# scripts of the local cluster, so the archive needs nothing else; a first
# run on a new machine builds the control plane with Go, as from a clone.
# Prints the archive's path.
set -euo pipefail
cd "$(dirname "$0")/.."
version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
arch=$(uname -m)
name="dra-e2e-$version-$arch-linux"
target=${CARGO_TARGET_DIR:-target}
out=$target/dist
stage="$out/$name"
cargo build --release --locked --bin dra-e2e --bin dra-e2e-agent >&2
rm -rf "$stage"
mkdir -p "$stage/bin" "$stage/docs" "$stage/profiles"
cp "$target/release/dra-e2e" "$target/release/dra-e2e-agent" "$stage/bin/"
cp README.md "$stage/"
cp docs/driver-conformance.md docs/driver-profile.md docs/driver-ci.md docs/cli.md "$stage/docs/"
cp profiles/*.yaml "$stage/profiles/"
# The archive's own check: the runner in it lists the pack from an empty
# directory and finds its agent beside it.
empty=$(mktemp -d)
trap 'rm -rf "$empty"' EXIT
( cd "$empty" && "$(cd "$stage" && pwd)/bin/dra-e2e" --list --tags @DriverConformance >/dev/null ) || {
  echo "dist: the runner in $stage does not list the built-in pack" >&2; exit 1; }
"$stage/bin/dra-e2e-agent" --version >/dev/null
tar -C "$out" --owner=0 --group=0 --sort=name -czf "$out/$name.tar.gz" "$name"
( cd "$out" && sha256sum "$name.tar.gz" > "$name.tar.gz.sha256" )
rm -rf "$stage"
echo "dist: $(du -h "$out/$name.tar.gz" | cut -f1) $out/$name.tar.gz" >&2
echo "$out/$name.tar.gz"

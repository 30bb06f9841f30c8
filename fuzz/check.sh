#!/bin/sh
# Builds the fuzz targets (CI calls this). With cargo-fuzz installed: a real libFuzzer build with
# sanitizer flags (RUSTC_BOOTSTRAP=1 lets stable rustc accept them); without it: `cargo check`.
# A short run: RUSTC_BOOTSTRAP=1 cargo fuzz run tfrecord_framing -- -max_total_time=60
# (from fuzz/'s parent, i.e. the repository root).
set -eu
cd "$(dirname "$0")/.."
if cargo fuzz --version >/dev/null 2>&1; then
    RUSTC_BOOTSTRAP=1 cargo fuzz build -O
else
    echo "cargo-fuzz not installed (cargo install cargo-fuzz); checking the targets only" >&2
    cargo check --manifest-path fuzz/Cargo.toml --bins
fi

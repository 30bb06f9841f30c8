#!/bin/sh
# Fuzz targets in CI (`.ci/run` calls this from the repository root):
# 1. Every target's body runs over its committed seed corpus (`cargo test` in fuzz/, no libFuzzer
#    needed): this always runs.
# 2. With cargo-fuzz installed (.ci/run installs it), a real libFuzzer build with sanitizer flags
#    (RUSTC_BOOTSTRAP=1 lets stable rustc take them), then each target for FUZZ_RUNS iterations
#    (default 2000), starting from its corpus. A long run of one target, as in fuzz/README.md:
#    RUSTC_BOOTSTRAP=1 cargo fuzz run shard_file fuzz/corpus/shard_file -- -max_total_time=600
# Seeds are regenerated (deterministically) by:
#    cargo run --manifest-path fuzz/Cargo.toml --example make_corpus
set -eu
cd "$(dirname "$0")/.."
cargo test --manifest-path fuzz/Cargo.toml
# .ci/run sets this on CI's fresh machine, whose disk is small: the libFuzzer build needs none of it.
if [ "${STOKEHOLD_FREE_DISK:-0}" = 1 ]; then rm -rf fuzz/target/debug; fi
if cargo fuzz --version >/dev/null 2>&1; then
    RUSTC_BOOTSTRAP=1 cargo fuzz build -O
    runs="${FUZZ_RUNS:-2000}"
    for target in $(cargo fuzz list); do
        # A scratch copy of the corpus: libFuzzer adds what it finds to its first folder.
        work="$(mktemp -d)"
        cp fuzz/corpus/"$target"/* "$work"/
        log="$work.log"
        if ! RUSTC_BOOTSTRAP=1 cargo fuzz run -O "$target" "$work" -- -runs="$runs" \
            -print_final_stats=1 >"$log" 2>&1; then
            tail -50 "$log" >&2
            echo "fuzz: $target failed (the crashing input is under fuzz/artifacts/$target/)" >&2
            exit 1
        fi
        echo "fuzz: $target: $(grep -E 'stat::number_of_executed_units' "$log" || echo '? runs')"
        rm -rf "$work" "$log"
    done
else
    echo "cargo-fuzz not installed (cargo install cargo-fuzz): the corpus runs above only" >&2
fi

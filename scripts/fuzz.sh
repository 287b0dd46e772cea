#!/usr/bin/env bash
# Builds the libFuzzer driver (`pushgate-fuzz`, with -D FUZZING, -sanitize=fuzzer,address) and runs one
# target for SECONDS, growing its corpus in Tests/FuzzCorpus/TARGET/ and minimising it there afterwards.
#
#   scripts/fuzz.sh TARGET SECONDS [libFuzzer flags...]
#   targets: json, http-body, http-path, legacy, http2-frames, hpack-answer (Sources/FuzzEntryPoints/FuzzTarget.swift)
#
# Crashes (broken invariants, traps, memory errors) are written to .build-fuzz/artifacts/TARGET/; copy each
# into Tests/FuzzCorpus/TARGET/ as `crash-…` so that `swift test --filter FuzzCorpusReplayTests` keeps it as a
# regression test. Runs under `nice -n 10` (the machine is shared). The build uses its own scratch path
# (.build-fuzz), so the normal build is untouched. The run's log (with libFuzzer's final stats) is
# .build-fuzz/TARGET.log.
set -euo pipefail

if [ $# -lt 2 ]; then
    echo "usage: $0 TARGET SECONDS [libFuzzer flags...]" >&2
    exit 2
fi
target=$1
seconds=$2
shift 2
root=$(cd "$(dirname "$0")/.." && pwd)
scratch=${PUSHGATE_FUZZ_SCRATCH:-$root/.build-fuzz}
corpus=$root/Tests/FuzzCorpus/$target
artifacts=$scratch/artifacts/$target
work=$scratch/corpus/$target
mkdir -p "$corpus" "$artifacts" "$work"

# The sanitizers are named once, as one `-sanitize=fuzzer,address`: SwiftPM keeps `--sanitize` values in a set
# and writes them in a different order on each run, and swiftc keeps only the last `-sanitize=` it is given.
# With `--sanitize fuzzer --sanitize address`, each build therefore recompiled every module and the Swift code
# got either coverage or ASan, never both (a run without coverage finds nothing: "no interesting inputs").
# Here the one set element keeps the order fixed, and the `-Xswiftc` value, coming last, is the one that counts
# (in the link too); `-Xcc` gives the C targets ASan as well.
build=(--package-path "$root" --scratch-path "$scratch" --product pushgate-fuzz --sanitize fuzzer
    -Xswiftc -sanitize=fuzzer,address -Xcc -fsanitize=address -Xswiftc -DFUZZING)
# PUSHGATE_FUZZ_NO_BUILD=1 runs the binary already in $scratch/debug (two runs at once would otherwise wait on
# each other's build lock).
if [ "${PUSHGATE_FUZZ_NO_BUILD:-0}" = 1 ]; then
    binary=$scratch/debug/pushgate-fuzz
    [ -x "$binary" ] || { echo "fuzz.sh: no $binary; run once without PUSHGATE_FUZZ_NO_BUILD" >&2; exit 2; }
else
    nice -n 10 swift build "${build[@]}" >&2
    binary=$(swift build "${build[@]}" --show-bin-path)/pushgate-fuzz
fi

export PUSHGATE_FUZZ_TARGET=$target
# A binary without coverage instrumentation runs, but blind: refuse it (libFuzzer then prints no `cov:`).
probe=$("$binary" -runs=0 "$corpus" 2>&1 || true)
if ! grep -q 'INITED cov: [1-9]' <<<"$probe"; then
    echo "$probe" | tail -n 20 >&2
    echo "fuzz.sh: $binary reports no coverage on $corpus (not built with -sanitize=fuzzer, or a crash)" >&2
    exit 1
fi
# The run: new inputs go to the work corpus, seeded from the committed one.
set +o pipefail
nice -n 10 "$binary" "$work" "$corpus" -max_total_time="$seconds" -artifact_prefix="$artifacts/" \
    -max_len=4096 -print_final_stats=1 "$@" 2>&1 | tee "$scratch/$target.log" >&2
status=${PIPESTATUS[0]}

# Minimise: the committed corpus becomes the smallest set with the coverage of both (crash inputs kept).
minimised=$(mktemp -d)
nice -n 10 "$binary" -merge=1 "$minimised" "$corpus" "$work" >"$scratch/$target-merge.log" 2>&1 || true
if [ -n "$(ls -A "$minimised")" ]; then
    find "$corpus" -maxdepth 1 -type f ! -name 'seed-*' ! -name 'crash-*' -delete
    cp -n "$minimised"/* "$corpus"/
fi
rm -rf "$minimised"
echo "fuzz.sh: $target: $(ls "$corpus" | wc -l) corpus files; crashes in $artifacts: $(ls "$artifacts" | wc -l)" >&2
exit $status

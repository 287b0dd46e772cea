#!/usr/bin/env bash
# Builds the libFuzzer driver (`pushgate-fuzz`, with -D FUZZING, --sanitize fuzzer and address) and runs one
# target for SECONDS, growing its corpus in Tests/FuzzCorpus/TARGET/ and minimising it there afterwards.
#
#   scripts/fuzz.sh TARGET SECONDS [libFuzzer flags...]
#   targets: json, http-body, legacy, http2-frames, hpack-answer (Sources/FuzzEntryPoints/FuzzTarget.swift)
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

nice -n 10 swift build --package-path "$root" --scratch-path "$scratch" --product pushgate-fuzz \
    --sanitize fuzzer --sanitize address -Xswiftc -DFUZZING >&2
binary=$(swift build --package-path "$root" --scratch-path "$scratch" --product pushgate-fuzz \
    --sanitize fuzzer --sanitize address -Xswiftc -DFUZZING --show-bin-path)/pushgate-fuzz

export PUSHGATE_FUZZ_TARGET=$target
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

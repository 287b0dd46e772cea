#!/bin/sh
# Builds pushgate and pushgate-bench in release (both from the sibling package Benchmarks/, into
# Benchmarks/.build), then runs the gateway benchmarks (docs/benchmarks.md).
# Figures only; nothing passes or fails.
#   DEVICES="100000 1000000" RUNS=3 SAMPLES=1000 REGISTRATIONS=100000 scripts/bench-gateway.sh
set -eu
cd "$(dirname "$0")/.."
DEVICES=${DEVICES:-"100000 1000000"}
RUNS=${RUNS:-3}
SAMPLES=${SAMPLES:-1000}
REGISTRATIONS=${REGISTRATIONS:-100000}

swift build -c release --package-path Benchmarks --product pushgate
swift build -c release --package-path Benchmarks --product pushgate-bench
bench=Benchmarks/.build/release/pushgate-bench
for devices in $DEVICES; do
    "$bench" e2e --devices "$devices" --runs "$RUNS"
done
"$bench" registrations --count "$REGISTRATIONS"
"$bench" latency --samples "$SAMPLES"

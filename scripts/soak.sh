#!/bin/sh
# The one-hour soak with faults (docs/reliability.md, "The one-hour soak"): builds pushgate and pushgate-bench
# (release unless CONFIG=debug) from the sibling package Benchmarks/ in SCRATCH (default
# Benchmarks/.build), then runs `pushgate-bench soak` under
# nice -n 5. Exit status: 0 when nothing was lost and RSS, fds, threads and CPU stayed within 10 %
# after the warm-up.
#   scripts/soak.sh [MINUTES] [extra pushgate-bench soak options...]
#   CONFIG=debug SKIP_BUILD=1 scripts/soak.sh 5 --devices 5000
#   SCRATCH=Benchmarks/.build-rel scripts/soak.sh 60 --simulator-threads 2
set -eu
cd "$(dirname "$0")/.."
MINUTES=${1:-60}
[ $# -gt 0 ] && shift
CONFIG=${CONFIG:-release}
SCRATCH=${SCRATCH:-Benchmarks/.build}
if [ -z "${SKIP_BUILD:-}" ]; then
    swift build -c "$CONFIG" --package-path Benchmarks --scratch-path "$SCRATCH" --product pushgate
    swift build -c "$CONFIG" --package-path Benchmarks --scratch-path "$SCRATCH" --product pushgate-bench
fi
exec nice -n 5 "$SCRATCH/$CONFIG/pushgate-bench" soak --minutes "$MINUTES" "$@"

#!/usr/bin/env bash
# Builds the package and its tests under one sanitizer and runs the tests, in its own scratch path
# (.build-tsan or .build-asan; the normal .build is untouched). Results: docs/reliability.md § Sanitizers.
#
#   scripts/sanitize.sh thread|address [swift test flags, e.g. --filter 'PushgateCoreTests']
#   scripts/sanitize.sh mutex-probe   does ThreadSanitizer see Synchronization.Mutex? (scripts/sanitize-probes)
#
# PostgreSQL suites run only when PUSHGATE_TEST_POSTGRES_URL is set (scripts/postgres-test-cluster.sh).
# The test log is kept as .build-SAN/test.log and the reports as .build-SAN/reports/tsan.PID (asan.PID), one file
# per process, the test runner's and every child's; each report starts with "WARNING: ThreadSanitizer" or
# "ERROR: AddressSanitizer".
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)

mutex_probe() {
    local dir=$root/.build-tsan/probe lock output
    mkdir -p "$dir"
    nice -n 10 swiftc -sanitize=thread -g -Onone "$root/scripts/sanitize-probes/MutexProbe.swift" -o "$dir/MutexProbe"
    for lock in mutex pthread; do
        output=$(TSAN_OPTIONS=halt_on_error=0 "$dir/MutexProbe" "$lock" 2>&1 || true)
        echo "$lock: $(grep -c "WARNING: ThreadSanitizer" <<<"$output" || true) report(s); $(grep count <<<"$output")"
    done
}

case "${1:-}" in
    mutex-probe)
        mutex_probe
        exit 0
        ;;
    thread) scratch_name=.build-tsan ;;
    address) scratch_name=.build-asan ;;
    *)
        echo "usage: $0 thread|address [swift test flags...] | $0 mutex-probe" >&2
        exit 2
        ;;
esac
sanitizer=$1
shift
scratch=$root/$scratch_name

# Reports go to files, one per process (log_path): the daemon tests run `pushgate` as a child process,
# instrumented too, whose reports on its own standard error the tests capture or drop.
reports_dir=$scratch/reports
rm -rf "$reports_dir"
mkdir -p "$reports_dir"
# Keep going after a report so that one run lists them all; the exit status still says whether any was found.
export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=0:second_deadlock_stack=1:history_size=4:log_path=$reports_dir/tsan}
# Leak checking is off: the Swift runtime's metadata caches and NIO's singleton event loop groups live for
# the whole process and are reported as leaks at exit (docs/reliability.md names this exception).
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:halt_on_error=0:log_path=$reports_dir/asan}

nice -n 10 swift build --package-path "$root" --build-tests --sanitize="$sanitizer" --scratch-path "$scratch"
set +o pipefail
nice -n 10 swift test --package-path "$root" --skip-build --sanitize="$sanitizer" --scratch-path "$scratch" "$@" 2>&1 \
    | tee "$scratch/test.log"
status=${PIPESTATUS[0]}
reports=$(cat "$scratch/test.log" "$reports_dir"/* 2>/dev/null | grep -c -E "WARNING: ThreadSanitizer|ERROR: AddressSanitizer" || true)
echo "sanitize.sh: $sanitizer: swift test exited $status; $reports sanitizer report(s) in $scratch/test.log and $reports_dir/ (one file per process)" >&2
exit "$status"

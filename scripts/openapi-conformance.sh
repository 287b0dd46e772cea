#!/usr/bin/env bash
# Checks a running pushgate HTTP API against the OpenAPI document it serves, with schemathesis
# (PyPI: `pip install schemathesis`): schema examples, boundary/coverage cases and fuzzing, positive
# and negative (malformed values, wrong types, unknown fields, unsupported methods), every check but
# positive_data_acceptance.
#
# That one is left out because the API has rules a JSON schema cannot state, so schema-valid data is
# rightly refused: a group must exist (400 unknown_group), an app must be configured (404
# unknown_app), a group name is at most 255 *bytes* and a payload at most 4096 bytes once
# serialised, a background notification allows only priority 5.
#
# Usage: scripts/openapi-conformance.sh http://127.0.0.1:7880 [more schemathesis options]
# Environment: CONFORMANCE_EXAMPLES (default 25) test cases per operation and phase; CONFORMANCE_SEED.
set -euo pipefail

base=${1:?usage: $0 BASE_URL [schemathesis options]}
shift

if ! command -v schemathesis >/dev/null 2>&1; then
    echo "schemathesis is not installed: pip install schemathesis" >&2
    exit 127
fi

# schemathesis keeps a cache in its working directory: give it a scratch one.
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
cd "$scratch"

schemathesis run "$base/openapi.yaml" \
    --url "$base" \
    --checks all --exclude-checks positive_data_acceptance \
    --mode all \
    --phases examples,coverage,fuzzing \
    --max-examples "${CONFORMANCE_EXAMPLES:-25}" \
    --seed "${CONFORMANCE_SEED:-7880}" \
    --workers 1 \
    --request-timeout 30 \
    --generation-database none \
    --suppress-health-check too_slow \
    --no-color \
    "$@"

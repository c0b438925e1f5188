#!/usr/bin/env bash
# CI step: install the Python SDK from its registry (every time), run the catalogue against the
# Python testee with its known failures, write target/conformance/python.{json,xml}.
# Prints only the summary and the unexpected cases (FAIL, WARN, XPASS, ERROR with details).
# Exit status: the harness's (0 = no unexpected FAIL and no stale XPASS).
# Environment: PYTHON (default python3) creates the venv; PROTOMCP_CONFORM_PYVENV (default
# target/conformance/pyvenv) is where it lives.
set -euo pipefail
exec </dev/null
root=$(cd "$(dirname "$0")/../../.." && pwd)
cd "$root"

out=target/conformance
venv=${PROTOMCP_CONFORM_PYVENV:-$out/pyvenv}
mkdir -p "$out"
log=$(mktemp)
trap 'rm -f "$log"' EXIT

# Idempotent: an existing venv is reused, the pinned version is (re)installed every time.
if ! { "${PYTHON:-python3}" -m venv "$venv" &&
       "$venv/bin/python" -m pip install --disable-pip-version-check -q 'protomcp==0.3.1'; } >"$log" 2>&1; then
  cat "$log"
  echo "python: installing protomcp==0.3.1 failed"
  exit 1
fi

# The manifest runs `python3 testee.py`: the venv's python3 comes first on PATH.
venv_bin=$(cd "$venv/bin" && pwd)
status=0
PATH="$venv_bin:$PATH" cargo run -q -- --sdk harness/testees/python \
  --json "$out/python.json" --junit "$out/python.xml" >"$log" 2>&1 || status=$?

# Drop the one line per scenario; keep the details of unexpected cases and the summary.
grep -Ev '^(PASS|FAIL|WARN|SKIP|XFAIL|XPASS|ERROR) +[^ ]+ \([0-9]+ ms\)' "$log" | sed '/./,$!d' || true
exit "$status"

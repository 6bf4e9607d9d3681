#!/usr/bin/env bash
# Runs `go test "$@"` and, when it fails, ends with what failed: CI keeps
# only the tail of a run's output, and a package that times out prints the
# tests it was running (and any test server that would not close) at the
# top of a goroutine dump thousands of lines long.
set -uo pipefail
out=$(mktemp -t airlock-go-test.XXXXXX)
trap 'rm -f "$out"' EXIT
go test "$@" 2>&1 | tee "$out"
rc=${PIPESTATUS[0]}
if [ "$rc" -ne 0 ]; then
  echo
  echo "== what failed (go test exited $rc) =="
  grep -E -A8 '^panic: test timed out|^[[:space:]]*running tests:' "$out" | grep -v '^goroutine ' | head -40
  grep -E -A3 'httptest.Server blocked in Close' "$out" | head -20
  grep -E '^[[:space:]]*--- FAIL|^FAIL|^panic:' "$out" | head -60
fi
exit "$rc"

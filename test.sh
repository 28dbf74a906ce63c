#!/usr/bin/env bash
# Runs the tests of every module in the repository, the core module first: the module a
# service requires (.), then the modules that keep heavy test and tool dependencies out
# of it (examples, the router end-to-end tests, the migration tools, the OpenTelemetry
# adapter, the Redis store), and the tools module (sqlc, and the Citus distribution
# contract over every statement, read with sqlc's PostgreSQL parser). Arguments go to
# every `go test` (e.g. ./test.sh -short, ./test.sh -count=1).
set -euo pipefail
cd "$(dirname "$0")"
status=0
for mod in . idem/idemotel idem/idemredis gen/internal/e2e migrations examples tools; do
  echo "== go test ./... in $mod"
  (cd "$mod" && go test "$@" ./...) || status=1
done
exit $status

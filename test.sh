#!/usr/bin/env bash
# Runs the tests of every module in the repository, the core module first: the module a
# service requires (.), then the modules that keep heavy test and tool dependencies out
# of it (examples, the router end-to-end tests, the migration tools, the OpenTelemetry
# adapter, the Redis store), and the tools module (sqlc, and the Citus distribution
# contract over every statement, read with sqlc's PostgreSQL parser). Arguments go to
# every `go test` (e.g. ./test.sh -short, ./test.sh -count=1), after a -timeout=30m of its own
# (go test's 10 minutes is near the corpus test's time on 2 loaded cores; -timeout overrides it).
set -euo pipefail
cd "$(dirname "$0")"
# gotestsum (pinned in tools/go.mod) runs `go test -json` and prints a line per package
# (and the output of a test that failed; with -v, go test -v's output); the tests that
# skipped (no Redis, no PgBouncer, no ../shared specs, no Citus cluster), with their
# reasons, are listed once at the end, for every module.
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
go build -C tools -o "$bin/gotestsum" gotest.tools/gotestsum
format=pkgname-and-test-fails
for a in "$@"; do case $a in -v | -test.v | -v=true) format=standard-verbose ;; esac; done
status=0
n=0
for mod in . idem/idemotel idem/idemredis gen/internal/e2e migrations examples tools; do
  echo "== go test ./... in $mod"
  n=$((n + 1))
  (cd "$mod" && "$bin/gotestsum" --format "$format" --hide-summary skipped --jsonfile "$bin/$n.json" -- -timeout=30m "$@" ./...) || status=1
done
echo "== tests that did not run, every module"
skipped=$("$bin/gotestsum" --format dots --raw-command -- cat "$bin"/*.json 2>&1 | sed -n '/^=== Skipped/,$p')
echo "${skipped:-no test skipped}"
exit $status

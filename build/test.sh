#!/usr/bin/env bash
# npm test: the type check, then every suite on the embedded SQLite engine, then the integration
# suites again on PostgreSQL (MAILROOM_TEST_ENGINE=postgres: each test server gets a database of
# its own in a private cluster the harness starts, test/support/postgres.ts). Without Debian's
# `postgresql` package installed, the second pass is left out and says so first; under CI=true
# (.ci/run) that fails the run instead, as any missing peer does (test/support/peers.ts).
# Each run of the test runner ends with `# skipped: N` and the reasons (build/test-reporter.mjs),
# then node's summary; the last lines are the summary of the PostgreSQL pass.
set -uo pipefail
cd "$(dirname "$0")/.."
npx tsc --noEmit || exit 1
# Every Node process of the run (test files, child servers, CLI runs) loads the sources with V8's
# compile cache and a shortcut past a slow step of Node's resolver (test/support/fast-start.ts):
# a pass starts a few hundred processes, and each then costs about a third of the CPU to start.
export NODE_OPTIONS="${NODE_OPTIONS:+$NODE_OPTIONS }--import=\"$PWD/test/support/fast-start.ts\""
# Test files run this many at a time. A file mostly waits (on sockets, child processes, peers,
# timers): at 2 the SQLite pass kept 1.2 of the 2 cores busy (440 s), at 4 1.55 (271 s, with the
# start-up savings above). The suite's deadline tests stretch with the number (below).
jobs=${MAILROOM_TEST_CONCURRENCY:-4}
# Each file gets a smaller share of the CPU the more run at once: the harness's hang guards (its
# waits, CLI runs, child servers' starts) stretch by half their number (test/support/wait.ts).
export MAILROOM_TEST_DEADLINE_SCALE=${MAILROOM_TEST_DEADLINE_SCALE:-$(((jobs + 1) / 2))}
# The longest files start first, so a pass does not end with one of them running alone.
slow=(dashboard-client cli data-stream node-failover first-run failure-paths interop streams-bounds search-corpus init hostile-http mcp)
# A file whose every test needs PostgreSQL says so on a line of its own; the SQLite pass leaves it out.
pg_only=$(grep -l '^// PostgreSQL pass only:' test/e2e/*.test.ts)
files() {
  local found s
  found=$(find "$@" -name '*.test.ts' | sort)
  for s in "${slow[@]}"; do grep -xF "test/e2e/$s.test.ts" <<<"$found"; done
  grep -vxF "$(printf 'test/e2e/%s.test.ts\n' "${slow[@]}")" <<<"$found"
}
# The noisy-neighbour file compares tenant B's latency and ingest in a quiet and a loud phase: a
# file running beside it lands in one phase only, so it runs alone, between the two passes' others.
alone=test/e2e/noisy-neighbour.test.ts
all=$(files test/unit test/e2e | grep -vxF "$pg_only" | grep -vxF "$alone")
e2e=$(files test/e2e | grep -vxF "$alone")
# Every pass appends its failed tests to one file, and each prints all of them before its summary
# (build/test-reporter.mjs): the run's end names every failure of the run, not only the last pass's.
if [ -z "${MAILROOM_TEST_FAILURES:-}" ]; then
  export MAILROOM_TEST_FAILURES=$(mktemp)
  trap 'rm -f "$MAILROOM_TEST_FAILURES"' EXIT
fi
run=(node --test --test-global-setup=test/support/global-setup.ts --test-reporter=./build/test-reporter.mjs --test-reporter-destination=stdout)
have_pg=0
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 && have_pg=1
pg=0
if [ "$have_pg" != 1 ]; then
  if [ "${CI:-}" = true ]; then
    echo "# PostgreSQL is not installed (apt-get install postgresql): under CI=true its pass is required, so this run fails"
    pg=1
  else
    echo "# PostgreSQL is not installed (apt-get install postgresql): the pass on it is left out"
  fi
fi
echo "# pass 1 of 2: embedded SQLite"
MAILROOM_TEST_PASS=sqlite "${run[@]}" --test-concurrency="$jobs" $all
sqlite=$?
echo "# pass 1 of 2: embedded SQLite, $alone alone"
MAILROOM_TEST_PASS=sqlite "${run[@]}" $alone || sqlite=1
if [ "$have_pg" = 1 ]; then
  echo "# pass 2 of 2: PostgreSQL, $alone alone"
  MAILROOM_TEST_PASS=postgres MAILROOM_TEST_ENGINE=postgres "${run[@]}" $alone
  pg=$?
  echo "# pass 2 of 2: PostgreSQL"
  MAILROOM_TEST_PASS=postgres MAILROOM_TEST_ENGINE=postgres "${run[@]}" --test-concurrency="$jobs" $e2e || pg=1
fi
[ "$sqlite" = 0 ] && [ "$pg" = 0 ]

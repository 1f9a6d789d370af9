#!/usr/bin/env bash
# npm test: the type check, then every suite on the embedded SQLite engine, then the integration
# suites again on PostgreSQL (MAILROOM_TEST_ENGINE=postgres: each test server gets a database of
# its own in a private cluster the harness starts, test/support/postgres.ts). Without Debian's
# `postgresql` package installed, the second pass is left out and says so first; under CI=true
# (.ci/run) that fails the run instead, as any missing peer does (test/support/peers.ts).
# Each pass ends with `# skipped: N` and the reasons (build/test-reporter.mjs), then node's summary.
set -uo pipefail
cd "$(dirname "$0")/.."
npx tsc --noEmit || exit 1
all=$(find test/unit test/e2e -name '*.test.ts' | sort)
e2e=$(find test/e2e -name '*.test.ts' | sort)
reporter=(--test-reporter=./build/test-reporter.mjs --test-reporter-destination=stdout)
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
node --import tsx --test --test-concurrency=2 "${reporter[@]}" $all
sqlite=$?
if [ "$have_pg" = 1 ]; then
  echo "# pass 2 of 2: PostgreSQL"
  MAILROOM_TEST_ENGINE=postgres node --import tsx --test --test-concurrency=2 "${reporter[@]}" $e2e
  pg=$?
fi
[ "$sqlite" = 0 ] && [ "$pg" = 0 ]

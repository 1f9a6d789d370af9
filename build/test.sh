#!/usr/bin/env bash
# npm test: the type check, then every suite on the embedded SQLite engine, then the integration
# suites again on PostgreSQL (MAILROOM_TEST_ENGINE=postgres: each test server gets a database of
# its own in a private cluster the harness starts, test/support/postgres.ts). Without Debian's
# `postgresql` package installed, the second pass is left out and says so first.
set -uo pipefail
cd "$(dirname "$0")/.."
npx tsc --noEmit || exit 1
all=$(find test/unit test/e2e -name '*.test.ts' | sort)
e2e=$(find test/e2e -name '*.test.ts' | sort)
have_pg=0
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 && have_pg=1
[ "$have_pg" = 1 ] || echo "# PostgreSQL is not installed (apt-get install postgresql): the pass on it is left out"
echo "# pass 1 of 2: embedded SQLite"
node --import tsx --test --test-concurrency=2 $all
sqlite=$?
pg=0
if [ "$have_pg" = 1 ]; then
  echo "# pass 2 of 2: PostgreSQL"
  MAILROOM_TEST_ENGINE=postgres node --import tsx --test --test-concurrency=2 $e2e
  pg=$?
fi
[ "$sqlite" = 0 ] && [ "$pg" = 0 ]

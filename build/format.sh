#!/usr/bin/env bash
# The house format, checked: Prettier (.prettierrc.json) over the TypeScript and JavaScript of
# src/, cli/, test/, bench/ and build/. `bash build/format.sh` checks and lists the files that
# differ (CI runs this); `bash build/format.sh --write` rewrites them. Prettier is locked in
# build/lint/ with the promise linter's tools, in the same cache directory, so a new release
# cannot change the verdict.
set -euo pipefail
source "$(dirname "$0")/lint-tools.sh"
cd "$root"
mode=--check
if [ "${1:-}" = --write ]; then mode=--write; fi
"$dir/node_modules/.bin/prettier" "$mode" --log-level warn 'src/**/*.{ts,mjs,cjs}' 'cli/**/*.ts' 'test/**/*.{ts,mjs}' 'bench/**/*.ts' 'build/**/*.{ts,mjs}' drizzle.config.ts drizzle-pg.config.ts

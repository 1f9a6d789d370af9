#!/usr/bin/env bash
# A promise nobody awaits is a write that may land outside its transaction, or an error nobody
# sees. This runs typescript-eslint's promise rules (no-floating-promises, no-misused-promises,
# await-thenable) over src/ and cli/. typescript-eslint needs TypeScript's JavaScript API,
# which the project's compiler (TypeScript 7, native) does not have, so the linter and a
# TypeScript 5 live in a cache directory of their own, installed with `npm ci` from the lock
# file in build/lint/ (exact versions, so a new eslint release cannot change the verdict), and
# installed again whenever that lock file changes.
set -euo pipefail
source "$(dirname "$0")/lint-tools.sh"
cat > "$dir/eslint.config.js" <<CONFIG
import tseslint from 'typescript-eslint';
export default tseslint.config({
  files: ['**/*.ts'],
  languageOptions: { parser: tseslint.parser, parserOptions: { project: '$root/tsconfig.json', tsconfigRootDir: '$root' } },
  plugins: { '@typescript-eslint': tseslint.plugin },
  linterOptions: { reportUnusedDisableDirectives: 'off' },
  rules: {
    '@typescript-eslint/no-floating-promises': 'error',
    '@typescript-eslint/no-misused-promises': ['error', { checksVoidReturn: { arguments: false } }],
    '@typescript-eslint/await-thenable': 'error',
  },
});
CONFIG
cd "$root"
if [ $# -eq 0 ]; then set -- src cli; fi
"$dir/node_modules/.bin/eslint" --no-warn-ignored --config "$dir/eslint.config.js" "$@"
# …and the promises eslint does not see: used as values where none is expected.
MAILROOM_LINT_DIR="$dir" node "$root/build/lint-promise-values.mjs" "$@"

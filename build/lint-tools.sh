# Sourced by build/lint-promises.sh and build/format.sh: the linters' own tools (build/lint/,
# exact versions from its lock file) in a cache directory of their own, installed with `npm ci`
# when missing and again whenever the lock file changes. Sets $root and $dir.
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
dir=${MAILROOM_LINT_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/mailroom-lint}
if [ ! -x "$dir/node_modules/.bin/eslint" ] || [ ! -x "$dir/node_modules/.bin/prettier" ] || ! cmp -s "$root/build/lint/package-lock.json" "$dir/package-lock.json"; then
  mkdir -p "$dir"
  cp "$root/build/lint/package.json" "$root/build/lint/package-lock.json" "$dir/"
  (cd "$dir" && npm ci --silent --no-audit --no-fund)
fi

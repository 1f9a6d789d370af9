// How the operator runs this CLI, so the commands it suggests can be pasted as they are:
// `npm run -s mailroom --` in a source checkout, the binary's path when built (src/sea.ts
// marks it), plus `--config FILE` when one was given.
import { isAbsolute, relative } from 'node:path';

let builtBinary = false;

/** Called by the single executable's entry point (src/sea.ts) before the CLI runs. */
export function markBuiltBinary(): void {
  builtBinary = true;
}

/** A shell word: quoted only when it needs to be. */
const shellWord = (s: string) => (/^[A-Za-z0-9_@%+=:,./-]+$/.test(s) ? s : `'${s.replace(/'/g, `'\\''`)}'`);

/** The command prefix for the given facts (pure, for tests). */
export function commandPrefix(opts: { binary: boolean; execPath: string; cwd: string }): string {
  if (!opts.binary) return 'npm run -s mailroom --';
  const rel = relative(opts.cwd, opts.execPath);
  if (!rel || rel.startsWith('..') || isAbsolute(rel)) return shellWord(opts.execPath);
  return shellWord(rel.includes('/') ? rel : `./${rel}`);
}

/** A full command line for `args` as this process was run, e.g. `build/mailroom keys create --config mailroom.toml`. */
export function suggestCommand(args: string, configFile: string | undefined): string {
  const prefix = commandPrefix({ binary: builtBinary, execPath: process.execPath, cwd: process.cwd() });
  return `${prefix} ${args}${configFile ? ` --config ${shellWord(configFile)}` : ''}`;
}

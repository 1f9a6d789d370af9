// The real peers the suites check against (PostgreSQL, Postfix, Exim, SpamAssassin, swaks, openssl,
// python3-dkim, strace, Chromium, ...). Without one, the tests that need it skip and say why. Under
// CI=true (.ci/run) a missing peer fails the run instead, naming the package to install, so a green
// CI cannot stand for claims nobody checked.
import { spawnSync } from 'node:child_process';
import { test } from 'node:test';

export const UNDER_CI = process.env.CI === 'true';

const failed = new Set<string>();

/**
 * The skip option for tests needing a peer: `missing` is false when the peer is there, else the
 * reason (naming the package). Under CI it also adds one failing test per reason to the file.
 * Call it where the tests are declared (a file's top level or a describe body), not in a test.
 */
export function peerSkip(missing: string | false): string | false {
  if (missing && UNDER_CI && !failed.has(missing)) {
    failed.add(missing);
    test(`peer missing under CI=true: ${missing}`, () => {
      throw new Error(`a peer is missing under CI=true: ${missing}`);
    });
  }
  return missing;
}

/** For a missing peer found while a test runs: throws under CI, else skips the test with the reason. */
export function skipOrFail(t: { skip(message?: string): void }, missing: string): void {
  if (UNDER_CI) throw new Error(`a peer is missing under CI=true: ${missing}`);
  t.skip(missing);
}

/** False when `command args` runs, else the reason naming the Debian package to install. */
export function toolMissing(command: string, args: string[], pkg: string): string | false {
  return spawnSync(command, args, { stdio: 'ignore' }).status === 0 ? false : `${command} is not installed (apt-get install ${pkg}; .ci/install-system installs it)`;
}

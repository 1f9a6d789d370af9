// The harness's peer checks (test/support/mta.ts): a peer that is there but cannot run is reported
// missing with its reason (skipped outside CI, failed under CI=true), never a crash of the file.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

test('eximMissing: an exim4 file that cannot be executed at all is a reason naming the error, not a TypeError', async () => {
  const root = mkdtempSync(join(tmpdir(), 'mailroom-exim-unrunnable-'));
  try {
    mkdirSync(join(root, 'usr/sbin'), { recursive: true });
    writeFileSync(join(root, 'usr/sbin/exim4'), 'not a program\n', { mode: 0o644 }); // no execute bit: EACCES, no output
    process.env.MAILROOM_TEST_EXIM_DIR = root; // read when mta.ts is first imported
    const { eximMissing } = await import('../support/mta.ts');
    assert.match(String(eximMissing()), /^exim4 does not run here: spawnSync .*exim4 EACCES/);
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});

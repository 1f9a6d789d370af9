// The single executable on PostgreSQL: pg travels in a chunk of its own that the main script
// loads only when a database URL is given (build/build.ts), so this is the one path where the
// binary must load it. Started with MAILROOM_DATABASE_URL against a private cluster, it
// migrates, prints the bootstrap key, answers /health and the API, and restarts on the same
// database. Run with `npm run test:binary`.
import assert from 'node:assert/strict';
import { chmodSync, copyFileSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { BINARY, ensureBinary, freePort, serveBinary } from '../support/binary.ts';
import { pgCluster, postgresMissing } from '../support/postgres.ts';
import { until } from '../support/wait.ts';
import { peerSkip } from '../support/peers.ts';

const enabled = process.env.MAILROOM_BINARY_TEST === '1';
const skip = enabled ? peerSkip(postgresMissing()) : 'builds the single executable: run `npm run test:binary`';

describe('single executable (build/mailroom) on PostgreSQL', { skip }, () => {
  let dir: string;
  let env: Record<string, string>;

  before(async () => {
    ensureBinary();
    dir = mkdtempSync(join(tmpdir(), 'mailroom-binary-pg-'));
    copyFileSync(BINARY, join(dir, 'mailroom'));
    chmodSync(join(dir, 'mailroom'), 0o755);
    const [http, smtp] = [await freePort(), await freePort()];
    writeFileSync(join(dir, 'mailroom.toml'), `data_dir = "./data"\n[http]\nlisten = "127.0.0.1:${http}"\n[smtp]\nlisten = "127.0.0.1:${smtp}"\n[outbound]\nmode = "dry-run"\n`);
    env = { MAILROOM_DATABASE_URL: await (await pgCluster()).createDatabase() };
  });

  after(() => {
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('migrates the database, serves, and starts again on it', async () => {
    const first = await serveBinary(dir, env);
    let key = '';
    try {
      assert.doesNotMatch(first.stdout(), /mailroom\.db/, 'the database is PostgreSQL, not the SQLite file');
      // Printed right after "started", once the empty database has its default account.
      key = await until('the bootstrap key', async () => /mr_live_[A-Za-z0-9]+/.exec(first.stderr())?.[0]);
      const health = await fetch(`${first.url}/health`);
      assert.equal(health.status, 200);
      const created = await fetch(`${first.url}/inboxes`, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: '{}' });
      assert.equal(created.status, 201, await created.text());
    } catch (err) {
      await first.stop();
      throw err;
    }
    assert.equal(await first.stop(), 0, 'stopped cleanly on SIGTERM');
    const again = await serveBinary(dir, env);
    try {
      assert.doesNotMatch(again.stderr(), /mr_live_/, 'the account is in the database: no second bootstrap key');
      const list = await fetch(`${again.url}/inboxes`, { headers: { authorization: `Bearer ${key}` } });
      assert.equal(list.status, 200);
      assert.equal(((await list.json()) as { data: unknown[] }).data.length, 1);
    } catch (err) {
      await again.stop();
      throw err;
    }
    assert.equal(await again.stop(), 0);
  });
});

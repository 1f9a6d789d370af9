// PostgreSQL: API clients and mail take connections from pools of their own (`database.connections`,
// `database.api_connections`; src/store/store.ts, asApiWork). Requests that hold every API
// connection (blocked on a lock here) leave SMTP ingest and the job runner their connections, and
// the requests answer once the lock goes.
import { after, before } from 'node:test';
import assert from 'node:assert/strict';
import pg from 'pg';
import { expectError, onEngine, startTestServer, type TestServer } from '../support/server.ts';
import { testDatabaseUrl } from '../support/server.ts';
import { SmtpClient } from '../support/smtp-client.ts';
import { until } from '../support/wait.ts';
import { mkdtempSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { tmpdir } from 'node:os';

const { describe, test } = onEngine('postgres');

describe('separate connection pools for the API and for mail (PostgreSQL)', () => {
  let t: TestServer;
  let url: string;
  let dataDir: string;
  let inboxId: string;
  before(async () => {
    dataDir = mkdtempSync(join(tmpdir(), 'mailroom-pools-'));
    url = await testDatabaseUrl(dataDir);
    t = await startTestServer({ database: { url, connections: 3, api_connections: 2, connect_timeout: '1s' } }, { dataDir });
    const inbox = await t.api('POST', '/inboxes', { address: 'pools' });
    assert.equal(inbox.status, 201, inbox.text);
    inboxId = inbox.body.id;
  });
  after(async () => {
    await t?.close();
    rmSync(dataDir, { recursive: true, force: true });
  });

  test('requests holding every API connection leave mail its own: a message is taken, processed and stored meanwhile', async () => {
    // The key is remembered by the server after its first use: the requests below read only the audit log.
    assert.equal((await t.api('GET', '/audit')).status, 200);
    const locker = new pg.Client({ connectionString: url });
    await locker.connect();
    const waiting: Array<ReturnType<TestServer['api']>> = [];
    try {
      await locker.query('BEGIN');
      await locker.query('LOCK TABLE audit_log IN ACCESS EXCLUSIVE MODE');
      // Two requests wait on the lock, holding both API connections; a third waits for one of them.
      for (let i = 0; i < 3; i++) waiting.push(t.api('GET', '/audit'));
      const blocked = async () => {
        // Inside a transaction the server keeps its first reading of pg_stat_activity: a fresh one each time.
        await locker.query('SELECT pg_stat_clear_snapshot()');
        const { rows } = await locker.query<{ n: number }>(
          "SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%audit_log%'",
        );
        return rows[0].n >= 2 ? true : undefined;
      };
      await until('both API connections to wait on the lock', blocked).catch(async (err: Error) => {
        await locker.query('SELECT pg_stat_clear_snapshot()');
        const { rows } = await locker.query('SELECT state, wait_event_type, wait_event, left(query, 120) AS query FROM pg_stat_activity WHERE datname = current_database()');
        throw new Error(`${err.message}: ${JSON.stringify(rows)}`);
      });

      // Spooled (inline_processing 0 is not set: processed before the 250 or spooled, mail's pool either way).
      const { client } = await SmtpClient.open(t.server.smtpPort);
      try {
        await client.cmd('EHLO client.example.net');
        assert.equal((await client.cmd('MAIL FROM:<sender@example.net>')).code, 250);
        assert.equal((await client.cmd('RCPT TO:<pools@agents.test>')).code, 250);
        const reply = await client.data(Buffer.from('From: sender@example.net\r\nTo: pools@agents.test\r\nSubject: while the API waits\r\n\r\nbody\r\n'));
        assert.equal(reply.code, 250, reply.text);
      } finally {
        await client.cmd('QUIT').catch(() => undefined);
      }
      const stored = async () => {
        const { rows } = await locker.query<{ subject: string }>('SELECT subject FROM messages WHERE inbox_id = $1', [inboxId]);
        return rows.length ? rows : undefined;
      };
      assert.deepEqual(await until('the message to be stored', stored), [{ subject: 'while the API waits' }]);
      // Still waiting: the requests did not get through some other way.
      assert.equal(await blocked(), true);
      // Past the budget: the request that found no free API connection within
      // `database.connect_timeout` (1 s here) answers 503 while the two holding one still wait.
      expectError(await Promise.race(waiting), 503, 'SERVICE_UNAVAILABLE');
    } finally {
      await locker.query('ROLLBACK').catch(() => undefined);
      await locker.end();
    }
    // The two that held a connection answer once the lock goes.
    assert.deepEqual((await Promise.all(waiting)).map((r) => r.status).sort(), [200, 200, 503]);
  });
});

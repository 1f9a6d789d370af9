// The storage port on both engines: the same drizzle queries against embedded SQLite and a real
// PostgreSQL (a private cluster started by the harness): results mapped alike, transactions
// that commit together or not at all, a guarded counter that stays exact under concurrent
// writers, and a statement on the store handle from inside a transaction refused.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { and, eq, sql } from 'drizzle-orm';
import { getTableConfig } from 'drizzle-orm/sqlite-core';
import { getTableConfig as getPgTableConfig } from 'drizzle-orm/pg-core';
import * as schema from '../../src/store/schema.ts';
import { derivedTables } from '../../src/store/schema-pg.ts';
import { openStore } from '../../src/store/open.ts';
import { changes, isUniqueViolation, rawRows, readOnce, sendAlong, sendAlongRow, type Db, type Store } from '../../src/store/store.ts';
import { insertEvents } from '../../src/store/repo/events.ts';
import { listDeliveryRows } from '../../src/store/repo/webhooks.ts';
import { listDomainNamesOfAccounts } from '../../src/store/repo/domains.ts';
import { Socket } from 'node:net';
import { numberPlaceholders, toPostgres } from '../../src/store/placeholders.ts';
import { lockFreeJobs } from '../../src/store/repo/jobs.ts';
import { pgCluster, postgresMissing } from '../support/postgres.ts';
import { findThreadIdOfParents } from '../../src/store/repo/messages.ts';
import pg from 'pg';
import { PgBlobs } from '../../src/store/blobs/pg-blobs.ts';
import { Readable } from 'node:stream';
import { randomBytes } from 'node:crypto';
import { buffer as collect } from 'node:stream/consumers';
import { peerSkip } from '../support/peers.ts';
import { until } from '../support/wait.ts';

const NOW = '2026-11-25T00:00:00.000Z';

test('placeholders are numbered outside quoted text and comments only', () => {
  assert.equal(
    numberPlaceholders(`SELECT '?', "a?" FROM t WHERE x = ? AND y = 'it''s ?' AND z = ? -- why?\nLIMIT ?`),
    `SELECT '?', "a?" FROM t WHERE x = $1 AND y = 'it''s ?' AND z = $2 -- why?\nLIMIT $3`,
  );
});

test('a JSON IN-list becomes = ANY(ARRAY(…)) on PostgreSQL; NOT IN and a json_each in FROM stay set-returning', () => {
  assert.equal(
    toPostgres('SELECT id FROM jobs WHERE id IN (SELECT value FROM json_each(?)) AND kind = ?'),
    'SELECT id FROM jobs WHERE id = ANY(ARRAY(SELECT json_array_elements_text($1))) AND kind = $2',
  );
  assert.equal(
    toPostgres('SELECT x FROM t WHERE a NOT IN (SELECT value FROM json_each(?)) AND b in (select value from json_each(?))'),
    'SELECT x FROM t WHERE a NOT IN (SELECT value FROM json_array_elements_text($1)) AND b = ANY(ARRAY(SELECT json_array_elements_text($2)))',
  );
  assert.equal(toPostgres('SELECT l.value FROM messages m, json_each(?) l'), 'SELECT l.value FROM messages m, json_array_elements_text($1) l');
});

test('every table has a PostgreSQL form with the same columns, keys and indexes', () => {
  const tables = Object.values(schema).filter((v) => typeof v === 'object' && v !== null && Symbol.for('drizzle:IsDrizzleTable') in v);
  assert.ok(tables.length >= 16);
  for (const table of tables) {
    const lite = getTableConfig(table as typeof schema.accounts);
    const pg = derivedTables().get(table as typeof schema.accounts);
    assert.ok(pg, `${lite.name} has no PostgreSQL form in src/store/schema-pg.ts`);
    const pgc = getPgTableConfig(pg);
    assert.deepEqual(
      pgc.columns.map((c) => [c.name, c.notNull, c.primary]),
      lite.columns.map((c) => [c.name, c.notNull, c.primary]),
      lite.name,
    );
    assert.deepEqual(pgc.indexes.map((i) => i.config.name).sort(), lite.indexes.map((i) => i.config.name).sort(), lite.name);
    assert.deepEqual(pgc.foreignKeys.map((f) => f.onDelete).sort(), lite.foreignKeys.map((f) => f.onDelete).sort(), lite.name);
    assert.equal(pgc.primaryKeys.length, lite.primaryKeys.length, lite.name);
  }
});

const engines: Array<[string, () => Promise<string | undefined>]> = [
  ['sqlite', async () => undefined],
  ['postgres', async () => (await pgCluster()).createDatabase()],
];

for (const [engine, databaseUrl] of engines) {
  describe(`store on ${engine}`, { skip: engine === 'postgres' && peerSkip(postgresMissing()) }, () => {
    let store: Store;
    let dir: string;
    let url: string | undefined;
    // This file tests the port itself, as src/store sees it: with drizzle's handle.
    const db = (): Db => store.db;

    before(async () => {
      dir = mkdtempSync(join(tmpdir(), 'mailroom-store-'));
      url = await databaseUrl();
      store = await openStore({ dataDir: dir, databaseUrl: url });
      await db().insert(schema.accounts).values({ id: 'acc_1', name: 'one', createdAt: NOW });
    });
    after(async () => {
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    });

    test('the query builder maps rows, booleans, big numbers and bytes alike', async () => {
      await db().insert(schema.apiKeys).values({ id: 'key_1', accountId: 'acc_1', keyPrefix: 'mr_abc', keyHash: 'h', readOnly: true, createdAt: NOW });
      const key = await db().select().from(schema.apiKeys).where(eq(schema.apiKeys.id, 'key_1')).get();
      assert.equal(key?.readOnly, true);
      assert.equal(key?.name, null);
      const big = 2 ** 52 + 7;
      await db().insert(schema.jobs).values({ id: 'job_1', kind: 'k', payload: '{}', maxAttempts: 3, runAt: big, createdAt: NOW, updatedAt: NOW });
      const bytes = Buffer.from([0, 1, 2, 255, 13, 10]);
      await db().insert(schema.spooledMessages).values({ jobId: 'job_1', raw: bytes, createdAt: NOW });
      const job = await db().select({ runAt: schema.jobs.runAt, status: schema.jobs.status }).from(schema.jobs).get();
      assert.deepEqual(job, { runAt: big, status: 'queued' });
      const spooled = await db().select().from(schema.spooledMessages).all();
      assert.ok(Buffer.isBuffer(spooled[0]?.raw) && bytes.equals(spooled[0].raw));
      const [count] = await store.rows<[number]>(store.db, 'SELECT count(*) FROM jobs WHERE run_at > ?', [1]);
      assert.deepEqual(count, [1]);
      assert.equal(await db().select().from(schema.apiKeys).where(eq(schema.apiKeys.id, 'nope')).get(), undefined);
    });

    test('a transaction commits everything or nothing; an inner one joins it', async () => {
      await assert.rejects(
        store.transaction(async (tx: Db) => {
          await tx.insert(schema.inboxes).values({ id: 'inb_x', accountId: 'acc_1', address: 'x@example.org', dailySendLimit: 5, createdAt: NOW });
          await store.transaction(async (inner: Db) => {
            assert.equal(inner, tx);
            await inner.insert(schema.inboxes).values({ id: 'inb_y', accountId: 'acc_1', address: 'y@example.org', dailySendLimit: 5, createdAt: NOW });
          });
          throw new Error('boom');
        }),
        /boom/,
      );
      assert.equal((await db().select().from(schema.inboxes).all()).length, 0);
      const id = await store.transaction(async (tx: Db) => {
        await tx.insert(schema.inboxes).values({ id: 'inb_1', accountId: 'acc_1', address: 'one@example.org', dailySendLimit: 3, createdAt: NOW });
        return 'inb_1';
      });
      assert.equal((await db().select().from(schema.inboxes).where(eq(schema.inboxes.id, id)).all()).length, 1);
    });

    test('a unique violation inside a transaction rolls it back', async () => {
      await assert.rejects(
        store.transaction(async (tx: Db) => {
          await tx.insert(schema.accounts).values({ id: 'acc_2', name: 'two', createdAt: NOW });
          await tx.insert(schema.inboxes).values({ id: 'inb_dup', accountId: 'acc_1', address: 'one@example.org', dailySendLimit: 3, createdAt: NOW });
        }),
        (err) => isUniqueViolation(err),
      );
      assert.equal((await db().select().from(schema.accounts).where(eq(schema.accounts.id, 'acc_2')).all()).length, 0);
    });

    test('a write sent along commits with its transaction, and the statements after it see it', async () => {
      const seen = await store.transaction(async (tx: Db) => {
        sendAlong(tx.insert(schema.accounts).values({ id: 'acc_along', name: 'along', createdAt: NOW }).run());
        return tx.select({ id: schema.accounts.id }).from(schema.accounts).where(eq(schema.accounts.id, 'acc_along')).all();
      });
      assert.deepEqual(seen, [{ id: 'acc_along' }]);
      assert.equal((await db().select().from(schema.accounts).where(eq(schema.accounts.id, 'acc_along')).all()).length, 1);
      await db().delete(schema.accounts).where(eq(schema.accounts.id, 'acc_along')).run();
      assert.throws(() => sendAlong(Promise.resolve()), /outside a transaction/);
    });

    test('a failed write sent along fails its transaction with its own error, and nothing of it commits', async () => {
      await assert.rejects(
        store.transaction(async (tx: Db) => {
          await tx.insert(schema.accounts).values({ id: 'acc_before', name: 'before', createdAt: NOW });
          sendAlong(tx.insert(schema.inboxes).values({ id: 'inb_dup', accountId: 'acc_1', address: 'one@example.org', dailySendLimit: 3, createdAt: NOW }).run());
          // PostgreSQL refuses this one only because the write before it failed ("current
          // transaction is aborted"); SQLite runs it. Either way the error is the duplicate's.
          await tx.insert(schema.accounts).values({ id: 'acc_after', name: 'after', createdAt: NOW });
        }),
        (err) => isUniqueViolation(err),
      );
      // The failed write the last of the work: on PostgreSQL the COMMIT went out right behind it.
      await assert.rejects(
        store.transaction(async (tx: Db) => {
          await tx.insert(schema.accounts).values({ id: 'acc_before', name: 'before', createdAt: NOW });
          sendAlong(tx.insert(schema.inboxes).values({ id: 'inb_dup', accountId: 'acc_1', address: 'one@example.org', dailySendLimit: 3, createdAt: NOW }).run());
        }),
        (err) => isUniqueViolation(err),
      );
      // Among grouped writers (SQLite: one transaction, a savepoint each), only the failed one's writes go.
      const [bad, good] = await Promise.allSettled([
        store.grouped(async (tx: Db) => {
          await tx.insert(schema.accounts).values({ id: 'acc_g1', name: 'g1', createdAt: NOW });
          sendAlong(tx.insert(schema.inboxes).values({ id: 'inb_dup', accountId: 'acc_1', address: 'one@example.org', dailySendLimit: 3, createdAt: NOW }).run());
        }),
        store.grouped(async (tx: Db) => {
          sendAlong(tx.insert(schema.accounts).values({ id: 'acc_g2', name: 'g2', createdAt: NOW }).run());
        }),
      ]);
      assert.ok(bad.status === 'rejected' && isUniqueViolation(bad.reason));
      assert.equal(good.status, 'fulfilled');
      const left = await db()
        .select({ id: schema.accounts.id })
        .from(schema.accounts)
        .where(sql`${schema.accounts.id} IN ('acc_before', 'acc_after', 'acc_g1', 'acc_g2')`)
        .all();
      assert.deepEqual(left, [{ id: 'acc_g2' }]);
      await db().delete(schema.accounts).where(eq(schema.accounts.id, 'acc_g2')).run();
    });

    test('rows kept for the end of a transaction are written there, each kind in one statement on PostgreSQL; a failed one fails the transaction', async () => {
      const event = (id: string) => ({ id, accountId: 'acc_1', type: 'domain.verified', data: '{}', messageId: null, createdAt: NOW });
      await store.transaction(async (tx: Db) => {
        for (const id of ['evt_r1', 'evt_r2', 'evt_r3']) sendAlongRow(tx, 'events', event(id), insertEvents);
        // Read in the work: not written yet where rows are kept for the end.
        const [[seen]] = await rawRows<[number]>(tx, "SELECT count(*) FROM events WHERE id LIKE 'evt_r%'");
        assert.equal(Number(seen), engine === 'postgres' ? 0 : 3);
      });
      const rows = await rawRows<[string]>(db(), `SELECT ${engine === 'postgres' ? "xmin::text || '/' || cmin::text" : "'-'"} FROM events WHERE id LIKE 'evt_r%' ORDER BY id`);
      assert.equal(rows.length, 3);
      if (engine === 'postgres') assert.equal(new Set(rows.map(([w]) => w)).size, 1, 'one statement wrote the three');
      // A kept row that fails (its account does not exist) fails the transaction, whose other writes go too.
      await assert.rejects(
        store.transaction(async (tx: Db) => {
          await tx.insert(schema.accounts).values({ id: 'acc_kept', name: 'kept', createdAt: NOW });
          sendAlongRow(tx, 'events', { ...event('evt_r4'), accountId: 'acc_none' }, insertEvents);
        }),
        (err: { cause?: { code?: string } }) => ['SQLITE_CONSTRAINT_FOREIGNKEY', '23503'].includes(err.cause?.code ?? ''),
      );
      assert.equal((await db().select().from(schema.accounts).where(eq(schema.accounts.id, 'acc_kept')).all()).length, 0);
      await rawRows(db(), "DELETE FROM events WHERE id LIKE 'evt_r%'");
      // Past 30,000 values (5,000 events of 6 columns), a further statement takes the rest.
      await store.transaction(async (tx: Db) => {
        for (let i = 0; i < 5_001; i++) sendAlongRow(tx, 'events', event(`evt_m${String(i).padStart(5, '0')}`), insertEvents);
      });
      const many = await rawRows<[string]>(db(), `SELECT ${engine === 'postgres' ? "xmin::text || '/' || cmin::text" : "'-'"} FROM events WHERE id LIKE 'evt_m%'`);
      assert.equal(many.length, 5_001);
      if (engine === 'postgres') assert.equal(new Set(many.map(([w]) => w)).size, 2, 'two statements');
      await rawRows(db(), "DELETE FROM events WHERE id LIKE 'evt_m%'");
    });

    test('a read made once for the transaction (PostgreSQL) answers every later call with the same key; elsewhere each call reads', async () => {
      let reads = 0;
      const count = () => {
        reads++;
        return rawRows<[number]>(db(), 'SELECT count(*) FROM accounts');
      };
      const answers = await store.transaction(async () => [await readOnce('accounts', count), await readOnce('accounts', count), await readOnce('other', count)]);
      assert.equal(reads, engine === 'postgres' ? 2 : 3);
      assert.deepEqual(answers[0], answers[1]);
      reads = 0;
      await readOnce('accounts', count);
      await readOnce('accounts', count);
      assert.equal(reads, 2, 'outside a transaction, each call reads');
    });

    test('the rows of several webhook deliveries come in one read: each pair asked for, with its message bodies; a pair whose event is gone is absent', async () => {
      const hook = (id: string, isActive: boolean) => ({ id, accountId: 'acc_1', url: 'https://example.org/h', isActive, secret: 's', createdAt: NOW, updatedAt: NOW });
      await db()
        .insert(schema.webhooks)
        .values([hook('wh_d1', true), hook('wh_d2', false)])
        .run();
      await db().insert(schema.inboxes).values({ id: 'inb_d', accountId: 'acc_1', address: 'd@example.org', dailySendLimit: 5, createdAt: NOW }).run();
      await db().insert(schema.threads).values({ id: 'thr_d', accountId: 'acc_1', inboxId: 'inb_d', lastMessageAt: NOW, createdAt: NOW }).run();
      await db()
        .insert(schema.messages)
        .values({
          id: 'msg_d',
          accountId: 'acc_1',
          inboxId: 'inb_d',
          threadId: 'thr_d',
          direction: 'inbound',
          fromAddress: 'a@b',
          status: 'received',
          messageIdHeader: '<d@b>',
          bodyText: 'the text',
          createdAt: NOW,
          updatedAt: NOW,
        })
        .run();
      const event = (id: string, messageId: string | null) => ({ id, accountId: 'acc_1', type: 'message.received', data: '{}', messageId, createdAt: NOW });
      await db()
        .insert(schema.events)
        .values([event('evt_d1', 'msg_d'), event('evt_d2', null)])
        .run();
      const rows = await listDeliveryRows(db(), [
        { webhookId: 'wh_d1', eventId: 'evt_d1' },
        { webhookId: 'wh_d2', eventId: 'evt_d2' },
        { webhookId: 'wh_d1', eventId: 'evt_gone' },
      ]);
      assert.deepEqual([...rows.keys()].sort(), ['wh_d1 evt_d1', 'wh_d2 evt_d2'], 'the pairs asked for, not every webhook with every event');
      const first = rows.get('wh_d1 evt_d1')!;
      assert.equal(first.hook.url, 'https://example.org/h');
      assert.equal(first.hook.isActive, true);
      assert.equal(first.event.messageId, 'msg_d');
      assert.equal(first.bodyText, 'the text');
      assert.equal(first.bodyHtml, null);
      const second = rows.get('wh_d2 evt_d2')!;
      assert.equal(second.hook.isActive, false);
      assert.equal(second.event.messageId, null);
      assert.equal(second.bodyText, null);
      await db().delete(schema.inboxes).where(eq(schema.inboxes.id, 'inb_d')).run();
      await db()
        .delete(schema.webhooks)
        .where(sql`${schema.webhooks.id} IN ('wh_d1', 'wh_d2')`)
        .run();
      await db()
        .delete(schema.events)
        .where(sql`${schema.events.id} IN ('evt_d1', 'evt_d2')`)
        .run();
    });

    test("each account's domain names, for the messages of a moment in one read; an account without any is absent", async () => {
      await db().insert(schema.accounts).values({ id: 'acc_l2', name: 'two', createdAt: NOW }).run();
      const domain = (id: string, accountId: string, name: string) => ({
        id,
        accountId,
        domain: name,
        dkimSelector: 's',
        dkimPrivateKey: 'k',
        dkimPublicKey: 'p',
        verificationToken: 't',
        createdAt: NOW,
      });
      await db()
        .insert(schema.domains)
        .values([domain('dom_l1', 'acc_1', 'one.example'), domain('dom_l2', 'acc_1', 'two.example')])
        .run();
      const domains = await listDomainNamesOfAccounts(db(), ['acc_1', 'acc_l2']);
      assert.deepEqual(domains.get('acc_1')?.sort(), ['one.example', 'two.example']);
      assert.equal(domains.has('acc_l2'), false);
      await db().delete(schema.accounts).where(eq(schema.accounts.id, 'acc_l2')).run();
      await db()
        .delete(schema.domains)
        .where(sql`${schema.domains.id} IN ('dom_l1', 'dom_l2')`)
        .run();
    });

    test('a transaction reports success only if it committed, even when its work caught a failed statement', async () => {
      // SQLite goes on after a failed statement; PostgreSQL ends the transaction and answers the
      // COMMIT with a rollback. Either is fine, as long as success means committed.
      let resolved = true;
      await store
        .transaction(async (tx: Db) => {
          await tx.insert(schema.accounts).values({ id: 'acc_caught', name: 'caught', createdAt: NOW });
          await tx
            .insert(schema.accounts)
            .values({ id: 'acc_caught', name: 'again', createdAt: NOW })
            .catch(() => undefined);
        })
        .catch(() => (resolved = false));
      const committed = (await db().select().from(schema.accounts).where(eq(schema.accounts.id, 'acc_caught')).all()).length === 1;
      assert.equal(committed, resolved, resolved ? 'the transaction resolved but its insert is not there' : 'the transaction rejected but its insert is there');
      await db().delete(schema.accounts).where(eq(schema.accounts.id, 'acc_caught')).run();
    });

    test('a guarded counter stays exact under 20 concurrent writers', async () => {
      const take = () =>
        store.transaction(async (tx: Db) => {
          const r = await tx
            .update(schema.inboxes)
            .set({ sendsToday: sql`${schema.inboxes.sendsToday} + 1` })
            .where(and(eq(schema.inboxes.id, 'inb_1'), sql`${schema.inboxes.sendsToday} < ${schema.inboxes.dailySendLimit}`))
            .run();
          return changes(r) === 1;
        });
      const outcomes = await Promise.all(Array.from({ length: 20 }, take));
      assert.equal(outcomes.filter(Boolean).length, 3);
      const inbox = await db().select({ n: schema.inboxes.sendsToday }).from(schema.inboxes).where(eq(schema.inboxes.id, 'inb_1')).get();
      assert.equal(inbox?.n, 3);
    });

    test('statements outside a transaction wait for it instead of joining it', async () => {
      let release!: () => void;
      const held = new Promise<void>((r) => (release = r));
      let inside!: () => void;
      const entered = new Promise<void>((r) => (inside = r));
      const tx = store.transaction(async (t: Db) => {
        await t.insert(schema.accounts).values({ id: 'acc_3', name: 'three', createdAt: NOW });
        inside();
        await held;
        throw new Error('rolled back');
      });
      await entered; // the transaction has written: the statement below comes while it is open
      const outside = db().insert(schema.accounts).values({ id: 'acc_4', name: 'four', createdAt: NOW }).run();
      release();
      await assert.rejects(tx, /rolled back/);
      await outside;
      const ids = (await db().select({ id: schema.accounts.id }).from(schema.accounts).all()).map((r) => r.id).sort();
      assert.deepEqual(ids, ['acc_1', 'acc_4']);
    });

    test('message counts per inbox and status follow inserts, status changes and deletes', async () => {
      await db().insert(schema.threads).values({ id: 'thr_1', accountId: 'acc_1', inboxId: 'inb_1', lastMessageAt: NOW, createdAt: NOW });
      const message = (id: string, status: string) => ({
        id,
        accountId: 'acc_1',
        inboxId: 'inb_1',
        threadId: 'thr_1',
        direction: 'inbound',
        fromAddress: 'a@example.net',
        status,
        messageIdHeader: `<${id}@example.net>`,
        createdAt: NOW,
        updatedAt: NOW,
      });
      await db()
        .insert(schema.messages)
        .values([message('msg_1', 'received'), message('msg_2', 'received'), message('msg_3', 'received')]);
      await db().update(schema.messages).set({ status: 'bounced' }).where(eq(schema.messages.id, 'msg_2'));
      await db().update(schema.messages).set({ subject: 'no status change' }).where(eq(schema.messages.id, 'msg_1'));
      await db().delete(schema.messages).where(eq(schema.messages.id, 'msg_3'));
      const counts = await store.rows<[string, number]>(store.db, 'SELECT status, sum(n) FROM inbox_message_counts WHERE inbox_id = ? GROUP BY status HAVING sum(n) <> 0 ORDER BY status', ['inb_1']);
      assert.deepEqual(counts, [
        ['bounced', 1],
        ['received', 1],
      ]);
    });

    test('a message joins the thread of its newest parent in its inbox; unknown parents and other inboxes give none', async () => {
      await db().insert(schema.inboxes).values({ id: 'inb_p2', accountId: 'acc_1', address: 'p2@example.org', dailySendLimit: 3, createdAt: NOW });
      for (const [id, inboxId] of [
        ['thr_p_old', 'inb_1'],
        ['thr_p_new', 'inb_1'],
        ['thr_p_other', 'inb_p2'],
      ])
        await db().insert(schema.threads).values({ id, accountId: 'acc_1', inboxId, lastMessageAt: NOW, createdAt: NOW });
      const message = (id: string, threadId: string, header: string, createdAt: string, inboxId = 'inb_1') => ({
        id,
        accountId: 'acc_1',
        inboxId,
        threadId,
        direction: 'inbound',
        fromAddress: 'a@example.net',
        status: 'received',
        messageIdHeader: header,
        createdAt,
        updatedAt: createdAt,
      });
      await db()
        .insert(schema.messages)
        .values([
          message('msg_p1', 'thr_p_old', '<root@example.net>', '2026-11-25T00:00:01.000Z'),
          message('msg_p2', 'thr_p_new', '<second@example.net>', '2026-11-25T00:00:02.000Z'),
          message('msg_p3', 'thr_p_other', '<third@example.net>', '2026-11-25T00:00:03.000Z', 'inb_p2'),
        ]);
      assert.equal(await findThreadIdOfParents(db(), 'acc_1', 'inb_1', ['<root@example.net>', '<second@example.net>', '<third@example.net>']), 'thr_p_new');
      assert.equal(await findThreadIdOfParents(db(), 'acc_1', 'inb_1', ['<root@example.net>']), 'thr_p_old');
      assert.equal(await findThreadIdOfParents(db(), 'acc_1', 'inb_1', ['<third@example.net>', '<never@example.net>']), undefined);
      assert.equal(await findThreadIdOfParents(db(), 'acc_1', 'inb_p2', ['<third@example.net>']), 'thr_p_other');
    });

    if (engine === 'postgres')
      test('PostgreSQL: two connections storing mail for one inbox do not wait for each other on its counters, and the sums stay exact', async () => {
        // Each connection adds to its own slot of a counter (migrations/pg/0022_counter_slots.sql):
        // two clients whose slots differ, one holding its transaction open.
        const clients: pg.Client[] = [];
        const slotOf = async (c: pg.Client) => Number((await c.query('SELECT pg_backend_pid() % 64 AS s')).rows[0].s);
        try {
          const open = async () => {
            const c = new pg.Client({ connectionString: url });
            await c.connect();
            clients.push(c);
            return c;
          };
          const a = await open();
          let b = await open();
          while ((await slotOf(b)) === (await slotOf(a))) b = await open();
          const insert = (c: pg.Client, id: string) =>
            c.query(
              `INSERT INTO messages (id, account_id, inbox_id, thread_id, direction, from_address, status, message_id_header, size, created_at, updated_at)
             VALUES ($1, 'acc_1', 'inb_1', 'thr_1', 'inbound', 'a@example.net', 'received', $2, 100, $3, $3)`,
              [id, `<${id}@example.net>`, NOW],
            );
          const totals = async () => {
            const [[received]] = await store.rows<[number]>(store.db, "SELECT coalesce(sum(n), 0) FROM inbox_message_counts WHERE inbox_id = 'inb_1' AND status = 'received'");
            const [[bytes]] = await store.rows<[number]>(store.db, "SELECT coalesce(sum(bytes), 0) FROM account_usage WHERE account_id = 'acc_1'");
            return { received: Number(received), bytes: Number(bytes) };
          };
          const before = await totals();
          await a.query('BEGIN');
          await insert(a, 'msg_slot_a');
          // Before the slots, b waited here for a's commit: the lock timeout makes that an error.
          await b.query("SET lock_timeout = '2s'");
          await insert(b, 'msg_slot_b');
          await a.query('COMMIT');
          assert.deepEqual(await totals(), { received: before.received + 2, bytes: before.bytes + 200 });
          // A decrement on a connection whose slot holds nothing for the counter takes another slot's row.
          const c = await open();
          await c.query("DELETE FROM messages WHERE id IN ('msg_slot_a', 'msg_slot_b')");
          assert.deepEqual(await totals(), before);
        } finally {
          for (const c of clients) await c.end();
        }
      });

    test('inside a transaction the store handle joins it; work left running after it ends does not', async () => {
      let leftover: Promise<unknown> | undefined;
      let release!: () => void;
      const late = new Promise<void>((r) => (release = r));
      await assert.rejects(
        store.transaction(async () => {
          // A helper reading through the store's own handle sees the transaction's rows.
          await db().insert(schema.accounts).values({ id: 'acc_5', name: 'five', createdAt: NOW });
          const seen = await db().select({ id: schema.accounts.id }).from(schema.accounts).where(eq(schema.accounts.id, 'acc_5')).get();
          assert.equal(seen?.id, 'acc_5');
          leftover = late.then(() => db().insert(schema.accounts).values({ id: 'acc_6', name: 'six', createdAt: NOW }).run());
          throw new Error('rolled back');
        }),
        /rolled back/,
      );
      release();
      await leftover;
      const ids = (await db().select({ id: schema.accounts.id }).from(schema.accounts).all()).map((r) => r.id);
      assert.ok(!ids.includes('acc_5'), 'the insert through the store handle rolled back with the transaction');
      assert.ok(ids.includes('acc_6'), 'a statement made after the transaction ended committed on its own');
    });
  });
}

describe('blobs in PostgreSQL', { skip: peerSkip(postgresMissing()) }, () => {
  let store: Store;
  let blobs: PgBlobs;
  const CHUNK = 64 * 1024;
  before(async () => {
    store = await openStore({ dataDir: '/nonexistent', databaseUrl: await (await pgCluster()).createDatabase() });
    blobs = new PgBlobs(store, CHUNK);
  });
  after(() => store.close());

  test('a blob of several chunks reads and streams back byte for byte', async () => {
    const bytes = randomBytes(CHUNK * 3 + 123);
    await blobs.write(store.db, 'raw/2026-11/msg_a.eml', bytes);
    assert.ok(bytes.equals(await blobs.read(store.db, 'raw/2026-11/msg_a.eml')));
    assert.ok(bytes.equals(await collect(blobs.stream('raw/2026-11/msg_a.eml'))));
    const [chunks] = await store.rows<[number]>(store.db, 'SELECT count(*) FROM blob_chunks WHERE key = ?', ['raw/2026-11/msg_a.eml']);
    assert.deepEqual(chunks, [4]);
  });

  test('an empty blob exists and reads back empty; a missing one is ENOENT', async () => {
    await blobs.write(store.db, 'raw/empty', Buffer.alloc(0));
    assert.equal((await blobs.read(store.db, 'raw/empty')).length, 0);
    assert.equal(await blobs.exists(store.db, 'raw/empty'), true);
    await assert.rejects(blobs.read(store.db, 'raw/none'), { code: 'ENOENT' });
    await assert.rejects(collect(blobs.stream('raw/none')), { code: 'ENOENT' });
  });

  test('writeStream stores what the source yields and answers its size', async () => {
    const parts = Array.from({ length: 10 }, () => randomBytes(20_000));
    const size = await blobs.writeStream(store.db, 'attachments/x', Readable.from(parts));
    assert.equal(size, 200_000);
    assert.ok(Buffer.concat(parts).equals(await blobs.read(store.db, 'attachments/x')));
  });

  test('blobs commit and roll back with the transaction that writes them', async () => {
    await assert.rejects(
      store.transaction(async (tx: Db) => {
        await blobs.write(tx, 'raw/rolled-back', randomBytes(CHUNK * 2));
        throw new Error('no');
      }),
      /no/,
    );
    assert.equal(await blobs.exists(store.db, 'raw/rolled-back'), false);
    const failing = new Readable({
      read() {
        this.destroy(new Error('client went away'));
      },
    });
    await assert.rejects(
      store.transaction((tx) => blobs.writeStream(tx, 'raw/cut', failing)),
      /client went away/,
    );
    assert.equal(await blobs.exists(store.db, 'raw/cut'), false);
  });

  test('writing a content key twice keeps one copy; remove takes every chunk', async () => {
    const bytes = randomBytes(CHUNK + 5);
    await blobs.write(store.db, 'attachments/sha256/ab/abc', bytes);
    await blobs.write(store.db, 'attachments/sha256/ab/abc', bytes);
    const [n] = await store.rows<[number]>(store.db, 'SELECT count(*) FROM blob_chunks WHERE key = ?', ['attachments/sha256/ab/abc']);
    assert.deepEqual(n, [2]);
    await blobs.remove(store.db, ['attachments/sha256/ab/abc', 'raw/2026-11/msg_a.eml']);
    assert.equal(await blobs.exists(store.db, 'attachments/sha256/ab/abc'), false);
    assert.equal(await blobs.exists(store.db, 'raw/2026-11/msg_a.eml'), false);
  });
});

describe('JSON IN-lists on PostgreSQL', { skip: peerSkip(postgresMissing()) }, () => {
  test("the claim's lock probes the jobs' primary key in a table of many updated rows, and locks each listed job once", async () => {
    const url = await (await pgCluster()).createDatabase();
    const store = await openStore({ dataDir: '/nonexistent', databaseUrl: url });
    const raw = new pg.Client({ connectionString: url });
    await raw.connect();
    const query = pg.Client.prototype.query;
    try {
      // A burst's jobs table: thousands of rows, each updated several times (claimed, finished)
      // before autovacuum comes by, the planner's statistics taken on the first rows.
      await raw.query('ALTER TABLE jobs SET (autovacuum_enabled = false)');
      const insert = (from: number, to: number) =>
        raw.query(
          `INSERT INTO jobs (id, kind, payload, status, max_attempts, run_at, created_at, updated_at)
           SELECT 'job_' || i, 'inbound', '{}', 'done', 5, i, '${NOW}', '${NOW}' FROM generate_series(${from}, ${to}) i`,
        );
      await insert(1, 300);
      await raw.query('ANALYZE jobs');
      await insert(301, 3000);
      for (let k = 0; k < 2; k++) await raw.query('UPDATE jobs SET lease_until = run_at + 1');
      const ids = ['job_7', 'job_2999', 'job_150', 'job_7', 'job_missing'];

      const sent: Array<{ text: string; values: unknown[] }> = [];
      pg.Client.prototype.query = function (this: pg.Client, ...args: unknown[]) {
        const config = args[0] as { text?: unknown; values?: unknown[] };
        if (typeof config.text === 'string' && config.text.includes('FOR UPDATE SKIP LOCKED')) sent.push({ text: config.text, values: config.values ?? [] });
        return (query as (...a: unknown[]) => unknown).apply(this, args);
      } as typeof query;
      const locked = await store.transaction((tx) => lockFreeJobs(tx, ids));
      pg.Client.prototype.query = query;
      assert.deepEqual([...locked].sort(), ['job_150', 'job_2999', 'job_7']);

      assert.equal(sent.length, 1, 'one statement locks the jobs');
      const plan = JSON.stringify((await raw.query(`EXPLAIN (FORMAT JSON) ${sent[0].text}`, sent[0].values)).rows[0]);
      assert.ok(!plan.includes('"Seq Scan"'), `no scan of the jobs table: ${plan}`);
      assert.ok(plan.includes('"Index Name":"jobs_pkey"'), `the jobs' primary key is probed: ${plan}`);
    } finally {
      pg.Client.prototype.query = query;
      await raw.end();
      await store.close();
    }
  });
});

describe('announcements between nodes (PostgreSQL NOTIFY)', { skip: peerSkip(postgresMissing()) }, () => {
  test('signals announced together go in one NOTIFY statement, and another node hears each of them', async () => {
    const url = await (await pgCluster()).createDatabase();
    const a = await openStore({ dataDir: '/nonexistent', databaseUrl: url });
    const b = await openStore({ dataDir: '/nonexistent', databaseUrl: url });
    try {
      const heard: string[] = [];
      b.listen((signal) => heard.push(signal));
      // b's LISTEN connection is up once a signal from a reaches it.
      await until('the listener', async () => {
        a.announce('ping');
        await new Promise((r) => setTimeout(r, 50));
        return heard.includes('ping') ? true : undefined;
      });
      heard.length = 0;
      // A late 'ping' of the loop above is not what the test counts.
      const signals = () => heard.filter((s) => s !== 'ping');
      const pool = (a as unknown as { pool: { query: (...args: unknown[]) => Promise<unknown> } }).pool;
      const sent: string[] = [];
      const query = pool.query.bind(pool);
      pool.query = (...args: unknown[]) => {
        if (typeof args[0] === 'string' && args[0].includes('pg_notify')) sent.push(args[0]);
        return query(...args);
      };
      for (let i = 0; i < 100; i++) {
        a.announce('jobs');
        a.announce('events');
      }
      await until('both signals heard', () => (signals().length >= 2 ? true : undefined));
      assert.deepEqual(sent, ['SELECT pg_notify($1, $2), pg_notify($1, $3)']);
      assert.deepEqual(signals().sort(), ['events', 'jobs']);
      // Announced while a statement is on its way: gathered into the next one, none lost.
      a.announce('jobs');
      await new Promise((r) => setImmediate(r));
      a.announce('events');
      a.announce('keys');
      await until('the later signals heard', () => (signals().length >= 5 ? true : undefined));
      assert.equal(sent.length, 3);
      assert.deepEqual(signals().slice(2).sort(), ['events', 'jobs', 'keys']);
    } finally {
      await a.close();
      await b.close();
    }
  });
});

describe('socket writes of a PostgreSQL transaction', { skip: peerSkip(postgresMissing()) }, () => {
  test('the statements of one turn go to the server in one write: BEGIN, the writes sent along and the read behind them, and COMMIT too when nothing is read', async () => {
    const url = await (await pgCluster()).createDatabase();
    const store = await openStore({ dataDir: '/nonexistent', databaseUrl: url });
    const port = Number(new URL(url).port);
    type Write = (this: Socket, ...args: unknown[]) => unknown;
    const proto = Socket.prototype as unknown as { _write: Write; _writev: Write };
    const { _write, _writev } = proto;
    let writes = 0;
    const counted = (original: Write): Write =>
      function (this: Socket, ...args: unknown[]) {
        if (this.remotePort === port) writes++;
        return original.apply(this, args);
      };
    try {
      // The pool's connection opened, and the statements prepared on it, before counting.
      const work = async (tx: Db) => {
        sendAlong(rawRows(tx, 'SELECT pg_advisory_xact_lock(?)', [42]));
        sendAlong(rawRows(tx, 'SELECT ?::int + 1', [1]));
        return rawRows<[number]>(tx, 'SELECT ?::int * 2', [21]);
      };
      await store.transaction(work);
      proto._write = counted(_write);
      proto._writev = counted(_writev);
      const rows = await store.transaction(work);
      assert.deepEqual(rows, [[42]]);
      // BEGIN and the three statements in one write, COMMIT in a second (it waits for the work).
      assert.equal(writes, 2);
      // A transaction of writes alone: BEGIN, the writes and COMMIT in one.
      writes = 0;
      await store.transaction(async (tx) => {
        sendAlong(rawRows(tx, 'SELECT pg_advisory_xact_lock(?)', [42]));
        sendAlong(rawRows(tx, 'SELECT ?::int + 1', [1]));
      });
      proto._write = _write;
      proto._writev = _writev;
      assert.equal(writes, 1);
    } finally {
      proto._write = _write;
      proto._writev = _writev;
      await store.close();
    }
  });
});

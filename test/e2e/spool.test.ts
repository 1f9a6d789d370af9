// The inbound spool under load (src/domain/inbound/spool.ts), forced with smtp.inline_processing = 0 so
// every message is spooled: the 250 names the job, the message then appears with the same
// fields as one processed before its reply, its spooled bytes become its stored source, a full
// spool answers 451 4.3.1, spooled mail survives a restart, and large mail is never spooled.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { eq, inArray } from 'drizzle-orm';
import { jobs, spooledMessages } from '../../src/store/schema.ts';
import { queueEntry } from '../../cli/commands/queue.ts';
import { SPOOL_BATCH_ROWS, SPOOL_MAX_MESSAGE_BYTES, processSpooled, receiveInbound } from '../../src/domain/inbound/spool.ts';
import { findInboxByAddress } from '../../src/domain/inboxes/inboxes.ts';
import { getJob, listJobs, sweepJobs } from '../../src/jobs/table.ts';
import { runCli } from '../support/cli.ts';
import type { Service } from '../../src/context.ts';
import { onEngine, startTestServer, TEST_ENGINE, type TestServer } from '../support/server.ts';
import { rawRows, type Db } from '../../src/store/store.ts';
import { SmtpClient } from '../support/smtp-client.ts';
import { until } from '../support/wait.ts';
import { sqlDb } from '../support/db.ts';

const SPOOL_ALL = { smtp: { inline_processing: 0, max_message_bytes: 4 * SPOOL_MAX_MESSAGE_BYTES } };

function message(subject: string, body = 'spooled body\r\n'): Buffer {
  return Buffer.from(`From: Sender <sender@example.net>\r\nTo: box@agents.test\r\nSubject: ${subject}\r\nMessage-ID: <${subject.replace(/\W/g, '')}@example.net>\r\n\r\n${body}`);
}

/** One SMTP transaction to `to`; returns the final reply of DATA. */
async function deliver(port: number, to: string, raw: Buffer): Promise<{ code: number; text: string }> {
  const { client } = await SmtpClient.open(port);
  try {
    await client.cmd('EHLO client.example.net');
    assert.equal((await client.cmd('MAIL FROM:<sender@example.net>')).code, 250);
    assert.equal((await client.cmd(`RCPT TO:<${to}>`)).code, 250);
    return await client.data(raw);
  } finally {
    await client.cmd('QUIT').catch(() => undefined);
  }
}

const jobRunner = (t: TestServer) => t.server.services.find((s) => s.name === 'jobs') as Service;
/** Spooled bytes waiting to be processed: rows no stored message keeps as its source. */
const spooledCount = async (t: TestServer): Promise<number> => {
  const [[n]] = await t.server.ctx.store.rows<[number]>(
    t.server.ctx.db as unknown as Db,
    "SELECT count(*) FROM spooled_messages s WHERE NOT EXISTS (SELECT 1 FROM messages m WHERE m.raw_path = 'raw/spooled/' || s.job_id)",
  );
  return Number(n);
};

async function messagesOf(t: TestServer, inboxId: string, key?: string): Promise<any[]> {
  const res = await t.api('GET', `/inboxes/${inboxId}/messages?limit=100`, undefined, key ? { key } : undefined);
  assert.equal(res.status, 200);
  return res.body.data;
}

describe('spooled inbound mail', () => {
  let t: TestServer;
  let inboxId: string;

  before(async () => {
    t = await startTestServer(SPOOL_ALL);
    inboxId = (await t.api('POST', '/inboxes', { address: 'box' })).body.id;
  });
  after(() => t?.close());

  // A spooled row lives for moments: compressing it on insert and again on read was CPU spent
  // for nothing (migrations/pg/0020), as for blob_chunks (0002).
  onEngine('postgres').test("PostgreSQL stores a spooled message's bytes, and blob chunks, out of line uncompressed", async () => {
    const storage = await t.server.ctx.store.rows<[string, string, string]>(
      t.server.ctx.db as unknown as Db,
      "SELECT c.relname, a.attname, a.attstorage FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid WHERE (c.relname, a.attname) IN (('spooled_messages', 'raw'), ('blob_chunks', 'data')) ORDER BY c.relname",
    );
    assert.deepEqual(storage, [
      ['blob_chunks', 'data', 'e'],
      ['spooled_messages', 'raw', 'e'],
    ]);
  });

  test('the 250 names the job; the message is then stored like one processed before its reply', async () => {
    const reply = await deliver(t.server.smtpPort, 'box@agents.test', message('spooled one'));
    assert.equal(reply.code, 250);
    const jobId = /queued as (job_\S+)/.exec(reply.text)?.[1];
    assert.ok(jobId, `reply names the job: ${reply.text}`);

    const stored = await until('the spooled message to be processed', async () => (await messagesOf(t, inboxId)).find((m) => m.subject === 'spooled one'));
    assert.equal(stored.fromAddress, 'sender@example.net');
    assert.equal(stored.fromName, 'Sender');
    assert.equal(stored.bodyText, 'spooled body');
    assert.deepEqual(stored.toAddresses, ['box@agents.test']);
    assert.equal(stored.status, 'received');
    assert.ok(stored.threadId.startsWith('thr_'));
    assert.ok(stored.authentication, 'sender authentication was evaluated');
    const raw = await fetch(`${t.url}/messages/${stored.id}/raw`, { headers: { authorization: `Bearer ${t.key}` } });
    assert.equal(raw.status, 200);
    const text = await raw.text();
    assert.match(text, /^Return-Path: <sender@example\.net>\r\nReceived: from client\.example\.net/);
    // The spooled bytes are the stored source, written once before the 250: the trace fields
    // (naming the stored message) then the message exactly as sent. No file is written for it.
    const spooled = await sqlDb(t.server.ctx).select().from(spooledMessages).where(eq(spooledMessages.jobId, jobId)).get();
    assert.equal(spooled?.raw.toString(), text);
    assert.ok(text.endsWith(message('spooled one').toString()));
    assert.match(text, new RegExp(`\\(mailroom\\) with ESMTP id ${stored.id};`));
    const [[rawPath]] = await t.server.ctx.store.rows<[string]>(t.server.ctx.db as unknown as Db, 'SELECT raw_path FROM messages WHERE id = ?', [stored.id]);
    assert.equal(rawPath, `raw/spooled/${jobId}`);
    assert.deepEqual(existsSync(join(t.dataDir, 'raw')) ? readdirSync(join(t.dataDir, 'raw'), { recursive: true }) : [], [], 'no raw file on disk');

    await until('the job to finish', async () => (await sqlDb(t.server.ctx).select().from(jobs).where(eq(jobs.id, jobId)).get())?.status === 'done' || undefined);
    assert.equal(await spooledCount(t), 0, 'no spooled bytes wait once the message is stored');
    // The finished job goes with the sweep; the source it leaves stays with its message.
    await sqlDb(t.server.ctx)
      .update(jobs)
      .set({ finishedAt: new Date(Date.now() - 30 * 86_400_000).toISOString() })
      .where(eq(jobs.id, jobId))
      .run();
    await sweepJobs(t.server.ctx);
    assert.equal(await getJob(t.server.ctx, jobId), undefined);
    assert.equal((await fetch(`${t.url}/messages/${stored.id}/raw`, { headers: { authorization: `Bearer ${t.key}` } })).status, 200);
  });

  test('a spooled message processed again (its lease ran out meanwhile) is stored once, and its source stays', async () => {
    const reply = await deliver(t.server.smtpPort, 'box@agents.test', message('processed twice'));
    const jobId = /queued as (job_\S+)/.exec(reply.text)![1];
    const stored = await until('the message', async () => (await messagesOf(t, inboxId)).find((m) => m.subject === 'processed twice'));
    const job = await sqlDb(t.server.ctx).select().from(jobs).where(eq(jobs.id, jobId)).get();
    const processed = await processSpooled(t.server.ctx, jobId, JSON.parse(job!.payload));
    assert.ok(processed, 'the bytes are still there: it runs');
    await t.server.ctx.store.transaction(processed.commit);
    assert.deepEqual(
      (await messagesOf(t, inboxId)).filter((m) => m.subject === 'processed twice').map((m) => m.id),
      [stored.id],
    );
    assert.ok(await sqlDb(t.server.ctx).select().from(spooledMessages).where(eq(spooledMessages.jobId, jobId)).get(), 'the source its message names is kept');
    assert.equal((await fetch(`${t.url}/messages/${stored.id}/raw`, { headers: { authorization: `Bearer ${t.key}` } })).status, 200);

    // Run again, and the message deleted (its source with it) before that run commits: the
    // deleted message does not come back, nor a row naming a source that is gone.
    const late = await processSpooled(t.server.ctx, jobId, JSON.parse(job!.payload));
    assert.ok(late);
    assert.equal((await t.api('DELETE', `/messages/${stored.id}`)).status, 204);
    await until('the source to go', async () => ((await sqlDb(t.server.ctx).select().from(spooledMessages).where(eq(spooledMessages.jobId, jobId)).get()) === undefined ? true : undefined));
    await t.server.ctx.store.transaction(late.commit);
    assert.deepEqual(
      (await messagesOf(t, inboxId)).filter((m) => m.subject === 'processed twice'),
      [],
    );
  });

  test('a spooled source goes with the last message that names it', async () => {
    const reply = await deliver(t.server.smtpPort, 'box@agents.test', message('deleted one'));
    const jobId = /queued as (job_\S+)/.exec(reply.text)![1];
    const stored = await until('the message', async () => (await messagesOf(t, inboxId)).find((m) => m.subject === 'deleted one'));
    const row = () => sqlDb(t.server.ctx).select().from(spooledMessages).where(eq(spooledMessages.jobId, jobId)).get();
    assert.ok(await row(), 'kept as the source');
    assert.equal((await t.api('DELETE', `/messages/${stored.id}`)).status, 204);
    await until('the source to go', async () => ((await row()) === undefined ? true : undefined));
  });

  test('a reply to a spooled message joins its thread', async () => {
    const first = await until('the first message', async () => (await messagesOf(t, inboxId)).find((m) => m.subject === 'spooled one'));
    const reply = Buffer.from(
      `From: sender@example.net\r\nTo: box@agents.test\r\nSubject: Re: spooled one\r\nMessage-ID: <reply1@example.net>\r\nIn-Reply-To: <spooledone@example.net>\r\n\r\nagain\r\n`,
    );
    assert.equal((await deliver(t.server.smtpPort, 'box@agents.test', reply)).code, 250);
    const second = await until('the reply', async () => (await messagesOf(t, inboxId)).find((m) => m.subject === 'Re: spooled one'));
    assert.equal(second.threadId, first.threadId);
  });

  test('an empty message is refused before it is spooled', async () => {
    const reply = await deliver(t.server.smtpPort, 'box@agents.test', Buffer.from('\r\n\r\n'));
    assert.equal(reply.code, 554);
    assert.match(reply.text, /^5\.6\.0 empty message/);
    assert.equal(await spooledCount(t), 0);
  });

  test(`a message over ${SPOOL_MAX_MESSAGE_BYTES} bytes is processed before its reply`, async () => {
    const big = message('big one', ('x'.repeat(76) + '\r\n').repeat(Math.ceil(SPOOL_MAX_MESSAGE_BYTES / 78) + 10));
    const reply = await deliver(t.server.smtpPort, 'box@agents.test', big);
    assert.equal(reply.code, 250);
    const id = /stored as (msg_\S+)/.exec(reply.text)?.[1];
    assert.ok(id, `stored at once: ${reply.text}`);
    const res = await t.api('GET', `/messages/${id}`);
    assert.equal(res.status, 200);
    assert.equal(res.body.subject, 'big one');
  });

  test('a failed spooled message keeps its bytes through the sweep and `mailroom queue --retry` processes it', async () => {
    await jobRunner(t).stop(1000);
    let jobId = '';
    try {
      const reply = await deliver(t.server.smtpPort, 'box@agents.test', message('retried one'));
      jobId = /queued as (job_\S+)/.exec(reply.text)![1];
      // As if every attempt had failed (a full disk) a month ago.
      const longAgo = new Date(Date.now() - 30 * 86_400_000).toISOString();
      await sqlDb(t.server.ctx).update(jobs).set({ status: 'failed', attempts: 7, lastError: 'ENOSPC', finishedAt: longAgo }).where(eq(jobs.id, jobId)).run();
      await sweepJobs(t.server.ctx);
      assert.equal((await getJob(t.server.ctx, jobId))?.status, 'failed', 'the sweep keeps a job whose mail is still spooled');
      assert.equal(await spooledCount(t), 1);

      const config = join(t.dataDir, 'cli.toml');
      writeFileSync(config, `data_dir = ${JSON.stringify(t.dataDir)}\nshared_domain = "agents.test"\n`);
      const retried = await runCli(['queue', '--retry', jobId, '--json', '--config', config]);
      assert.equal(retried.code, 0, retried.stderr);
      assert.deepEqual(JSON.parse(retried.stdout), { jobId, status: 'queued' });
      const again = await runCli(['queue', '--retry', jobId, '--config', config]);
      assert.notEqual(again.code, 0);
      assert.match(again.stderr, /is queued; only a failed one can be retried/);
      const missing = await runCli(['queue', '--retry', 'job_nope', '--config', config]);
      assert.notEqual(missing.code, 0);
      assert.match(missing.stderr, /job job_nope not found/);
    } finally {
      await jobRunner(t).start();
    }
    const stored = await until('the retried message', async () => (await messagesOf(t, inboxId)).find((m) => m.subject === 'retried one'));
    assert.equal(stored.bodyText, 'spooled body');
    assert.equal((await getJob(t.server.ctx, jobId))?.status, 'done');
  });

  test('copies of one message spooled together and processed together (finished in one transaction on PostgreSQL) are stored once', async () => {
    const ctx = t.server.ctx;
    const inbox = (await findInboxByAddress(ctx, 'box@agents.test'))!;
    const copy = () => ({ raw: message('one message, thirty copies'), mailFrom: 'sender@example.net', recipients: [inbox], remoteAddress: '192.0.2.9' });
    await jobRunner(t).stop(1000);
    try {
      // Other messages between the copies: they are stored side by side with the first copy.
      const received = await Promise.all(Array.from({ length: 60 }, (_, i) => receiveInbound(ctx, i % 2 ? copy() : { ...copy(), raw: message(`neighbour ${i}`) })));
      assert.ok(received.every((r) => r.spooledAs));
    } finally {
      await jobRunner(t).start();
    }
    const all = async () => (await messagesOf(t, inboxId)).filter((m) => m.subject === 'one message, thirty copies' || m.subject.startsWith('neighbour '));
    const stored = await until('the spool to be worked off', async () => ((await spooledCount(t)) === 0 && (await all()).length >= 31 ? await all() : undefined));
    assert.equal(stored.filter((m) => m.subject === 'one message, thirty copies').length, 1);
    assert.equal(stored.length, 31);
    if (TEST_ENGINE === 'postgres') {
      // Their events were written at the end of each batch's transaction, one statement a batch
      // (sendAlongRow): fewer statements (transaction and command ids) than messages.
      const writes = await rawRows<[string]>(ctx.db, "SELECT DISTINCT xmin::text || '/' || cmin::text FROM events WHERE message_id IN (SELECT value FROM json_each(?))", [
        JSON.stringify(stored.map((m) => m.id)),
      ]);
      assert.ok(writes.length <= stored.length / 2, `${writes.length} statements wrote the events of ${stored.length} messages`);
    }
  });

  test(`messages spooled at the same moment share batches of at most ${SPOOL_BATCH_ROWS}: one job each, each stored once with its own bytes`, async () => {
    const ctx = t.server.ctx;
    const inbox = (await findInboxByAddress(ctx, 'box@agents.test'))!;
    const input = (i: number) => ({ raw: message(`batched ${i}`, `body ${i}\r\n`), mailFrom: 'sender@example.net', recipients: [inbox], remoteAddress: '192.0.2.9' });
    await receiveInbound(ctx, input(99));
    // Started in one turn of the event loop, as by SMTP sessions ending DATA together.
    const received = await Promise.all(Array.from({ length: SPOOL_BATCH_ROWS + 6 }, (_, i) => receiveInbound(ctx, input(i))));
    const jobIds = received.map((r) => r.spooledAs!);
    assert.equal(new Set(jobIds).size, SPOOL_BATCH_ROWS + 6, 'a job of its own for each message, past one batch too');
    const rows = await sqlDb(ctx).select().from(jobs).where(inArray(jobs.id, jobIds)).all();
    await until('batched 99', async () => (await messagesOf(t, inboxId)).find((m) => m.subject === 'batched 99'));
    for (const [i, jobId] of jobIds.entries()) {
      assert.equal(JSON.parse(rows.find((r) => r.id === jobId)!.payload).recipients[0], inbox.id);
      const stored = await until(`batched ${i}`, async () => (await messagesOf(t, inboxId)).find((m) => m.subject === `batched ${i}`));
      assert.equal(stored.bodyText, `body ${i}`, 'each job carries its own message');
    }
    await until('the batch processed', async () => ((await spooledCount(t)) === 0 ? true : undefined));
    const subjects = (await messagesOf(t, inboxId)).map((m) => m.subject).filter((s) => s.startsWith('batched '));
    assert.equal(subjects.length, SPOOL_BATCH_ROWS + 7, 'each stored exactly once');
  });

  test('a batch whose transaction fails refuses each of its messages (451) and leaves no job and no bytes', async () => {
    const ctx = t.server.ctx;
    const inbox = (await findInboxByAddress(ctx, 'box@agents.test'))!;
    const db = ctx.db as unknown as Db;
    const postgres = ctx.store.dialect === 'postgres';
    // As a full disk would: every insert of spooled bytes fails.
    if (postgres) {
      await ctx.store.run(db, "CREATE FUNCTION refuse_spool() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'disk full'; END $$");
      await ctx.store.run(db, 'CREATE TRIGGER refuse_spool BEFORE INSERT ON spooled_messages FOR EACH ROW EXECUTE FUNCTION refuse_spool()');
    } else await ctx.store.run(db, "CREATE TRIGGER refuse_spool BEFORE INSERT ON spooled_messages BEGIN SELECT RAISE(ABORT, 'disk full'); END");
    const jobsBefore = (await sqlDb(ctx).select().from(jobs).all()).length;
    try {
      const input = (i: number) => ({ raw: message(`refused ${i}`), mailFrom: 'sender@example.net', recipients: [inbox], remoteAddress: '192.0.2.9' });
      const results = await Promise.allSettled(Array.from({ length: 5 }, (_, i) => receiveInbound(ctx, input(i))));
      for (const r of results) {
        assert.equal(r.status, 'rejected');
        const reason = (r as PromiseRejectedResult).reason as Error;
        assert.match(`${reason} ${reason.cause}`, /disk full/);
      }
      const reply = await deliver(t.server.smtpPort, 'box@agents.test', message('refused over smtp'));
      assert.equal(reply.code, 451, reply.text);
      assert.equal((await sqlDb(ctx).select().from(jobs).all()).length, jobsBefore, 'no job without its bytes');
      assert.equal(await spooledCount(t), 0);
    } finally {
      await ctx.store.run(db, postgres ? 'DROP TRIGGER refuse_spool ON spooled_messages' : 'DROP TRIGGER refuse_spool');
      if (postgres) await ctx.store.run(db, 'DROP FUNCTION refuse_spool()');
    }
    assert.equal((await deliver(t.server.smtpPort, 'box@agents.test', message('accepted after'))).code, 250);
    await until('the next message', async () => (await messagesOf(t, inboxId)).find((m) => m.subject === 'accepted after'));
  });

  test('mail for an inbox deleted before processing is dropped with its spooled bytes', async () => {
    const doomed = (await t.api('POST', '/inboxes', { address: 'doomed' })).body.id;
    await jobRunner(t).stop(1000);
    try {
      assert.equal((await deliver(t.server.smtpPort, 'doomed@agents.test', message('for doomed'))).code, 250);
      assert.equal(await spooledCount(t), 1);
      assert.equal((await t.api('DELETE', `/inboxes/${doomed}`)).status, 204);
    } finally {
      await jobRunner(t).start();
    }
    await until('the spool to empty', async () => (await spooledCount(t)) === 0 || undefined);
    const res = await t.api('GET', `/inboxes/${doomed}/messages`);
    assert.equal(res.status, 404);
  });
});

describe('a full spool and a restart', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'mailroom-spool-'));
  let first: TestServer | undefined;
  let second: TestServer | undefined;
  after(async () => {
    await first?.close();
    await second?.close();
    rmSync(dataDir, { recursive: true, force: true });
  });

  test('451 4.3.1 past smtp.spool_limit; what was spooled is processed after a restart', async () => {
    first = await startTestServer({ smtp: { inline_processing: 0, spool_limit: 2 } }, { dataDir });
    const inboxId = (await first.api('POST', '/inboxes', { address: 'box' })).body.id;
    const key = first.key;
    // Nothing processes the spool while the runner is stopped.
    await jobRunner(first).stop(1000);
    for (const n of [1, 2]) assert.equal((await deliver(first.server.smtpPort, 'box@agents.test', message(`held ${n}`))).code, 250);
    const full = await deliver(first.server.smtpPort, 'box@agents.test', message('held 3'));
    assert.equal(full.code, 451);
    assert.match(full.text, /^4\.3\.1 the inbound spool is full \(2 messages waiting\)/);
    assert.equal(await spooledCount(first), 2);
    assert.deepEqual(await messagesOf(first, inboxId), []);
    // `mailroom queue` shows what waits, named by its envelope sender.
    const waiting = (await listJobs(first.server.ctx, ['queued'])).map(queueEntry).filter((e) => e.kind === 'inbound');
    assert.deepEqual(
      waiting.map((e) => e.subject),
      ['mail from <sender@example.net>', 'mail from <sender@example.net>'],
    );
    await first.close();
    first = undefined;

    second = await startTestServer({}, { dataDir });
    const s = second;
    const subjects = await until('both held messages to be processed', async () => {
      const list = (await messagesOf(s, inboxId, key)).map((m) => m.subject).sort();
      return list.length === 2 ? list : undefined;
    });
    assert.deepEqual(subjects, ['held 1', 'held 2']);
    assert.equal(await spooledCount(s), 0);
  });
});

describe('mail that waits in the spool', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'mailroom-spool-join-'));
  let first: TestServer | undefined;
  let second: TestServer | undefined;
  after(async () => {
    await first?.close();
    await second?.close();
    rmSync(dataDir, { recursive: true, force: true });
  });

  test('new mail joins a non-empty spool instead of overtaking it, even with processing slots free', async () => {
    first = await startTestServer({ smtp: { inline_processing: 0 } }, { dataDir });
    const inboxId = (await first.api('POST', '/inboxes', { address: 'box' })).body.id;
    const key = first.key;
    await jobRunner(first).stop(1000);
    const waiting = /queued as (job_\S+)/.exec((await deliver(first.server.smtpPort, 'box@agents.test', message('waiting one'))).text)![1];
    // Not due for an hour: it stays in the spool across the restart.
    await sqlDb(first.server.ctx)
      .update(jobs)
      .set({ runAt: Date.now() + 3_600_000 })
      .where(eq(jobs.id, waiting))
      .run();
    await first.close();
    first = undefined;

    // Default smtp.inline_processing (8): nothing is being processed, yet the spool is not empty.
    second = await startTestServer({}, { dataDir });
    const s = second;
    const reply = await deliver(s.server.smtpPort, 'box@agents.test', message('newcomer'));
    assert.equal(reply.code, 250);
    assert.match(reply.text, /queued as job_/, `spooled behind the waiting message: ${reply.text}`);

    await sqlDb(s.server.ctx).update(jobs).set({ runAt: Date.now() }).where(eq(jobs.id, waiting)).run();
    s.server.ctx.notify('jobs');
    const subjects = await until('both messages to be processed', async () => {
      const list = (await messagesOf(s, inboxId, key)).map((m) => m.subject).sort();
      return list.length === 2 ? list : undefined;
    });
    assert.deepEqual(subjects, ['newcomer', 'waiting one']);
    // With the spool empty again, mail is processed before its reply.
    const after250 = await until('the spool count to catch up', async () => {
      const r = await deliver(s.server.smtpPort, 'box@agents.test', message('later one'));
      return /stored as msg_/.test(r.text) ? r : undefined;
    });
    assert.equal(after250.code, 250);
  });
});

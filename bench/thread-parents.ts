// The thread lookup of a message that names parents (findThreadIdOfParents, src/store/repo/messages.ts)
// on an inbox of N messages (default 20,000) none of which is a parent, as for the first reply
// from outside: embedded SQLite, then a PostgreSQL test cluster, each before and after ANALYZE.
// Usage: N=20000 node bench/thread-parents.ts
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openStore } from '../src/store/open.ts';
import * as schema from '../src/store/schema.ts';
import { findThreadIdOfParents } from '../src/store/repo/messages.ts';
import { rawRun } from '../src/store/store.ts';
import { startCluster } from '../test/support/postgres.ts';

const N = Number(process.env.N ?? 20000);
const NOW = '2026-11-25T00:00:00.000Z';
for (const engine of ['sqlite', 'postgres']) {
  const cluster = engine === 'postgres' ? await startCluster({ durable: false }) : undefined;
  const dataDir = mkdtempSync(join(tmpdir(), 'thread-parents-'));
  const store = await openStore({ dataDir, databaseUrl: cluster ? await cluster.createDatabase('p') : undefined });
  const db = store.db as any;
  await db.insert(schema.accounts).values({ id: 'acc_1', name: 'one', createdAt: NOW });
  await db.insert(schema.inboxes).values({ id: 'inb_1', accountId: 'acc_1', address: 'x@example.org', dailySendLimit: 5, createdAt: NOW });
  await db.insert(schema.threads).values({ id: 'thr_1', accountId: 'acc_1', inboxId: 'inb_1', lastMessageAt: NOW, createdAt: NOW });
  const time = async (label: string) => {
    const t0 = performance.now();
    for (let i = 0; i < 50; i++) await findThreadIdOfParents(store.db, 'acc_1', 'inb_1', [`<nope${i}@x>`, `<nope${i}b@x>`]);
    console.log(engine, label, ((performance.now() - t0) / 50).toFixed(3), 'ms a call');
  };
  await time('empty');
  for (let at = 0; at < N; at += 500) {
    const rows = Array.from({ length: 500 }, (_, k) => {
      const i = at + k;
      const ts = new Date(Date.parse(NOW) + i * 1000).toISOString();
      return {
        id: `msg_${String(i).padStart(8, '0')}`,
        accountId: 'acc_1',
        inboxId: 'inb_1',
        threadId: 'thr_1',
        direction: 'inbound',
        fromAddress: 'a@example.net',
        status: 'received',
        messageIdHeader: `<m${i}@example.net>`,
        createdAt: ts,
        updatedAt: ts,
      };
    });
    await db.insert(schema.messages).values(rows);
  }
  await time(`${N} messages, no ANALYZE`);
  await rawRun(store.db, 'ANALYZE messages');
  await time(`${N} messages, after ANALYZE`);
  await store.close();
  cluster?.stop();
  rmSync(dataDir, { recursive: true, force: true });
}

// IMAP on two nodes of one PostgreSQL database (docs/several-nodes.md): both number a folder
// alike (the same UIDs and UIDVALIDITY, whichever looks first), and a session IDLE on one node
// hears mail stored by the other (the event feed's NOTIFY).
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { imapClient } from '../support/imap.ts';
import { deliverMail } from '../support/mail.ts';
import { peerSkip } from '../support/peers.ts';
import { pgCluster, postgresMissing } from '../support/postgres.ts';
import { onEngine, startTestServer, type TestServer } from '../support/server.ts';

// PostgreSQL pass only: nodes share a database only there (build/test.sh leaves this file out of
// the SQLite pass; run on SQLite, it declares nothing: onEngine).
const skip = peerSkip(postgresMissing());

onEngine('postgres').describe('IMAP on two nodes', { skip }, () => {
  let a: TestServer;
  let b: TestServer;
  let address: string;

  before(async () => {
    const url = await (await pgCluster()).createDatabase();
    a = await startTestServer({ database: { url }, imap: { listen: '127.0.0.1:0' } });
    b = await startTestServer({ database: { url }, imap: { listen: '127.0.0.1:0' } });
    address = (await a.api('POST', '/inboxes', { address: 'nodes' })).body.address;
    for (const subject of ['first', 'second']) await deliverMail(a.server.smtpPort, { from: 'ann@example.org', to: address, subject, text: 'x' });
  });
  after(async () => {
    await a?.close();
    await b?.close();
  });

  test('the same UIDs on both nodes; IDLE on one hears mail stored by the other', async () => {
    const onB = await imapClient(b, address, a.key);
    const onA = await imapClient(a, address, a.key);
    try {
      const boxB = await onB.mailboxOpen('INBOX');
      const boxA = await onA.mailboxOpen('INBOX');
      assert.equal(boxA.uidValidity, boxB.uidValidity);
      const uids = async (c: typeof onA) => {
        const out = [];
        for await (const m of c.fetch('1:*', { uid: true, envelope: true })) out.push([m.uid, m.envelope?.subject]);
        return out;
      };
      assert.deepEqual(await uids(onA), await uids(onB));
      assert.deepEqual(
        (await uids(onB)).map((u) => u[1]),
        ['first', 'second'],
      );

      const told = new Promise<number>((resolve) => onB.on('exists', (d: { count: number }) => resolve(d.count)));
      void onB.idle();
      await deliverMail(a.server.smtpPort, { from: 'ann@example.org', to: address, subject: 'third', text: 'x' });
      assert.equal(await told, 3);
      // Node A's session learns of it at its next NOOP, with the same UID.
      await onA.noop();
      assert.deepEqual(await uids(onB), await uids(onA));
    } finally {
      await onA.logout();
      await onB.logout();
    }
  });
});

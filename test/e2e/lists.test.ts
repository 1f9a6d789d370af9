// Allow and block lists end to end: the /lists API (validation, lowercase, duplicates answered
// with the existing entry, filters, deletion, other accounts, read-only keys), receive lists at
// the real SMTP listener (550 5.7.1 at RCPT, nothing stored; an allow list lets only its
// entries in, per inbox or account-wide), and send lists on sends, replies, forwards and local
// deliveries (403 RECIPIENT_BLOCKED naming the address, nothing stored or queued). Received mail
// is checked again by its header From: an allow entry requires an authenticated sender (SPF
// against the test DNS) unless it says otherwise, on the inline and the spooled path.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { generateKeyPairSync } from 'node:crypto';
import nodemailer from 'nodemailer';
import { createApiKey } from '../../src/domain/accounts/apikeys.ts';
import { rawRows, rawRun } from '../../src/store/store.ts';
import { dbDigest, settleJobs } from '../support/db-digest.ts';
import { deliverMail } from '../support/mail.ts';
import { SmtpClient } from '../support/smtp-client.ts';
import { expectError, startTestServer, type TestServer } from '../support/server.ts';
import { startTestDns, type TestDns } from '../support/dns.ts';

let t: TestServer;

before(async () => {
  t = await startTestServer({ limits: { requests_per_minute: 100_000 } });
});

after(async () => {
  await t?.close();
});

const inbox = async (address: string) => (await t.api('POST', '/inboxes', { address })).body as { id: string; address: string };
const addEntry = async (body: Record<string, unknown>) => {
  const res = await t.api('POST', '/lists', body);
  assert.equal(res.status, 201, res.text);
  return res.body as { id: string; entry: string };
};
const removeEntry = async (id: string) => assert.equal((await t.api('DELETE', `/lists/${id}`)).status, 204);
const messageCount = async (): Promise<number> => (await rawRows<[number]>(t.server.ctx.db, 'SELECT count(*) FROM messages'))[0]?.[0];

/** The RCPT TO reply for `rcpt` from `mailFrom` over a real SMTP session (the transaction is reset after). */
async function rcptReply(mailFrom: string, rcpt: string): Promise<{ code: number; text: string }> {
  const { client } = await SmtpClient.open(t.server.smtpPort);
  try {
    assert.equal((await client.cmd('EHLO sender.example')).code, 250);
    assert.equal((await client.cmd(`MAIL FROM:<${mailFrom}>`)).code, 250);
    return await client.cmd(`RCPT TO:<${rcpt}>`);
  } finally {
    await client.quit();
  }
}

describe('the /lists API', () => {
  test('create (lowercase, @domain form), duplicate answered with the existing entry, list with filters, delete', async () => {
    const box = await inbox('lists-api');
    const created = await t.api('POST', '/lists', { direction: 'receive', kind: 'block', entry: '  Spammer@Example.COM ' });
    assert.equal(created.status, 201, created.text);
    assert.match(created.body.id, /^lst_[0-9a-z]{26}$/);
    assert.deepEqual(
      { direction: created.body.direction, kind: created.body.kind, entry: created.body.entry, inboxId: created.body.inboxId },
      { direction: 'receive', kind: 'block', entry: 'spammer@example.com', inboxId: null },
    );
    assert.ok(created.body.createdAt);
    // The same entry in another case: nothing added, the existing one answered with 200.
    const again = await t.api('POST', '/lists', { direction: 'receive', kind: 'block', entry: 'SPAMMER@example.com' });
    assert.equal(again.status, 200, again.text);
    assert.deepEqual(again.body, created.body);
    // The same entry for one inbox, or of another kind, is another entry.
    const forInbox = await addEntry({ direction: 'receive', kind: 'block', entry: 'spammer@example.com', inboxId: box.id });
    assert.equal((forInbox as any).inboxId, box.id);
    const domain = await addEntry({ direction: 'send', kind: 'allow', entry: '@Partner.Example' });
    assert.equal(domain.entry, 'partner.example');

    const all = (await t.api('GET', '/lists')).body;
    assert.equal(all.total, 3);
    assert.deepEqual(
      all.data.map((e: any) => e.id),
      [domain.id, forInbox.id, created.body.id],
    );
    assert.deepEqual([all.limit, all.offset], [20, 0]);
    assert.deepEqual(
      (await t.api('GET', '/lists?direction=send')).body.data.map((e: any) => e.id),
      [domain.id],
    );
    assert.deepEqual(
      (await t.api('GET', '/lists?kind=block')).body.data.map((e: any) => e.id),
      [forInbox.id, created.body.id],
    );
    assert.deepEqual(
      (await t.api('GET', `/lists?inboxId=${box.id}`)).body.data.map((e: any) => e.id),
      [forInbox.id],
    );
    const page = (await t.api('GET', '/lists?limit=1&offset=1')).body;
    assert.deepEqual([page.total, page.data.length, page.data[0].id], [3, 1, forInbox.id]);

    for (const id of [created.body.id, forInbox.id, domain.id]) await removeEntry(id);
    expectError(await t.api('DELETE', `/lists/${created.body.id}`), 404, 'LIST_ENTRY_NOT_FOUND');
    assert.equal((await t.api('GET', '/lists')).body.total, 0);
  });

  test('junk entries, directions and kinds are 400 naming the field; nothing is stored', async () => {
    const before = await dbDigest(t.server.ctx);
    for (const entry of ['not an address', 'a@b', 'foo@', '@', '', 'localhost', 'x@-bad-.example', 'a b@example.com', '"q"@example.com', 'example..com', 'ex ample.com']) {
      const res = await t.api('POST', '/lists', { direction: 'receive', kind: 'block', entry });
      expectError(res, 400, 'VALIDATION_ERROR');
      assert.match(res.body.error.message, /`entry`/, entry);
    }
    for (const [field, body] of [
      ['direction', { direction: 'inbound', kind: 'block', entry: 'example.com' }],
      ['kind', { direction: 'send', kind: 'deny', entry: 'example.com' }],
      ['entry', { direction: 'send', kind: 'block' }],
      ['entry', { direction: 'send', kind: 'block', entry: 'evil.example\r\nBcc: x@y.z' }],
    ] as const) {
      const res = await t.api('POST', '/lists', body);
      expectError(res, 400, 'VALIDATION_ERROR');
      assert.match(res.body.error.message, new RegExp(`\`${field}\``));
    }
    expectError(await t.api('GET', '/lists?direction=both'), 400, 'VALIDATION_ERROR');
    expectError(await t.api('GET', '/lists?kind=deny'), 400, 'VALIDATION_ERROR');
    expectError(await t.api('GET', '/lists?limit=101'), 400, 'VALIDATION_ERROR');
    expectError(await t.api('GET', '/lists?inboxId=inb_unknown'), 404, 'INBOX_NOT_FOUND');
    assert.equal(await dbDigest(t.server.ctx), before);
  });

  test('another account: its inbox is 404 in a body and a filter, its entries are 404 and never listed; read-only keys get 403', async () => {
    const other = await t.newAccount('other');
    const theirInbox = (await t.api('POST', '/inboxes', { address: 'their-lists' }, { key: other.key })).body;
    const theirs = await t.api('POST', '/lists', { direction: 'send', kind: 'block', entry: 'x.example' }, { key: other.key });
    assert.equal(theirs.status, 201);
    expectError(await t.api('POST', '/lists', { direction: 'send', kind: 'block', entry: 'x.example', inboxId: theirInbox.id }), 404, 'INBOX_NOT_FOUND');
    expectError(await t.api('GET', `/lists?inboxId=${theirInbox.id}`), 404, 'INBOX_NOT_FOUND');
    expectError(await t.api('DELETE', `/lists/${theirs.body.id}`), 404, 'LIST_ENTRY_NOT_FOUND');
    assert.ok(!(await t.api('GET', '/lists')).body.data.some((e: any) => e.id === theirs.body.id));
    // Their block applies to them only.
    const mine = await inbox('not-theirs');
    assert.equal((await t.api('POST', `/inboxes/${mine.id}/messages`, { to: ['a@x.example'], subject: 's', bodyText: 'b' })).status, 202);

    const ro = (await createApiKey(t.server.ctx, other.accountId, { name: 'reader', readOnly: true })).key;
    expectError(await t.api('POST', '/lists', { direction: 'send', kind: 'block', entry: 'y.example' }, { key: ro }), 403, 'FORBIDDEN');
    expectError(await t.api('DELETE', `/lists/${theirs.body.id}`, undefined, { key: ro }), 403, 'FORBIDDEN');
    assert.equal((await t.api('GET', '/lists', undefined, { key: ro })).body.total, 1);
    await settleJobs(t.server.ctx);
  });
});

describe('receive lists at the SMTP listener', () => {
  test('a blocked sender (address, or domain and its subdomains, any case) is refused at RCPT with 550 5.7.1, nothing stored', async () => {
    const box = await inbox('guarded');
    const byAddress = await addEntry({ direction: 'receive', kind: 'block', entry: 'pest@nuisance.test', inboxId: box.id });
    const byDomain = await addEntry({ direction: 'receive', kind: 'block', entry: 'spam.test' });
    const stored = await messageCount();
    for (const sender of ['pest@nuisance.test', 'PEST@Nuisance.TEST', 'anyone@spam.test', 'x@mail.spam.test']) {
      const reply = await rcptReply(sender, box.address);
      assert.equal(reply.code, 550, `${sender}: ${reply.code} ${reply.text}`);
      assert.match(reply.text, /^5\.7\.1 /, sender);
    }
    // Close matches that are not the entry get in.
    for (const sender of ['pest2@nuisance.test', 'friend@nuisance.test', 'x@notspam.test', 'x@spam.test.example']) {
      assert.equal((await rcptReply(sender, box.address)).code, 250, sender);
    }
    assert.equal(await messageCount(), stored, 'a refused RCPT stored something');
    // A message from an accepted sender is stored as usual.
    const id = await deliverMail(t.server.smtpPort, { from: 'friend@nuisance.test', to: box.address, subject: 'hello', text: 'hi' });
    assert.equal((await t.api('GET', `/messages/${id}`)).body.inboxId, box.id);
    // nodemailer, like any MTA, hears the refusal.
    await assert.rejects(deliverMail(t.server.smtpPort, { from: 'pest@nuisance.test', to: box.address, subject: 'again', text: 'hi' }), (err: any) => err.responseCode === 550);
    // The inbox entry covers that inbox only.
    const neighbour = await inbox('neighbour');
    assert.equal((await rcptReply('pest@nuisance.test', neighbour.address)).code, 250);
    await removeEntry(byAddress.id);
    await removeEntry(byDomain.id);
    assert.equal((await rcptReply('pest@nuisance.test', box.address)).code, 250);
  });

  test('a non-empty receive-allow list lets only its entries in; account-wide entries apply to every inbox; block wins', async () => {
    const closed = await inbox('closed');
    const open = await inbox('open');
    const allow = await addEntry({ direction: 'receive', kind: 'allow', entry: 'friends.test', inboxId: closed.id });
    assert.equal((await rcptReply('a@friends.test', closed.address)).code, 250);
    assert.equal((await rcptReply('a@sub.friends.test', closed.address)).code, 250);
    const stranger = await rcptReply('stranger@elsewhere.test', closed.address);
    assert.equal(stranger.code, 550);
    assert.match(stranger.text, /^5\.7\.1 /);
    // The null sender of bounces matches no entry: an allow list keeps it out.
    assert.equal((await rcptReply('', closed.address)).code, 550);
    assert.equal((await rcptReply('', open.address)).code, 250);
    assert.equal((await rcptReply('stranger@elsewhere.test', open.address)).code, 250);

    // Account-wide: an allow entry makes every inbox's list non-empty.
    const wide = await addEntry({ direction: 'receive', kind: 'allow', entry: 'boss@corp.test' });
    assert.equal((await rcptReply('stranger@elsewhere.test', open.address)).code, 550);
    assert.equal((await rcptReply('BOSS@corp.test', open.address)).code, 250);
    assert.equal((await rcptReply('boss@corp.test', closed.address)).code, 250, 'account-wide entries count for the inbox too');
    // Block wins over allow.
    const block = await addEntry({ direction: 'receive', kind: 'block', entry: 'corp.test', inboxId: open.id });
    assert.equal((await rcptReply('boss@corp.test', open.address)).code, 550);
    for (const e of [allow, wide, block]) await removeEntry(e.id);
    assert.equal((await rcptReply('stranger@elsewhere.test', closed.address)).code, 250);
  });
});

describe('the lists a node remembers', () => {
  test('the entries that apply are read once and remembered until a list changes through mailroom', async () => {
    const box = await inbox('remembered');
    assert.equal((await rcptReply('sneaky@behind.test', box.address)).code, 250);
    // An entry written behind mailroom's back (no API, no announcement) is not read at once...
    const [[accountId]] = await rawRows<[string]>(t.server.ctx.db, 'SELECT account_id FROM inboxes WHERE id = ?', [box.id]);
    await rawRun(
      t.server.ctx.db,
      `INSERT INTO list_entries (id, account_id, inbox_id, direction, kind, entry, require_auth, created_at) VALUES ('lst_behind', ?, ?, 'receive', 'block', 'behind.test', 0, ?)`,
      [accountId, box.id, new Date().toISOString()],
    );
    assert.equal((await rcptReply('sneaky@behind.test', box.address)).code, 250, 'the remembered (empty) list was read again');
    // ...but any change through the API has every list read again.
    const other = await addEntry({ direction: 'send', kind: 'block', entry: 'unrelated.test' });
    assert.equal((await rcptReply('sneaky@behind.test', box.address)).code, 550);
    await rawRun(t.server.ctx.db, "DELETE FROM list_entries WHERE id = 'lst_behind'");
    await removeEntry(other.id);
    assert.equal((await rcptReply('sneaky@behind.test', box.address)).code, 250);
  });
});

describe('send lists', () => {
  test('send, reply and forward to a blocked recipient (To, Cc or Bcc) are 403 RECIPIENT_BLOCKED naming it; nothing stored or queued', async () => {
    const box = await inbox('sender');
    const received = await deliverMail(t.server.smtpPort, { from: 'customer@blocked.test', to: box.address, subject: 'question', text: '?' });
    await settleJobs(t.server.ctx);
    const entry = await addEntry({ direction: 'send', kind: 'block', entry: 'blocked.test', inboxId: box.id });
    const before = await dbDigest(t.server.ctx);
    for (const field of ['to', 'cc', 'bcc']) {
      const body: Record<string, unknown> = { to: ['ok@fine.test'], subject: 's', bodyText: 'b', [field]: ['Someone <Someone@Blocked.test>'] };
      if (field === 'to') body.to = ['ok@fine.test', 'Someone <Someone@Blocked.test>'];
      const res = await t.api('POST', `/inboxes/${box.id}/messages`, body);
      expectError(res, 403, 'RECIPIENT_BLOCKED');
      assert.match(res.body.error.message, /Someone@blocked\.test/i);
    }
    expectError(await t.api('POST', `/messages/${received}/reply`, { bodyText: 'answer' }), 403, 'RECIPIENT_BLOCKED');
    expectError(await t.api('POST', `/messages/${received}/forward`, { to: ['x@sub.blocked.test'] }), 403, 'RECIPIENT_BLOCKED');
    assert.equal(await dbDigest(t.server.ctx), before, 'a refused send changed the database');
    // Another inbox of the account is not covered by this inbox's entry.
    const other = await inbox('sender-two');
    assert.equal((await t.api('POST', `/inboxes/${other.id}/messages`, { to: ['x@blocked.test'], subject: 's', bodyText: 'b' })).status, 202);
    await removeEntry(entry.id);
    assert.equal((await t.api('POST', `/messages/${received}/reply`, { bodyText: 'answer' })).status, 202);
    await settleJobs(t.server.ctx);
  });

  test('a non-empty send-allow list: only its entries may be written to', async () => {
    const box = await inbox('restricted');
    const allow = await addEntry({ direction: 'send', kind: 'allow', entry: 'partner.test', inboxId: box.id });
    assert.equal((await t.api('POST', `/inboxes/${box.id}/messages`, { to: ['a@partner.test', 'b@eu.partner.test'], subject: 's', bodyText: 'b' })).status, 202);
    const res = await t.api('POST', `/inboxes/${box.id}/messages`, { to: ['a@partner.test'], cc: ['leak@competitor.test'], subject: 's', bodyText: 'b' });
    expectError(res, 403, 'RECIPIENT_BLOCKED');
    assert.match(res.body.error.message, /leak@competitor\.test/);
    await removeEntry(allow.id);
    await settleJobs(t.server.ctx);
  });

  test('receive lists apply to mail from a neighbour inbox: the local recipient is bounced 550 5.7.1', async () => {
    const from = await inbox('neighbour-sender');
    const to = await inbox('neighbour-receiver');
    const entry = await addEntry({ direction: 'receive', kind: 'block', entry: from.address, inboxId: to.id });
    const sent = await t.api('POST', `/inboxes/${from.id}/messages`, { to: [to.address], subject: 'hi', bodyText: 'b' });
    assert.equal(sent.status, 202);
    await settleJobs(t.server.ctx);
    const msg = (await t.api('GET', `/messages/${sent.body.id}`)).body;
    assert.equal(msg.status, 'bounced');
    assert.equal(msg.recipients[0].status, 'bounced');
    assert.match(msg.recipients[0].response, /^550 5\.7\.1 /);
    assert.equal((await t.api('GET', `/inboxes/${to.id}/messages`)).body.total, 0);
    await removeEntry(entry.id);
  });
});

describe('allow entries and sender authentication (the header From, SPF/DKIM/DMARC)', () => {
  let a: TestServer;
  let spooling: TestServer;
  let dns: TestDns;
  before(async () => {
    dns = await startTestDns();
    const settings = { dns: { servers: [dns.server], timeout: '1s' }, limits: { requests_per_minute: 100_000 } };
    [a, spooling] = await Promise.all([startTestServer(settings), startTestServer({ ...settings, smtp: { inline_processing: 0 } })]);
    // friends.test: loopback may send for it (SPF pass, so aligned for a From at friends.test), DMARC published.
    dns.set('friends.test', [{ type: 'TXT', value: 'v=spf1 ip4:127.0.0.1 -all' }]);
    dns.set('_dmarc.friends.test', [{ type: 'TXT', value: 'v=DMARC1; p=reject' }]);
    // strict.test: nobody may send for it (SPF fail), and it signs nothing.
    dns.set('strict.test', [{ type: 'TXT', value: 'v=spf1 -all' }]);
  });
  after(async () => {
    await Promise.all([a?.close(), spooling?.close()]);
    await dns?.close();
  });

  const entryOn = async (server: TestServer, body: Record<string, unknown>) => {
    const res = await server.api('POST', '/lists', body);
    assert.equal(res.status, 201, res.text);
    return res.body;
  };
  const storedIn = async (server: TestServer, inboxId: string) => (await server.api('GET', `/inboxes/${inboxId}/messages`)).body.total as number;
  /** One whole transaction over a real session: the reply to RCPT if refused, else the end of DATA. */
  async function deliverRaw(server: TestServer, mailFrom: string, headerFrom: string, to: string) {
    const { client } = await SmtpClient.open(server.server.smtpPort);
    try {
      assert.equal((await client.cmd('EHLO mail.friends.test')).code, 250);
      return await client.send(mailFrom, [to], Buffer.from(`From: ${headerFrom}\r\nTo: ${to}\r\nSubject: hello\r\nMessage-ID: <${Math.random()}@x>\r\n\r\nhi\r\n`));
    } finally {
      await client.quit();
    }
  }
  const REFUSED = { code: 550, text: '5.7.1 sender not accepted by this mailbox (blocked, or not on its allow list)' };

  test('the API: requireAuth defaults to true on receive allow entries, can be turned off, is false on other entries, and is refused on them', async () => {
    const box = (await a.api('POST', '/inboxes', { address: 'api-auth' })).body;
    const strict = await entryOn(a, { direction: 'receive', kind: 'allow', entry: 'x@strict.test', inboxId: box.id });
    assert.equal(strict.requireAuth, true);
    const loose = await entryOn(a, { direction: 'receive', kind: 'allow', entry: 'y@strict.test', inboxId: box.id, requireAuth: false });
    assert.equal(loose.requireAuth, false);
    const block = await entryOn(a, { direction: 'receive', kind: 'block', entry: 'z@strict.test', inboxId: box.id });
    assert.equal(block.requireAuth, false);
    expectError(await a.api('POST', '/lists', { direction: 'send', kind: 'allow', entry: 'q@strict.test', requireAuth: true }), 400, 'VALIDATION_ERROR');
    expectError(await a.api('POST', '/lists', { direction: 'receive', kind: 'allow', entry: 'q@strict.test', requireAuth: 'yes' }), 400, 'VALIDATION_ERROR');
    const listed = (await a.api('GET', `/lists?inboxId=${box.id}`)).body.data;
    assert.deepEqual(Object.fromEntries(listed.map((e: any) => [e.entry, e.requireAuth])), { 'x@strict.test': true, 'y@strict.test': false, 'z@strict.test': false });
    for (const e of [strict, loose, block]) assert.equal((await a.api('DELETE', `/lists/${e.id}`)).status, 204);
  });

  test('the allowed address typed into MAIL FROM and From without authentication: 550 5.7.1 at the end of DATA, nothing stored; authenticated mail from an allowed sender gets in', async () => {
    const box = (await a.api('POST', '/inboxes', { address: 'guarded-auth' })).body;
    const boss = await entryOn(a, { direction: 'receive', kind: 'allow', entry: 'boss@strict.test', inboxId: box.id });
    const friend = await entryOn(a, { direction: 'receive', kind: 'allow', entry: 'friends.test', inboxId: box.id });
    // Forged: SPF fails for strict.test, and nothing signs it.
    assert.deepEqual(await deliverRaw(a, 'boss@strict.test', 'boss@strict.test', box.address), REFUSED);
    // The envelope is an authenticated allowed sender, but the From the reader sees is the
    // allowed boss, which that envelope does not prove.
    assert.deepEqual(await deliverRaw(a, 'someone@friends.test', 'Boss <boss@strict.test>', box.address), REFUSED);
    assert.equal(await storedIn(a, box.id), 0);
    // SPF pass for friends.test, aligned with the From: in.
    const ok = await deliverRaw(a, 'someone@friends.test', 'Someone <someone@friends.test>', box.address);
    assert.equal(ok.code, 250, ok.text);
    assert.equal(await storedIn(a, box.id), 1);
    for (const e of [boss, friend]) assert.equal((await a.api('DELETE', `/lists/${e.id}`)).status, 204);
  });

  test('a DKIM signature counts only when it is aligned with the From domain', async () => {
    const box = (await a.api('POST', '/inboxes', { address: 'dkim-auth' })).body;
    // signed.test publishes a DKIM key, and no SPF or DMARC.
    const keys = generateKeyPairSync('rsa', { modulusLength: 2048 });
    dns.set('sel1._domainkey.signed.test', [{ type: 'TXT', value: `v=DKIM1; k=rsa; p=${keys.publicKey.export({ type: 'spki', format: 'der' }).toString('base64')}` }]);
    dns.set('sel1._domainkey.friends.test', [{ type: 'TXT', value: `v=DKIM1; k=rsa; p=${keys.publicKey.export({ type: 'spki', format: 'der' }).toString('base64')}` }]);
    const ceo = await entryOn(a, { direction: 'receive', kind: 'allow', entry: 'ceo@signed.test', inboxId: box.id });
    // The envelope is friends.test's (SPF pass there, so it passes RCPT), not signed.test's.
    const relay = await entryOn(a, { direction: 'receive', kind: 'allow', entry: 'friends.test', inboxId: box.id });
    const signedBy = async (domainName: string) => {
      const transport = nodemailer.createTransport({
        host: '127.0.0.1',
        port: a.server.smtpPort,
        secure: false,
        ignoreTLS: true,
        dkim: { domainName, keySelector: 'sel1', privateKey: keys.privateKey.export({ type: 'pkcs1', format: 'pem' }).toString() },
      });
      try {
        return await transport.sendMail({ envelope: { from: 'relay@friends.test', to: [box.address] }, from: 'ceo@signed.test', to: box.address, subject: `signed by ${domainName}`, text: 'x' });
      } finally {
        transport.close();
      }
    };
    // Signed by friends.test: a valid signature, and SPF passes, but neither is the From's domain.
    await assert.rejects(signedBy('friends.test'), (err: any) => err.responseCode === 550 && /^5\.7\.1 /.test(err.response.slice(4)));
    assert.equal(await storedIn(a, box.id), 0);
    // Signed by signed.test itself: aligned, in.
    const info = await signedBy('signed.test');
    assert.match(info.response, /^250 /);
    assert.equal(await storedIn(a, box.id), 1);
    for (const e of [ceo, relay]) assert.equal((await a.api('DELETE', `/lists/${e.id}`)).status, 204);
  });

  test('an allow entry with requireAuth false matches the envelope or the From unauthenticated, as before', async () => {
    const box = (await a.api('POST', '/inboxes', { address: 'loose-auth' })).body;
    const loose = await entryOn(a, { direction: 'receive', kind: 'allow', entry: 'boss@strict.test', inboxId: box.id, requireAuth: false });
    const res = await deliverRaw(a, 'boss@strict.test', 'boss@strict.test', box.address);
    assert.equal(res.code, 250, res.text);
    assert.equal(await storedIn(a, box.id), 1);
    assert.equal((await a.api('DELETE', `/lists/${loose.id}`)).status, 204);
  });

  test('a block entry matches the header From too: another envelope does not get it past', async () => {
    const box = (await a.api('POST', '/inboxes', { address: 'blocked-from' })).body;
    const block = await entryOn(a, { direction: 'receive', kind: 'block', entry: 'pest@strict.test', inboxId: box.id });
    assert.deepEqual(await deliverRaw(a, 'someone@friends.test', 'pest@strict.test', box.address), REFUSED);
    assert.equal(await storedIn(a, box.id), 0);
    assert.equal((await a.api('DELETE', `/lists/${block.id}`)).status, 204);
  });

  test('spooled mail (answered 250 before it is read) that the allow list refuses is dropped, never stored', async () => {
    const box = (await spooling.api('POST', '/inboxes', { address: 'spooled-auth' })).body;
    const boss = await entryOn(spooling, { direction: 'receive', kind: 'allow', entry: 'boss@strict.test', inboxId: box.id });
    const forged = await deliverRaw(spooling, 'boss@strict.test', 'boss@strict.test', box.address);
    assert.equal(forged.code, 250, forged.text);
    assert.match(forged.text, /queued as/);
    await settleJobs(spooling.server.ctx);
    assert.equal(await storedIn(spooling, box.id), 0);
    const spooled = await rawRows<[number]>(spooling.server.ctx.db, 'SELECT count(*) FROM spooled_messages');
    assert.equal(Number(spooled[0]![0]), 0, 'the refused message is not kept in the spool');
    assert.equal((await spooling.api('DELETE', `/lists/${boss.id}`)).status, 204);
  });
});

// IMAP bounds and hostile input (docs/imap.md "Bounds", docs/security.md): a revoked key's session
// ends; connections per address and sessions per account; the longest line and literal; bad
// commands get BAD, never a crash; STARTTLS and implicit TLS; and a folder of 10,000 messages
// is listed, searched and fetched whole in bounded memory (a bound, not a speed claim).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { ImapFlow } from 'imapflow';
import { createApiKey, revokeApiKey } from '../../src/domain/accounts/apikeys.ts';
import type { ImapService } from '../../src/imap/server.ts';
import { newId } from '../../src/ids.ts';
import { renderMetrics } from '../../src/metrics.ts';
import { describeStartup, renderStartup } from '../../src/startup.ts';
import { imapPort, RawImap, taggedLine } from '../support/imap.ts';
import { deliverMail } from '../support/mail.ts';
import { peerSkip, toolMissing } from '../support/peers.ts';
import { startTestServer, type TestServer } from '../support/server.ts';

const NO_OPENSSL = peerSkip(toolMissing('openssl', ['version'], 'openssl'));

describe('IMAP bounds', () => {
  let t: TestServer;
  let address: string;
  let inboxId: string;

  before(async () => {
    t = await startTestServer({ imap: { listen: '127.0.0.1:0', connections_per_account: 2, max_literal_bytes: 1024, max_line_bytes: 1024 } });
    const inbox = (await t.api('POST', '/inboxes', { address: 'bounds' })).body;
    address = inbox.address;
    inboxId = inbox.id;
    await deliverMail(t.server.smtpPort, { from: 'ann@example.org', to: address, subject: 'one', text: 'x' });
  });
  after(() => t?.close());

  const login = async (key = t.key) => {
    const c = await RawImap.open(imapPort(t));
    const answer = await c.command('l', `LOGIN ${address} ${key}`);
    return { c, answer: taggedLine(answer, 'l') };
  };

  test('a revoked key ends its session (IDLE included) with BYE', async () => {
    const key = await createApiKey(t.server.ctx, t.accountId, { name: 'to revoke' });
    const { c, answer } = await login(key.key);
    assert.match(answer, /^l OK/);
    await c.command('s', 'SELECT INBOX');
    c.send('i IDLE\r\n');
    await c.until((text) => text.includes('+ idling'));
    await revokeApiKey(t.server.ctx, t.accountId, key.id);
    const rest = await c.ended();
    assert.match(rest, /^\* BYE the API key of this session was revoked or expired/m);
    assert.ok(c.closed);
  });

  test('sessions per account: the next LOGIN gets NO [LIMIT]; one leaving frees its place', async () => {
    const a = await login();
    const b = await login();
    const third = await login();
    assert.equal(third.answer, 'l NO [LIMIT] at most 2 IMAP sessions of an account at once');
    a.c.close();
    b.c.close();
    third.c.close();
  });

  test('a literal over max_literal_bytes gets NO [TOOBIG] (non-synchronizing: BYE); a line over max_line_bytes: BYE', async () => {
    const { c } = await login();
    c.send('a APPEND Drafts {5000}\r\n');
    assert.equal(taggedLine(await c.until((x) => /^a /m.test(x)), 'a'), 'a NO [TOOBIG] literal of 5000 bytes is over the 1024 byte limit');
    // The session goes on.
    assert.match(taggedLine(await c.command('n', 'NOOP'), 'n'), /^n OK/);
    c.send('b APPEND Drafts {5000+}\r\n');
    assert.match(await c.ended(), /^\* BYE literal of 5000 bytes is over the 1024 byte limit/m);
    const d = (await login()).c;
    d.send(`x ${'A'.repeat(3000)}`);
    assert.match(await d.ended(), /^\* BYE command line too long/m);
  });

  test('bad commands get BAD, refusals NO with their code, and the session goes on', async () => {
    const c = await RawImap.open(imapPort(t));
    assert.match(taggedLine(await c.command('a', 'SELECT INBOX'), 'a'), /^a BAD log in first/);
    assert.match(taggedLine(await c.command('b', 'LOGIN "unclosed'), 'b'), /^b BAD/);
    assert.match(taggedLine(await c.command('c', `LOGIN ${address} ${t.key}`), 'c'), /^c OK/);
    assert.match(taggedLine(await c.command('d', 'FROB'), 'd'), /^d BAD unknown command FROB/);
    assert.match(taggedLine(await c.command('e', 'FETCH 1 FLAGS'), 'e'), /^e BAD select a folder first/);
    assert.match(taggedLine(await c.command('f', 'SELECT nosuch/Folder'), 'f'), /^f NO \[NONEXISTENT\]/);
    await c.command('g', 'SELECT INBOX');
    assert.match(taggedLine(await c.command('h', 'FETCH 0 FLAGS'), 'h'), /^h BAD not a sequence set: 0/);
    assert.match(taggedLine(await c.command('i', 'FETCH 1 (FLAGS NOSUCH)'), 'i'), /^i BAD unknown FETCH item NOSUCH/);
    assert.match(taggedLine(await c.command('j', 'STORE 1 +FLAGS (Not/A/Label)'), 'j'), /^j BAD keyword Not\/A\/Label is not a label name/);
    assert.match(taggedLine(await c.command('k', 'SEARCH FROBNICATE'), 'k'), /^k BAD unknown SEARCH criterion FROBNICATE/);
    assert.match(taggedLine(await c.command('l', 'SEARCH SINCE yesterday'), 'l'), /^l BAD not a date/);
    assert.match(taggedLine(await c.command('m', 'COPY 1 INBOX'), 'm'), /^m NO \[CANNOT\]/);
    assert.match(taggedLine(await c.command('mv', 'MOVE 1 somelabel'), 'mv'), /^mv NO \[CANNOT\] messages move only into Trash/);
    assert.match(taggedLine(await c.command('n', 'RENAME a b'), 'n'), /^n NO \[CANNOT\]/);
    const fetched = await c.command('o', 'FETCH 1 (UID FLAGS)');
    assert.match(fetched, /^\* 1 FETCH \(UID 1 FLAGS \(\)\)/m);
    assert.match(taggedLine(await c.command('p', 'LOGOUT'), 'p'), /^p OK/);
    await c.ended();
  });

  test('LIST wildcards and sequence sets of any shape: exact answers, hostile ones at once', async () => {
    const { c } = await login();
    await c.command('c1', 'CREATE pattern-a');
    await c.command('c2', 'CREATE pattern-b');
    assert.equal(await c.command('a', 'LIST "" "pattern-%"'), '* LIST (\\HasNoChildren) "/" "pattern-a"\r\n* LIST (\\HasNoChildren) "/" "pattern-b"\r\na OK LIST completed\r\n');
    assert.equal(await c.command('b', 'LIST "" "inbox%"'), '* LIST (\\HasNoChildren) "/" "INBOX"\r\nb OK LIST completed\r\n');
    // 200 wildcards backtracked for minutes as a regular expression.
    assert.equal(await c.command('d', `LIST "" "${'*'.repeat(200)}b"`), '* LIST (\\HasNoChildren) "/" "pattern-b"\r\nd OK LIST completed\r\n');
    assert.equal(await c.command('e', `LSUB "" "${'*%'.repeat(150)}x"`), 'e OK LSUB completed\r\n');
    await c.command('s', 'SELECT INBOX');
    assert.equal(await c.command('f', 'FETCH 1:*,*:1,1,1 (UID)'), '* 1 FETCH (UID 1)\r\nf OK FETCH completed\r\n');
    assert.equal(await c.command('g', 'UID FETCH 9:2,1 (UID)'), '* 1 FETCH (UID 1)\r\ng OK UID FETCH completed\r\n');
    assert.equal(await c.command('h', 'UID SEARCH UID 2:*'), '* SEARCH 1\r\nh OK UID SEARCH completed\r\n');
    await c.command('c3', 'DELETE pattern-a');
    await c.command('c4', 'DELETE pattern-b');
    c.close();
  });

  test('malformed commands each get a tagged BAD or NO, and the session still answers', async () => {
    const c = await RawImap.open(imapPort(t));
    await c.command('l', `LOGIN ${address} ${t.key}`);
    await c.command('s', 'SELECT INBOX');
    const hostile = [
      'FETCH 1 (BODY[)',
      'FETCH 1 BODY[99.1]',
      'FETCH 1 BODY[HEADER.FIELDS]',
      'FETCH 1 (BINARY[1.MIME])',
      'FETCH',
      'FETCH 1',
      'FETCH 4294967296:* FLAGS',
      'SEARCH',
      'SEARCH OR SEEN',
      'SEARCH NOT',
      'SEARCH HEADER',
      'SEARCH LARGER abc',
      'SEARCH CHARSET KOI8-R ALL',
      'SEARCH ((((((((((((((((((((ALL))))))))))))))))))))',
      'STORE 1 FLAGS',
      'STORE 1 NOSUCH (\\Seen)',
      'UID',
      'UID FROB 1',
      'COPY',
      'MOVE 1',
      'LIST',
      'LIST "" ("INBOX"',
      'STATUS INBOX',
      'STATUS INBOX (NOSUCH)',
      'SELECT',
      'APPEND',
      'APPEND Drafts',
      'AUTHENTICATE',
      'LOGIN a',
      'ENABLE',
      'IDLE extra',
      'CREATE',
      'CREATE UPPER',
      'DELETE INBOX',
      '"quoted" NOOP',
      'x'.repeat(300),
    ];
    for (const [i, line] of hostile.entries()) {
      const answer = taggedLine(await c.command(`h${i}`, line), `h${i}`);
      assert.match(answer, new RegExp(`^h${i} (BAD|NO|OK)`), `${line} → ${answer}`);
      assert.doesNotMatch(answer, /SERVERBUG/, `${line} → ${answer}`);
      if (process.env.SHOW) console.log(`# ${line.slice(0, 40)} → ${answer}`);
    }
    assert.match(taggedLine(await c.command('z', 'NOOP'), 'z'), /^z OK/);
    c.close();
  });

  test('deeply nested SEARCH criteria and a sequence set of 20,000 ranges within the default line length: BAD, not a crash', async () => {
    const wide = await startTestServer({ imap: { listen: '127.0.0.1:0' } });
    try {
      const who = (await wide.api('POST', '/inboxes', { address: 'nested' })).body.address;
      const c = await RawImap.open(imapPort(wide));
      await c.command('l', `LOGIN ${who} ${wide.key}`);
      await c.command('s', 'SELECT INBOX');
      for (const [tag, line] of [
        ['p', `SEARCH ${'('.repeat(30000)}ALL${')'.repeat(30000)}`],
        ['n', `SEARCH ${'NOT '.repeat(15000)}ALL`],
        ['o', `SEARCH ${'OR ALL '.repeat(9000)}ALL`],
      ]) {
        const answer = taggedLine(await c.command(tag, line), tag);
        assert.match(answer, new RegExp(`^${tag} BAD`), answer);
        assert.doesNotMatch(answer, /SERVERBUG/);
      }
      // A sequence set of 20,000 ranges (folder size times ranges was the work): refused.
      assert.equal(taggedLine(await c.command('q', `FETCH ${'1,'.repeat(19_999)}1 FLAGS`), 'q'), 'q BAD sequence set of 20000 ranges is over the 10000 range limit');
      assert.match(taggedLine(await c.command('z', 'NOOP'), 'z'), /^z OK/);
      c.close();
    } finally {
      await wide.close();
    }
  });

  test('failed logins: past 5 for one user from one address, NO [UNAVAILABLE] even with the right key', async () => {
    const small = await startTestServer({ imap: { listen: '127.0.0.1:0' } });
    try {
      const who = (await small.api('POST', '/inboxes', { address: 'guessed' })).body.address;
      const c = await RawImap.open(imapPort(small));
      for (let i = 0; i < 5; i++) assert.equal(taggedLine(await c.command(`f${i}`, `LOGIN ${who} mr_live_wrong${i}`), `f${i}`), `f${i} NO [AUTHENTICATIONFAILED] authentication credentials invalid`);
      assert.equal(taggedLine(await c.command('g', `LOGIN ${who} ${small.key}`), 'g'), 'g NO [UNAVAILABLE] too many failed logins for this user from your address, try again later');
      c.close();
      const metrics = await renderMetrics(small.server.ctx);
      assert.match(metrics, /^mailroom_imap_logins_total\{result="rejected"\} 5$/m);
      assert.match(metrics, /^mailroom_imap_logins_total\{result="rate_limited"\} 1$/m);
    } finally {
      await small.close();
    }
  });

  test('a key without send opens folders read-only; without manage, EXPUNGE is refused', async () => {
    const first = (await t.api('GET', `/inboxes/${inboxId}/messages`)).body.data[0];
    await t.api('PATCH', `/messages/${first.id}`, { unread: true });
    const readOnly = await createApiKey(t.server.ctx, t.accountId, { name: 'reader', scopes: ['read'] });
    const { c } = await login(readOnly.key);
    assert.match(taggedLine(await c.command('s', 'SELECT INBOX'), 's'), /^s OK \[READ-ONLY\]/);
    assert.match(taggedLine(await c.command('t', 'STORE 1 +FLAGS (\\Seen)'), 't'), /^t NO \[READ-ONLY\]/);
    // A FETCH of the body does not mark it read.
    await c.command('f', 'FETCH 1 BODY[]');
    const api = (await t.api('GET', `/inboxes/${inboxId}/messages`)).body.data[0];
    assert.equal(api.unread, true);
    c.close();
    const sender = await createApiKey(t.server.ctx, t.accountId, { name: 'sender', scopes: ['read', 'send'] });
    const s = (await login(sender.key)).c;
    await s.command('s', 'SELECT INBOX');
    await s.command('d', 'STORE 1 +FLAGS (\\Deleted)');
    assert.match(taggedLine(await s.command('e', 'EXPUNGE'), 'e'), /^e NO \[NOPERM\] this API key lacks the `manage` scope/);
    s.close();
  });
});

describe('IMAP connection limits', () => {
  test('connections per address: past the limit, BYE at once', async () => {
    const small = await startTestServer({ imap: { listen: '127.0.0.1:0', max_connections_per_ip: 4 } });
    try {
      const open = [];
      for (let i = 0; i < 4; i++) open.push(await RawImap.open(imapPort(small)));
      const extra = await RawImap.open(imapPort(small));
      assert.ok(extra.greeting.startsWith('* BYE too many connections'), extra.greeting);
      await extra.ended();
      for (const c of open) c.close();
    } finally {
      await small.close();
    }
  });
});

describe('IMAP over TLS', { skip: NO_OPENSSL }, () => {
  let t: TestServer;
  let dir: string;
  let address: string;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'mailroom-imap-tls-'));
    const cert = join(dir, 'cert.pem');
    const key = join(dir, 'key.pem');
    execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-keyout', key, '-out', cert, '-days', '1', '-subj', '/CN=localhost'], {
      stdio: 'ignore',
    });
    t = await startTestServer({ smtp: { tls_cert: cert, tls_key: key }, imap: { listen: '127.0.0.1:0', tls_listen: '127.0.0.1:0' } });
    address = (await t.api('POST', '/inboxes', { address: 'tls' })).body.address;
    await deliverMail(t.server.smtpPort, { from: 'ann@example.org', to: address, subject: 'over tls', text: 'x' });
  });
  after(async () => {
    await t?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  test('the start-up block names both IMAP listeners', async () => {
    const service = t.server.services.find((s) => s.name === 'imap') as ImapService;
    const bound = { httpUrl: t.url, smtpPort: t.server.smtpPort, submissionPort: 0, metricsPort: 0, services: [], imapPort: service.port, imapTlsPort: service.tlsPort };
    const block = renderStartup(await describeStartup(t.server.ctx, bound, undefined));
    assert.match(block, new RegExp(`^  IMAP +127\\.0\\.0\\.1:${service.port} \\(STARTTLS\\), 127\\.0\\.0\\.1:${service.tlsPort} \\(TLS\\)$`, 'm'));
  });

  for (const mode of ['STARTTLS', 'implicit TLS'] as const) {
    test(`imapflow reads mail over ${mode}`, async () => {
      const service = t.server.services.find((s) => s.name === 'imap') as ImapService;
      const c = new ImapFlow({
        host: '127.0.0.1',
        port: mode === 'STARTTLS' ? service.port : service.tlsPort,
        secure: mode !== 'STARTTLS',
        doSTARTTLS: mode === 'STARTTLS' ? true : undefined,
        tls: { rejectUnauthorized: false },
        auth: { user: address, pass: t.key },
        logger: false,
      });
      c.on('error', () => undefined);
      await c.connect();
      try {
        assert.equal(c.secureConnection, true);
        await c.mailboxOpen('INBOX');
        const m = await c.fetchOne('1', { envelope: true });
        assert.equal(m && m.envelope?.subject, 'over tls');
      } finally {
        await c.logout();
      }
    });
  }
});

describe('IMAP: a folder of 10,000 messages', () => {
  let t: TestServer;
  let address: string;
  const COUNT = 10_000;
  /** Each source is 16 KiB: the whole folder is 160 MiB, which a FETCH must not hold. */
  const SOURCE_BYTES = 16 * 1024;

  before(async () => {
    t = await startTestServer({ imap: { listen: '127.0.0.1:0' } });
    const inbox = (await t.api('POST', '/inboxes', { address: 'bulk' })).body;
    address = inbox.address;
    const ctx = t.server.ctx;
    const head = `From: bulk@example.org\r\nTo: ${address}\r\nSubject: bulk\r\nMessage-ID: <bulk@example.org>\r\n\r\n`;
    const source = Buffer.from(head + 'x'.repeat(SOURCE_BYTES - head.length - 2) + '\r\n');
    await ctx.blobs.write('raw/imap-bulk.eml', source);
    const now = new Date().toISOString();
    const threadId = newId('thr', Date.now());
    // One statement seeds the rows (every message shares one stored source).
    await ctx.store.transaction(async (tx) => {
      await ctx.store.run(tx, 'INSERT INTO threads (id, account_id, inbox_id, subject, message_count, last_message_at, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)', [
        threadId,
        t.accountId,
        inbox.id,
        'bulk',
        COUNT,
        now,
        now,
      ]);
      await ctx.store.run(
        tx,
        `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ${COUNT})
         INSERT INTO messages (id, account_id, inbox_id, thread_id, direction, from_address, subject, status, message_id_header, raw_path, size, unread, created_at, updated_at)
         SELECT 'msg_bulk' || CAST(i AS text), ?, ?, ?, 'inbound', 'bulk@example.org', 'bulk', 'received', '<bulk' || CAST(i AS text) || '@example.org>', ?, ?, 1, ?, ? FROM n`,
        [t.accountId, inbox.id, threadId, 'raw/imap-bulk.eml', source.length, now, now],
      );
    });
  });
  after(() => t?.close());

  test('SELECT, STATUS, UID SEARCH and FETCH of every source hold a bounded amount of memory', async () => {
    const c = await RawImap.open(imapPort(t), 4096);
    await c.command('l', `LOGIN ${address} ${t.key}`);
    const selected = await c.command('s', 'SELECT INBOX');
    assert.match(selected, new RegExp(`^\\* ${COUNT} EXISTS`, 'm'));
    assert.match(taggedLine(await c.command('t', 'STATUS INBOX (MESSAGES UNSEEN UIDNEXT)'), 't'), /^t OK/);
    // Live memory, not garbage: each sample follows a full collection.
    gc();
    const base = used();
    let peak = base;
    const sampler = setInterval(() => {
      gc();
      peak = Math.max(peak, used());
    }, 1000);
    try {
      const searched = await c.command('u', 'UID SEARCH UNSEEN');
      assert.match(taggedLine(searched, 'u'), /^u OK/);
      const before = c.received;
      const answer = await c.command('f', 'FETCH 1:* (UID FLAGS RFC822.SIZE ENVELOPE BODY.PEEK[])');
      assert.match(taggedLine(answer, 'f'), /^f OK/);
      assert.ok(c.received - before > COUNT * SOURCE_BYTES, 'every source was sent');
    } finally {
      clearInterval(sampler);
    }
    const grew = peak - base;
    // Bounded: a few batches of rows and sources, not the 160 MiB folder.
    assert.ok(grew < 48 * 1024 * 1024, `memory grew by ${Math.round(grew / 1048576)} MiB during the FETCH`);
    console.log(`# live memory grew by ${(grew / 1048576).toFixed(1)} MiB while ${Math.round(c.received / 1048576)} MiB were fetched`);
    c.close();
  });
});

/** Heap and Buffer memory of this process (the server runs in it). */
const used = () => {
  const m = process.memoryUsage();
  return m.heapUsed + m.arrayBuffers;
};
setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

// mailroom with the MTAs that carry most of the internet's mail, in both directions: Debian's
// Postfix and Exim (test/support/mta.ts runs a private instance of each on loopback).
//  - in: 200 messages queued at the MTA and handed to mailroom over reused connections (fewer
//    SMTP sessions at mailroom's listener than messages, several messages in one session) are
//    stored exactly once each, with no deferral in the MTA's log; Exim pipelines "." with QUIT
//    and half-closes before mailroom's replies, seen in the bytes on the wire; the same message
//    redelivered after a lost reply is stored once;
//  - out: a send reaches the MTA over STARTTLS, DKIM-signed; a recipient the MTA bounces later
//    comes back as the MTA's own DSN at the per-recipient bounce address and marks the message
//    bounced with the MTA's diagnostic; a 450 greylist is retried to success;
//  - the versions README's "Tested with" table names are the installed ones (major.minor).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createServer, connect, type AddressInfo } from 'node:net';
import { join } from 'node:path';
import { eq } from 'drizzle-orm';
import { events } from '../../src/store/schema.ts';
import { dkimTxtValue, publishedKeyFor } from '../../src/domain/domains/dkim-keys.ts';
import { smtpTransport } from '../support/mail.ts';
import { EXIM_ROOT, eximMissing, postfixMissing, startExim, startPostfix, type Mta, type MtaOptions } from '../support/mta.ts';
import { startTestDns, type TestDns } from '../support/dns.ts';
import { SmtpClient } from '../support/smtp-client.ts';
import { expectError, startTestServer, type TestServer } from '../support/server.ts';
import { guard, until } from '../support/wait.ts';
import { peerSkip } from '../support/peers.ts';
import { sqlDb } from '../support/db.ts';

const PARTNERS: Array<{ name: string; missing: () => string | false; start: (o: MtaOptions) => Promise<Mta> }> = [
  { name: 'Postfix', missing: postfixMissing, start: startPostfix },
  { name: 'Exim', missing: eximMissing, start: startExim },
];

const MESSAGES = 200;

const CLIENT_FIN = '\u0000client FIN\u0000';
const SERVER = '\u0000server:';

/**
 * A TCP relay between the MTA and mailroom's SMTP port that keeps each session's bytes in order:
 * the client's as they are, the server's after SERVER, and each side's half-close (FIN) as it
 * comes. Half-closes are passed on (allowHalfOpen), so mailroom sees what the MTA does.
 */
async function startRelay(target: number): Promise<{ port: number; sessions: string[][]; close(): void }> {
  const sessions: string[][] = [];
  const server = createServer({ allowHalfOpen: true }, (client) => {
    const log: string[] = [];
    sessions.push(log);
    const upstream = connect({ port: target, host: '127.0.0.1', allowHalfOpen: true });
    client.on('data', (d) => void (log.push(d.toString('latin1')), upstream.write(d)));
    client.on('end', () => void (log.push(CLIENT_FIN), upstream.end()));
    upstream.on('data', (d) => void (log.push(SERVER + d.toString('latin1')), client.write(d)));
    upstream.on('end', () => client.end());
    // A side that closed for good (Exim closes once it has its replies) resets the other.
    for (const s of [client, upstream]) s.on('error', () => void (client.destroy(), upstream.destroy()));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { port: (server.address() as AddressInfo).port, sessions, close: () => server.close() };
}

for (const partner of PARTNERS) {
  const skip = peerSkip(partner.missing());
  // A peer that stops answering fails the suite in minutes instead of holding CI.
  describe(`${partner.name} as a peer`, { skip, timeout: guard(240_000) }, () => {
    let t: TestServer;
    let dns: TestDns;
    let mta: Mta;
    let relay: Awaited<ReturnType<typeof startRelay>>;
    let metricsUrl: string;
    let inbox: { id: string; address: string };

    before(async () => {
      dns = await startTestDns();
      // mailroom's outbound goes to the MTA's port; the MTA's mail for agents.test comes back.
      t = await startTestServer({
        outbound: { mode: 'email', mx_port: 1, retry_schedule: ['1s', '1s', '1s', '2s', '2s', '5s'], timeout: '10s' },
        dns: { servers: [dns.server], timeout: '1s' },
        limits: { requests_per_minute: 100_000 },
        // Postfix keeps up to 20 connections to one destination (and caches them): the test's
        // own sessions come from the same loopback address.
        smtp: { max_connections_per_ip: 100 },
        metrics: { listen: '127.0.0.1:0' },
      });
      metricsUrl = `http://127.0.0.1:${(t.server.services.find((s) => s.name === 'metrics') as { port: number } | undefined)!.port}/metrics`;
      // The MTA reaches mailroom through the relay, which keeps the bytes of each session.
      relay = await startRelay(t.server.smtpPort);
      mta = await partner.start({ mailroomPort: relay.port, routeDomains: [t.config.shared_domain], greylisted: 'grey@remote.test', queueOnly: true });
      t.config.outbound.mx_port = mta.port;
      for (const d of ['remote.test', 'bouncy.test']) {
        dns.set(d, [{ type: 'MX', exchange: `mx.${d}`, priority: 10 }]);
        dns.set(`mx.${d}`, [{ type: 'A', address: '127.0.0.1' }]);
      }
      const key = (await publishedKeyFor(t.server.ctx, t.config.shared_domain))!;
      dns.set(`${key.selector}._domainkey.${t.config.shared_domain}`, [{ type: 'TXT', value: dkimTxtValue(key.publicKey) }]);
      inbox = (await t.api('POST', '/inboxes', { address: `peer-${partner.name.toLowerCase()}` })).body;
      console.log(`# ${partner.name} ${mta.version}`);
    });

    after(async () => {
      await mta?.stop();
      relay?.close();
      await t?.close();
      await dns?.close();
    });

    const stored = async () => (await t.api('GET', `/inboxes/${inbox.id}/messages?limit=1`)).body.total as number;
    /** mailroom_smtp_sessions_total: the SMTP connections mailroom's listener accepted. */
    const smtpSessions = async () => Number(/^mailroom_smtp_sessions_total (\d+)$/m.exec(await (await fetch(metricsUrl)).text())?.[1] ?? 0);
    const receivedEvents = async () =>
      (await sqlDb(t.server.ctx).select({ data: events.data }).from(events).where(eq(events.type, 'message.received')).all()).filter((e) => JSON.parse(e.data).inboxId === inbox.id).length;

    test(`${MESSAGES} messages queued at ${partner.name}, handed over on reused connections: each stored once, no deferral`, async () => {
      const sessionsBefore = await smtpSessions();
      const relayedBefore = relay.sessions.length;
      const transport = smtpTransport(mta.port);
      try {
        for (let i = 0; i < MESSAGES; i++) {
          await transport.sendMail({ from: `sender${i}@remote.test`, to: inbox.address, subject: `interop ${i}`, text: `message ${i}`, messageId: `<interop-${i}@remote.test>` });
        }
      } finally {
        transport.close();
      }
      // Postfix takes each message through pickup and cleanup before its queue manager defers it
      // (queue-only): a flush before every one is deferred misses the late ones, which then wait
      // for the next queue run (a minute). Flush once all are in the deferred queue.
      if (partner.name === 'Postfix') {
        const deferred = () => (mta.log().match(new RegExp(`to=<${inbox.address.replace(/[.]/g, '\\.')}>.*status=deferred \\(deferred transport\\)`, 'g')) ?? []).length;
        await until(`${MESSAGES} messages deferred at Postfix`, () => (deferred() >= MESSAGES ? true : undefined), 30_000);
      }
      mta.flush();
      await until(`${MESSAGES} stored`, async () => ((await stored()) >= MESSAGES ? true : undefined), 60_000);
      // Nothing arrives a second time: the MTA logs each message delivered (it heard the 250),
      // and it has ended its sessions with mailroom (its FIN: Postfix closes the connections it
      // cached after 2 s idle).
      const address = inbox.address.replace(/[.]/g, '\\.');
      const sent = () => (mta.log().match(new RegExp(partner.name === 'Postfix' ? `to=<${address}>.*status=sent` : `=> ${address} `, 'g')) ?? []).length;
      const ended = () => relay.sessions.slice(relayedBefore).every((l) => l.includes(CLIENT_FIN));
      await until(`${MESSAGES} logged as delivered by ${partner.name}, its sessions ended`, () => (sent() >= MESSAGES && ended() ? true : undefined), 30_000);
      assert.equal(sent(), MESSAGES);
      assert.equal(await stored(), MESSAGES);
      assert.equal(await receivedEvents(), MESSAGES);
      const log = mta.log();
      // Until the flush the MTA only queued (Postfix logs that as "deferred transport").
      assert.doesNotMatch(log, /status=deferred(?! \(deferred transport\))|==\s.*(defer|closed)|Remote host closed connection/i, log.slice(-3000));
      // Reused connections: fewer sessions at mailroom's listener than messages, and sessions
      // that carried several messages each, every message once.
      const sessions = (await smtpSessions()) - sessionsBefore;
      const relayed = relay.sessions.slice(relayedBefore).map((l) => l.filter((c) => !c.startsWith(SERVER)).join(''));
      const perSession = relayed.map((c) => (c.match(/^MAIL FROM:/gim) ?? []).length);
      console.log(`# ${partner.name}: ${MESSAGES} messages over ${sessions} SMTP sessions (messages per session: ${perSession.join(' ')})`);
      assert.equal(relayed.length, sessions, 'every session went through the relay');
      assert.ok(sessions >= 1 && sessions < MESSAGES / 2, `${sessions} sessions for ${MESSAGES} messages`);
      assert.equal(
        perSession.reduce((a, b) => a + b, 0),
        MESSAGES,
        'each message handed over once',
      );
      assert.ok(Math.max(...perSession) > 1, 'a session carried several messages');
      if (partner.name === 'Exim') {
        // Exim sends its last message's "." and QUIT in one go (no reply of mailroom's between
        // them) and half-closes its side before mailroom has answered either: mailroom's 250 for
        // the data and its 221 still come, after the client's FIN.
        const wire = () => relay.sessions.slice(relayedBefore).map((l) => l.join(''));
        const shape = new RegExp(`\r\n\\.\r\nQUIT\r\n${CLIENT_FIN}${SERVER}250 [^\u0000]*(${SERVER})?221 `);
        // mailroom's 221 may still be on its way after Exim's last delivery is logged.
        const pipelined = await until(
          'a session with ".", QUIT, FIN, 250 and 221',
          () => {
            const found = wire().filter((w) => shape.test(w));
            return found.length ? found : undefined;
          },
          10_000,
        ).catch(() => []);
        console.log(`# Exim: ${pipelined.length} of ${wire().length} sessions ended with ".", QUIT and a FIN before the replies`);
        assert.ok(
          pipelined.length >= 1,
          `no session with ".", QUIT, FIN, then 250 and 221:\n${wire()
            .map((w) => JSON.stringify(w.slice(-300)))
            .join('\n')}`,
        );
      }
    });

    test('the same message handed over again after a lost reply is stored once', async () => {
      const list = (await t.api('GET', `/inboxes/${inbox.id}/messages?limit=1`)).body.data;
      const first = list[0];
      // The bytes the MTA sent (mailroom's own trace fields, added on receipt, removed): what it
      // would send again from its queue file after a lost 250.
      const raw = (await (await fetch(`${t.url}/messages/${first.id}/raw`, { headers: { authorization: `Bearer ${t.key}` } })).text()).replace(
        /^Return-Path: [^\n]*\n(Received: [^\n]*\n(?:\t[^\n]*\n)*)/,
        '',
      );
      const { client } = await SmtpClient.open(t.server.smtpPort);
      await client.cmd(`EHLO ${partner.name.toLowerCase()}.remote.test`);
      const reply = await client.send(first.fromAddress, [inbox.address], Buffer.from(raw, 'utf8'));
      await client.quit();
      assert.equal(reply.code, 250, reply.text);
      assert.match(reply.text, new RegExp(`stored as ${first.id}`));
      assert.equal(await stored(), MESSAGES);
    });

    test(`a send reaches ${partner.name} over STARTTLS, DKIM-signed`, async () => {
      const res = await t.api('POST', `/inboxes/${inbox.id}/messages`, { to: ['alice@remote.test'], subject: 'to a real MTA', bodyText: 'hello alice' });
      assert.equal(res.status, 202, res.text);
      const m = await until(
        'sent',
        async () => {
          const r = (await t.api('GET', `/messages/${res.body.id}`)).body;
          return r.status === 'sent' ? r : undefined;
        },
        20_000,
      );
      assert.match(m.recipients[0].response, /^250 /);
      partner.name === 'Exim' && mta.flush();
      // Read once written whole: Exim's file can be there, still empty, for a moment (CI saw '').
      const whole = () => mta.delivered('alice').filter((f) => f.includes('hello alice'));
      const files = await until('delivered to alice', () => (whole().length ? whole() : undefined), 20_000);
      const got = files[0];
      assert.match(got, /^DKIM-Signature: .*d=agents\.test/im);
      assert.match(got, /with ESMTPS/i, 'the MTA logged the hop as TLS');
      assert.match(got, /Subject: to a real MTA/);
    });

    test(`a recipient ${partner.name} bounces later: its DSN comes back to the bounce address and marks the message bounced`, async () => {
      const res = await t.api('POST', `/inboxes/${inbox.id}/messages`, { to: ['nobody@bouncy.test'], subject: 'will bounce', bodyText: 'hi' });
      assert.equal(res.status, 202, res.text);
      await until('accepted by the MTA', async () => ((await t.api('GET', `/messages/${res.body.id}`)).body.status === 'sent' ? true : undefined), 20_000);
      // The MTA writes its DSN to the envelope sender: the bounce address on agents.test, which
      // it routes back to mailroom.
      mta.flush();
      const m = await until(
        'bounced',
        async () => {
          partner.name === 'Exim' && mta.flush();
          const r = (await t.api('GET', `/messages/${res.body.id}`)).body;
          return r.status === 'bounced' ? r : undefined;
        },
        30_000,
      );
      assert.equal(m.recipients[0].status, 'bounced');
      assert.match(m.recipients[0].response, /User unknown/, m.recipients[0].response);
      assert.equal((await t.api('GET', `/inboxes/${inbox.id}`)).body.bounceCount, 1);
      // The MTA's DSN put the recipient on the suppression list: the next send to it is refused.
      const entry = (await t.api('GET', '/suppressions?address=nobody%40bouncy.test')).body.data[0];
      assert.deepEqual([entry?.reason, entry?.messageId], ['bounce', res.body.id]);
      const again = await t.api('POST', `/inboxes/${inbox.id}/messages`, { to: ['nobody@bouncy.test'], subject: 'again', bodyText: 'hi' });
      expectError(again, 422, 'RECIPIENTS_SUPPRESSED');
    });

    test(`a 450 greylist from ${partner.name} is retried to success`, async () => {
      const res = await t.api('POST', `/inboxes/${inbox.id}/messages`, { to: ['grey@remote.test'], subject: 'greylisted', bodyText: 'hi' });
      assert.equal(res.status, 202, res.text);
      const deferred = await until(
        'deferred once',
        async () => {
          const r = (await t.api('GET', `/messages/${res.body.id}`)).body;
          return /^4\d\d /.test(r.recipients[0].response ?? '') ? r : undefined;
        },
        20_000,
      );
      assert.match(deferred.recipients[0].response, /greylisted/);
      mta.stopGreylisting();
      const m = await until(
        'sent after the retry',
        async () => {
          const r = (await t.api('GET', `/messages/${res.body.id}`)).body;
          return r.status === 'sent' ? r : undefined;
        },
        30_000,
      );
      assert.match(m.recipients[0].response, /^250 /);
    });
  });
}

/** The installed version of each peer README's "Tested with" table names, or why there is none. */
const VERSIONS: Array<{ peer: string; version: () => string | undefined }> = [
  { peer: 'Postfix', version: () => out('/usr/sbin/postconf', ['-d', '-h', 'mail_version']) },
  { peer: 'Exim', version: () => (eximMissing() ? undefined : /Exim version (\S+)/.exec(out(join(EXIM_ROOT, 'usr/sbin/exim4'), ['-bV', '-C', '/dev/null']) ?? '')?.[1]) },
  { peer: 'SpamAssassin', version: () => /SpamAssassin version (\S+)/.exec(out('spamassassin', ['--version']) ?? '')?.[1] },
  { peer: 'python3-dkim', version: () => out('/usr/bin/python3', ['-c', "import importlib.metadata as m; print(m.version('dkimpy'))"]) },
  { peer: 'swaks', version: () => /swaks version (\S+)/.exec(out('swaks', ['--version']) ?? '')?.[1] },
];

function out(cmd: string, args: string[]): string | undefined {
  const r = spawnSync(cmd, args, { encoding: 'utf8' });
  return r.status === 0 ? r.stdout.trim() : undefined;
}

describe('README "Tested with": the versions named are the ones the suite ran against', () => {
  const section =
    readFileSync(join(import.meta.dirname, '..', '..', 'README.md'), 'utf8')
      .split('## Tested with')[1]
      ?.split('\n## ')[0] ?? '';
  for (const { peer, version } of VERSIONS) {
    const installed = version();
    test(`${peer}: the table's major.minor is the installed version`, { skip: installed === undefined && `${peer} is not installed` }, () => {
      const row = section.split('\n').find((l) => l.startsWith(`| ${peer} `));
      assert.ok(row, `README's "Tested with" table has a row for ${peer}`);
      const named = row.split('|')[2].trim();
      // The table names major.minor (Debian's point releases are security fixes).
      assert.match(named, /^\d+(\.\d+)?$/, `${peer}: "${named}"`);
      assert.ok(installed === named || installed!.startsWith(`${named}.`), `${peer} ${installed} installed, README says ${named}`);
    });
  }
});

// The webhook receivers docs/api.md shows (issue 20: "the docs show a 10-line receiver in Node
// and Python"), run as written against real deliveries: the Node one with the `standardwebhooks`
// package, the Python one with its standard library. Each code block is read from the page,
// given a free port instead of 8080 and the webhook's secret in MAILROOM_WEBHOOK_SECRET; mail
// over SMTP must be printed by both, and a forged signature or a stale timestamp refused.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { createHmac } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { freePort } from '../support/child-server.ts';
import { deliverMail } from '../support/mail.ts';
import { startTestServer, type TestServer } from '../support/server.ts';
import { until } from '../support/wait.ts';
import { peerSkip, toolMissing } from '../support/peers.ts';

const ROOT = join(import.meta.dirname, '..', '..');
const PAGE = readFileSync(join(ROOT, 'docs/api.md'), 'utf8');

/** The fenced block of `lang` on docs/api.md that contains `marker`. */
function block(lang: string, marker: string): string {
  const found = [...PAGE.matchAll(new RegExp(`^\`\`\`${lang}\\n([\\s\\S]*?)^\`\`\``, 'gm'))].map((m) => m[1]!).find((b) => b.includes(marker));
  assert.ok(found, `docs/api.md has a ${lang} block with ${marker}`);
  return found;
}

interface Running {
  port: number;
  child: ChildProcess;
  out(): string;
}

/** Starts a receiver from the page on `port` (instead of 8080), verifying with `secret`. */
async function startReceiver(command: string, args: (code: string) => string[], code: string, secret: string, port: number): Promise<Running> {
  const local = code.replace('.listen(8080)', `.listen(${port}, '127.0.0.1')`).replace("(('', 8080)", `(('127.0.0.1', ${port})`);
  assert.notEqual(local, code, 'the block listens on 8080');
  const child = spawn(command, args(local), { cwd: ROOT, env: { ...process.env, MAILROOM_WEBHOOK_SECRET: secret }, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (out += d));
  // Listening once it answers anything to a bare GET.
  await until(
    `the receiver on port ${port}`,
    async () => {
      if (child.exitCode !== null) throw new Error(`the receiver exited: ${out}`);
      return fetch(`http://127.0.0.1:${port}/`).then(
        () => true,
        () => undefined,
      );
    },
    15_000,
  );
  return { port, child, out: () => out };
}

/** A Standard Webhooks signature of `body` for `id` at `timestamp`, keyed with the secret's bytes. */
const sign = (secret: string, id: string, timestamp: number, body: string) => `v1,${createHmac('sha256', secret).update(`${id}.${timestamp}.${body}`).digest('base64')}`;

describe('the webhook receivers of docs/api.md', () => {
  let t: TestServer;
  const receivers: Running[] = [];

  before(async () => {
    t = await startTestServer();
  });

  after(async () => {
    for (const r of receivers) r.child.kill();
    await t?.close();
  });

  const cases = [
    {
      name: 'Node, with the standardwebhooks package',
      lang: 'js',
      marker: "from 'standardwebhooks'",
      command: process.execPath,
      args: (code: string) => ['--input-type=module', '--eval', code],
      skip: false,
    },
    {
      name: 'Python, with the standard library',
      lang: 'python',
      marker: 'HTTPServer',
      command: 'python3',
      args: (code: string) => ['-c', code],
      skip: peerSkip(toolMissing('python3', ['--version'], 'python3')),
    },
  ];

  for (const c of cases) {
    test(`${c.name}: real deliveries are printed; a forged signature and a stale timestamp get 401`, { skip: c.skip }, async () => {
      const inbox = (await t.api('POST', '/inboxes', {})).body;
      // The secret is known once the webhook exists; the receiver starts on a port chosen before.
      const port = await freePort();
      const hook = await t.api('POST', '/webhooks', { url: `http://127.0.0.1:${port}/hook`, events: ['message.received'], inboxIds: [inbox.id] });
      assert.equal(hook.status, 201, hook.text);
      const r = await startReceiver(c.command, c.args, block(c.lang, c.marker), hook.body.secret, port);
      receivers.push(r);
      const id = await deliverMail(t.server.smtpPort, { from: 'sender@example.org', to: inbox.address, subject: 'for the receiver', text: 'hello' });
      await until(`${c.name} printed the event`, () => (r.out().includes(`message.received ${id}`) ? true : undefined), 15_000);

      const body = JSON.stringify({ id: 'evt_forged', type: 'message.received', data: { id: 'msg_forged' } });
      const now = Math.floor(Date.now() / 1000);
      const post = (headers: Record<string, string>) =>
        fetch(`http://127.0.0.1:${port}/hook`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body }).then((res) => res.status);
      assert.equal(await post({ 'webhook-id': 'evt_forged', 'webhook-timestamp': String(now), 'webhook-signature': sign('whsec_wrong', 'evt_forged', now, body) }), 401);
      const stale = now - 600;
      assert.equal(await post({ 'webhook-id': 'evt_forged', 'webhook-timestamp': String(stale), 'webhook-signature': sign(hook.body.secret, 'evt_forged', stale, body) }), 401);
      // The same request signed now is accepted: the refusals above were for the reasons given.
      assert.equal(await post({ 'webhook-id': 'evt_forged', 'webhook-timestamp': String(now), 'webhook-signature': sign(hook.body.secret, 'evt_forged', now, body) }), 204);
      const printed = () => r.out().split('message.received msg_forged').length - 1;
      await until('the well-signed one printed', () => (printed() ? true : undefined));
      assert.equal(printed(), 1, 'only the well-signed one printed');
    });
  }
});

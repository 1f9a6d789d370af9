// mailroom init, run as a new user runs it: non-interactive with --yes and flags, then `serve`
// on the file it wrote; refusal to overwrite; a second init's key called a new one; one clear
// line for a bad answer; the questions answered through stdin.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig } from '../../src/config.ts';
import { runCli, startServe } from '../support/cli.ts';

const tmp = () => mkdtempSync(join(tmpdir(), 'mailroom-init-'));

/** Flags that keep a test's server on free loopback ports and its data in `dir`. */
const local = (dir: string) => ['--data-dir', join(dir, 'data'), '--http-listen', '127.0.0.1:0', '--smtp-listen', '127.0.0.1:0', '--config', join(dir, 'mailroom.toml')];

const KEY = /^ {4}(mr_live_[0-9A-Za-z]{40})$/m;

test('init --yes writes a commented config that loads, makes the first key, prints DNS records and three commands; serve starts with it', async () => {
  const dir = tmp();
  const file = join(dir, 'mailroom.toml');
  const res = await runCli(['init', '--yes', '--hostname', 'mail.example.com', '--domain', 'example.com', ...local(dir)]);
  assert.equal(res.code, 0, res.stderr);
  assert.equal(res.stderr, '', 'no questions with --yes');

  // The file: the answers set, every other key present as a comment at its default.
  const text = readFileSync(file, 'utf8');
  assert.match(text, /^# mailroom configuration, written by `mailroom init`/);
  assert.match(text, /^hostname = "mail\.example\.com"$/m);
  assert.match(text, /^shared_domain = "example\.com"$/m);
  assert.match(text, /^\[outbound\]\n# .*\nmode = "dry-run"$/m, 'a first install does not send for real');
  assert.match(text, /^# Address the HTTP API listens on\.\nlisten = "127\.0\.0\.1:0"$/m);
  assert.match(text, /^# max_body_bytes = 1048576$/m);
  const config = loadConfig(file);
  assert.equal(config.hostname, 'mail.example.com');
  assert.equal(config.shared_domain, 'example.com');
  assert.equal(config.outbound.mode, 'dry-run');
  assert.equal(config.data_dir, join(dir, 'data'));
  assert.ok(existsSync(join(dir, 'data', 'mailroom.db')), 'the data directory and database exist');

  // What it prints: the key once, the zone lines for the domain, the next three commands.
  const key = KEY.exec(res.stdout)?.[1];
  assert.ok(key, res.stdout);
  assert.equal(res.stdout.split(key).length, 3, 'the key, and the curl command that uses it');
  assert.match(res.stdout, /^example\.com\. 3600 IN MX 10 mail\.example\.com\.$/m);
  assert.match(res.stdout, /^mr\d{6}\._domainkey\.example\.com\. 3600 IN TXT "v=DKIM1; k=rsa; p=/m);
  assert.match(res.stdout, /^example\.com\. 3600 IN TXT "v=spf1 a:mail\.example\.com mx ~all"$/m);
  assert.match(res.stdout, /^_dmarc\.example\.com\. 3600 IN TXT "v=DMARC1;/m);
  assert.match(res.stdout, /^ {2}1\. npm run -s mailroom -- serve --config \S+mailroom\.toml$/m);
  assert.match(res.stdout, /^ {2}2\. curl -s -X POST http:\/\/127\.0\.0\.1:0\/inboxes /m);
  assert.match(res.stdout, /^ {2}3\. swaks --server 127\.0\.0\.1:0 --to agent@example\.com /m);

  // `domains show` prints the same DKIM record: init made the key serve signs with.
  const shown = await runCli(['domains', 'show', 'shared', '--no-check', '--config', file]);
  assert.equal(shown.code, 0, shown.stderr);
  const dkim = (s: string) => /^mr\d{6}\._domainkey\.example\.com\..*$/m.exec(s)?.[0];
  assert.equal(dkim(shown.stdout), dkim(res.stdout));

  const serve = await startServe(['--config', file]);
  try {
    assert.doesNotMatch(serve.stderr(), /mr_live_/, 'init made the first key: serve prints none');
    const inbox = await fetch(`${serve.url}/inboxes`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ address: 'agent' }),
    });
    assert.equal(inbox.status, 201);
    assert.equal((await inbox.json()).address, 'agent@example.com');
  } finally {
    serve.child.kill('SIGTERM');
  }
  assert.equal(await serve.exited, 0);
});

test('init refuses to overwrite an existing file without --force', async () => {
  const dir = tmp();
  const file = join(dir, 'mailroom.toml');
  assert.equal((await runCli(['init', '--yes', ...local(dir)])).code, 0);
  const before = readFileSync(file, 'utf8');
  const again = await runCli(['init', '--yes', '--hostname', 'mx.example.org', ...local(dir)]);
  assert.equal(again.code, 1);
  assert.equal(again.stderr, `mailroom: ${file} exists; pass --force to overwrite it, or --config FILE to write another file\n`);
  assert.equal(again.stdout, '');
  assert.equal(readFileSync(file, 'utf8'), before);
  const forced = await runCli(['init', '--yes', '--force', '--hostname', 'mx.example.org', ...local(dir)]);
  assert.equal(forced.code, 0, forced.stderr);
  assert.equal(loadConfig(file).hostname, 'mx.example.org');
  assert.equal(loadConfig(file).shared_domain, 'example.org', 'the domain defaults to the host name without its first label');
});

test('a second init on the same data directory calls its key a new one, not the first', async () => {
  const dir = tmp();
  const first = await runCli(['init', '--yes', ...local(dir)]);
  assert.equal(first.code, 0, first.stderr);
  assert.match(first.stdout, /\. The first API key \(shown only once; store it now\):$/m);
  const again = await runCli(['init', '--yes', '--force', ...local(dir)]);
  assert.equal(again.code, 0, again.stderr);
  assert.match(again.stdout, /\. A new API key \(this installation has keys already\) \(shown only once; store it now\):$/m);
  assert.doesNotMatch(again.stdout, /first API key/);
});

test('init: a bad answer in a flag is one line naming the flag, and nothing is written', async () => {
  const dir = tmp();
  const cases: Array<[string[], RegExp]> = [
    [['--hostname', 'mail example'], /^mailroom: --hostname: "mail example" is not a valid DNS host name \(letters, digits, hyphens and dots, such as "mail\.example\.com"\)\n$/],
    [['--domain', 'exa mple.com'], /^mailroom: --domain: "exa mple\.com" is not a valid DNS host name/],
    [['--mode', 'live'], /^mailroom: --mode: expected one of "email", "dry-run", got "live"\n$/],
    [['--public-url', 'mail.example.com'], /^mailroom: --public-url: expected an absolute http:\/\/ or https:\/\/ URL/],
    [['--http-listen', 'everywhere'], /^mailroom: --http-listen: expected "host:port"/],
  ];
  for (const [flags, message] of cases) {
    const res = await runCli(['init', '--yes', ...flags, '--config', join(dir, 'mailroom.toml')]);
    assert.equal(res.code, 1, flags.join(' '));
    assert.match(res.stderr, message);
    assert.equal(res.stderr.split('\n').length, 2, `one line: ${res.stderr}`);
    assert.equal(existsSync(join(dir, 'mailroom.toml')), false);
  }
});

test('init asks through stdin: a bad answer is refused in one line and asked again; empty answers take the default', async () => {
  const dir = tmp();
  const file = join(dir, 'mailroom.toml');
  // hostname: a bad one, then a good one; domain: the default (example.net); mode: email.
  const res = await runCli(['init', ...local(dir)], { input: 'mail example\nmx1.example.net\n\nemail\n' });
  assert.equal(res.code, 0, res.stderr);
  assert.match(res.stderr, /^Host name of this server \(EHLO name, MX target\) \[localhost\]: mailroom: --hostname: "mail example" is not a valid DNS host name/);
  assert.match(res.stderr, /Mail domain of the inboxes \(agent@DOMAIN\) \[example\.net\]: /);
  assert.match(res.stderr, /Outbound mode: "dry-run" \(nothing leaves this machine\) or "email" \(live\) \[dry-run\]: $/);
  const config = loadConfig(file);
  assert.equal(config.hostname, 'mx1.example.net');
  assert.equal(config.shared_domain, 'example.net');
  assert.equal(config.outbound.mode, 'email');
  assert.match(res.stdout, /outbound email: sending is live/);

  // Questions that stdin leaves unanswered: one line, exit 1, no file.
  const short = await runCli(['init', ...local(tmp())], { input: 'mail.example.com\n' });
  assert.equal(short.code, 1);
  assert.match(short.stderr, /mailroom: no answer for --domain \(stdin ended\); pass --yes with flags to answer without questions\n$/);
});

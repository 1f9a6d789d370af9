// What a new user meets in the first minutes (issue 21): `GET /` leads to the dashboard,
// `mailroom --version`, the start-up block, a busy port, the first-start hint, the modes of a new
// data directory and database, and README's Set up saying what runs live (issue 32).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { connect, createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { configFrom, loadConfig } from '../../src/config.ts';
import { closeContext, createContext } from '../../src/context.ts';
import { createAccount } from '../../src/domain/accounts/accounts.ts';
import { createInbox, getInbox } from '../../src/domain/inboxes/inboxes.ts';
import { silentLogger } from '../../src/log.ts';
import { runCli, startServe, writeTestConfig } from '../support/cli.ts';
import { startTestServer, type TestServer } from '../support/server.ts';

const ROOT = join(import.meta.dirname, '..', '..');
const PKG_VERSION: string = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')).version;

describe('GET /', () => {
  let t: TestServer;
  before(async () => {
    t = await startTestServer();
  });
  after(async () => {
    await t?.close();
  });

  test('redirects to the dashboard (302), without a key; the dashboard answers there', async () => {
    const res = await fetch(`${t.url}/`, { redirect: 'manual' });
    assert.equal(res.status, 302);
    assert.equal(res.headers.get('location'), '/dashboard');
    const followed = await fetch(`${t.url}/`);
    assert.equal(followed.status, 200);
    assert.equal(new URL(followed.url).pathname, '/dashboard');
    assert.match(followed.headers.get('content-type') ?? '', /^text\/html/);
  });
});

describe('mailroom --version', () => {
  test('prints the version from package.json and exits 0', async () => {
    for (const flag of ['--version', '-V']) {
      const res = await runCli([flag]);
      assert.equal(res.code, 0, res.stderr);
      assert.equal(res.stdout, `${PKG_VERSION}\n`);
    }
  });
});

describe('config validation at start', () => {
  test('serve refuses a bad hostname and a public_url without a scheme: one line each, exit 2, nothing started', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'mailroom-first-'));
    const config = join(dir, 'mailroom.toml');
    writeFileSync(config, `data_dir = ${JSON.stringify(join(dir, 'data'))}\nhostname = "mail example"\n[http]\nlisten = "127.0.0.1:0"\npublic_url = "mail.example.com"\n`);
    const res = await runCli(['serve', '--config', config]);
    assert.equal(res.code, 2);
    assert.equal(res.stdout, '');
    const lines = res.stderr.trimEnd().split('\n');
    assert.equal(lines.length, 2, res.stderr);
    assert.match(lines[0], /^mailroom: config key `hostname`: "mail example" is not a valid DNS host name/);
    assert.match(lines[1], /^mailroom: config key `http\.public_url`: expected an absolute http:\/\/ or https:\/\/ URL/);
  });
});

describe('mailroom inboxes by address', () => {
  test('suspend, unsuspend and set-limit take an address as well as an id; set-limit errors are worded like the API', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'mailroom-first-'));
    const config = writeTestConfig(dir);
    const ctx = await createContext(loadConfig(config), silentLogger);
    let accountId: string;
    let id: string;
    try {
      accountId = (await createAccount(ctx, 'support')).id;
      id = (await createInbox(ctx, accountId, { address: 'helpdesk@agents.test' })).id;
    } finally {
      await closeContext(ctx);
    }
    const status = async () => {
      const c = await createContext(loadConfig(config), silentLogger);
      try {
        const i = await getInbox(c, accountId, id);
        return { status: i.status, limit: i.dailySendLimit };
      } finally {
        await closeContext(c);
      }
    };

    const suspended = await runCli(['inboxes', 'suspend', 'HelpDesk@agents.test', '--json', '--config', config]);
    assert.equal(suspended.code, 0, suspended.stderr);
    assert.equal(JSON.parse(suspended.stdout).id, id);
    assert.equal((await status()).status, 'suspended');
    assert.equal((await runCli(['inboxes', 'unsuspend', 'helpdesk@agents.test', '--config', config])).code, 0);
    assert.equal((await status()).status, 'active');
    const limited = await runCli(['inboxes', 'set-limit', 'helpdesk@agents.test', '7', '--json', '--config', config]);
    assert.equal(limited.code, 0, limited.stderr);
    assert.equal(JSON.parse(limited.stdout).dailySendLimit, 7);
    assert.equal((await status()).limit, 7);

    for (const bad of ['lots', '-1', '1.5', '99999999999']) {
      const res = await runCli(['inboxes', 'set-limit', 'helpdesk@agents.test', bad, '--config', config]);
      assert.equal(res.code, 1, bad);
      assert.equal(res.stderr, `mailroom: VALIDATION_ERROR: \`dailySendLimit\`: must be a whole number from 0 to 1000000000, got ${JSON.stringify(bad === '99999999999' ? 99999999999 : bad)}\n`, bad);
    }
    assert.equal((await status()).limit, 7);
    const missing = await runCli(['inboxes', 'suspend', 'nobody@agents.test', '--config', config]);
    assert.equal(missing.code, 1);
    assert.equal(missing.stderr, 'mailroom: INBOX_NOT_FOUND: inbox nobody@agents.test not found\n');
  });
});

const tmp = () => mkdtempSync(join(tmpdir(), 'mailroom-first-'));

/** A config on free ports with outbound.mode set (writeTestConfig fixes dry-run). */
function configWithMode(dir: string, mode: 'email' | 'dry-run', extra = ''): string {
  const file = join(dir, 'mailroom.toml');
  writeFileSync(
    file,
    `data_dir = ${JSON.stringify(join(dir, 'data'))}\nshared_domain = "agents.test"\n[http]\nlisten = "127.0.0.1:0"\n[smtp]\nlisten = "127.0.0.1:0"\n[outbound]\nmode = "${mode}"\n${extra}`,
  );
  return file;
}

const logLines = (stdout: string) =>
  stdout
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l));

describe('the start-up block', () => {
  test('not on a terminal: one JSON "started" line with version, config, data dir, database, URLs, SMTP address, outbound mode', async () => {
    const dir = tmp();
    const config = writeTestConfig(dir);
    const serve = await startServe(['--config', config]);
    try {
      const started = logLines(serve.stdout()).filter((l) => l.msg === 'started');
      assert.equal(started.length, 1);
      const s = started[0];
      assert.equal(s.level, 'info');
      assert.equal(s.version, PKG_VERSION);
      assert.equal(s.config, resolve(config));
      assert.equal(s.dataDir, join(dir, 'data'));
      assert.equal(s.database, join(dir, 'data', 'mailroom.db'));
      assert.match(s.http, /^http:\/\/127\.0\.0\.1:[1-9]\d*$/);
      assert.equal(s.dashboard, `${s.http}/dashboard`);
      assert.match(s.smtp, /^127\.0\.0\.1:[1-9]\d*$/);
      assert.equal(s.metrics, 'off');
      assert.equal(s.outbound, 'dry-run');
      // The addresses are the bound ones: the dashboard answers, the SMTP port greets.
      assert.equal((await fetch(s.dashboard)).status, 200);
      const banner = await new Promise<string>((ok, fail) => {
        const [host, port] = s.smtp.split(':');
        const sock = connect(Number(port), host);
        sock.once('data', (d: Buffer) => (sock.destroy(), ok(d.toString())));
        sock.once('error', fail);
      });
      assert.match(banner, /^220 /);
      assert.ok(!logLines(serve.stdout()).some((l) => l.level === 'warn'), 'dry-run: no live-sending warning');
    } finally {
      serve.child.kill('SIGTERM');
    }
    assert.equal(await serve.exited, 0);
  });

  test('live sending with no verified domain adds a warning line naming outbound.mode = "dry-run"', async () => {
    const dir = tmp();
    const serve = await startServe(['--config', configWithMode(dir, 'email')]);
    try {
      const lines = logLines(serve.stdout());
      assert.equal(lines.find((l) => l.msg === 'started')?.outbound, 'email');
      const warns = lines.filter((l) => l.level === 'warn');
      assert.equal(warns.length, 1);
      assert.match(warns[0].msg, /^sending is live .*no domain is verified.*set outbound\.mode = "dry-run"/);
    } finally {
      serve.child.kill('SIGTERM');
    }
    assert.equal(await serve.exited, 0);
  });

  test('on a terminal: the same facts as aligned lines for a person, no JSON "started" line', async () => {
    const dir = tmp();
    const config = configWithMode(dir, 'email');
    const entry = join(ROOT, 'cli', 'mailroom.ts');
    // script(1) runs serve on a pseudo-terminal, so its stdout is a TTY.
    const cmd = `${JSON.stringify(process.execPath)} ${JSON.stringify(entry)} serve --config ${JSON.stringify(config)}`;
    const child = spawn('script', ['-qfec', cmd, '/dev/null'], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    let out = '';
    const exited = new Promise<void>((r) => child.on('close', () => r()));
    try {
      await new Promise<void>((ok, fail) => {
        const timer = setTimeout(() => fail(new Error(`no start-up block on the terminal: ${out}`)), 30_000);
        child.stdout!.on('data', (d) => {
          out += d;
          if (/^warning: /m.test(out)) {
            clearTimeout(timer);
            ok();
          }
        });
      });
    } finally {
      process.kill(-child.pid!, 'SIGTERM');
      await exited;
    }
    const text = out.replace(/\r\n/g, '\n');
    assert.match(text, new RegExp(`^mailroom ${PKG_VERSION.replace(/\./g, '\\.')} started$`, 'm'));
    assert.match(text, new RegExp(`^  config     ${resolve(config).replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}$`, 'm'));
    assert.match(text, /^  data dir   \/.+\/data$/m);
    assert.match(text, /^  database   \/.+\/data\/mailroom\.db$/m);
    assert.match(text, /^  HTTP API   http:\/\/127\.0\.0\.1:\d+$/m);
    assert.match(text, /^  dashboard  http:\/\/127\.0\.0\.1:\d+\/dashboard$/m);
    assert.match(text, /^  SMTP       127\.0\.0\.1:\d+$/m);
    assert.match(text, /^  outbound   email \(live: mail leaves this machine, direct to MX\)$/m);
    assert.match(text, /^warning: sending is live .*set outbound\.mode = "dry-run"/m);
    assert.doesNotMatch(text, /"msg":"started"/);
  });
});

describe('a busy port', () => {
  let blocker: Server;
  let port: number;
  before(async () => {
    blocker = createServer();
    await new Promise<void>((ok) => blocker.listen(0, '127.0.0.1', ok));
    port = (blocker.address() as { port: number }).port;
  });
  after(() => new Promise<void>((ok) => blocker.close(() => ok())));

  for (const key of ['http.listen', 'smtp.listen', 'metrics.listen', 'submission.listen']) {
    test(`${key}: one line naming the key, exit 1, no stack trace`, async () => {
      const dir = tmp();
      const [table] = key.split('.');
      const listen = { http: '127.0.0.1:0', smtp: '127.0.0.1:0', metrics: '127.0.0.1:0', submission: '', [table]: `127.0.0.1:${port}` };
      const config = join(dir, 'mailroom.toml');
      writeFileSync(
        config,
        `data_dir = ${JSON.stringify(join(dir, 'data'))}\n[http]\nlisten = "${listen.http}"\n[smtp]\nlisten = "${listen.smtp}"\n[metrics]\nlisten = "${listen.metrics}"\n[submission]\nlisten = "${listen.submission}"\n[outbound]\nmode = "dry-run"\n`,
      );
      const res = await runCli(['serve', '--config', config]);
      assert.equal(res.code, 1);
      assert.equal(
        res.stderr,
        `mailroom: cannot listen on 127.0.0.1:${port} for ${key}: the address is already in use (another mailroom, or another program, listens there); set \`${key}\` in the config to another address\n`,
      );
      assert.doesNotMatch(res.stdout, /"msg":"started"/);
    });
  }
});

describe('the first-start hint', () => {
  test('from a source checkout it names `npm run -s mailroom --` and the --config given', async () => {
    const dir = tmp();
    const config = writeTestConfig(dir);
    const serve = await startServe(['--config', config]);
    serve.child.kill('SIGTERM');
    assert.equal(await serve.exited, 0);
    assert.match(serve.stderr(), /mr_live_/);
    assert.ok(serve.stderr().includes(`Make more with: npm run -s mailroom -- keys create [--name LABEL] [--read-only] --config ${config}\n`), serve.stderr());
  });
});

describe('file modes of a new installation', () => {
  test('serve makes the data directory 0700, and mailroom.db with its -wal and -shm 0600', async () => {
    const dir = tmp();
    const serve = await startServe(['--config', writeTestConfig(dir)]);
    try {
      const mode = (name: string) => (statSync(join(dir, 'data', name)).mode & 0o777).toString(8);
      assert.equal(mode(''), '700');
      for (const name of ['mailroom.db', 'mailroom.db-wal', 'mailroom.db-shm']) assert.equal(mode(name), '600', name);
    } finally {
      serve.child.kill('SIGTERM');
    }
    assert.equal(await serve.exited, 0);
  });
});

describe("README's Set up", () => {
  test('says, before `npm start` on the embedded defaults, that it sends live (outbound.mode = "email"), and where the dry-run start is', () => {
    const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
    const setUp = readme.slice(readme.indexOf('## Set up'), readme.indexOf('npm install && npm start'));
    assert.match(setUp, /outbound\.mode = "email"/);
    assert.match(setUp, /live/);
    assert.match(setUp, /dry-run/);
    assert.equal(configFrom().outbound.mode, 'email', 'the embedded default is what the README says');
  });
});

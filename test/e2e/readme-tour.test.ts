// README.md's "A 5-minute tour", walked as written (issue 21: a new user following only the
// README gets a mail into an inbox, sees it in the dashboard and answers it from the API, in
// dry-run unless they chose otherwise). The shell blocks are read from README.md itself and run
// one command at a time in one bash, in a fresh directory, with curl, jq and swaks: the only
// changes are the npm scripts spelled out (checked against package.json), free ports for 3000
// and 2525, and Enter pressed three times for `init`. Each "# …" line under a command is its
// sample output: it must appear in what the command printed (… stands for anything, spaces
// are ignored). Then the facts the tour states are checked through the API.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from '../support/child-server.ts';
import { pdfWithText } from '../support/documents.ts';
import { pgCluster } from '../support/postgres.ts';
import { readResponse, TEST_ENGINE } from '../support/server.ts';
import { until } from '../support/wait.ts';
import { peerSkip } from '../support/peers.ts';

const ROOT = join(import.meta.dirname, '..', '..');
/** `npm run -s mailroom --` and `npm start` as package.json spells them, runnable from any directory. */
const MAILROOM = `${process.execPath} ${join(ROOT, 'cli/mailroom.ts')}`;
const missing = ['curl', 'jq', 'swaks'].filter((tool) => spawnSync('sh', ['-c', `command -v ${tool}`]).status !== 0);
const skip = peerSkip(missing.length ? `${missing.join(', ')} not installed (apt-get install curl jq swaks)` : false);

interface Command {
  text: string;
  /** The "# …" lines that follow it: sample output. */
  expected: string[];
}

/** The tour's shell blocks, each as its commands (continuation lines joined) with their sample output. */
function tourBlocks(): Command[][] {
  const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
  const tour = /^## A 5-minute tour\n([\s\S]*?)^## /m.exec(readme)?.[1];
  assert.ok(tour, 'README.md has a section "A 5-minute tour"');
  return [...tour.matchAll(/^```sh\n([\s\S]*?)^```/gm)].map(([, body]) => {
    const commands: Command[] = [];
    let pending = '';
    for (const line of body!.split('\n')) {
      if (/^#( |$)/.test(line) && !pending) {
        const sample = line.replace(/^# ?/, '');
        if (sample.trim()) commands.at(-1)?.expected.push(sample);
      } else if (line.trim()) {
        pending += line.endsWith('\\') ? `${line.slice(0, -1)} ` : line;
        if (!line.endsWith('\\')) {
          commands.push({ text: pending, expected: [] });
          pending = '';
        }
      }
    }
    return commands;
  });
}

/** True when `sample` (… for anything) occurs in `output`, spaces ignored on both sides. */
function shows(output: string, sample: string): boolean {
  const squeeze = (s: string) => s.replace(/\s+/g, '');
  const pattern = squeeze(sample)
    .split('…')
    .map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))
    .join('.*?');
  return new RegExp(pattern).test(squeeze(output));
}

/** One bash for the whole tour, so variables set by one command are there for the next. */
class Shell {
  private out = '';
  private readonly bash: ChildProcessWithoutNullStreams;
  private done = 0;

  constructor(cwd: string, env: Record<string, string>) {
    this.bash = spawn('bash', ['--noprofile', '--norc'], { cwd, env: { ...process.env, ...env } });
    this.bash.stdout.on('data', (d) => (this.out += d));
    this.bash.stderr.on('data', (d) => (this.out += d));
    this.bash.stdin.write('set -o pipefail\n');
  }

  /** Runs one command (stdin: `input`, else nothing) and answers its exit status and output. */
  async run(command: string, input = ''): Promise<{ code: number; output: string }> {
    const marker = `__tour_done_${++this.done}__`;
    const from = this.out.length;
    this.bash.stdin.write(`{ ${command}\n} < <(printf %b ${JSON.stringify(input)}) 2>&1\nprintf '\\n${marker} %s\\n' "$?"\n`);
    const end = await until(
      `${command.slice(0, 60)}…`,
      () => {
        const m = new RegExp(`\\n${marker} (\\d+)\\n`).exec(this.out.slice(from));
        return m ? m : undefined;
      },
      60_000,
    );
    return { code: Number(end[1]), output: this.out.slice(from, from + end.index) };
  }

  close(): void {
    this.bash.stdin.end();
    this.bash.kill();
  }
}

describe("README's 5-minute tour, as written", { skip }, () => {
  let dir: string;
  let shell: Shell;
  let server: ReturnType<typeof spawn> | undefined;
  let serverOut = '';
  let httpPort: number;
  let smtpPort: number;
  const env: Record<string, string> = {};

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'mailroom-tour-'));
    writeFileSync(join(dir, 'report.pdf'), pdfWithText(['Quarterly report']));
    httpPort = await freePort();
    smtpPort = await freePort();
    if (TEST_ENGINE === 'postgres') env.MAILROOM_DATABASE_URL = await (await pgCluster()).createDatabase();
    shell = new Shell(dir, env);
  });

  after(async () => {
    shell?.close();
    if (server && server.exitCode === null) {
      server.kill('SIGTERM');
      await new Promise((r) => server!.once('exit', r));
    }
    rmSync(dir, { recursive: true, force: true });
  });

  /** The README's command with the npm scripts spelled out and this test's ports. */
  const local = (command: string) => command.replaceAll('npm run -s mailroom --', MAILROOM).replaceAll('localhost:3000', `localhost:${httpPort}`).replaceAll('127.0.0.1:2525', `127.0.0.1:${smtpPort}`);

  test('the npm scripts the tour uses run the CLI, and `npm start` is `serve`', () => {
    const { scripts } = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8'));
    assert.equal(scripts.mailroom, 'node cli/mailroom.ts');
    assert.equal(scripts.start, 'node cli/mailroom.ts serve');
  });

  test('every command runs and prints what the README shows; the mail is in the API and the dashboard, the reply sent in dry-run', async () => {
    const blocks = tourBlocks();
    assert.equal(blocks.length, 6, 'init, start, create an inbox, send a mail, read it, reply');
    const [init, start, ...rest] = blocks;

    // 1. init, Enter three times: the defaults, dry-run among them.
    const initCommand = init!.find((c) => c.text.includes(' init'))!;
    const made = await shell.run(local(initCommand.text), '\n\n\n');
    assert.equal(made.code, 0, made.output);
    for (const sample of initCommand.expected) assert.ok(shows(made.output, sample), `init printed no "${sample}":\n${made.output}`);
    assert.match(made.output, /outbound dry-run/);
    const key = /mr_live_[A-Za-z0-9]+/.exec(made.output)?.[0];
    assert.ok(key, made.output);
    const keyLine = init!.find((c) => c.text.startsWith('KEY='));
    assert.ok(keyLine, 'the tour sets KEY');
    assert.equal((await shell.run(`KEY=${key}`)).code, 0);

    // 2. npm start, with this test's ports written into the mailroom.toml init wrote.
    assert.deepEqual(
      start!.map((c) => c.text),
      ['npm start'],
    );
    const toml = join(dir, 'mailroom.toml');
    writeFileSync(
      toml,
      readFileSync(toml, 'utf8')
        .replace(/^\[http\]$/m, `[http]\nlisten = "127.0.0.1:${httpPort}"\npublic_url = "http://localhost:${httpPort}"`)
        .replace(/^\[smtp\]$/m, `[smtp]\nlisten = "127.0.0.1:${smtpPort}"`),
    );
    server = spawn('sh', ['-c', `exec ${MAILROOM} serve`], { cwd: dir, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    server.stdout!.on('data', (d) => (serverOut += d));
    server.stderr!.on('data', (d) => (serverOut += d));
    const started = await until('the server started', () => serverOut.split('\n').find((l) => l.includes('"msg":"started"')), 30_000);
    assert.equal(JSON.parse(started).outbound, 'dry-run', started);

    // 3.–7. create an inbox, send a mail with swaks, read it, reply: each command as written.
    // A reading command whose sample shows a later state (the reply `sent`) is run again until
    // it does, as a person typing it a few seconds later would see; a POST runs once.
    for (const command of rest.flat()) {
      const samples = command.expected.map(local);
      const reads = !command.text.includes('-X POST');
      let last = '';
      const ran = await until(command.text, async () => {
        const r = await shell.run(local(command.text));
        last = r.output;
        if (process.env.TOUR_DEBUG) process.stderr.write(`$ ${command.text}\n${r.output}\n`);
        return r.code !== 0 || !reads || samples.every((sample) => shows(r.output, sample)) ? r : undefined;
      }).catch((err: Error) => {
        throw new Error(`${err.message}; it last printed:\n${last}`);
      });
      assert.equal(ran.code, 0, `${command.text}\n${ran.output}`);
      for (const sample of samples) assert.ok(shows(ran.output, sample), `"${command.text}" printed no "${sample}":\n${ran.output}`);
    }

    // What the tour says happened, through the API.
    const vars = (await shell.run('printf "%s %s %s" "$ID" "$MSG" "$THREAD"')).output.split(' ');
    const [inboxId, messageId, threadId] = vars;
    const api = async (path: string) => readResponse(await fetch(`http://127.0.0.1:${httpPort}${path}`, { headers: { authorization: `Bearer ${key}` } }));
    const received = (await api(`/messages/${messageId}`)).body;
    assert.equal(received.inboxId, inboxId);
    assert.equal(received.subject, 'hello');
    assert.deepEqual(
      received.attachments.map((a: { filename: string; contentType: string }) => [a.filename, a.contentType]),
      [['report.pdf', 'application/pdf']],
      'swaks attached report.pdf as application/pdf',
    );
    const download = await fetch(received.attachments[0].url);
    assert.equal(download.status, 200, 'the attachment URL opens without a key');
    assert.ok(Buffer.from(await download.arrayBuffer()).equals(readFileSync(join(dir, 'report.pdf'))));
    // 6. The dashboard is there, on the same API (test/e2e/dashboard-client.test.ts drives it in Chromium).
    const dashboard = await fetch(`http://localhost:${httpPort}/dashboard`);
    assert.equal(dashboard.status, 200);
    assert.match(dashboard.headers.get('content-type') ?? '', /^text\/html/);
    // 7. The reply ends sent, in dry-run, in the same thread.
    const thread = await until('the reply is sent', async () => {
      const t = (await api(`/threads/${threadId}`)).body;
      return t.messages.at(-1)?.status === 'sent' ? t : undefined;
    });
    assert.deepEqual(
      thread.messages.map((m: { subject: string; status: string }) => [m.subject, m.status]),
      [
        ['hello', 'received'],
        ['Re: hello', 'sent'],
      ],
    );
    const reply = thread.messages[1];
    assert.equal(reply.delivery, 'dry-run');
    assert.deepEqual(reply.toAddresses, ['you@example.org']);
    const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
    const said = /the response\s+`([^`]+)`/.exec(readme)?.[1];
    assert.ok(said, 'README names the dry-run response');
    assert.equal(reply.recipients[0].response, said);
  });
});

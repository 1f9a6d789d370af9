// mailroom init: the first command of a new installation. Asks for (or takes flags for) the
// host name, the mail domain and the outbound mode; writes a commented mailroom.toml in the
// layout of config.example.toml (the same schema renders both); creates the data directory
// and the first API key; prints the DNS records to publish and the next three commands.
import type { Command } from 'commander';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { ConfigError, configFrom, loadConfig, renderConfigFile, type Config, type ListenAddress } from '../../src/config.ts';
import { closeContext, createContext } from '../../src/context.ts';
import { defaultAccount } from '../../src/domain/accounts/accounts.ts';
import { createApiKey, listAllApiKeys } from '../../src/domain/accounts/apikeys.ts';
import { ensureSharedDkimKey } from '../../src/domain/domains/dkim-keys.ts';
import { zoneLine } from '../../src/domain/domains/domain-check.ts';
import { dnsRecordsFor } from '../../src/domain/domains/domains.ts';
import { silentLogger } from '../../src/log.ts';
import { suggestCommand } from '../invocation.ts';
import { CliError, globals, print } from '../shared.ts';
import { renderZone } from './domains.ts';

interface InitOptions {
  hostname?: string;
  domain?: string;
  mode?: string;
  dataDir?: string;
  httpListen?: string;
  smtpListen?: string;
  publicUrl?: string;
  yes?: boolean;
  force?: boolean;
}

/** A question of init: the flag that answers it, the config key it sets, its default. */
interface Question {
  flag: 'hostname' | 'domain' | 'mode';
  key: string;
  prompt: string;
  fallback: (answers: Partial<Record<Question['flag'], string>>) => string;
}

/** A first install tries things out: nothing leaves the machine until the operator says so. */
export const INIT_DEFAULT_MODE = 'dry-run';

/** mail.example.com → example.com; localhost (or a one-label name) → the config's shared domain default. */
export function defaultDomainFor(hostname: string): string {
  const labels = hostname.replace(/\.$/, '').split('.');
  return labels.length > 2 ? labels.slice(1).join('.') : labels.length === 2 ? labels.join('.') : configFrom().shared_domain;
}

const QUESTIONS: Question[] = [
  { flag: 'hostname', key: 'hostname', prompt: 'Host name of this server (EHLO name, MX target)', fallback: () => configFrom().hostname },
  { flag: 'domain', key: 'shared_domain', prompt: 'Mail domain of the inboxes (agent@DOMAIN)', fallback: (a) => defaultDomainFor(a.hostname ?? configFrom().hostname) },
  { flag: 'mode', key: 'outbound.mode', prompt: 'Outbound mode: "dry-run" (nothing leaves this machine) or "email" (live)', fallback: () => INIT_DEFAULT_MODE },
];

/** Flags that are written as given (not asked): option name → config key. */
const PLAIN_FLAGS: Array<[keyof InitOptions, string, string]> = [
  ['httpListen', 'http.listen', '--http-listen'],
  ['smtpListen', 'smtp.listen', '--smtp-listen'],
  ['publicUrl', 'http.public_url', '--public-url'],
];

/** { 'outbound.mode': 'x' } → { outbound: { mode: 'x' } }, the shape configFrom reads. */
function nest(values: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, any> = {};
  for (const [path, value] of Object.entries(values)) {
    const parts = path.split('.');
    let node = out;
    for (const p of parts.slice(0, -1)) node = node[p] ??= {};
    node[parts.at(-1)!] = value;
  }
  return out;
}

/** Checks one answer against the config schema; the error line names the flag, not the key. */
function checkAnswer(key: string, label: string, value: string): string | undefined {
  try {
    configFrom(nest({ [key]: value }));
    return undefined;
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    return `${label}: ${err.problems[0].replace(/^config key `[^`]+`: /, '')}`;
  }
}

/** Reads answers line by line from stdin (a terminal or a pipe), re-asking after a bad answer. */
async function ask(questions: Question[], given: Partial<Record<Question['flag'], string>>): Promise<Partial<Record<Question['flag'], string>>> {
  const answers = { ...given };
  const pending = questions.filter((q) => answers[q.flag] === undefined);
  if (pending.length === 0) return answers;
  // Loaded here: node:readline is half a millisecond of every other command's start (serve's too).
  // Not with import(): inside the single executable a dynamic import has no loader and throws
  // ERR_VM_DYNAMIC_IMPORT_CALLBACK_MISSING. getBuiltinModule is Node 20.16+; before it, from source, import() works.
  const { createInterface } = process.getBuiltinModule?.('node:readline') ?? (await import('node:readline'));
  const rl = createInterface({ input: process.stdin, terminal: false });
  const lines = rl[Symbol.asyncIterator]();
  try {
    for (const q of pending) {
      for (;;) {
        const fallback = q.fallback(answers);
        process.stderr.write(`${q.prompt} [${fallback}]: `);
        const next = await lines.next();
        if (next.done) throw new CliError(`no answer for --${q.flag} (stdin ended); pass --yes with flags to answer without questions`);
        const value = next.value.trim() || fallback;
        const problem = checkAnswer(q.key, `--${q.flag}`, value);
        if (!problem) {
          answers[q.flag] = value;
          break;
        }
        process.stderr.write(`mailroom: ${problem}\n`);
      }
    }
  } finally {
    rl.close();
  }
  return answers;
}

/** Where a local client reaches a listener: a wildcard address means this machine. */
const localHost = (a: ListenAddress) => (a.host === '0.0.0.0' || a.host === '::' ? '127.0.0.1' : a.host.includes(':') ? `[${a.host}]` : a.host);

/** The three commands after init: start, make an inbox, mail it. */
function nextCommands(config: Config, configArg: string | undefined, key: string): string[] {
  const http = config.http.listen!;
  const smtp = config.smtp.listen!;
  const base = `http://${localHost(http)}:${http.port}`;
  return [
    suggestCommand('serve', configArg),
    `curl -s -X POST ${base}/inboxes -H 'Authorization: Bearer ${key}' -H 'Content-Type: application/json' -d '{"address": "agent"}'`,
    `swaks --server ${localHost(smtp)}:${smtp.port} --to agent@${config.shared_domain} --from you@example.org --header 'Subject: hello' --body 'hi'`,
  ];
}

export function registerInit(program: Command): void {
  program
    .command('init')
    .description('write a commented mailroom.toml (--config FILE to name another), create the data directory and the first API key, print the DNS records and the next commands')
    .option('--hostname <name>', 'host name of this server: EHLO name and MX target (asked when not given)')
    .option('--domain <domain>', "mail domain of the inboxes, the config's shared_domain (asked when not given)")
    .option('--mode <mode>', `outbound mode, "dry-run" or "email" (asked when not given; default "${INIT_DEFAULT_MODE}")`)
    .option('--data-dir <dir>', 'data directory (default ./data), written as an absolute path')
    .option('--http-listen <host:port>', 'HTTP API address (default 127.0.0.1:3000)')
    .option('--smtp-listen <host:port>', 'SMTP listener address (default 127.0.0.1:2525; a server uses 0.0.0.0:25)')
    .option('--public-url <url>', 'base URL clients reach the API at (default http://localhost:3000)')
    .option('-y, --yes', 'ask nothing: take the flags given and the defaults for the rest')
    .option('--force', 'overwrite an existing config file')
    .option('--json', 'print what was made as JSON (the key included)')
    .action(async (opts: InitOptions, cmd: Command) => {
      const configArg = globals(cmd).config;
      const file = resolve(configArg ?? 'mailroom.toml');
      if (existsSync(file) && !opts.force) throw new CliError(`${file} exists; pass --force to overwrite it, or --config FILE to write another file`);

      // Flags are checked before any question, so a script learns of a typo at once.
      const given: Partial<Record<Question['flag'], string>> = {};
      const values: Record<string, string> = {};
      for (const q of QUESTIONS) {
        const v = opts[q.flag];
        if (v === undefined) continue;
        const problem = checkAnswer(q.key, `--${q.flag}`, v);
        if (problem) throw new CliError(problem);
        given[q.flag] = v;
      }
      for (const [opt, key, flag] of PLAIN_FLAGS) {
        const v = opts[opt];
        if (typeof v !== 'string') continue;
        const problem = checkAnswer(key, flag, v);
        if (problem) throw new CliError(problem);
        values[key] = v;
      }
      const answers = opts.yes ? given : await ask(QUESTIONS, given);
      for (const q of QUESTIONS) values[q.key] = answers[q.flag] ?? q.fallback(answers);
      values.data_dir = resolve(opts.dataDir ?? configFrom().data_dir);

      mkdirSync(dirname(file), { recursive: true });
      writeFileSync(
        file,
        renderConfigFile(
          [
            `mailroom configuration, written by \`mailroom init\` on ${new Date().toISOString().slice(0, 10)}.`,
            'The keys set below are the answers given; every other key is commented out at its default.',
            'Every key with its type and description: docs/configuration.md.',
          ],
          values,
        ),
      );
      // Read back through the loader `serve` uses: what was written is what will run.
      const config = loadConfig(file);
      const ctx = await createContext(config, silentLogger);
      let made: { key: Awaited<ReturnType<typeof createApiKey>>; first: boolean; zone: string; records: string[] };
      try {
        // An installation used before (init --force, or a config written anew) already has keys.
        const first = (await listAllApiKeys(ctx)).length === 0;
        const key = await createApiKey(ctx, (await defaultAccount(ctx)).account.id, { name: 'init' });
        await ensureSharedDkimKey(ctx);
        const records = (await dnsRecordsFor(ctx, config.shared_domain))!;
        made = { key, first, zone: renderZone(records), records: [...records.sending, ...records.receiving].map((r) => zoneLine(r)) };
      } finally {
        await closeContext(ctx);
      }
      const next = nextCommands(config, configArg, made.key.key);
      if (globals(cmd).json) {
        return print(cmd, {
          config: file,
          dataDir: resolve(config.data_dir),
          hostname: config.hostname,
          domain: config.shared_domain,
          outbound: config.outbound.mode,
          key: made.key,
          records: made.records,
          next,
        });
      }
      const mode = config.outbound.mode === 'dry-run' ? 'dry-run: nothing leaves this machine' : 'email: sending is live';
      process.stdout.write(
        `Wrote ${file} (hostname ${config.hostname}, domain ${config.shared_domain}, outbound ${mode}).\n` +
          `Data directory ${resolve(config.data_dir)}. ${made.first ? 'The first API key' : 'A new API key (this installation has keys already)'} (shown only once; store it now):\n\n    ${made.key.key}\n\n` +
          `DNS records to publish in the zone of ${config.shared_domain}, with an A record for ${config.hostname} pointing at this server\n` +
          `(not needed to try mailroom on this machine; \`${suggestCommand('domains show shared', configArg)}\` shows what DNS answers for each):\n\n` +
          made.zone +
          `\nNext:\n${next.map((c, i) => `  ${i + 1}. ${c}\n`).join('')}` +
          `Then open ${`http://${localHost(config.http.listen!)}:${config.http.listen!.port}`}/dashboard and sign in with the key.\n`,
      );
    });
}

#!/usr/bin/env node
// The mailroom command line: `serve` and the operator's commands. Every command takes
// --config FILE (default ./mailroom.toml, else the embedded defaults).
import { Command } from 'commander';
import { realpathSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import { registerAccounts } from './commands/accounts.ts';
import { registerAudit } from './commands/audit.ts';
import { registerBackup } from './commands/backup.ts';
import { registerDoctor } from './commands/doctor.ts';
import { registerDomains } from './commands/domains.ts';
import { registerInboxes } from './commands/inboxes.ts';
import { registerInit } from './commands/init.ts';
import { registerKeys } from './commands/keys.ts';
import { registerSuppressions } from './commands/suppressions.ts';
import { registerMcp } from './commands/mcp.ts';
import { registerMigrate } from './commands/migrate.ts';
import { registerTransfer } from './commands/transfer.ts';
import { registerQueue } from './commands/queue.ts';
import { registerServe } from './commands/serve.ts';
import { registerWebhooks } from './commands/webhooks.ts';
import { VERSION } from '../src/version.ts';
import { reportFailure } from './shared.ts';

const COMMANDS = [
  registerInit,
  registerServe,
  registerAccounts,
  registerKeys,
  registerInboxes,
  registerQueue,
  registerDomains,
  registerWebhooks,
  registerBackup,
  registerDoctor,
  registerMcp,
  registerMigrate,
  registerTransfer,
  registerAudit,
  registerSuppressions,
];

/** The program with every command, or with `serve` alone (see runCli). */
export function buildProgram(commands = COMMANDS): Command {
  const program = new Command('mailroom')
    .description('self-hosted email appliance for software agents')
    .version(VERSION, '-V, --version', 'print the version and exit')
    .option('--config <file>', 'config file (default: ./mailroom.toml if present, else built-in defaults)')
    .showHelpAfterError();
  for (const register of commands) register(program);
  return program;
}

/**
 * The command argv names, when only the global --config comes before it; undefined when
 * anything else does (--help, --version, an unknown option: the whole program answers those).
 */
export function commandOf(argv: string[]): string | undefined {
  for (let i = 2; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === '--config') i++;
    else if (!arg.startsWith('--config=')) return arg.startsWith('-') ? undefined : arg;
  }
  return undefined;
}

export async function runCli(argv: string[]): Promise<void> {
  try {
    // `serve` needs none of the other thirty-odd commands and their options (building them is
    // 2-3 ms of the single executable's start); its own help and errors name only it anyway.
    await buildProgram(commandOf(argv) === 'serve' ? [registerServe] : COMMANDS).parseAsync(argv);
  } catch (err) {
    process.exitCode = reportFailure(err);
  }
}

/**
 * True when this file is the program being run (`node cli/mailroom.ts`). The single executable
 * imports it from src/sea.ts, which calls runCli itself; there import.meta.url is a constant
 * no argv[1] can name (see build/build.ts), so the CLI runs exactly once.
 */
function invokedDirectly(): boolean {
  try {
    return !!process.argv[1] && import.meta.url === pathToFileURL(realpathSync(process.argv[1])).href;
  } catch {
    return false;
  }
}

// Not awaited: runCli settles every failure itself, and the bundle (CommonJS) has no top-level await.
if (invokedDirectly()) void runCli(process.argv);

#!/usr/bin/env node
// The mailroom command line: `serve` and the operator's commands. Every command takes
// --config FILE (default ./mailroom.toml, else the embedded defaults).
import { Command } from 'commander';
import { registerAccounts } from './commands/accounts.ts';
import { registerInboxes } from './commands/inboxes.ts';
import { registerKeys } from './commands/keys.ts';
import { registerServe } from './commands/serve.ts';
import { reportFailure } from './shared.ts';

export function buildProgram(): Command {
  const program = new Command('mailroom')
    .description('self-hosted email appliance for software agents')
    .option('--config <file>', 'config file (default: ./mailroom.toml if present, else built-in defaults)')
    .showHelpAfterError();
  for (const register of [registerServe, registerAccounts, registerKeys, registerInboxes]) register(program);
  return program;
}

export async function runCli(argv: string[]): Promise<void> {
  try {
    await buildProgram().parseAsync(argv);
  } catch (err) {
    process.exitCode = reportFailure(err);
  }
}

await runCli(process.argv);

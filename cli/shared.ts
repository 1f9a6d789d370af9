// What every CLI command shares: loading the config named by --config, opening the data
// directory (the same SQLite file the server uses; WAL lets both work at once), printing.
import type { Command } from 'commander';
import { ConfigError, loadConfig, type Config } from '../src/config.ts';
import { closeContext, createContext, type AppContext } from '../src/context.ts';
import { defaultAccount, getAccount } from '../src/domain/accounts/accounts.ts';
import { isAppError } from '../src/domain/errors.ts';
import { silentLogger } from '../src/log.ts';

export interface GlobalOptions {
  config?: string;
  json?: boolean;
}

export function globals(cmd: Command): GlobalOptions {
  return cmd.optsWithGlobals() as GlobalOptions;
}

export function configOf(cmd: Command): Config {
  return loadConfig(globals(cmd).config);
}

/** Runs `fn` with a context on the data directory, closing it afterwards. */
export async function withContext<T>(cmd: Command, fn: (ctx: AppContext) => T | Promise<T>): Promise<T> {
  const ctx = await createContext(configOf(cmd), silentLogger);
  try {
    return await fn(ctx);
  } finally {
    await closeContext(ctx);
  }
}

/** The account named by --account, or the default one (created if there is none). */
export async function resolveAccount(ctx: AppContext, id: string | undefined): Promise<string> {
  if (!id) return (await defaultAccount(ctx)).account.id;
  const acc = await getAccount(ctx, id);
  if (!acc) throw new CliError(`account ${id} not found (see \`mailroom accounts list\`)`);
  return acc.id;
}

export class CliError extends Error {}

/** Prints rows as aligned columns, or as JSON with --json. */
export function print(cmd: Command, value: unknown, rows?: Array<Record<string, unknown>>): void {
  if (globals(cmd).json || !rows) {
    process.stdout.write(JSON.stringify(value, null, 2) + '\n');
    return;
  }
  if (rows.length === 0) {
    process.stdout.write('(none)\n');
    return;
  }
  const cols = Object.keys(rows[0]);
  const cell = (v: unknown) => (v === null || v === undefined ? '-' : String(v));
  const widths = cols.map((c) => Math.max(c.length, ...rows.map((r) => cell(r[c]).length)));
  const line = (vals: string[]) =>
    vals
      .map((v, i) => v.padEnd(widths[i]))
      .join('  ')
      .trimEnd();
  process.stdout.write([line(cols), ...rows.map((r) => line(cols.map((c) => cell(r[c]))))].join('\n') + '\n');
}

/** Turns expected failures into one line on stderr and exit code 1 (2 for bad config: one line per bad key). */
export function reportFailure(err: unknown): number {
  if (err instanceof ConfigError) {
    process.stderr.write(err.problems.map((line) => `mailroom: ${line}\n`).join(''));
    return 2;
  }
  if (isAppError(err)) {
    // The API's wording: the same code and message as its error envelope.
    process.stderr.write(`mailroom: ${err.code}: ${err.message}\n`);
    return 1;
  }
  if (err instanceof CliError) {
    process.stderr.write(`mailroom: ${err.message}\n`);
    return 1;
  }
  process.stderr.write(`mailroom: ${(err as Error)?.stack ?? String(err)}\n`);
  return 1;
}

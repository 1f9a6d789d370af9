// AppContext: what every domain function needs, built once in main.ts (or a CLI command).
// Time and DNS are injected here so tests control them without monkey-patching.
import { join } from 'node:path';
import { ConfigError, type Config } from './config.ts';
import { openDatabase, type Db } from './db/client.ts';
import { migrateDatabase } from './db/migrate.ts';
import type { Logger } from './log.ts';
import { createResolver, type Resolver } from './dns.ts';
import { Blobs } from './storage/blobs.ts';
import { closeGroupCommit } from './db/group-commit.ts';

export interface Clock {
  now(): Date;
}
export const systemClock: Clock = { now: () => new Date() };

/**
 * In-process notifications so workers wake without polling: 'jobs' (a job was enqueued),
 * 'events' (an event was committed: the event stream and long-polls, src/domain/event-feed.ts).
 */
export type Signal = 'jobs' | 'events';

/** A long-running part of the server (HTTP, SMTP, the job runner, …), started and stopped by main.ts. */
export interface Service {
  name: string;
  start(): Promise<void>;
  /** Stop taking new work and finish what is in flight within `graceMs`. */
  stop(graceMs: number): Promise<void>;
}

export interface AppContext {
  config: Config;
  db: Db;
  log: Logger;
  clock: Clock;
  dns: Resolver;
  blobs: Blobs;
  /** Listeners registered by long-running parts (the job runner) of this process. */
  notify(signal: Signal): void;
  onSignal(signal: Signal, fn: () => void): void;
}

export function createContext(config: Config, log: Logger, opts: { clock?: Clock } = {}): AppContext {
  if (config.database.url) {
    // The storage port (src/store/) runs on PostgreSQL and `mailroom migrate` prepares its schema;
    // the domain moves onto the port next. Until then a node must not start on a database it cannot serve.
    throw new ConfigError([
      'database.url: this release serves from the embedded SQLite database only; PostgreSQL is accepted by `mailroom migrate` (see docs/operations.md, "Several nodes")',
    ]);
  }
  const db = openDatabase(join(config.data_dir, 'mailroom.db'));
  migrateDatabase(db);
  const listeners = new Map<Signal, Array<() => void>>();
  return {
    config,
    db,
    log,
    clock: opts.clock ?? systemClock,
    dns: createResolver(config.dns.servers, config.dns.timeout),
    blobs: new Blobs(config.data_dir),
    notify(signal) {
      for (const fn of listeners.get(signal) ?? []) fn();
    },
    onSignal(signal, fn) {
      listeners.set(signal, [...(listeners.get(signal) ?? []), fn]);
    },
  };
}

export function closeContext(ctx: AppContext): void {
  closeGroupCommit(ctx.db);
  ctx.db.$client.close();
}

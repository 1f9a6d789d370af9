// AppContext: what every domain function needs, built once in main.ts (or a CLI command).
// Time and DNS are injected here so tests control them without monkey-patching.
import type { Config } from './config.ts';
import type { Db } from './store/client.ts';
import { exitOnFatal, type Logger } from './log.ts';
import { createResolver, type Resolver } from './dns.ts';
import { Blobs, type BlobStore } from './store/blobs/blobs.ts';
import { DbBlobs } from './store/blobs/pg-blobs.ts';
import { openStore } from './store/open.ts';
import { loadUrlSigningSecret } from './store/signed-url.ts';
import type { Store } from './store/store.ts';

export interface Clock {
  now(): Date;
}
export const systemClock: Clock = { now: () => new Date() };

/**
 * In-process notifications so workers wake without polling: 'jobs' (a job was enqueued),
 * 'events' (an event was committed: the event stream and long-polls, src/domain/events/event-feed.ts).
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
  /** The database (src/store/): transactions, and the engine's few differences. */
  store: Store;
  /** The store's handle for work outside a transaction (`store.db`). */
  db: Db;
  log: Logger;
  clock: Clock;
  dns: Resolver;
  /** Raw messages and attachment bytes: files under data_dir, or rows on PostgreSQL. */
  blobs: BlobStore;
  /** Listeners registered by long-running parts (the job runner) of this process. */
  notify(signal: Signal): void;
  onSignal(signal: Signal, fn: () => void): void;
}

export async function createContext(config: Config, log: Logger, opts: { clock?: Clock } = {}): Promise<AppContext> {
  const store = await openStore({
    dataDir: config.data_dir,
    databaseUrl: config.database.url,
    postgres: { limits: config.database, max: config.database.connections, apiMax: config.database.api_connections, log },
    fatal: (err) => exitOnFatal(log, 'the database cannot be made durable: stopping', err),
  });
  const listeners = new Map<Signal, Array<() => void>>();
  const ctx: AppContext = {
    config,
    store,
    db: store.db,
    log,
    clock: opts.clock ?? systemClock,
    dns: createResolver(config.dns.servers, config.dns.timeout),
    blobs: store.dialect === 'postgres' ? new DbBlobs(store) : new Blobs(config.data_dir, store),
    notify(signal) {
      for (const fn of listeners.get(signal) ?? []) fn();
      store.announce(signal);
    },
    onSignal(signal, fn) {
      // The first listener of this process also hears what other processes announce.
      if (listeners.size === 0) store.listen((s) => listeners.get(s as Signal)?.forEach((f) => f()));
      listeners.set(signal, [...(listeners.get(signal) ?? []), fn]);
    },
  };
  // Every node signs download URLs and bounce addresses with the one shared secret.
  if (store.dialect === 'postgres') {
    await loadUrlSigningSecret(ctx).catch(async (err: unknown) => {
      await store.close();
      throw err;
    });
  }
  return ctx;
}

export function closeContext(ctx: AppContext): Promise<void> {
  return ctx.store.close();
}

// The single executable's main script (bundled by build/build.ts, run by src/sea-loader.ts with
// its code cache). Inside a Node SEA there is no node_modules and no migrations/ folder: the
// SQLite addon and the migrations travel as SEA assets and are handed to the database layer
// before the CLI runs.
// First, so that the filter is in place before any bundled module runs.
import './bundle-warnings.ts';
import type { MigrationMeta } from 'drizzle-orm/migrator';
import { markBuiltBinary } from '../cli/invocation.ts';
import { commandOf, runCli } from '../cli/mailroom.ts';
import { addonCacheDirs, loadCachedAddon } from './addon-cache.ts';
import { setNativeBinding } from './store/client.ts';
import { useExecutableAsTextWorker } from './domain/mail/attachment-text.ts';
import { ANALYSIS_WORKER_ASSET, assetBytes, assetText, beforeChunkCompile, SEARCH_WORKER_ASSET } from './sea-chunks.ts';
import { setSearchWorkerSource } from './store/search-reader.ts';
import { setAnalysisWorkerSource } from './domain/inbound/analysis.ts';
import { setEmbeddedMigrations } from './store/migrate-sqlite.ts';
import { setEmbeddedPgMigrations } from './store/migrate.ts';
import { resumeOptimizingTiers } from './startup-tiers.ts';

/** Asset names; build/build.ts writes them under the same names. */
const ADDON_ASSET = 'better_sqlite3.node';
const ADDON_SHA256_ASSET = 'better_sqlite3.node.sha256';
const MIGRATIONS_ASSET = 'migrations.json';
const PG_MIGRATIONS_ASSET = 'migrations-pg.json';

function boot(): boolean {
  try {
    const embedded = { sha256: assetText(ADDON_SHA256_ASSET), bytes: () => new Uint8Array(assetBytes(ADDON_ASSET)) };
    const addon = loadCachedAddon('better_sqlite3', embedded, addonCacheDirs());
    setNativeBinding(addon.exports);
    setEmbeddedMigrations(JSON.parse(assetText(MIGRATIONS_ASSET)) as MigrationMeta[]);
    setEmbeddedPgMigrations(JSON.parse(assetText(PG_MIGRATIONS_ASSET)) as MigrationMeta[]);
    // Text extraction processes are this executable again (src/sea-loader.ts).
    useExecutableAsTextWorker();
    // A worker compiles the "mail" chunk with its code cache, which the compilers must be on for
    // (src/startup-tiers.ts); so does the main thread's first use of a chunk.
    setAnalysisWorkerSource(() => {
      resumeOptimizingTiers();
      return assetText(ANALYSIS_WORKER_ASSET);
    });
    beforeChunkCompile(resumeOptimizingTiers);
    setSearchWorkerSource(() => assetText(SEARCH_WORKER_ASSET), addon.path);
    return true;
  } catch (err) {
    process.stderr.write(`mailroom: ${(err as Error).message}\n`);
    process.exitCode = 1;
    return false;
  }
}

// No top-level await: the bundle is CommonJS (what the SEA blob holds here).
if (boot()) {
  // `serve` turns them on once it has started (src/memory.ts).
  if (commandOf(process.argv) !== 'serve') resumeOptimizingTiers();
  markBuiltBinary();
  void runCli(process.argv);
}

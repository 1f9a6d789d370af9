// `mailroom export` / `mailroom import`: a whole installation moved between the two engines
// (SQLite → PostgreSQL to scale out, or back), keeping every id, key and message.
//
// The archive is one gzipped tar, mode 0600:
//   manifest.json         format, source engine, row count per table, blob count, salt
//   tables/<table>.jsonl  one row per line, columns by their SQL names; bytes as {"$b64": …}
//   blobs/<key>           raw messages and attachment bytes, under the keys rows name
//   secrets.enc           the secret parts, sealed with the export passphrase
// The secret parts — DKIM private keys, webhook signing secrets, and data_dir's secret files
// (the URL-signing key, the shared domain's DKIM key) — are sealed with AES-256-GCM under a
// key derived by scrypt from a passphrase the operator gives on both sides; their columns are
// empty in the JSONL. API keys travel as the SHA-256 hashes the database holds (the keys
// themselves are never stored). Import refuses a wrong passphrase before writing anything.
import { createCipheriv, createDecipheriv, randomBytes, scryptSync } from 'node:crypto';
import { existsSync, promises as fs } from 'node:fs';
import { dirname, join, relative, sep } from 'node:path';
import { getTableColumns, getTableName } from 'drizzle-orm';
import { createReadStream } from 'node:fs';
import { createInterface } from 'node:readline';
import { getTableConfig, type SQLiteColumn, type SQLiteTable } from 'drizzle-orm/sqlite-core';
import * as schema from './schema.ts';
import { Blobs, isRowBlob } from './blobs/blobs.ts';
import { PgBlobs } from './blobs/pg-blobs.ts';
import { spooledSourceJob } from './blobs/spooled.ts';
import { listSecrets, SECRET_PATH, writeSecret } from './secrets.ts';
import type { Db, Store } from './store.ts';

export const TRANSFER_FORMAT = 1;
const MANIFEST = 'manifest.json';
const SECRETS = 'secrets.enc';

export class TransferError extends Error {}

/** Columns whose values are secrets: sealed in secrets.enc, empty in the JSONL. */
const SECRET_COLUMNS: Record<string, string[]> = { domains: ['dkim_private_key'], webhooks: ['secret'] };

/** Tables the database maintains itself (triggers rebuild them as rows arrive). */
const DERIVED = new Set(['inbox_message_counts', 'account_usage']);

/**
 * The shape of every blob key mailroom writes (Blobs.key, Blobs.contentKey): a kind, then
 * plain path segments. An archive naming anything else (`..`, an absolute path) is refused.
 */
const BLOB_KEY = /^(?:raw|attachments)(?:\/[A-Za-z0-9_][A-Za-z0-9_.-]*)+$/;
/** The secret files an export carries: the URL-signing key and the DKIM keys' directory. */

/** Where rows name blobs. */
const BLOB_COLUMNS: Array<[string, string]> = [
  ['messages', 'raw_path'],
  ['attachments', 'storage_path'],
];

export interface TransferManifest {
  format: number;
  createdAt: string;
  source: Store['dialect'];
  tables: Record<string, number>;
  blobs: number;
  /** Blob keys rows name whose bytes were missing at export (normally empty). */
  missing: string[];
  /** scrypt salt of the sealed secrets, hex. */
  salt: string;
}

/** Every table of the schema, parents before children (foreign keys), derived ones left out. */
export function transferTables(): SQLiteTable[] {
  const all = (Object.values(schema) as unknown[]).filter((v): v is SQLiteTable => typeof v === 'object' && v !== null && Symbol.for('drizzle:IsDrizzleTable') in v);
  const ordered: SQLiteTable[] = [];
  const visit = (t: SQLiteTable, path: Set<SQLiteTable>) => {
    if (ordered.includes(t) || path.has(t)) return;
    path.add(t);
    for (const fk of getTableConfig(t).foreignKeys) {
      const parent = fk.reference().foreignTable as SQLiteTable;
      if (parent !== t) visit(parent, path);
    }
    ordered.push(t);
  };
  for (const t of all) visit(t, new Set());
  return ordered.filter((t) => !DERIVED.has(getTableName(t)));
}

function sealKey(passphrase: string, salt: Buffer): Buffer {
  if (passphrase.length < 12) throw new TransferError('the passphrase must be at least 12 characters');
  return scryptSync(passphrase, salt, 32, { N: 2 ** 15, r: 8, p: 1, maxmem: 64 * 1024 * 1024 });
}

function seal(data: Buffer, key: Buffer): Buffer {
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', key, iv);
  const body = Buffer.concat([cipher.update(data), cipher.final()]);
  return Buffer.concat([iv, cipher.getAuthTag(), body]);
}

function unseal(data: Buffer, key: Buffer): Buffer {
  const decipher = createDecipheriv('aes-256-gcm', key, data.subarray(0, 12));
  decipher.setAuthTag(data.subarray(12, 28));
  try {
    return Buffer.concat([decipher.update(data.subarray(28)), decipher.final()]);
  } catch {
    throw new TransferError('wrong passphrase (or a damaged archive): nothing was imported');
  }
}

interface Sealed {
  /** table → primary key JSON → column → value */
  columns: Record<string, Record<string, Record<string, string>>>;
  /** data_dir-relative path → base64 */
  files: Record<string, string>;
}

const encodeValue = (v: unknown) => (Buffer.isBuffer(v) ? { $b64: v.toString('base64') } : v);
const decodeValue = (v: unknown) => (v && typeof v === 'object' && '$b64' in v ? Buffer.from((v as { $b64: string }).$b64, 'base64') : v);

/** Where an installation's blobs live: data_dir on SQLite, blob_chunks on PostgreSQL. */
interface BlobSide {
  read(key: string): Promise<Buffer>;
  write(tx: Db, key: string, data: Buffer): Promise<void>;
}

function blobSide(store: Store, dataDir: string): BlobSide {
  if (store.dialect === 'postgres') {
    const pg = new PgBlobs(store);
    return { read: (key) => pg.read(store.db, key), write: (tx, key, data) => pg.write(tx, key, data) };
  }
  // Row blobs (Blobs.rowKey) are in the database on SQLite too, written with the imported rows.
  const disk = new Blobs(dataDir, store);
  return { read: (key) => disk.read(key), write: (tx, key, data) => (isRowBlob(key) ? disk.writeRowsIn(tx, key, data) : disk.write(key, data)) };
}

const PAGE = 1000;

async function* rowsOf(store: Store, table: SQLiteTable): AsyncGenerator<Record<string, unknown>> {
  const columns = getTableConfig(table).columns;
  const names = columns.map((c) => `"${c.name}"`).join(', ');
  const order = primaryKeyColumns(table)
    .map((c) => `"${c}"`)
    .join(', ');
  for (let offset = 0; ; offset += PAGE) {
    const page = await store.rows(store.db, `SELECT ${names} FROM "${getTableName(table)}" ORDER BY ${order} LIMIT ? OFFSET ?`, [PAGE, offset]);
    for (const values of page) yield Object.fromEntries(columns.map((c, i) => [c.name, values[i]]));
    if (page.length < PAGE) return;
  }
}

function primaryKeyColumns(table: SQLiteTable): string[] {
  const config = getTableConfig(table);
  const single = config.columns.filter((c) => c.primary).map((c) => c.name);
  return single.length ? single : (config.primaryKeys[0]?.columns ?? config.columns).map((c) => c.name);
}

/** Writes the archive of `store` (and the secret files of `dataDir`) to `file`. */
export async function exportInstallation(opts: { store: Store; dataDir: string; file: string; passphrase: string; staging: string }): Promise<TransferManifest & { file: string; bytes: number }> {
  const { store, dataDir, staging } = opts;
  const salt = randomBytes(16);
  const key = sealKey(opts.passphrase, salt);
  await fs.mkdir(join(staging, 'tables'), { recursive: true, mode: 0o700 });
  const manifest: TransferManifest = { format: TRANSFER_FORMAT, createdAt: new Date().toISOString(), source: store.dialect, tables: {}, blobs: 0, missing: [], salt: salt.toString('hex') };
  const sealed: Sealed = { columns: {}, files: {} };
  const blobKeys = new Set<string>();
  const exportedSpooled = new Set<string>();
  for (const table of transferTables()) {
    const name = getTableName(table);
    const secret = SECRET_COLUMNS[name] ?? [];
    const pk = primaryKeyColumns(table);
    const out = await fs.open(join(staging, 'tables', `${name}.jsonl`), 'w', 0o600);
    let n = 0;
    try {
      for await (const row of rowsOf(store, table)) {
        for (const column of secret) {
          if (row[column] == null) continue;
          ((sealed.columns[name] ??= {})[JSON.stringify(pk.map((c) => row[c]))] ??= {})[column] = String(row[column]);
          row[column] = '';
        }
        for (const [t, c] of BLOB_COLUMNS) if (t === name && typeof row[c] === 'string') blobKeys.add(row[c] as string);
        if (name === 'spooled_messages') exportedSpooled.add(row.job_id as string);
        await out.write(JSON.stringify(Object.fromEntries(Object.entries(row).map(([k, v]) => [k, encodeValue(v)]))) + '\n');
        n++;
      }
    } finally {
      await out.close();
    }
    manifest.tables[name] = n;
  }
  const blobs = blobSide(store, dataDir);
  for (const k of [...blobKeys].sort()) {
    // A spooled row kept as a message's source travels with the spooled_messages table.
    const job = spooledSourceJob(k);
    if (job !== undefined) {
      if (!exportedSpooled.has(job)) manifest.missing.push(k);
      continue;
    }
    let data: Buffer;
    try {
      data = await blobs.read(k);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
      manifest.missing.push(k);
      continue;
    }
    const dest = join(staging, 'blobs', k);
    await fs.mkdir(dirname(dest), { recursive: true });
    await fs.writeFile(dest, data, { mode: 0o600 });
    manifest.blobs++;
  }
  for (const [path, value] of await listSecrets(store, dataDir)) sealed.files[path] = Buffer.from(value).toString('base64');
  await fs.writeFile(join(staging, SECRETS), seal(Buffer.from(JSON.stringify(sealed)), key), { mode: 0o600 });
  await fs.writeFile(join(staging, MANIFEST), JSON.stringify(manifest, null, 2), { mode: 0o600 });
  const tar = await import('tar');
  const partial = `${opts.file}.partial`;
  await fs.writeFile(partial, '', { mode: 0o600 }); // tar keeps the mode of the file it fills
  await tar.create({ gzip: true, file: partial, cwd: staging, portable: true }, [MANIFEST, SECRETS, 'tables', ...(manifest.blobs ? ['blobs'] : [])]);
  await fs.chmod(partial, 0o600);
  await fs.rename(partial, opts.file);
  return { ...manifest, file: opts.file, bytes: (await fs.stat(opts.file)).size };
}

async function filesUnder(path: string): Promise<string[]> {
  if (!existsSync(path)) return [];
  const stat = await fs.stat(path);
  if (stat.isFile()) return [path];
  const out: string[] = [];
  for (const e of await fs.readdir(path, { withFileTypes: true })) out.push(...(await filesUnder(join(path, e.name))));
  return out;
}

/**
 * Loads an archive into `store`, which must hold no account yet (a fresh database after
 * `mailroom migrate`); rows and (on PostgreSQL) blobs in one transaction, secret files into
 * `dataDir`. The passphrase is checked first.
 */
export async function importInstallation(opts: { store: Store; dataDir: string; file: string; passphrase: string; staging: string }): Promise<TransferManifest> {
  const { store, dataDir, staging } = opts;
  const tar = await import('tar');
  await fs.mkdir(staging, { recursive: true, mode: 0o700 });
  try {
    await tar.extract({ file: opts.file, cwd: staging, strict: true });
  } catch (err) {
    throw new TransferError(`${opts.file} is not a mailroom export: ${(err as Error).message}`);
  }
  let manifest: TransferManifest;
  try {
    manifest = JSON.parse(await fs.readFile(join(staging, MANIFEST), 'utf8')) as TransferManifest;
  } catch {
    throw new TransferError(`${opts.file} is not a mailroom export (no ${MANIFEST})`);
  }
  if (manifest.format !== TRANSFER_FORMAT) throw new TransferError(`${opts.file} has export format ${manifest.format}; this release reads format ${TRANSFER_FORMAT}`);
  const sealed = JSON.parse(unseal(await fs.readFile(join(staging, SECRETS)), sealKey(opts.passphrase, Buffer.from(manifest.salt, 'hex'))).toString('utf8')) as Sealed;
  const [present] = await store.rows<[number]>(store.db, 'SELECT count(*) FROM accounts');
  if (present?.[0]) throw new TransferError(`the target database already holds ${present[0]} account(s): import needs an empty one (a fresh database after \`mailroom migrate\`)`);
  for (const rel of Object.keys(sealed.files)) {
    if (!SECRET_PATH.test(rel.split(sep).join('/'))) throw new TransferError(`refusing secret file ${JSON.stringify(rel)}: only url-signing.key and dkim/ are carried; nothing was imported`);
  }
  const blobs = blobSide(store, dataDir);
  const tables = new Map(transferTables().map((t) => [getTableName(t), t]));
  await store.transaction(async (tx: Db) => {
    for (const [name, table] of tables) {
      const file = join(staging, 'tables', `${name}.jsonl`);
      if (!existsSync(file)) continue;
      const keyOf = new Map(Object.entries(getTableColumns(table)).map(([k, c]) => [(c as SQLiteColumn).name, k]));
      const pk = primaryKeyColumns(table);
      const secrets = sealed.columns[name] ?? {};
      const booleans = booleanColumns(table);
      let batch: Record<string, unknown>[] = [];
      const flush = async () => {
        if (batch.length) await tx.insert(table).values(batch as never);
        batch = [];
      };
      for await (const line of createInterface({ input: createReadStream(file), crlfDelay: Infinity })) {
        if (!line) continue;
        const raw = JSON.parse(line) as Record<string, unknown>;
        const values = Object.fromEntries(Object.entries(raw).map(([k, v]) => [k, decodeValue(v)]));
        for (const [t, c] of BLOB_COLUMNS) {
          if (t === name && values[c] != null && !BLOB_KEY.test(String(values[c])))
            throw new TransferError(`refusing ${name}.${c} ${JSON.stringify(values[c])}: not a blob key mailroom writes; nothing was imported`);
        }
        Object.assign(values, secrets[JSON.stringify(pk.map((c) => values[c]))] ?? {});
        batch.push(Object.fromEntries(Object.entries(values).map(([column, v]) => [keyOf.get(column) ?? column, booleans.has(column) ? Boolean(v) : v])));
        if (batch.length >= 200) await flush();
      }
      await flush();
    }
    const root = join(staging, 'blobs');
    for (const file of await filesUnder(root)) {
      const key = relative(root, file).split(sep).join('/');
      if (!BLOB_KEY.test(key)) throw new TransferError(`refusing blob ${JSON.stringify(key)}: not a blob key mailroom writes; nothing was imported`);
      await blobs.write(tx, key, await fs.readFile(file));
    }
  });
  for (const [rel, b64] of Object.entries(sealed.files)) await writeSecret(store, store.db, dataDir, rel.split(sep).join('/'), Buffer.from(b64, 'base64').toString('utf8'));
  return manifest;
}

/** SQL names of a table's boolean-mode columns (stored 0/1, given to the builder as booleans). */
function booleanColumns(table: SQLiteTable): Set<string> {
  return new Set(
    getTableConfig(table)
      .columns.filter((c) => c.columnType === 'SQLiteBoolean')
      .map((c) => c.name),
  );
}

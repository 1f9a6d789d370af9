// Files on disk under data_dir: raw messages and attachment bytes. Writes go to a temporary
// name, are fsynced, then renamed into place (and the directory fsynced), so a file that exists
// is complete and a file written before a 250 survives power loss.
import { closeSync, createReadStream, createWriteStream, existsSync, fsyncSync, linkSync, mkdirSync, openSync, promises as fs, renameSync, unlinkSync, writeSync, type WriteStream } from 'node:fs';
import { dirname, join, resolve, sep } from 'node:path';
import { randomBytes } from 'node:crypto';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { Db, Store } from '../store.ts';
import { readSpooledSource, spooledSourceJob, streamSpooledSource } from './spooled.ts';
import { deleteSpooledMessage } from '../repo/spool.ts';
import { PgBlobs } from './pg-blobs.ts';

/**
 * Keys of blobs kept in the database on either engine (Blobs.rowKey): rows of blob_chunks, written
 * in the transaction that commits the rows naming them. Small outbound sources are kept so: a
 * file costs a create, an fsync, a rename and a directory fsync per message, which was most of
 * what a send cost (docs/performance.md).
 */
export const ROW_BLOB_PREFIX = 'raw/rows/';

export const isRowBlob = (rel: string): boolean => rel.startsWith(ROW_BLOB_PREFIX);

/**
 * The largest source kept as rows; a larger one is a file. Sends share group commits of up to
 * 256 transactions (src/store/sqlite.ts MAX_BATCH): one then writes at most 16 MiB of sources,
 * within the write-ahead log's usual size (docs/operations.md).
 */
export const ROW_BLOB_MAX_BYTES = 64 * 1024;

/**
 * Where raw messages and attachment bytes live: files under data_dir (Blobs) with the embedded
 * database, rows of blob_chunks (DbBlobs, src/store/blobs/pg-blobs.ts) with PostgreSQL, so that no
 * node needs another's disk. Keys are relative paths (Blobs.key, Blobs.contentKey). Every write
 * is durable when it resolves, except writeRowsIn's, which commits with its transaction. On
 * both engines small outbound sources are rows (ROW_BLOB_PREFIX), and a spooled message's
 * source is its spooled row (src/store/blobs/spooled.ts).
 */
export interface BlobStore {
  /** Writes `data` (several buffers are written one after another, never joined in memory). */
  write(rel: string, data: Buffer | string | Buffer[]): Promise<void>;
  /** Streams into place; if the source errors (a size limit, a dropped client) nothing is left behind. */
  writeStream(rel: string, source: Readable): Promise<void>;
  /** Moves a finished staged file (src/store/blobs/staging.ts) into place; the staged file is gone after. */
  adopt(rel: string, staged: string): Promise<void>;
  /**
   * Only where blobs are rows (PostgreSQL): writes through `tx`, so the bytes commit with the
   * rows that name them instead of in a transaction (and a commit) of their own. A staged file
   * is read, not moved: its owner removes it. Files cannot join a transaction: Blobs has none.
   */
  writeIn?(tx: Db, rel: string, data: Buffer | Buffer[] | { staged: string }): Promise<void>;
  /** Writes a blob kept in the database (a Blobs.rowKey key) through `tx`: it commits with the rows that name it. */
  writeRowsIn(tx: Db, rel: string, data: Buffer): Promise<void>;
  /** Gives a content-addressed key its bytes from a staged file, unless it has them; the staged file stays. */
  link(rel: string, staged: string): Promise<void>;
  /**
   * In the transaction committing a row that names content-addressed `rel`: puts the bytes back
   * if the deletion of the last other row sharing them removed them since they were written.
   */
  ensure(tx: Db, rel: string, content: Buffer | { staged: string }): Promise<void>;
  /** In the transaction that found no row naming `rel` (src/store/blobs/blob-refs.ts): removes it; answers 1, or 0 when it was not there. */
  remove(tx: Db, rel: string): Promise<number>;
  /** The bytes; rejects with code ENOENT when there is no such blob. */
  read(rel: string): Promise<Buffer>;
  /** The bytes as a stream, read as they are sent. */
  stream(rel: string): Readable;
  /** A page of blobs kept as rows (by key, after `after`), with those written before `beforeMs` (epoch) that no row names: the orphan sweep's candidates. */
  unreferenced(beforeMs: number, after: string, limit: number): Promise<UnreferencedPage>;
}

/** A page of the orphan sweep over blobs kept as rows: the unnamed old ones, and the key the next page starts after (none: the last page). */
export interface UnreferencedPage {
  keys: string[];
  last: string | undefined;
}

export class Blobs implements BlobStore {
  readonly root: string;
  /** Directories known to exist: one mkdir per month directory, not one per message. */
  private readonly made = new Set<string>();
  /**
   * The database whose rows hold some blobs: spooled messages' sources (src/store/blobs/spooled.ts)
   * and row blobs (ROW_BLOB_PREFIX). None for a bare directory (the unit tests').
   */
  private readonly store: Store | undefined;
  private readonly rows: PgBlobs | undefined;
  constructor(dataDir: string, store?: Store) {
    this.root = resolve(dataDir);
    this.store = store;
    this.rows = store && new PgBlobs(store);
  }

  private database(rel: string): { db: Db; rows: PgBlobs } {
    if (!this.store || !this.rows) throw new Error(`blob ${rel} is in the database, which this blob store has not`);
    return { db: this.store.db, rows: this.rows };
  }

  /** Per directory: the fsync not yet started (joined by renames made before it starts) and the one running. */
  private readonly syncWaiting = new Map<string, Promise<void>>();
  private readonly syncRunning = new Map<string, Promise<void>>();

  /**
   * Makes the renames already done in `dir` durable: a rename is on disk once an fsync of its
   * directory that started after it has finished (POSIX promises nothing sooner; ext4 happens
   * to, XFS and btrfs need it). Renames made while one fsync runs share the next one, so a burst
   * of messages costs a few directory fsyncs, not one each.
   */
  private syncDir(dir: string): Promise<void> {
    const waiting = this.syncWaiting.get(dir);
    if (waiting) return waiting;
    const next = (async () => {
      await this.syncRunning.get(dir)?.catch(() => undefined);
      this.syncWaiting.delete(dir);
      const run = (async () => {
        const fh = await fs.open(dir, 'r');
        try {
          await fh.sync();
        } finally {
          await fh.close();
        }
      })();
      this.syncRunning.set(dir, run);
      try {
        await run;
      } finally {
        if (this.syncRunning.get(dir) === run) this.syncRunning.delete(dir);
      }
    })();
    this.syncWaiting.set(dir, next);
    return next;
  }

  private async ensureDir(dir: string): Promise<void> {
    if (this.made.has(dir)) return;
    await fs.mkdir(dir, { recursive: true });
    this.made.add(dir);
  }

  /** Absolute path of a stored relative path; refuses anything that escapes data_dir, and row blobs (never files). */
  path(rel: string): string {
    if (isRowBlob(rel)) throw new Error(`blob ${rel} is kept in the database, not in a file`);
    const abs = resolve(this.root, rel);
    if (!abs.startsWith(this.root + sep)) throw new Error(`blob path escapes data_dir: ${rel}`);
    return abs;
  }

  /** Writes `data` (several buffers are written one after another, never joined in memory). */
  async write(rel: string, data: Buffer | string | Buffer[]): Promise<void> {
    const abs = this.path(rel);
    const dir = dirname(abs);
    await this.ensureDir(dir);
    const tmp = `${abs}.${randomBytes(4).toString('hex')}.tmp`;
    // writeFile with flush (Node ≥ 20.10) fsyncs before closing; one call instead of a
    // FileHandle's open/write/sync/close round trips, which cost the event loop about twice as
    // much per file (bench/: ~210 vs ~105 µs of loop time per 10 KB write). Several buffers (a
    // large message and its trace fields) go through writev instead of a joined copy.
    const put = Array.isArray(data)
      ? async () => {
          const fh = await fs.open(tmp, 'w', 0o600);
          try {
            // writev may write less than asked (like write(2)): go on from where it stopped.
            let rest = data.filter((b) => b.length > 0);
            while (rest.length) {
              let { bytesWritten } = await fh.writev(rest);
              while (rest.length && bytesWritten >= rest[0].length) bytesWritten -= rest.shift()!.length;
              if (rest.length) rest[0] = rest[0].subarray(bytesWritten);
            }
            await fh.sync();
          } finally {
            await fh.close();
          }
        }
      : () => fs.writeFile(tmp, data, { mode: 0o600, flush: true });
    try {
      await put().catch(async (err: NodeJS.ErrnoException) => {
        // The directory went away behind our back (restore, manual cleanup): make it again.
        if (err.code !== 'ENOENT') throw err;
        this.made.delete(dir);
        await this.ensureDir(dir);
        await put();
      });
      await fs.rename(tmp, abs);
      await this.syncDir(dir);
    } catch (err) {
      await fs.rm(tmp, { force: true });
      throw err;
    }
  }

  /** Streams into place; if the source errors (a size limit, a dropped client) nothing is left behind. */
  async writeStream(rel: string, source: Readable): Promise<void> {
    // An error emitted before pipeline() listens (while mkdir runs: a client that sends a
    // truncated upload) would be an uncaught 'error' event and end the process; pipeline()
    // still sees it (the stream is left errored) and rejects.
    const early = () => {};
    source.on('error', early);
    const abs = this.path(rel);
    const tmp = `${abs}.${randomBytes(4).toString('hex')}.tmp`;
    let out: WriteStream | undefined;
    try {
      await fs.mkdir(dirname(abs), { recursive: true });
      out = createWriteStream(tmp, { mode: 0o600 });
      await pipeline(source, out);
      const fh = await fs.open(tmp, 'r+');
      try {
        await fh.sync();
      } finally {
        await fh.close();
      }
      await fs.rename(tmp, abs);
      await this.syncDir(dirname(abs));
    } catch (err) {
      // pipeline() rejects as soon as the source fails (413, client gone), possibly before the
      // write stream has even opened its file: removing it then would leave the file behind.
      const opened = out;
      if (opened && !opened.closed) await new Promise<void>((resolve) => opened.once('close', () => resolve()));
      await fs.rm(tmp, { force: true });
      throw err;
    } finally {
      source.off('error', early);
    }
  }

  /**
   * Moves a finished staged file (src/store/blobs/staging.ts, fsynced) into place under `rel` by a
   * rename: the bytes are not written again.
   */
  async adopt(rel: string, staged: string): Promise<void> {
    const abs = this.path(rel);
    const dir = dirname(abs);
    await this.ensureDir(dir);
    await fs.rename(staged, abs);
    await this.syncDir(dir);
  }

  /**
   * Gives a content-addressed file (contentKey) its bytes from a staged file by a hard link; a
   * file already there (the same content, from another message) is kept. The staged file stays
   * until the caller removes it: linkSync may need it again at commit.
   */
  async link(rel: string, staged: string): Promise<void> {
    const abs = this.path(rel);
    const dir = dirname(abs);
    await this.ensureDir(dir);
    await fs.link(staged, abs).catch((err: NodeJS.ErrnoException) => {
      if (err.code !== 'EEXIST') throw err;
    });
    await this.syncDir(dir);
  }

  /** ensureSync for a file linked from a staged one: put back at commit time if it was removed meanwhile. */
  private linkSync(rel: string, staged: string): void {
    const abs = this.path(rel);
    if (existsSync(abs)) return;
    mkdirSync(dirname(abs), { recursive: true });
    linkSync(staged, abs);
    this.fsyncDirSync(dirname(abs));
  }

  private fsyncDirSync(dir: string): void {
    const fd = openSync(dir, 'r');
    try {
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
  }

  read(rel: string): Promise<Buffer> {
    const job = spooledSourceJob(rel);
    if (job) return readSpooledSource(this.database(rel).db, job);
    if (isRowBlob(rel)) {
      const { db, rows } = this.database(rel);
      return rows.read(db, rel);
    }
    return fs.readFile(this.path(rel));
  }

  stream(rel: string): Readable {
    const job = spooledSourceJob(rel);
    if (job) return streamSpooledSource(this.database(rel).db, job);
    if (isRowBlob(rel)) return this.database(rel).rows.stream(rel);
    return createReadStream(this.path(rel));
  }

  writeRowsIn(tx: Db, rel: string, data: Buffer): Promise<void> {
    if (!isRowBlob(rel)) throw new Error(`blob ${rel} is a file: it cannot join a transaction`);
    return this.database(rel).rows.write(tx, rel, data);
  }

  async unreferenced(beforeMs: number, after: string, limit: number): Promise<UnreferencedPage> {
    return this.rows ? this.rows.unreferenced(beforeMs, after, limit) : { keys: [], last: undefined };
  }

  async ensure(_tx: Db, rel: string, content: Buffer | { staged: string }): Promise<void> {
    // Synchronous: nothing else runs on the one connection between this and the COMMIT.
    if (Buffer.isBuffer(content)) this.ensureSync(rel, content);
    else this.linkSync(rel, content.staged);
  }

  async remove(tx: Db, rel: string): Promise<number> {
    const job = spooledSourceJob(rel);
    if (job) return deleteSpooledMessage(tx, job);
    if (isRowBlob(rel)) return this.database(rel).rows.removeKey(tx, rel);
    try {
      unlinkSync(this.path(rel));
      return 1;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
      return 0;
    }
  }

  /**
   * Makes sure a content-addressed file is in place at commit time, synchronously (inside the
   * transaction that adds a row naming it): a file written earlier may have been removed
   * meanwhile by the deletion of the last other message that shared it.
   */
  private ensureSync(rel: string, data: Buffer): void {
    const abs = this.path(rel);
    if (existsSync(abs)) return;
    mkdirSync(dirname(abs), { recursive: true });
    const tmp = `${abs}.${randomBytes(4).toString('hex')}.tmp`;
    const fd = openSync(tmp, 'w', 0o600);
    try {
      writeSync(fd, data);
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    renameSync(tmp, abs);
    this.fsyncDirSync(dirname(abs));
  }

  /**
   * The path of content stored once however many messages share it:
   * <kind>/sha256/<first two hex digits>/<sha256>. Rows name it; the file goes with the last
   * row (removeUnreferenced).
   */
  static contentKey(kind: 'attachments', sha256: string): string {
    return join(kind, 'sha256', sha256.slice(0, 2), sha256);
  }

  /** The key of a blob kept in the database on either engine (ROW_BLOB_PREFIX): raw/rows/<id><ext>. */
  static rowKey(id: string, ext = ''): string {
    return `${ROW_BLOB_PREFIX}${id}${ext}`;
  }

  /** A fresh relative path for a new blob: <kind>/<yyyy-mm>/<id><ext>. */
  static key(kind: 'raw' | 'attachments', id: string, ext = ''): string {
    const d = new Date();
    const month = `${d.getUTCFullYear()}-${String(d.getUTCMonth() + 1).padStart(2, '0')}`;
    return join(kind, month, id + ext);
  }
}

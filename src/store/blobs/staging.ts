// Files written before they have a place: a large message as SMTP DATA arrives, a large
// attachment as it is decoded. They live under data_dir/tmp, on the same file system as the
// blobs, so placing one is a rename or a hard link (Blobs.adopt, Blobs.link), never a copy.
// Bytes are hashed (SHA-256) and counted on the way and fsynced at the end; memory holds only
// what the file system has not taken yet. What a crash leaves is removed by the orphan sweep.
import { createHash, randomBytes, type Hash } from 'node:crypto';
import { createWriteStream, mkdirSync, promises as fs, type WriteStream } from 'node:fs';
import { join } from 'node:path';
import { errorFields, type Logger } from '../../log.ts';

/** A finished staged file: its absolute path, and the size and SHA-256 of what followed its prefix. */
export interface StagedFile {
  path: string;
  size: number;
  sha256: string;
}

/** data_dir/tmp directories known to exist. */
const made = new Set<string>();

export class StagedWriter {
  private readonly hash: Hash = createHash('sha256');
  private size = 0;
  private failure: Error | undefined;
  readonly path: string;
  private readonly out: WriteStream;

  private constructor(path: string, out: WriteStream) {
    this.path = path;
    this.out = out;
    out.on('error', (err) => (this.failure ??= err));
  }

  /**
   * A new file under `dataDir`/tmp, made at once (the stream queues writes until it is open).
   * `prefix` (trace fields) is written first and is not part of the size or the hash.
   */
  static create(dataDir: string, name: string, prefix?: Buffer): StagedWriter {
    const dir = join(dataDir, 'tmp');
    if (!made.has(dir)) {
      mkdirSync(dir, { recursive: true, mode: 0o700 });
      made.add(dir);
    }
    const path = join(dir, `${name}-${randomBytes(8).toString('hex')}`);
    const w = new StagedWriter(path, createWriteStream(path, { mode: 0o600 }));
    if (prefix?.length) w.out.write(prefix);
    return w;
  }

  /** Writes `chunk`; resolves at once, or once the file has taken the bytes waiting (the caller pauses its source meanwhile). */
  write(chunk: Buffer): Promise<void> | undefined {
    if (this.failure) return Promise.reject(this.failure);
    this.size += chunk.length;
    this.hash.update(chunk);
    if (this.out.write(chunk)) return undefined;
    return new Promise<void>((resolve, reject) => {
      const done = () => {
        this.out.off('drain', done);
        this.out.off('error', done);
        if (this.failure) reject(this.failure);
        else resolve();
      };
      this.out.on('drain', done);
      this.out.on('error', done);
    });
  }

  /**
   * Closes and fsyncs the file; without `sync`, only closes it (bytes that are made durable
   * elsewhere: streamed into rows on PostgreSQL, whose commit is the one fsync).
   */
  async finish(sync = true): Promise<StagedFile> {
    await new Promise<void>((resolve, reject) => {
      if (this.failure) return reject(this.failure);
      this.out.end(() => (this.failure ? reject(this.failure) : resolve()));
    });
    if (!sync) return { path: this.path, size: this.size, sha256: this.hash.digest('hex') };
    const fh = await fs.open(this.path, 'r+');
    try {
      await fh.sync();
    } finally {
      await fh.close();
    }
    return { path: this.path, size: this.size, sha256: this.hash.digest('hex') };
  }

  /**
   * Stops writing and removes the file. Never throws: it runs after the message was stored (or
   * refused), and an error here must not change that answer (a stored message told 451 would be
   * sent again). A file it cannot remove is logged and left to the orphan sweep (src/store/blobs/orphans.ts).
   */
  async discard(log?: Logger): Promise<void> {
    try {
      if (!this.out.closed) {
        await new Promise<void>((resolve) => {
          this.out.once('close', () => resolve());
          this.out.destroy();
        });
      }
      await fs.rm(this.path, { force: true });
    } catch (err) {
      log?.warn('staged file not removed; the orphan sweep will', { path: this.path, ...errorFields(err) });
    }
  }
}

/** Removes staged files that were not placed (or whose place was taken by a link). Never throws. */
export async function removeStaged(paths: Iterable<string>): Promise<void> {
  await Promise.all([...paths].map((p) => fs.rm(p, { force: true }).catch(() => undefined)));
}

// Loads a native addon that travels inside the single executable: the bytes are written once
// to a private per-user cache directory (content hash in the file name, atomic rename) and
// opened with process.dlopen. A directory that cannot hold it, or that is mounted noexec, is
// skipped for the next candidate.
import { createHash, randomBytes } from 'node:crypto';
import { type BigIntStats, closeSync, fsyncSync, lstatSync, mkdirSync, openSync, readFileSync, readSync, renameSync, rmSync, writeFileSync, writeSync } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { dirname, isAbsolute, join } from 'node:path';

/**
 * Where the addon may be cached, best first. MAILROOM_CACHE_DIR lets an operator name one (for
 * hosts where home and /tmp are both mounted noexec); the binary's own directory comes last
 * because it is executable by definition but may not be writable.
 */
export function addonCacheDirs(env: NodeJS.ProcessEnv = process.env): string[] {
  const dirs: string[] = [];
  if (env.MAILROOM_CACHE_DIR && isAbsolute(env.MAILROOM_CACHE_DIR)) dirs.push(env.MAILROOM_CACHE_DIR);
  // XDG Base Directory Specification: relative values are invalid and must be ignored.
  if (env.XDG_CACHE_HOME && isAbsolute(env.XDG_CACHE_HOME)) dirs.push(join(env.XDG_CACHE_HOME, 'mailroom'));
  try {
    dirs.push(join(homedir(), '.cache', 'mailroom'));
  } catch {
    // No home directory for this user (homedir() throws when getpwuid finds no entry).
  }
  dirs.push(join(tmpdir(), `mailroom-${process.getuid?.() ?? 'user'}`));
  dirs.push(join(dirname(process.execPath), '.mailroom-cache'));
  return [...new Set(dirs)];
}

export interface LoadedAddon {
  exports: object;
  path: string;
}

/**
 * The addon to cache: the SHA-256 of its bytes (hex), and the bytes themselves, asked for only
 * when a copy has to be written. At a start whose cache already holds the file, the embedded
 * copy is not read at all (build/build.ts stores the hash beside it): reading it cost a 2 MB
 * copy out of the executable, and comparing a second 2 MB read of the file, about 5 ms and
 * 4 MB of garbage on every start.
 */
export interface EmbeddedAddon {
  sha256: string;
  bytes(): Uint8Array;
}

/**
 * Writes the addon as `<name>-<sha256 prefix>.node` into the first usable directory and loads
 * it. Throws one error naming every directory tried and why each was refused.
 */
export function loadCachedAddon(name: string, addon: EmbeddedAddon, dirs: string[]): LoadedAddon {
  const hash = addon.sha256.slice(0, 16);
  const reasons: string[] = [];
  for (const dir of dirs) {
    try {
      const file = join(dir, `${name}-${hash}.node`);
      prepareDir(dir);
      if (!holds(file, addon.sha256)) {
        writeAtomically(file, addon.bytes());
        seal(file, addon.sha256);
      }
      const mod = { exports: {} as object };
      // A noexec mount fails here ("failed to map segment from shared object"): try the next.
      process.dlopen(mod, file);
      return { exports: mod.exports, path: file };
    } catch (err) {
      reasons.push(`${dir}: ${(err as Error).message.split('\n')[0]}`);
    }
  }
  throw new Error(`cannot load the embedded ${name} addon; tried:\n  ${reasons.join('\n  ')}\nset MAILROOM_CACHE_DIR to a private directory on a filesystem that allows executables`);
}

/** Creates the directory with mode 0700, or accepts an existing one only if it is private. */
function prepareDir(dir: string): void {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  // lstat: a symlink planted in a shared place such as /tmp must not redirect the write.
  const st = lstatSync(dir);
  if (!st.isDirectory()) throw new Error('not a directory');
  const uid = process.getuid?.();
  if (uid !== undefined && st.uid !== uid) throw new Error(`owned by uid ${st.uid}, not ${uid}`);
  // Anyone else who can write here could swap the library we are about to load.
  if (st.mode & 0o022) throw new Error(`writable by group or others (mode ${(st.mode & 0o777).toString(8)})`);
}

/**
 * True when `file` is our own regular file whose content has this SHA-256 (reused as is). Once
 * a copy has been hashed, `<file>.ok` records the hash with the file's identity and change
 * times, and a later start whose lstat matches it does not hash again (as git's index does):
 * any write or replacement changes the ctime, which no one but root can set back. Hashing the
 * 2 MB addon cost about 2 ms of every start.
 */
function holds(file: string, sha256: string): boolean {
  let st;
  try {
    st = lstatSync(file, { bigint: true });
  } catch {
    return false;
  }
  if (!st.isFile()) return false;
  const uid = process.getuid?.();
  if (uid !== undefined && st.uid !== BigInt(uid)) return false;
  try {
    if (readFileSync(`${file}.ok`, 'latin1') === sealOf(st, sha256)) return true;
  } catch {
    // No seal yet (an older cache): hash.
  }
  if (sha256Of(file) !== sha256) return false;
  seal(file, sha256);
  return true;
}

const sealOf = (st: BigIntStats, sha256: string) => `${sha256} ${st.dev}:${st.ino}:${st.size}:${st.mtimeNs}:${st.ctimeNs}\n`;

/** Records that `file` (just written, or just hashed) has this content; a failure only costs a hash next time. */
function seal(file: string, sha256: string): void {
  try {
    writeFileSync(`${file}.ok`, sealOf(lstatSync(file, { bigint: true }), sha256), { mode: 0o600 });
  } catch {
    // A read-only directory: hashed again next time.
  }
}

/** SHA-256 (hex) of a file, read through one small buffer rather than whole into memory. */
export function sha256Of(file: string): string {
  const hash = createHash('sha256');
  const buf = Buffer.allocUnsafe(256 * 1024);
  const fd = openSync(file, 'r');
  try {
    let n;
    while ((n = readSync(fd, buf, 0, buf.length, null)) > 0) hash.update(buf.subarray(0, n));
  } finally {
    closeSync(fd);
  }
  return hash.digest('hex');
}

/** Temp file, fsync, rename: a concurrent start or a crash never leaves a half-written library. */
function writeAtomically(file: string, bytes: Uint8Array): void {
  const tmp = `${file}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`;
  const fd = openSync(tmp, 'wx', 0o700);
  try {
    let off = 0;
    while (off < bytes.length) off += writeSync(fd, bytes, off, bytes.length - off);
    fsyncSync(fd);
  } catch (err) {
    closeSync(fd);
    rmSync(tmp, { force: true });
    throw err;
  }
  closeSync(fd);
  try {
    renameSync(tmp, file);
  } catch (err) {
    rmSync(tmp, { force: true });
    throw err;
  }
}

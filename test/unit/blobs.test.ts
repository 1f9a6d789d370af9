// Blob durability seen from the system calls: a file is renamed into place and then its
// directory is fsynced (a rename is only durable once its directory is; ext4 hides the need,
// XFS and btrfs do not). strace records what a real write does.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { peerSkip, toolMissing } from '../support/peers.ts';

test('a blob write renames the file into place, then fsyncs its directory', { skip: peerSkip(toolMissing('strace', ['-V'], 'strace')) }, () => {
  const dir = mkdtempSync(join(tmpdir(), 'mailroom-blobs-'));
  try {
    const trace = join(dir, 'trace');
    const script = `import { Blobs } from ${JSON.stringify(new URL('../../src/store/blobs/blobs.ts', import.meta.url).href)};
const b = new Blobs(${JSON.stringify(join(dir, 'data'))});
await b.write('raw/2026-11/one.eml', 'hello');
await b.writeStream('attachments/2026-11/two', (await import('node:stream')).Readable.from([Buffer.from('x')]));`;
    const run = spawnSync('strace', ['-f', '-e', 'trace=openat,rename,renameat,renameat2,fsync', '-o', trace, process.execPath, '--input-type=module', '-e', script], {
      encoding: 'utf8',
    });
    assert.equal(run.status, 0, run.stderr);
    const lines = readFileSync(trace, 'utf8').split('\n');
    for (const [file, sub] of [
      ['one.eml', 'raw/2026-11'],
      ['two', 'attachments/2026-11'],
    ]) {
      const renamed = lines.findIndex((l) => /rename/.test(l) && l.includes(`${sub}/${file}"`));
      assert.ok(renamed >= 0, `no rename into ${sub}/${file}`);
      const dirPath = join(dir, 'data', sub);
      // openat(AT_FDCWD, "<dir>", O_RDONLY|O_CLOEXEC) = N, after the rename, then fsync(N).
      const opened = lines
        .slice(renamed)
        .map((l) => new RegExp(`openat\\(AT_FDCWD, "${dirPath}", O_RDONLY[^)]*\\) = (\\d+)`).exec(l))
        .find(Boolean);
      assert.ok(opened, `${sub} not opened after the rename of ${file}`);
      assert.ok(
        lines.slice(renamed).some((l) => new RegExp(`fsync\\(${opened[1]}\\)\\s+= 0`).test(l)),
        `${sub} not fsynced after the rename of ${file}`,
      );
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

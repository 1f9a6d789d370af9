// The single executable, started and left idle, hands back the memory its start-up used
// (src/memory.ts): its resident set falls well below its peak without any request. Before,
// V8 kept the young generation start-up had grown and the start-up garbage for good (the
// same RSS 3 s and 20 s after start). The figure itself is bench (g)'s (docs/performance.md).
import assert from 'node:assert/strict';
import { chmodSync, copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { after, describe, it } from 'node:test';
import { BINARY, ensureBinary, ROOT, SLOWDOWN, serveBinary, type BinaryServe } from '../support/binary.ts';
import { until } from '../support/wait.ts';

const enabled = process.env.MAILROOM_BINARY_TEST === '1';
// Under an emulator (MAILROOM_BINARY_RUNNER) the process is the emulator's, whose memory says nothing.
const skip = !enabled ? 'builds the single executable: run `npm run test:binary`' : process.env.MAILROOM_BINARY_RUNNER ? 'RSS under an emulator is the emulator’s' : false;

/** Resident set of a process in MB, from /proc. */
function rssMb(pid: number): number {
  const kb = /^VmRSS:\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
  return Number(kb) / 1024;
}

describe(`idle memory of the single executable (${relative(ROOT, BINARY)})`, { skip }, () => {
  let dir: string | undefined;
  let serve: BinaryServe | undefined;

  after(async () => {
    if (serve && serve.child.exitCode === null) await serve.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('releases what start-up used once it is idle: RSS falls at least 5 MB below its peak, with no request', async () => {
    ensureBinary();
    dir = mkdtempSync(join(tmpdir(), 'mailroom-idle-'));
    copyFileSync(BINARY, join(dir, 'mailroom'));
    chmodSync(join(dir, 'mailroom'), 0o755);
    writeFileSync(
      join(dir, 'mailroom.toml'),
      `data_dir = "./data"\n[http]\nlisten = "127.0.0.1:0"\n[smtp]\nlisten = "127.0.0.1:0"\n[outbound]\nmode = "dry-run"\n[dns]\nservers = ["127.0.0.1:9"]\n`,
    );
    serve = await serveBinary(dir);
    const pid = serve.child.pid!;
    let peak = 0;
    const fell = await until(
      'the idle server to release its start-up memory',
      () => {
        const now = rssMb(pid);
        peak = Math.max(peak, now);
        return now <= peak - 5 ? { peak, now } : undefined;
      },
      30_000 * SLOWDOWN,
    );
    assert.ok(fell.now <= fell.peak - 5, `RSS ${fell.now.toFixed(1)} MB, peak ${fell.peak.toFixed(1)} MB`);
    assert.equal(serve.stderr().includes('warning'), false, `no warning on stderr: ${serve.stderr()}`);
  });
});

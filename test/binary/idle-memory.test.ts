// The single executable, started and left idle, hands back the memory its start-up used
// (src/memory.ts): its resident set falls well below its peak without any request. Before,
// V8 kept the young generation start-up had grown and the start-up garbage for good (the
// same RSS 3 s and 20 s after start); and the scripts it reads once are not left among its
// resident pages (src/sea-chunks.ts). The figure itself is bench (g)'s (docs/performance.md).
import assert from 'node:assert/strict';
import { chmodSync, copyFileSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { after, describe, it } from 'node:test';
import { PACK_TRAILER_MAGIC } from '../../src/sea-chunks.ts';
import { BINARY, ensureBinary, ROOT, runBinary, SLOWDOWN, serveBinary, type BinaryServe } from '../support/binary.ts';
import { until } from '../support/wait.ts';

const enabled = process.env.MAILROOM_BINARY_TEST === '1';
// Under an emulator (MAILROOM_BINARY_RUNNER) the process is the emulator's, whose memory says nothing.
const skip = !enabled ? 'builds the single executable: run `npm run test:binary`' : process.env.MAILROOM_BINARY_RUNNER ? 'RSS under an emulator is the emulator’s' : false;

/** Resident set of a process in MB, from /proc. */
function rssMb(pid: number): number {
  const kb = /^VmRSS:\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
  return Number(kb) / 1024;
}

/** The mappings of a process with their resident size. */
function smapsOf(pid: number): Array<{ path: string; perms: string; offset: number; rssKb: number }> {
  const maps: Array<{ path: string; perms: string; offset: number; rssKb: number }> = [];
  for (const line of readFileSync(`/proc/${pid}/smaps`, 'utf8').split('\n')) {
    const head = /^[0-9a-f]+-[0-9a-f]+ (\S+) ([0-9a-f]+) \S+ \d+\s*(.*)$/.exec(line);
    if (head) maps.push({ perms: head[1], offset: parseInt(head[2], 16), path: head[3], rssKb: 0 });
    const rss = /^Rss:\s+(\d+) kB/.exec(line);
    if (rss && maps.length) maps[maps.length - 1].rssKb = Number(rss[1]);
  }
  return maps;
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

  it('reads its main script and code cache from the file: they are not among its resident pages', () => {
    // The SEA blob is the last read-only mapping of the executable. Through node:sea, the
    // main script and its code cache (3.9 MB) stayed resident there, and 60-120 KB around the
    // name of each asset, which node:sea reads at the first use of one.
    const blob = smapsOf(serve!.child.pid!)
      .filter((m) => m.path === join(dir!, 'mailroom') && m.perms === 'r--p')
      .sort((a, b) => b.offset - a.offset)[0];
    const mainScript = statSync(join(ROOT, 'build', 'out', 'main.js')).size;
    assert.ok(blob.rssKb * 1024 < mainScript, `${blob.rssKb} KB of the blob resident, the main script alone is ${Math.round(mainScript / 1024)} KB`);
  });

  it('reads its assets through node:sea when the offset at the end of the file is wrong or missing', async () => {
    const file = readFileSync(join(dir!, 'mailroom'));
    const trailer = 10 + PACK_TRAILER_MAGIC.length;
    assert.equal(file.subarray(file.length - PACK_TRAILER_MAGIC.length).toString('latin1'), PACK_TRAILER_MAGIC);
    const image = file.subarray(0, file.length - trailer);
    const at = Number(file.subarray(image.length, image.length + 10).toString('latin1'));
    const variants = {
      // One byte off: what is there is not the pack's header.
      shifted: Buffer.concat([image, Buffer.from(String(at - 1).padStart(10, '0') + PACK_TRAILER_MAGIC, 'latin1')]),
      missing: image,
    };
    for (const [name, bytes] of Object.entries(variants)) {
      const other = mkdtempSync(join(tmpdir(), 'mailroom-pack-'));
      try {
        writeFileSync(join(other, 'mailroom'), bytes, { mode: 0o755 });
        const res = await runBinary(other, ['--help']);
        assert.equal(res.code, 0, `${name} offset: ${res.stderr}`);
        assert.match(res.stdout, /^Usage: mailroom/, `${name} offset`);
        assert.equal(res.stderr, '', `${name} offset: nothing on stderr (the code cache still fits)`);
      } finally {
        rmSync(other, { recursive: true, force: true });
      }
    }
  });
});

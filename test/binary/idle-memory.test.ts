// The single executable, started and left idle, hands back the memory its start-up used
// (src/memory.ts): its resident set falls well below its peak without any request. Before,
// V8 kept the young generation start-up had grown and the start-up garbage for good (the
// same RSS 3 s and 20 s after start); and the scripts it reads once are not left among its
// resident pages (src/sea-chunks.ts); and what it does at once after start, with V8's optimizing
// compilers still off (src/startup-tiers.ts), works as ever. The figure itself is bench (g)'s
// (docs/performance.md).
import assert from 'node:assert/strict';
import { chmodSync, copyFileSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { after, describe, it } from 'node:test';
import nodemailer from 'nodemailer';
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
    writeFileSync(join(dir, 'mailroom.toml'), `data_dir = "./data"\n[http]\nlisten = "127.0.0.1:0"\n[smtp]\nlisten = "127.0.0.1:0"\n[outbound]\nmode = "dry-run"\n[dns]\nservers = ["127.0.0.1:9"]\n`);
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

  it('works at once after start, while start-up has V8’s optimizing compilers off: chunks and analysis workers compile with their code caches', async () => {
    // src/startup-tiers.ts: the compilers are part of V8's flag hash, so anything that compiles
    // with a code cache turns them on first, or V8 refuses the cache (a warning on stderr).
    const other = mkdtempSync(join(tmpdir(), 'mailroom-early-'));
    let early: BinaryServe | undefined;
    try {
      copyFileSync(BINARY, join(other, 'mailroom'));
      chmodSync(join(other, 'mailroom'), 0o755);
      writeFileSync(
        join(other, 'mailroom.toml'),
        `data_dir = "./data"\nshared_domain = "agents.test"\n[http]\nlisten = "127.0.0.1:0"\n[smtp]\nlisten = "127.0.0.1:0"\n[outbound]\nmode = "dry-run"\n[dns]\nservers = ["127.0.0.1:9"]\n`,
      );
      early = await serveBinary(other);
      const started = JSON.parse(
        early
          .stdout()
          .split('\n')
          .find((l) => l.includes('"msg":"started"'))!,
      ) as { smtp: string };
      const key = await until('the bootstrap key', () => /mr_live_[A-Za-z0-9]+/.exec(early!.stderr())?.[0]);
      const headers = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
      const inbox = (await (await fetch(`${early.url}/inboxes`, { method: 'POST', headers, body: '{}' })).json()) as { id: string; address: string };
      // The MCP SDK's chunk on the main thread, and an analysis worker with the "mail" chunk.
      const mcp = await fetch(`${early.url}/mcp`, {
        method: 'POST',
        headers: { ...headers, accept: 'application/json, text/event-stream' },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-03-26', capabilities: {}, clientInfo: { name: 'test', version: '1' } } }),
      });
      assert.equal(mcp.status, 200);
      await mcp.text();
      const [host, port] = started.smtp.split(':');
      const transport = nodemailer.createTransport({ host, port: Number(port), secure: false, ignoreTLS: true });
      try {
        await transport.sendMail({ from: 'sender@example.org', to: inbox.address, subject: 'early', text: 'hello' });
      } finally {
        transport.close();
      }
      await until(
        'the message to be listed',
        async () => {
          const list = (await (await fetch(`${early!.url}/inboxes/${inbox.id}/messages`, { headers })).json()) as { data: unknown[] };
          return list.data.length ? true : undefined;
        },
        10_000 * SLOWDOWN,
      );
      assert.doesNotMatch(early.stderr(), /warning/i);
    } finally {
      if (early && early.child.exitCode === null) await early.stop();
      rmSync(other, { recursive: true, force: true });
    }
  });
});

// How many fsynced 10 KB files this disk takes per second, written the way inbound mail was
// before the spool (writeFile with flush, then rename), 50 at a time, with nothing else running:
// the ceiling of a file-per-message-before-the-250 design (docs/performance.md).
// Usage: node bench/fsync-files.ts [files]   (writes under bench/work/fsync-files)
import { mkdirSync, rmSync, promises as fs } from 'node:fs';
import { join } from 'node:path';
import { WORK, round } from './support.ts';

const FILES = Number(process.argv[2] ?? 3000);
const PARALLEL = 50;
const dir = join(WORK, 'fsync-files');
rmSync(dir, { recursive: true, force: true });
mkdirSync(dir, { recursive: true });
const body = Buffer.alloc(10_240, 'x');
let next = 0;
const cpu0 = process.cpuUsage();
const t0 = performance.now();
for (let batch = 0; batch < FILES / PARALLEL; batch++) {
  await Promise.all(
    Array.from({ length: PARALLEL }, async () => {
      const path = join(dir, String(next++));
      await fs.writeFile(`${path}.tmp`, body, { flush: true });
      await fs.rename(`${path}.tmp`, path);
    }),
  );
}
const seconds = (performance.now() - t0) / 1000;
const cpu = process.cpuUsage(cpu0);
process.stdout.write(`${next} fsynced 10 KB files, ${PARALLEL} at a time: ${round(next / seconds)} files/s; CPU ${round((cpu.user + cpu.system) / 1000 / next, 3)} ms per file\n`);
rmSync(dir, { recursive: true, force: true });

// The suite's reporter: node's TAP output, plus what the runner's own summary leaves out. Its
// `# skipped` counts skipped tests only, and a skipped describe counts as none (its tests are
// never enumerated), so a suite skipped whole for a missing peer would go unnoticed. Before the
// summary this prints `# skipped: N`, the skipped tests and suites, and each one's reason; the
// summary stays the last lines. Used by build/test.sh and `npm run test:binary`.
import { relative } from 'node:path';
import { tap } from 'node:test/reporters';

export default async function* report(source) {
  const skipped = [];
  async function* watch() {
    let told = false;
    for await (const event of source) {
      const d = event.data;
      if (event.type === 'test:pass' && d.skip !== undefined && d.skip !== false) {
        skipped.push({ suite: d.details?.type === 'suite', where: `${d.file ? relative(process.cwd(), d.file) : '?'}: ${d.name}`, why: d.skip === true ? 'no reason given' : d.skip });
      }
      // The runner's summary starts with `tests N` at the top level.
      if (!told && event.type === 'test:diagnostic' && d.nesting === 0 && /^tests \d+$/.test(d.message)) {
        told = true;
        const suites = skipped.filter((s) => s.suite).length;
        yield diagnostic(`skipped: ${skipped.length} (${skipped.length - suites} tests, ${suites} suites whose tests did not run)`);
        for (const s of skipped) yield diagnostic(`  ${s.suite ? 'suite' : 'test'} ${s.where}: ${s.why}`);
      }
      yield event;
    }
  }
  yield* tap(watch());
}

const diagnostic = (message) => ({ type: 'test:diagnostic', data: { nesting: 0, message } });

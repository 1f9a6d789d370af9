// Every relative link in README.md and docs/*.md points at a file that exists and, with a
// #fragment, at a heading of that file (GitHub's heading ids), so moving text cannot leave a
// dead link behind.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const pages = [
  'README.md',
  ...readdirSync(join(root, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`),
];

/** The text outside fenced code blocks, line by line (a `# comment` in a shell block is no heading). */
function proseLines(markdown: string): string[] {
  const out: string[] = [];
  let fence: string | null = null;
  for (const line of markdown.split('\n')) {
    const m = /^ {0,3}(`{3,}|~{3,})/.exec(line);
    if (m) {
      if (fence === null) fence = m[1][0].repeat(m[1].length);
      else if (m[1].startsWith(fence)) fence = null;
      out.push('');
      continue;
    }
    out.push(fence === null ? line : '');
  }
  return out;
}

/** GitHub's id for a heading: lowercase, punctuation dropped, spaces to hyphens. */
function slug(heading: string): string {
  return heading
    .replace(/\[([^\]]*)\]\([^)]*\)/g, '$1') // [text](url) → text
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\p{M} _-]/gu, '')
    .replace(/ /g, '-');
}

/** The ids of every heading of a page, duplicates numbered -1, -2 … as GitHub does. */
function anchors(markdown: string): Set<string> {
  const seen = new Map<string, number>();
  const ids = new Set<string>();
  for (const line of proseLines(markdown)) {
    const m = /^ {0,3}#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (!m) continue;
    const base = slug(m[1]);
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    ids.add(n === 0 ? base : `${base}-${n}`);
  }
  return ids;
}

/** Every inline link and image target outside code: [text](target) and ![alt](target). */
function links(markdown: string): Array<{ target: string; line: number }> {
  const out: Array<{ target: string; line: number }> = [];
  proseLines(markdown).forEach((raw, i) => {
    const line = raw.replace(/`[^`]*`/g, (code) => ' '.repeat(code.length)); // inline code is no link
    for (const m of line.matchAll(/\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)) out.push({ target: m[1], line: i + 1 });
  });
  return out;
}

test('GitHub heading ids', () => {
  assert.equal(slug("Custom domains' records"), 'custom-domains-records');
  assert.equal(slug('`[http]`'), 'http');
  assert.equal(slug('(e) Scale: list and get with 10³ and 10⁶ stored messages'), 'e-scale-list-and-get-with-10³-and-10⁶-stored-messages');
  assert.equal(slug('Dashboard, metrics and request ids'), 'dashboard-metrics-and-request-ids');
  assert.deepEqual([...anchors('# A\n## Status rules\n```sh\n# not a heading\n```\n### Status rules\n')], ['a', 'status-rules', 'status-rules-1']);
});

test('every relative link in README.md and docs/ points at an existing file and heading', () => {
  const problems: string[] = [];
  let checked = 0;
  for (const page of pages) {
    const text = readFileSync(join(root, page), 'utf8');
    for (const { target, line } of links(text)) {
      if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue; // https:, mailto: …
      checked++;
      const [pathPart, fragment] = target.split('#', 2) as [string, string | undefined];
      const file = pathPart === '' ? join(root, page) : resolve(join(root, dirname(page)), decodeURIComponent(pathPart));
      const where = `${page}:${line} → ${target}`;
      if (!file.startsWith(root + '/') && file !== root) {
        problems.push(`${where}: leaves the repository`);
        continue;
      }
      if (!existsSync(file)) {
        problems.push(`${where}: no such file ${relative(root, file)}`);
        continue;
      }
      if (fragment !== undefined) {
        if (statSync(file).isDirectory() || !file.endsWith('.md')) {
          problems.push(`${where}: a #fragment on a file that is not Markdown`);
          continue;
        }
        if (!anchors(readFileSync(file, 'utf8')).has(decodeURIComponent(fragment))) {
          problems.push(`${where}: no heading #${fragment} in ${relative(root, file)}`);
        }
      }
    }
  }
  assert.ok(checked > 20, `only ${checked} links found: is the parser broken?`);
  assert.deepEqual(problems, []);
});

test('README links every page of docs/', () => {
  const readme = readFileSync(join(root, 'README.md'), 'utf8');
  const linked = new Set(links(readme).map((l) => l.target.split('#')[0]));
  for (const page of pages.filter((p) => p.startsWith('docs/'))) assert.ok(linked.has(page), `README.md does not link ${page}`);
});

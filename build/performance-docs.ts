// npm run docs:performance: writes the results part of docs/performance.md (between its two
// markers) from bench/results/latest.json, as bench/report.ts renders it. The page's text around
// the markers is written by hand; its tables are not. test/unit/performance-docs.test.ts fails
// when the committed page differs from what this renders, so a table cannot outlive the run
// it came from, nor a run its table.
import { readFileSync, realpathSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { renderMarkdown, type RunResults } from '../bench/report.ts';

const START = '<!-- bench results: generated from bench/results/latest.json by `npm run docs:performance`; edit bench/report.ts, not this -->';
const END = '<!-- end of bench results -->';

export const RESULTS_FILE = join(import.meta.dirname, '..', 'bench', 'results', 'latest.json');
export const PAGE_FILE = join(import.meta.dirname, '..', 'docs', 'performance.md');

/** The results as they appear on the page: latest.md's #### headings are ### there. */
export function renderResults(run: RunResults): string {
  return renderMarkdown(run)
    .replace(/^#### /gm, '### ')
    .trimEnd();
}

/** `page` with the text between the markers rendered anew from `run`. */
export function withResults(page: string, run: RunResults): string {
  const start = page.indexOf(START);
  const end = page.indexOf(END);
  if (start === -1 || end === -1 || end < start) throw new Error('docs/performance.md has no bench results markers');
  return page.slice(0, start) + START + '\n' + renderResults(run) + '\n' + page.slice(end);
}

export function readResults(): RunResults {
  return JSON.parse(readFileSync(RESULTS_FILE, 'utf8')) as RunResults;
}

if (process.argv[1] && import.meta.url === pathToFileURL(realpathSync(process.argv[1])).href) {
  writeFileSync(PAGE_FILE, withResults(readFileSync(PAGE_FILE, 'utf8'), readResults()));
  process.stdout.write(`wrote ${PAGE_FILE} (bench results)\n`);
}

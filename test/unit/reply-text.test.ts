// Reply extraction (src/domain/mail/reply-text.ts) against hand-written replies as Gmail, Outlook
// (Windows, web, Mac, iOS, new), Apple Mail, iPhone, Thunderbird, Yahoo and Proton produce
// them, in en, de, fr, es, it, pt, nl, sv and pl (test/fixtures/replies/: each file holds the
// text and/or HTML body and the exact expected extraction); then hostile input: never a
// throw, a string out. How long hostile input takes is measured by `npm run bench -- reply-text`.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { replyHtml, replyText } from '../../src/domain/mail/reply-text.ts';
import { HOSTILE_HTMLS, HOSTILE_TEXTS } from '../support/hostile-replies.ts';

const DIR = join(import.meta.dirname, '..', 'fixtures', 'replies');

/** Sections of a fixture: "=== name" lines open them; each is its lines without the final newline. */
function readFixture(file: string): Record<string, string> {
  const out: Record<string, string> = {};
  let name: string | null = null;
  let lines: string[] = [];
  const close = () => {
    if (name) out[name] = lines.join('\n');
  };
  for (const line of readFileSync(join(DIR, file), 'utf8').replace(/\n$/, '').split('\n')) {
    const m = /^=== (.+)$/.exec(line);
    if (m) {
      close();
      name = m[1];
      lines = [];
    } else if (name) lines.push(line);
  }
  close();
  return out;
}

const fixtures = readdirSync(DIR)
  .filter((f) => f.endsWith('.txt'))
  .sort();

describe('reply fixtures', () => {
  test('at least 40 fixtures, each with an expectation', () => {
    assert.ok(fixtures.length >= 40, `${fixtures.length} fixtures`);
    for (const f of fixtures) {
      const fx = readFixture(f);
      assert.ok(('text' in fx && 'expected text' in fx) || ('html' in fx && 'expected html' in fx), f);
    }
  });
  for (const f of fixtures) {
    test(f, () => {
      const fx = readFixture(f);
      if ('text' in fx) assert.equal(replyText(fx.text), fx['expected text'], `${f}: text`);
      if ('html' in fx) assert.equal(replyHtml(fx.html), fx['expected html'], `${f}: html`);
    });
  }
});

describe('hostile input', () => {
  // The timeout is the failure mode, not a speed target: inputs that took planer 54 s end in ms.
  test('long lines, many lines, unclosed tags and odd markup: never a throw, the body kept when nothing is found', { timeout: 30_000 }, () => {
    for (const t of HOSTILE_TEXTS) assert.equal(typeof replyText(t), 'string', `text of ${t.length}`);
    for (const h of HOSTILE_HTMLS) assert.equal(typeof replyHtml(h), 'string', `html of ${h.length}`);
    // Over the size bound: returned whole.
    const big = 'Hi\n\nOn Mon, Jan 8, 2024 at 10:15 AM Bob <b@example.com> wrote:\n> ' + 'q'.repeat(600_000);
    assert.equal(replyText(big), big);
  });
});

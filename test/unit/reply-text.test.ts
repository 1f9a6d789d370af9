// Reply extraction (src/domain/mail/reply-text.ts) against hand-written replies as Gmail, Outlook
// (Windows, web, Mac, iOS, new), Apple Mail, iPhone, Thunderbird, Yahoo and Proton produce
// them, in en, de, fr, es, it, pt, nl, sv and pl (test/fixtures/replies/: each file holds the
// text and/or HTML body and the exact expected extraction); then hostile input: never a
// throw, never more than linear time.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { replyHtml, replyText } from '../../src/domain/mail/reply-text.ts';

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

const fixtures = readdirSync(DIR).filter((f) => f.endsWith('.txt')).sort();

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
  const within = (label: string, ms: number, fn: () => unknown) => {
    const started = performance.now();
    fn();
    const took = performance.now() - started;
    assert.ok(took < ms, `${label}: ${took.toFixed(0)} ms`);
  };

  test('long lines, many lines, unclosed tags and odd markup: fast, never a throw, the body kept when nothing is found', () => {
    const texts = [
      'On ' + 'a '.repeat(200_000),
      'From: ' + 'x '.repeat(200_000),
      '> quoted line\nreply line\n'.repeat(20_000),
      'a' + ' '.repeat(200_000) + 'b',
      '-- \n'.repeat(100_000),
      'x'.repeat(600_000),
      '',
      '\u0000\uffff\ud800',
    ];
    for (const t of texts) {
      within(`text of ${t.length}`, 1500, () => {
        const out = replyText(t);
        assert.equal(typeof out, 'string');
      });
    }
    const htmls = [
      '<div>'.repeat(50_000),
      '<blockquote type="cite">'.repeat(20_000) + 'x',
      '<div class="gmail_quote">' + '<'.repeat(200_000),
      'text' + ' '.repeat(200_000) + '<br>'.repeat(10_000) + 'x',
      '<style>'.repeat(50_000),
      '<div>' + 'On 1 Jan 2024 Bob wrote:'.repeat(10_000) + '</div>',
      '</div></div></p>'.repeat(10_000),
      '<div>Hi</div>' + '<br>'.repeat(100_000),
    ];
    for (const h of htmls) {
      within(`html of ${h.length}`, 1500, () => {
        const out = replyHtml(h);
        assert.equal(typeof out, 'string');
      });
    }
    // Over the size bound: returned whole.
    const big = 'Hi\n\nOn Mon, Jan 8, 2024 at 10:15 AM Bob <b@example.com> wrote:\n> ' + 'q'.repeat(600_000);
    assert.equal(replyText(big), big);
  });
});

// LIST and LSUB mailbox patterns (src/imap/mailbox-pattern.ts): `*` matches anything, `%`
// anything but the delimiter `/`; a pattern of hundreds of wildcards is answered, not backtracked.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mailboxMatcher } from '../../src/imap/mailbox-pattern.ts';

const names = ['INBOX', 'Sent', 'Drafts', 'Trash', 'work', 'work/2026', 'work/2026/q1', 'workshop', 'a%b', 'x*y'];
const listed = (pattern: string, caseless = false) => names.filter(mailboxMatcher(pattern, caseless));

test('* crosses the delimiter, % does not', () => {
  assert.deepEqual(listed('*'), names);
  assert.deepEqual(listed('%'), ['INBOX', 'Sent', 'Drafts', 'Trash', 'work', 'workshop', 'a%b', 'x*y']);
  assert.deepEqual(listed('work/*'), ['work/2026', 'work/2026/q1']);
  assert.deepEqual(listed('work/%'), ['work/2026']);
  assert.deepEqual(listed('work%'), ['work', 'workshop']);
  assert.deepEqual(listed('work*'), ['work', 'work/2026', 'work/2026/q1', 'workshop']);
  assert.deepEqual(listed('%/%'), ['work/2026']);
  assert.deepEqual(listed('%/%/%'), ['work/2026/q1']);
  assert.deepEqual(listed('*/q1'), ['work/2026/q1']);
  assert.deepEqual(listed('%/q1'), []);
  assert.deepEqual(listed('*s*'), ['Drafts', 'Trash', 'workshop']);
  assert.deepEqual(listed('*s*', true), ['Sent', 'Drafts', 'Trash', 'workshop']);
  assert.deepEqual(listed('%a%'), ['Drafts', 'Trash', 'a%b']);
  assert.deepEqual(listed('w%6'), []);
  assert.deepEqual(listed('w*6'), ['work/2026']);
});

test('runs of wildcards: any * makes the run a *, %% is %', () => {
  assert.deepEqual(listed('%%'), listed('%'));
  assert.deepEqual(listed('w%*1'), ['work/2026/q1']);
  assert.deepEqual(listed('w*%1'), ['work/2026/q1']);
  assert.deepEqual(listed('w%%1'), []);
});

test('no other character is special; exact names; INBOX caseless', () => {
  assert.deepEqual(listed('Sent'), ['Sent']);
  assert.deepEqual(listed('sent'), []);
  assert.deepEqual(listed('inbox', true), ['INBOX']);
  assert.deepEqual(listed('INBOX*', true), ['INBOX']);
  assert.deepEqual(listed('a.b'), []);
  assert.deepEqual(listed('x*'), ['x*y']);
  assert.deepEqual(listed(''), []);
  assert.equal(mailboxMatcher('')(''), true);
  assert.equal(mailboxMatcher('%')(''), true);
  assert.equal(mailboxMatcher('a(b)[c]+?^$|\\')('a(b)[c]+?^$|\\'), true);
});

test('hostile patterns: hundreds of wildcards before a letter that is not there', () => {
  const long = 'a'.repeat(200);
  assert.equal(mailboxMatcher(`${'*'.repeat(200)}x`)(long), false);
  assert.equal(mailboxMatcher(`${'*'.repeat(200)}a`)(long), true);
  assert.equal(mailboxMatcher(`${'%a'.repeat(200)}x`)(long), false);
  assert.equal(mailboxMatcher(`${'*a'.repeat(150)}`)(long), true);
  assert.equal(mailboxMatcher(`${'*a'.repeat(201)}`)(long), false);
  assert.equal(mailboxMatcher(`${'a'.repeat(100_000)}*`)(long), false);
});

test('the same answers as a backtracking matcher on small patterns', () => {
  const slow = (p: string, s: string): boolean => {
    if (!p) return !s;
    if (p[0] === '*') return [...Array(s.length + 1).keys()].some((k) => slow(p.slice(1), s.slice(k)));
    if (p[0] === '%') return [...Array(s.length + 1).keys()].some((k) => !s.slice(0, k).includes('/') && slow(p.slice(1), s.slice(k)));
    return s[0] === p[0] && slow(p.slice(1), s.slice(1));
  };
  let seed = 11;
  const pick = (chars: string, n: number) => Array.from({ length: n }, () => chars[(seed = (seed * 1103515245 + 12345) % 2 ** 31) % chars.length]).join('');
  for (let i = 0; i < 3000; i++) {
    const p = pick('ab/*%', i % 7);
    const s = pick('ab/', i % 9);
    assert.equal(mailboxMatcher(p)(s), slow(p, s), `${p} against ${s}`);
  }
});

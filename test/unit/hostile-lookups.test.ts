// Lookups that take attacker-sized inputs on the main thread, checked for their answers: the
// receive lists' block check (src/domain/inboxes/lists.ts) and a forwarded message's HTML body
// (src/domain/sending/replies.ts). Their cost is bench/hostile-inputs.ts's.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { blocksAny, entryMatches } from '../../src/domain/inboxes/lists.ts';
import { htmlBody } from '../../src/domain/sending/replies.ts';
import { guard } from '../support/wait.ts';

test('blocksAny answers what comparing every block entry with every From address answers', () => {
  const domains = ['example.com', 'mail.example.com', 'a.b.example.com', 'example.org', 'com', 'other.net'];
  const addresses = ['bob@example.com', 'Eve@Mail.Example.com', 'x@a.b.example.com', 'y@example.org', 'z@notexample.com', 'w@other.net'];
  const entries = [...domains, ...addresses.map((a) => a.toLowerCase()), 'nobody@example.com', 'example.net'];
  let seed = 7;
  const random = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
  const pick = <T>(list: T[], n: number) => Array.from({ length: n }, () => list[Math.floor(random() * list.length)]);
  for (let i = 0; i < 2000; i++) {
    const from = pick(addresses, Math.floor(random() * 4));
    const list = pick(entries, Math.floor(random() * 5)).map((entry) => ({ kind: random() < 0.7 ? 'block' : 'allow', entry }));
    const expected = list.some((e) => e.kind === 'block' && from.some((a) => entryMatches(e.entry, a)));
    assert.equal(blocksAny(list, from), expected, JSON.stringify({ from, list }));
  }
  // A subdomain entry does not block its parent, nor a lookalike domain.
  assert.equal(blocksAny([{ kind: 'block', entry: 'mail.example.com' }], ['a@example.com']), false);
  assert.equal(blocksAny([{ kind: 'block', entry: 'example.com' }], ['a@notexample.com']), false);
  // 90,000 From addresses against 1,000 entries: answered (each entry one lookup).
  const many = Array.from({ length: 90_000 }, (_, i) => `a${i}@x${i % 50}.example.io`);
  assert.equal(
    blocksAny(
      Array.from({ length: 1000 }, (_, i) => ({ kind: 'block', entry: `spam${i}.example` })),
      many,
    ),
    false,
  );
  assert.equal(blocksAny([{ kind: 'block', entry: 'x49.example.io' }], many), true);
});

// The timeout is a hang guard: the regex this replaced would take minutes on the last input.
test('htmlBody: what is inside <body> (any case, with attributes), else the whole fragment', { timeout: guard(30_000) }, () => {
  assert.equal(htmlBody('<html><head><title>t</title></head><BODY class="x">Hi <b>there</b></BODY></html>'), 'Hi <b>there</b>');
  assert.equal(htmlBody('<p>just a fragment</p>'), '<p>just a fragment</p>');
  assert.equal(htmlBody('<body>a</body>b</body>'), 'a</body>b', 'up to the last </body>');
  assert.equal(htmlBody('<body>no end'), '<body>no end');
  // <body> repeated without an end (a backtracking regex took about 55 s on 1 MB of this).
  const hostile = '<body>'.repeat(400_000);
  assert.equal(htmlBody(hostile), hostile);
});

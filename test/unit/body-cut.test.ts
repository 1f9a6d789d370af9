import { test } from 'node:test';
import assert from 'node:assert/strict';
import { cutBodies, cutText } from '../../src/domain/mail/body-cut.ts';

test('cutText keeps short text and cuts long text at a character boundary', () => {
  assert.equal(cutText('hello', 5), 'hello');
  assert.equal(cutText('hello world', 5), 'hello');
  // "é" is 2 bytes, "€" 3, "😀" 4: a cut inside any of them drops the whole character.
  assert.equal(cutText('aé', 2), 'a');
  assert.equal(cutText('a€b', 3), 'a');
  assert.equal(cutText('a€b', 4), 'a€');
  assert.equal(cutText('a😀', 4), 'a');
  assert.equal(cutText('a😀', 5), 'a😀');
  for (let n = 0; n < 12; n++) {
    const cut = cutText('é€😀x'.repeat(3), n);
    assert.ok(Buffer.byteLength(cut) <= n, `at ${n}`);
    assert.ok(!cut.includes('\uFFFD'), `at ${n}`);
  }
});

test('cutBodies cuts every body field and says so', () => {
  const big = 'x'.repeat(100);
  const m = cutBodies({ bodyText: big, bodyHtml: null, extractedText: big, extractedHtml: 'short' }, 10);
  assert.deepEqual(m, { bodyText: 'x'.repeat(10), bodyHtml: null, extractedText: 'x'.repeat(10), extractedHtml: 'short', bodyTruncated: true });
  assert.equal(cutBodies({ bodyText: 'small', bodyHtml: '<p>small</p>' }, 64).bodyTruncated, false);
});

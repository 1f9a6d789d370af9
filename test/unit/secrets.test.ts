// The secret patterns of the `secret_detected` hold (src/domain/sending/secrets.ts): every rule
// finds its example, in running text too, and stays quiet on near misses; card numbers are held
// only when they pass Luhn.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { findSecrets, hasCardNumber, luhnValid, SECRET_RULES } from '../../src/domain/sending/secrets.ts';

for (const rule of SECRET_RULES) {
  test(`secret rule ${rule.id} finds its example, alone and inside a sentence`, () => {
    assert.deepEqual(findSecrets(rule.example), [rule.name]);
    assert.ok(findSecrets(`Sure, here it is: ${rule.example} — keep it safe.`).includes(rule.name));
  });
}

test('near misses are not secrets', () => {
  for (const text of [
    'Our public key: -----BEGIN PUBLIC KEY-----',
    'AKIA1234', // too short
    'ghp_short',
    'sk_live_short',
    'the key- of the matter',
    'mr_live_tooShort',
    'https://user@example.org/path',
    'Order 4111-1111-1111-1112 shipped', // fails Luhn
    'Call +1 415 555 0100',
    'Invoice 2024000123456',
  ]) {
    assert.deepEqual(findSecrets(text), [], text);
  }
});

test('cards: Luhn-valid numbers of the common issuers, with or without separators', () => {
  assert.equal(luhnValid('4111111111111111'), true);
  assert.equal(luhnValid('4111111111111112'), false);
  for (const card of ['4111 1111 1111 1111', '5555-5555-5555-4444', '378282246310005', '6011111111111117', '3530111333300000', '2223003122003222']) {
    assert.equal(hasCardNumber(`pay with ${card} please`), true, card);
  }
  // Luhn-valid but no card issuer's prefix (a tracking number).
  assert.equal(hasCardNumber('tracking 1234567812345670'), false);
  assert.deepEqual(findSecrets('card: 4111111111111111'), ['a payment card number']);
});

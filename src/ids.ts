// Identifiers: a type prefix and a time-ordered opaque tail (PRODUCT.md), e.g. inb_01jd3k…
// The tail is 10 Crockford base32 characters of milliseconds then 16 random ones, so ids sort
// by creation time and never collide in practice.
import { randomBytes, randomFillSync } from 'node:crypto';

const ALPHABET = '0123456789abcdefghjkmnpqrstvwxyz';

export type IdPrefix = 'inb' | 'msg' | 'thr' | 'dom' | 'att' | 'whk' | 'key' | 'evt' | 'dlv' | 'acc' | 'job' | 'drf' | 'lst' | 'aud' | 'rpt';

let lastTime = 0;
let counter = 0;

// Random bytes for ids come from a pool refilled 4 KB at a time (as crypto.randomUUID does):
// one call into OpenSSL per ~300 ids instead of one per id (bench/: 2.5% of the SMTP spool
// path's CPU, where every message takes a job id and a message id).
const POOL = Buffer.alloc(4096);
let poolAt = POOL.length;

function randomTail(n: number): string {
  if (poolAt + n > POOL.length) {
    randomFillSync(POOL);
    poolAt = 0;
  }
  let out = '';
  for (let i = 0; i < n; i++) out += ALPHABET[POOL[poolAt + i] & 31];
  poolAt += n;
  return out;
}

export function newId(prefix: IdPrefix, now = Date.now()): string {
  // Within one millisecond, bump a counter in the random part's first chars to keep order.
  if (now === lastTime) counter++;
  else {
    lastTime = now;
    counter = 0;
  }
  let time = '';
  let t = now;
  for (let i = 0; i < 10; i++) {
    time = ALPHABET[t % 32] + time;
    t = Math.floor(t / 32);
  }
  const seq = ALPHABET[(counter >> 10) & 31] + ALPHABET[(counter >> 5) & 31] + ALPHABET[counter & 31];
  return `${prefix}_${time}${seq}${randomTail(13)}`;
}

/** Random lowercase base32 string of the given length (inbox local parts, tokens). */
export function randomToken(length: number): string {
  const bytes = randomBytes(length);
  let out = '';
  for (const b of bytes) out += ALPHABET[b & 31];
  return out;
}

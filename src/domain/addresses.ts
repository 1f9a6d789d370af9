// Email address rules for inbox addresses and recipients. Inbox addresses are stored
// lowercase and compared case-insensitively. Local parts are limited to a conservative
// character set: no quoting, no `%` or `!` (old relay hacks), no source routes.
import { randomInt } from 'node:crypto';
import { wordlist } from '@scure/bip39/wordlists/english.js';
import { AppError } from './errors.ts';

const LOCAL = /^[a-z0-9](?:[a-z0-9._+-]{0,62}[a-z0-9_+-])?$/i;
const LABEL = /^(?!-)[a-z0-9-]{1,63}(?<!-)$/i;

export function isValidDomainName(name: string): boolean {
  if (name.length > 253 || !name.includes('.')) return false;
  return name.split('.').every((l) => LABEL.test(l));
}

export function isValidLocalPart(local: string): boolean {
  return LOCAL.test(local) && !local.includes('..');
}

export function splitAddress(address: string): { local: string; domain: string } | undefined {
  const at = address.lastIndexOf('@');
  if (at <= 0 || at === address.length - 1) return undefined;
  return { local: address.slice(0, at), domain: address.slice(at + 1) };
}

/** A recipient address for sending: local@domain, ASCII, no CR/LF, sane length. */
export function normalizeRecipient(field: string, raw: string): string {
  const address = raw.trim();
  const parts = splitAddress(address);
  if (
    address.length > 254 ||
    /[\s<>(),;:\\"\[\]]/.test(address) ||
    !parts ||
    !/^[A-Za-z0-9.!#$%&'*+/=?^_`{|}~-]{1,64}$/.test(parts.local) ||
    parts.local.startsWith('.') ||
    parts.local.endsWith('.') ||
    parts.local.includes('..') ||
    !isValidDomainName(parts.domain)
  ) {
    throw new AppError('INVALID_ADDRESS', `\`${field}\` contains an invalid email address: ${JSON.stringify(raw).slice(0, 100)}`);
  }
  return `${parts.local}@${parts.domain.toLowerCase()}`;
}

/** Words that read badly in someone's address; the rest of the BIP-39 list is kept. */
const UNWELCOME = new Set(
  'abuse blood bomb bullet cage chaos crime cruel cry damage danger destroy dirt disease divorce dumb enemy evil exile fatal fever funeral garbage ghost grief gun hazard horror hungry hurt ill illegal injury insane jail lawsuit liar lonely mad monster naked nasty negative nuclear pain panic penalty pig pistol poison prison punch rifle riot rude sad scam scare sex shoot sick sin slave snake spy steal stupid suicide tank terror toilet toxic tragic trap trash trigger ugly victim violence virus vomit war warfare weapon wreck wrong zombie'.split(
    ' ',
  ),
);
const WORDS = wordlist.filter((w) => !UNWELCOME.has(w));

/**
 * The local part of an inbox created without an address: three common English words and a
 * number, e.g. `amber-orbit-lucky-417`. Random-looking local parts (consonant runs, no
 * separator) cost +2 points with SpamAssassin's HK_RANDOM_FROM/HK_RANDOM_ENVFROM each time the
 * inbox sends; these read like names people choose (and the hyphen alone keeps those rules off).
 * Unguessable all the same: the BIP-39 English list (2048 words) less ~90 unwelcome ones gives
 * 3 × 10.93 bits, plus 9.97 bits of the number: 42.8 bits.
 */
export function readableLocalPart(): string {
  const pick = () => WORDS[randomInt(WORDS.length)];
  return `${pick()}-${pick()}-${pick()}-${randomInt(1000)}`;
}

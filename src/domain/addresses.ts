// Email address rules for inbox addresses and recipients. Inbox addresses are stored
// lowercase and compared case-insensitively. Local parts are limited to a conservative
// character set: no quoting, no `%` or `!` (old relay hacks), no source routes.
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

// Webhook target safety: which URLs may be saved and which addresses may be connected to.
// A webhook makes this server send requests on a customer's behalf, so a target that points
// back inside the host or its network (SSRF) is refused at save and again at every delivery.
import ipaddr from 'ipaddr.js';
import { isIP } from 'node:net';
import type { AppContext } from '../../context.ts';
import { DnsUnavailableError } from '../../dns.ts';
import { AppError } from '../errors.ts';

export const MAX_WEBHOOK_URL_LENGTH = 2048;

/** A target as the sender will reach it: the parsed URL and the address(es) it may connect to. */
export interface ResolvedTarget {
  url: URL;
  /** Host without IPv6 brackets. */
  host: string;
  /** Checked addresses; the connection goes to the first. Empty: let the system resolve (insecure mode only). */
  addresses: Array<{ address: string; family: 4 | 6 }>;
}

export class UnsafeTargetError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UnsafeTargetError';
  }
}

// RFC 6052 §2.1 well-known NAT64 prefix; RFC 6145 / RFC 4291 §2.5.5 embedded IPv4 forms.
const NAT64 = ipaddr.IPv6.parse('64:ff9b::');
const COMPAT = ipaddr.IPv6.parse('::');
const GLOBAL_UNICAST = ipaddr.IPv6.parse('2000::');

function v4Reason(ip: ipaddr.IPv4): string | undefined {
  // ipaddr.js names every special-purpose block of RFC 6890 (loopback, private = RFC 1918,
  // linkLocal, carrierGradeNat = RFC 6598 100.64/10, multicast, unspecified, broadcast,
  // reserved = documentation/benchmark/240/4/…); only plain unicast is public.
  const range = ip.range();
  return range === 'unicast' ? undefined : range;
}

/** Why an address must not be connected to, or undefined when it is a public unicast one. */
export function nonPublicReason(address: string): string | undefined {
  const family = isIP(address);
  if (!family) return 'not an IP address';
  // ipaddr.js reads a dotted tail (::127.0.0.1) as IPv4-mapped; the socket would use ::7f00:1.
  // The WHATWG URL parser gives the form the connection really uses.
  let ip: ipaddr.IPv4 | ipaddr.IPv6;
  try {
    ip = ipaddr.parse(family === 6 ? new URL(`http://[${address}]/`).hostname.slice(1, -1) : address);
  } catch {
    return 'not a plain IP address'; // e.g. an IPv6 zone id (fe80::1%eth0)
  }
  if (ip.kind() === 'ipv4') return v4Reason(ip as ipaddr.IPv4);
  const v6 = ip as ipaddr.IPv6;
  // Forms that carry an IPv4 address are judged by the address they reach.
  if (v6.isIPv4MappedAddress()) return v4Reason(v6.toIPv4Address()) && `IPv4-mapped ${v4Reason(v6.toIPv4Address())}`;
  const parts = v6.parts;
  const embedded = () => ipaddr.IPv4.parse(`${parts[6] >> 8}.${parts[6] & 255}.${parts[7] >> 8}.${parts[7] & 255}`);
  if (v6.match(NAT64, 96)) {
    const r = v4Reason(embedded());
    return r && `NAT64 ${r}`;
  }
  if (v6.match(COMPAT, 96)) {
    // ::/96 holds ::, ::1 and the deprecated IPv4-compatible form (RFC 4291 §2.5.5.1).
    if (parts.slice(0, 7).every((p) => p === 0) && parts[7] <= 1) return v6.range();
    const r = v4Reason(embedded());
    return r && `IPv4-compatible ${r}`;
  }
  const range = v6.range();
  if (range === '6to4') {
    // RFC 3056: 2002:V4ADDR::/48.
    const r = v4Reason(ipaddr.IPv4.parse(`${parts[1] >> 8}.${parts[1] & 255}.${parts[2] >> 8}.${parts[2] & 255}`));
    return r && `6to4 ${r}`;
  }
  // Everything else must be ordinary global unicast (2000::/3, RFC 4291 §2.4): this refuses
  // ULA fc00::/7, link-local fe80::/10, multicast, Teredo, documentation and the like.
  if (!v6.match(GLOBAL_UNICAST, 3)) return range === 'unicast' ? 'not global unicast' : range;
  return range === 'unicast' ? undefined : range;
}

/** Named in every refusal the setting would lift, so a developer finds it from the error. */
const INSECURE_HINT = 'set webhooks.allow_insecure_targets = true in the config to allow it (development only)';

function invalid(message: string): AppError {
  return new AppError('INVALID_WEBHOOK_URL', message);
}

/** Parses a webhook URL and applies the scheme rules; throws INVALID_WEBHOOK_URL. */
export function parseWebhookUrl(raw: string, allowInsecure: boolean): URL {
  if (raw.length > MAX_WEBHOOK_URL_LENGTH) throw invalid(`\`url\` must be at most ${MAX_WEBHOOK_URL_LENGTH} characters`);
  // The WHATWG parser silently drops tab, CR and LF; refuse them (and other controls and
  // spaces) so the URL saved is exactly the URL the client sent.
  if (/[\x00-\x20\x7f]/.test(raw)) throw invalid('`url` must not contain spaces or control characters');
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw invalid('`url` is not a valid absolute URL');
  }
  if (url.protocol !== 'https:' && !(allowInsecure && url.protocol === 'http:')) {
    throw invalid(url.protocol === 'http:' ? `\`url\` must use https://; ${INSECURE_HINT}` : '`url` must use https://');
  }
  // Credentials in the URL would be sent to the receiver and shown in logs and listings.
  if (url.username || url.password) throw invalid('`url` must not contain a user name or password');
  if (!url.hostname) throw invalid('`url` has no host');
  return url;
}

const hostOf = (url: URL) =>
  url.hostname
    .replace(/^\[(.*)\]$/, '$1')
    .replace(/\.$/, '')
    .toLowerCase();

async function lookupAll(ctx: AppContext, host: string): Promise<ResolvedTarget['addresses']> {
  const [a, aaaa] = await Promise.all([ctx.dns.a(host), ctx.dns.aaaa(host)]);
  return [...a.map((address) => ({ address, family: 4 as const })), ...aaaa.map((address) => ({ address, family: 6 as const }))];
}

/**
 * Resolves the URL's host through `ctx.dns` and checks every address. Throws
 * UnsafeTargetError when any address is non-public or none exists; DnsUnavailableError when DNS
 * could not answer. Used at save and before every delivery, which then connects to one of
 * the checked addresses (no second lookup that a rebinding name could answer differently).
 */
export async function resolveTarget(ctx: AppContext, url: URL): Promise<ResolvedTarget> {
  const host = hostOf(url);
  const literal = isIP(host);
  if (ctx.config.webhooks.allow_insecure_targets) {
    // Development: no checks. A name is still resolved through `dns.servers` and pinned the
    // same way; when those servers do not know it (localhost), the system resolver is used.
    if (literal || host === 'localhost' || host.endsWith('.localhost')) return { url, host, addresses: [] };
    return { url, host, addresses: await lookupAll(ctx, host).catch(() => []) };
  }
  if (literal) {
    const reason = nonPublicReason(host);
    if (reason) throw new UnsafeTargetError(`${host} is not a public address (${reason})`);
    return { url, host, addresses: [{ address: host, family: literal as 4 | 6 }] };
  }
  // RFC 6761 §6.3: localhost names always mean this host, whatever a resolver says.
  if (host === 'localhost' || host.endsWith('.localhost')) throw new UnsafeTargetError(`${host} is a loopback name`);
  const addresses = await lookupAll(ctx, host);
  if (!addresses.length) throw new UnsafeTargetError(`${host} does not resolve to any address`);
  for (const { address } of addresses) {
    const reason = nonPublicReason(address);
    if (reason) throw new UnsafeTargetError(`${host} resolves to ${address}, which is not a public address (${reason})`);
  }
  return { url, host, addresses };
}

/** Save-time check: the URL rules plus the address rules, as 400 INVALID_WEBHOOK_URL. */
export async function checkWebhookUrl(ctx: AppContext, raw: string): Promise<string> {
  const url = parseWebhookUrl(raw, ctx.config.webhooks.allow_insecure_targets);
  try {
    await resolveTarget(ctx, url);
  } catch (err) {
    if (err instanceof UnsafeTargetError) throw invalid(`\`url\` is not allowed: ${err.message}; ${INSECURE_HINT}`);
    if (err instanceof DnsUnavailableError) throw invalid(`\`url\` host could not be resolved (DNS unavailable: ${err.code}); try again`);
    throw err;
  }
  return url.toString();
}

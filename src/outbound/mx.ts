// Where mail for a domain goes: its MX hosts in preference order, each with its addresses,
// looked up through `dns.servers` (ctx.dns). RFC 5321 §5.1: no MX means the domain itself is
// the implicit MX (its A/AAAA); RFC 7505: a lone "MX 0 ." (null MX) means it takes no mail.
import type { AppContext } from '../context.ts';

export interface MxHost {
  /** Host name of the MX (used for TLS SNI and in logs). */
  name: string;
  priority: number;
  /** Addresses to connect to, IPv4 first. */
  addresses: string[];
}

export type MxRoute =
  | { kind: 'hosts'; hosts: MxHost[]; implicit: boolean }
  /** RFC 7505 null MX: the domain declares it accepts no mail. */
  | { kind: 'null-mx' }
  /** Neither MX nor A/AAAA: nowhere to deliver (RFC 5321 §5.1: a permanent failure). */
  | { kind: 'none' };

/** Answers are kept this long: one lookup serves every message to a domain in a burst. */
const CACHE_MS = 60_000;
/** Addresses tried per MX host and family, so a host with dozens of A records cannot stall an attempt. */
const MAX_ADDRESSES = 4;

const caches = new WeakMap<AppContext, Map<string, { route: MxRoute; until: number }>>();

async function addressesOf(ctx: AppContext, name: string): Promise<string[]> {
  // Both families; a lookup that cannot be answered for one family must not hide the other.
  const [v4, v6] = await Promise.allSettled([ctx.dns.a(name), ctx.dns.aaaa(name)]);
  const a = v4.status === 'fulfilled' ? v4.value.slice(0, MAX_ADDRESSES) : [];
  const aaaa = v6.status === 'fulfilled' ? v6.value.slice(0, MAX_ADDRESSES) : [];
  if (!a.length && !aaaa.length && v4.status === 'rejected') throw v4.reason;
  return [...a, ...aaaa];
}

/** Shuffles hosts of equal preference (RFC 5321 §5.1 asks senders to spread the load). */
function byPreference(records: Array<{ exchange: string; priority: number }>) {
  return records
    .map((r) => ({ ...r, tie: Math.random() }))
    .sort((x, y) => x.priority - y.priority || x.tie - y.tie)
    .map(({ exchange, priority }) => ({ exchange, priority }));
}

/**
 * Resolves the route for `domain`. Throws DnsUnavailableError when DNS could not answer (the
 * caller retries later); returns `none`/`null-mx` only on authoritative answers.
 */
export async function resolveMx(ctx: AppContext, domain: string): Promise<MxRoute> {
  let cache = caches.get(ctx);
  if (!cache) caches.set(ctx, (cache = new Map()));
  const now = ctx.clock.now().getTime();
  const hit = cache.get(domain);
  if (hit && hit.until > now) return hit.route;

  const route = await lookup(ctx, domain);
  // Only usable routes are cached: a domain that just published its MX should not wait.
  if (route.kind === 'hosts') cache.set(domain, { route, until: now + CACHE_MS });
  return route;
}

async function lookup(ctx: AppContext, domain: string): Promise<MxRoute> {
  const records = await ctx.dns.mx(domain);
  const isNull = (r: { exchange: string }) => r.exchange === '' || r.exchange === '.';
  if (records.length === 1 && isNull(records[0])) return { kind: 'null-mx' };
  const real = records.filter((r) => !isNull(r));
  if (real.length === 0) {
    if (records.length) return { kind: 'null-mx' };
    // RFC 5321 §5.1: no MX records, so the domain's own address records act as one MX.
    const addresses = await addressesOf(ctx, domain);
    if (!addresses.length) return { kind: 'none' };
    return { kind: 'hosts', implicit: true, hosts: [{ name: domain, priority: 0, addresses }] };
  }
  const hosts: MxHost[] = [];
  let lastError: unknown;
  for (const r of byPreference(real)) {
    const name = r.exchange.replace(/\.$/, '').toLowerCase();
    try {
      const addresses = await addressesOf(ctx, name);
      if (addresses.length) hosts.push({ name, priority: r.priority, addresses });
    } catch (err) {
      lastError = err;
    }
  }
  if (hosts.length) return { kind: 'hosts', implicit: false, hosts };
  // MX hosts exist but none resolved: a DNS outage is retried later; an authoritative answer
  // that no MX host has an address means there is nowhere to deliver.
  if (lastError) throw lastError;
  return { kind: 'none' };
}

// DNS lookups through the configured resolvers (`dns.servers`, system resolvers when empty).
// "No such record" answers are returned as empty lists; anything that means "could not find
// out" (timeout, SERVFAIL, refused) throws DnsUnavailableError so callers never mistake an
// outage for a missing record.
import { promises as dnsPromises } from 'node:dns';

export class DnsUnavailableError extends Error {
  constructor(
    readonly name_: string,
    readonly rrtype: string,
    readonly code: string,
  ) {
    super(`DNS lookup of ${rrtype} ${name_} failed: ${code}`);
    this.name = 'DnsUnavailableError';
  }
}

const ABSENT = new Set(['ENOTFOUND', 'ENODATA', 'ENONAME', 'NXDOMAIN']);

export interface MxRecord {
  exchange: string;
  priority: number;
}

export interface Resolver {
  mx(name: string): Promise<MxRecord[]>;
  txt(name: string): Promise<string[]>;
  a(name: string): Promise<string[]>;
  aaaa(name: string): Promise<string[]>;
  ptr(ip: string): Promise<string[]>;
  /** Generic lookup in the shape mailauth's `resolver` option expects (throws ENOTFOUND etc.). */
  raw(name: string, rrtype: string): Promise<unknown>;
}

export function createResolver(servers: string[], timeoutMs: number): Resolver {
  const r = new dnsPromises.Resolver({ timeout: timeoutMs, tries: 2 });
  if (servers.length) r.setServers(servers);
  const safe = async <T>(name: string, rrtype: string, fn: () => Promise<T[]>): Promise<T[]> => {
    try {
      return await fn();
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code ?? 'ERROR';
      if (ABSENT.has(code)) return [];
      throw new DnsUnavailableError(name, rrtype, code);
    }
  };
  return {
    mx: (name) => safe(name, 'MX', () => r.resolveMx(name)),
    txt: (name) => safe(name, 'TXT', async () => (await r.resolveTxt(name)).map((chunks) => chunks.join(''))),
    a: (name) => safe(name, 'A', () => r.resolve4(name)),
    aaaa: (name) => safe(name, 'AAAA', () => r.resolve6(name)),
    ptr: (ip) => safe(ip, 'PTR', () => r.reverse(ip)),
    raw: (name, rrtype) => r.resolve(name, rrtype as 'TXT'),
  };
}

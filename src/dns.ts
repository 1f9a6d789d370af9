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
  // Made on the first lookup, not at start-up: setServers() with an "ip:port" entry compiles
  // Node's IPv6 address pattern, 6-8 ms of the single executable's start (bench/ scenario (g)).
  let resolver: dnsPromises.Resolver | undefined;
  const res = (): dnsPromises.Resolver => {
    if (!resolver) {
      resolver = new dnsPromises.Resolver({ timeout: timeoutMs, tries: 2 });
      if (servers.length) resolver.setServers(servers);
    }
    return resolver;
  };
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
    mx: (name) => safe(name, 'MX', () => res().resolveMx(name)),
    txt: (name) => safe(name, 'TXT', async () => (await res().resolveTxt(name)).map((chunks) => chunks.join(''))),
    a: (name) => safe(name, 'A', () => res().resolve4(name)),
    aaaa: (name) => safe(name, 'AAAA', () => res().resolve6(name)),
    ptr: (ip) => safe(ip, 'PTR', () => res().reverse(ip)),
    raw: (name, rrtype) => res().resolve(name, rrtype as 'TXT'),
  };
}

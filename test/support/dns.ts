// A dns2 server on loopback acting as the authoritative source in tests. Records are held in
// a mutable zone; a name can be made to SERVFAIL or to never answer (timeout).
import dns2 from 'dns2';

// dns2's bundled types lag its API (RCODE, record shapes); it is used untyped here.
const Packet = (dns2 as any).Packet;

export type TestRecord =
  | { type: 'A'; address: string }
  | { type: 'AAAA'; address: string }
  | { type: 'MX'; exchange: string; priority: number }
  | { type: 'TXT'; value: string }
  | { type: 'CNAME'; domain: string }
  | { type: 'PTR'; domain: string };

export interface TestDns {
  /** "127.0.0.1:port", for `dns.servers`. */
  server: string;
  port: number;
  /** Replaces the records of `name` (lowercase, no trailing dot) for one type, or all types. */
  set(name: string, records: TestRecord[]): void;
  add(name: string, record: TestRecord): void;
  clear(name?: string): void;
  /** Answers SERVFAIL for this name. */
  servfail(name: string): void;
  /** Never answers for this name (the client times out). */
  blackhole(name: string): void;
  /** Every question asked so far, as "TYPE name". */
  queries: string[];
  close(): Promise<void>;
}

const TYPE_NAMES = Object.fromEntries(Object.entries(Packet.TYPE as Record<string, number>).map(([k, v]) => [v, k])) as Record<number, string>;

export async function startTestDns(): Promise<TestDns> {
  const zone = new Map<string, TestRecord[]>();
  const failing = new Set<string>();
  const silent = new Set<string>();
  const queries: string[] = [];

  const server = dns2.createServer({
    udp: true,
    handle: (request: any, send: (r: any) => void) => {
      const response: any = Packet.createResponseFromRequest(request);
      const [q] = request.questions;
      const name = String(q.name).toLowerCase().replace(/\.$/, '');
      const typeName = TYPE_NAMES[q.type] ?? String(q.type);
      queries.push(`${typeName} ${name}`);
      if (silent.has(name)) return;
      if (failing.has(name)) {
        response.header.rcode = Packet.RCODE.SERVFAIL;
        send(response);
        return;
      }
      const records = zone.get(name);
      if (!records) {
        response.header.rcode = Packet.RCODE.NXDOMAIN;
        send(response);
        return;
      }
      const base = { name: q.name, class: Packet.CLASS.IN, ttl: 1 };
      for (const r of records) {
        // A CNAME answers every type (the client follows it).
        if (r.type !== typeName && r.type !== 'CNAME') continue;
        if (r.type === 'A') response.answers.push({ ...base, type: Packet.TYPE.A, address: r.address });
        else if (r.type === 'AAAA') response.answers.push({ ...base, type: Packet.TYPE.AAAA, address: r.address });
        else if (r.type === 'MX') response.answers.push({ ...base, type: Packet.TYPE.MX, exchange: r.exchange, priority: r.priority });
        else if (r.type === 'CNAME') response.answers.push({ ...base, type: Packet.TYPE.CNAME, domain: r.domain });
        else if (r.type === 'PTR') response.answers.push({ ...base, type: Packet.TYPE.PTR, domain: r.domain });
        else if (r.type === 'TXT') {
          // Long values are split into 255-byte character-strings, as real zones publish them.
          const chunks = r.value.match(/[\s\S]{1,255}/g) ?? [''];
          response.answers.push({ ...base, type: Packet.TYPE.TXT, data: chunks });
        }
      }
      send(response);
    },
  });
  await server.listen({ udp: { port: 0, address: '127.0.0.1' } } as any);
  const port = (server.addresses() as any).udp.port as number;
  const key = (n: string) => n.toLowerCase().replace(/\.$/, '');
  return {
    server: `127.0.0.1:${port}`,
    port,
    set(name, records) {
      zone.set(key(name), records);
    },
    add(name, record) {
      zone.set(key(name), [...(zone.get(key(name)) ?? []), record]);
    },
    clear(name) {
      if (name === undefined) {
        zone.clear();
        failing.clear();
        silent.clear();
      } else {
        zone.delete(key(name));
        failing.delete(key(name));
        silent.delete(key(name));
      }
    },
    servfail(name) {
      failing.add(key(name));
    },
    blackhole(name) {
      silent.add(key(name));
    },
    queries,
    close: () => server.close(),
  };
}

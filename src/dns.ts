// DNS lookups through the configured resolvers (`dns.servers`, system resolvers when empty).
// "No such record" answers are returned as empty lists; anything that means "could not find
// out" (timeout, SERVFAIL, refused) throws DnsUnavailableError so callers never mistake an
// outage for a missing record. createSecureLookup asks the same servers directly for the MX and
// TLSA answers DANE needs, with their AD flag (Node's resolver does not expose it).
import { promises as dnsPromises } from 'node:dns';
import { randomInt } from 'node:crypto';
import { createSocket } from 'node:dgram';
import { connect, isIP } from 'node:net';

export class DnsUnavailableError extends Error {
  readonly name_: string;
  readonly rrtype: string;
  readonly code: string;
  constructor(name_: string, rrtype: string, code: string) {
    super(`DNS lookup of ${rrtype} ${name_} failed: ${code}`);
    this.name_ = name_;
    this.rrtype = rrtype;
    this.code = code;
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

/** TLSA record (RFC 6698 §2.1). */
export interface TlsaRecord {
  usage: number;
  selector: number;
  matchingType: number;
  data: Buffer;
}

/**
 * An answer of a validating resolver (`dns.dnssec`): `authenticated` is the AD flag (RFC 4035
 * §3.2.3; asked for with AD set in the query, RFC 6840 §5.7), `bogus` a SERVFAIL, which a
 * validating resolver gives for data failing validation.
 */
export interface SecureAnswer<T> {
  authenticated: boolean;
  bogus: boolean;
  records: T[];
}

const TYPE_MX = 15;
const TYPE_TLSA = 52;

/** A DNS name at `offset` of `msg` (compression pointers followed, at most 64 hops). */
function readName(msg: Buffer, offset: number): { name: string; end: number } {
  const labels: string[] = [];
  let end = -1;
  for (let hops = 0; hops < 64; hops++) {
    const len = msg[offset];
    if (len === undefined) throw new Error('truncated name');
    if ((len & 0xc0) === 0xc0) {
      if (end < 0) end = offset + 2;
      offset = ((len & 0x3f) << 8) | msg[offset + 1];
      continue;
    }
    if (len === 0) return { name: labels.join('.'), end: end < 0 ? offset + 1 : end };
    labels.push(msg.subarray(offset + 1, offset + 1 + len).toString('latin1'));
    offset += 1 + len;
  }
  throw new Error('name compression loop');
}

function queryPacket(id: number, name: string, type: number): Buffer {
  const labels = name.replace(/\.$/, '').split('.').filter(Boolean);
  const qname = Buffer.concat([...labels.map((l) => Buffer.concat([Buffer.from([l.length]), Buffer.from(l, 'latin1')])), Buffer.from([0])]);
  const header = Buffer.alloc(12);
  header.writeUInt16BE(id, 0);
  header.writeUInt16BE(0x0120, 2); // RD + AD: recursion, and report whether the answer is authenticated
  header.writeUInt16BE(1, 4);
  const question = Buffer.alloc(4);
  question.writeUInt16BE(type, 0);
  question.writeUInt16BE(1, 2); // IN
  return Buffer.concat([header, qname, question]);
}

interface RawAnswer {
  rcode: number;
  ad: boolean;
  truncated: boolean;
  answers: Array<{ type: number; rdata: Buffer; rdataOffset: number }>;
  msg: Buffer;
}

function parseResponse(msg: Buffer): RawAnswer {
  const flags = msg.readUInt16BE(2);
  const qd = msg.readUInt16BE(4);
  const an = msg.readUInt16BE(6);
  let offset = 12;
  for (let i = 0; i < qd; i++) offset = readName(msg, offset).end + 4;
  const answers: RawAnswer['answers'] = [];
  for (let i = 0; i < an; i++) {
    offset = readName(msg, offset).end;
    const type = msg.readUInt16BE(offset);
    const rdlen = msg.readUInt16BE(offset + 8);
    const rdataOffset = offset + 10;
    answers.push({ type, rdata: msg.subarray(rdataOffset, rdataOffset + rdlen), rdataOffset });
    offset = rdataOffset + rdlen;
  }
  return { rcode: flags & 0xf, ad: (flags & 0x0020) !== 0, truncated: (flags & 0x0200) !== 0, answers, msg };
}

/** One question to one server over UDP, then TCP when the answer is truncated. */
async function ask(server: { host: string; port: number }, name: string, type: number, timeoutMs: number): Promise<RawAnswer> {
  const id = randomInt(0x10000);
  const packet = queryPacket(id, name, type);
  const udp = await new Promise<Buffer>((resolve, reject) => {
    const sock = createSocket(isIP(server.host) === 6 ? 'udp6' : 'udp4');
    const timer = setTimeout(() => {
      sock.close();
      reject(Object.assign(new Error('timeout'), { code: 'ETIMEOUT' }));
    }, timeoutMs);
    sock.on('message', (msg) => {
      if (msg.length < 12 || msg.readUInt16BE(0) !== id) return; // not ours (spoofing, a late answer)
      clearTimeout(timer);
      sock.close();
      resolve(msg);
    });
    sock.on('error', (err) => {
      clearTimeout(timer);
      sock.close();
      reject(err);
    });
    sock.send(packet, server.port, server.host);
  });
  const res = parseResponse(udp);
  if (!res.truncated) return res;
  const tcp = await new Promise<Buffer>((resolve, reject) => {
    const chunks: Buffer[] = [];
    const sock = connect({ host: server.host, port: server.port, timeout: timeoutMs });
    const len = Buffer.alloc(2);
    len.writeUInt16BE(packet.length);
    sock.on('connect', () => sock.end(Buffer.concat([len, packet])));
    sock.on('data', (c: Buffer) => chunks.push(c));
    sock.on('timeout', () => sock.destroy(Object.assign(new Error('timeout'), { code: 'ETIMEOUT' })));
    sock.on('error', reject);
    sock.on('close', () => {
      const all = Buffer.concat(chunks);
      if (all.length < 14) return reject(Object.assign(new Error('short TCP answer'), { code: 'ETIMEOUT' }));
      resolve(all.subarray(2, 2 + all.readUInt16BE(0)));
    });
  });
  return parseResponse(tcp);
}

/** "ip", "ip:port", "[v6]:port" (the forms `dns.servers` takes) → host and port. */
function serverAddress(text: string): { host: string; port: number } {
  const m = /^\[(.+)\]:(\d+)$/.exec(text) ?? /^([^:]+):(\d+)$/.exec(text);
  return m ? { host: m[1], port: Number(m[2]) } : { host: text, port: 53 };
}

/**
 * Asks the configured resolvers (or the system's) for `name`/`type` with the AD flag, each
 * in turn until one answers. Throws DnsUnavailableError when none does.
 */
export function createSecureLookup(servers: string[], timeoutMs: number) {
  const query = async (name: string, type: number, rrtype: string): Promise<RawAnswer> => {
    const list = (servers.length ? servers : dnsPromises.getServers()).map(serverAddress);
    let last = 'ESERVFAIL';
    for (const server of list) {
      try {
        return await ask(server, name, type, timeoutMs);
      } catch (err) {
        last = (err as NodeJS.ErrnoException).code ?? 'ERROR';
      }
    }
    throw new DnsUnavailableError(name, rrtype, last);
  };
  const secure = async <T>(name: string, type: number, rrtype: string, parse: (a: RawAnswer['answers'][number], msg: Buffer) => T): Promise<SecureAnswer<T>> => {
    const res = await query(name, type, rrtype);
    // 2 SERVFAIL: what a validating resolver answers for bogus data; 3 NXDOMAIN: no records.
    if (res.rcode === 2) return { authenticated: false, bogus: true, records: [] };
    if (res.rcode !== 0 && res.rcode !== 3) throw new DnsUnavailableError(name, rrtype, `RCODE${res.rcode}`);
    return { authenticated: res.ad, bogus: false, records: res.answers.filter((a) => a.type === type).map((a) => parse(a, res.msg)) };
  };
  return {
    mx: (name: string) => secure(name, TYPE_MX, 'MX', (a, msg) => ({ priority: a.rdata.readUInt16BE(0), exchange: readName(msg, a.rdataOffset + 2).name })),
    tlsa: (name: string) => secure(name, TYPE_TLSA, 'TLSA', (a) => ({ usage: a.rdata[0], selector: a.rdata[1], matchingType: a.rdata[2], data: Buffer.from(a.rdata.subarray(3)) })),
  };
}

export type SecureLookup = ReturnType<typeof createSecureLookup>;

// Outbound DANE (RFC 7672): with `dns.dnssec` (the resolvers validate; their AD flag is
// trusted) a recipient domain whose MX RRset is DNSSEC-authenticated has the TLSA records of
// each MX host (`_<port>._tcp.<host>`) looked up. Usable records (DANE-TA(2), DANE-EE(3))
// make TLS mandatory and the certificate must match one of them; records none of which is
// usable still make TLS mandatory (§2.2); a TLSA lookup the resolver answers SERVFAIL (bogus)
// makes the host unusable. DANE takes precedence over MTA-STS for the hosts it covers.
import { createHash, X509Certificate } from 'node:crypto';
import type { DetailedPeerCertificate } from 'node:tls';
import type { AppContext } from '../context.ts';
import { createSecureLookup, type TlsaRecord } from '../dns.ts';
import type { MxHost } from './mx.ts';

export type DaneStatus =
  /** TLS required; the certificate must match one of `records` (empty: TLS without authentication). */
  | { kind: 'dane'; records: TlsaRecord[] }
  /** The TLSA lookup failed validation: the host must not be used (RFC 7672 §2.2.1). */
  | { kind: 'bogus'; detail: string };

/** Usable per RFC 7672 §3.1: DANE-TA(2) or DANE-EE(3), selector 0/1, matching type 0/1/2. */
const usable = (r: TlsaRecord) => (r.usage === 2 || r.usage === 3) && r.selector <= 1 && r.matchingType <= 2;

/** TLSA records in presentation form (TLS-RPT's policy-string). */
export const tlsaText = (name: string, records: TlsaRecord[]) => records.map((r) => `${name}. IN TLSA ${r.usage} ${r.selector} ${r.matchingType} ${r.data.toString('hex')}`);

export const tlsaName = (ctx: AppContext, host: string) => `_${ctx.config.outbound.mx_port}._tcp.${host}`;

/**
 * The DANE status of each MX host of `domain` (hosts without TLSA records are left out), or
 * undefined when DANE does not apply: turned off, no validating resolver, or an MX RRset that
 * is not authenticated.
 */
export async function daneFor(ctx: AppContext, domain: string, hosts: MxHost[]): Promise<Map<string, DaneStatus> | undefined> {
  if (!ctx.config.outbound.dane || !ctx.config.dns.dnssec) return undefined;
  const lookup = createSecureLookup(ctx.config.dns.servers, ctx.config.dns.timeout);
  const mx = await lookup.mx(domain);
  if (!mx.authenticated) return undefined;
  const result = new Map<string, DaneStatus>();
  for (const host of hosts) {
    const answer = await lookup.tlsa(tlsaName(ctx, host.name));
    if (answer.bogus) result.set(host.name, { kind: 'bogus', detail: `TLSA lookup of ${tlsaName(ctx, host.name)} failed DNSSEC validation` });
    else if (answer.authenticated && answer.records.length) result.set(host.name, { kind: 'dane', records: answer.records.filter(usable) });
  }
  return result;
}

function matches(record: TlsaRecord, cert: X509Certificate): boolean {
  const selected = record.selector === 0 ? cert.raw : cert.publicKey.export({ type: 'spki', format: 'der' });
  const digest =
    record.matchingType === 0
      ? selected
      : createHash(record.matchingType === 1 ? 'sha256' : 'sha512')
          .update(selected)
          .digest();
  return digest.equals(record.data);
}

/** The chain as the server presented it (leaf first), from Node's detailed peer certificate. */
export function peerChain(peer: DetailedPeerCertificate): X509Certificate[] {
  const chain: X509Certificate[] = [];
  const seen = new Set<DetailedPeerCertificate>();
  for (let c: DetailedPeerCertificate | undefined = peer; c?.raw && !seen.has(c); c = c.issuerCertificate) {
    seen.add(c);
    chain.push(new X509Certificate(c.raw));
  }
  return chain;
}

/**
 * Checks the server's chain against the TLSA records; answers the reason when it fails.
 * DANE-EE(3): the leaf matches, nothing else is checked (RFC 7672 §3.1.1: no name, no expiry).
 * DANE-TA(2): a certificate of the chain matches, the leaf chains up to it by signatures, is
 * current, and names the MX host (§3.2.2).
 */
export function checkDane(records: TlsaRecord[], chain: X509Certificate[], host: string, now: Date): string | undefined {
  if (!records.length) return undefined;
  const [leaf] = chain;
  if (!leaf) return 'the server presented no certificate';
  if (records.some((r) => r.usage === 3 && matches(r, leaf))) return undefined;
  for (const r of records.filter((x) => x.usage === 2)) {
    const at = chain.findIndex((c) => matches(r, c));
    if (at < 0) continue;
    let linked = true;
    for (let i = 0; i < at; i++) if (!chain[i].verify(chain[i + 1].publicKey)) linked = false;
    if (!linked) continue;
    if (Date.parse(leaf.validTo) < now.getTime() || Date.parse(leaf.validFrom) > now.getTime()) return `certificate of ${host} is not current (DANE-TA)`;
    if (!leaf.checkHost(host)) return `certificate does not name ${host} (DANE-TA)`;
    return undefined;
  }
  return `certificate of ${host} matches none of its TLSA records`;
}

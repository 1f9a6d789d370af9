// DNS records of a domain and the rules that turn what DNS answered into domain statuses.
// Everything here except observeRecords() is a pure function over DNS answers, so the rules
// can be read (and tested) without a resolver.
import { createHash } from 'node:crypto';
import { DnsUnavailableError, type MxRecord, type Resolver } from '../../dns.ts';
import { dkimTxtValue } from './dkim-keys.ts';

export interface DnsRecord {
  type: 'TXT' | 'MX' | 'CNAME';
  /** Fully qualified, lowercase, without the trailing dot. */
  name: string;
  value: string;
  /** MX only. */
  priority?: number;
}

export type RecordRole = 'ownership' | 'dkim' | 'spf' | 'dmarc' | 'mx' | 'mta_sts' | 'mta_sts_host' | 'tls_rpt';

/** The records mailroom asks an operator to publish for one domain, by role. */
export interface RecordPlan {
  /** Absent for the shared domain: the operator owns it by configuration. */
  ownership?: DnsRecord;
  dkim: DnsRecord;
  spf: DnsRecord;
  dmarc: DnsRecord;
  mx: DnsRecord;
  /**
   * Custom domains only (src/domain/domains/mta-sts.ts): the MTA-STS policy id (RFC 8461 §3.1),
   * the host that serves the policy (the appliance), and where TLS reports go (RFC 8460 §3).
   */
  mta_sts?: DnsRecord;
  mta_sts_host?: DnsRecord;
  tls_rpt?: DnsRecord;
}

export const OWNERSHIP_LABEL = '_mailroom';
export const OWNERSHIP_PREFIX = 'mailroom-verification=';
export const MX_PRIORITY = 10;
export const RECORD_TTL = 3600;

/**
 * The MTA-STS policy id: changes whenever the policy served changes (its mode or MX host), so
 * senders fetch it again (RFC 8461 §3.1: 1 to 32 letters and digits).
 */
export const mtaStsId = (mode: string, hostname: string): string =>
  createHash('sha256')
    .update(`${mode}\n${normalizeHost(hostname)}`)
    .digest('hex')
    .slice(0, 20);

/** The report addresses (src/domain/inbound/service-address.ts), as the records name them. */
export const DMARC_RUA_LOCAL = 'dmarc-reports';
export const TLS_RUA_LOCAL = 'tls-reports';

export function planRecords(p: { domain: string; hostname: string; selector: string; publicKey: string; token?: string; mtaStsMode?: string }): RecordPlan {
  const host = normalizeHost(p.hostname);
  // A custom domain (it has an ownership token) gets its reports here; the shared domain's
  // operator publishes what they like.
  const custom = !!p.token;
  return {
    ownership: p.token ? { type: 'TXT', name: `${OWNERSHIP_LABEL}.${p.domain}`, value: `${OWNERSHIP_PREFIX}${p.token}` } : undefined,
    dkim: { type: 'TXT', name: `${p.selector}._domainkey.${p.domain}`, value: dkimTxtValue(p.publicKey) },
    // RFC 7208: the appliance sends from `hostname`'s addresses; ~all (softfail) is the
    // cautious suggestion while an operator checks nothing else sends for the domain.
    spf: { type: 'TXT', name: p.domain, value: `v=spf1 a:${host} mx ~all` },
    // RFC 7489: a monitoring-only policy to start with; operators tighten it later.
    dmarc: { type: 'TXT', name: `_dmarc.${p.domain}`, value: `v=DMARC1; p=none; adkim=r; aspf=r${custom ? `; rua=mailto:${DMARC_RUA_LOCAL}@${p.domain}` : ''}` },
    mx: { type: 'MX', name: p.domain, value: host, priority: MX_PRIORITY },
    ...(custom
      ? {
          mta_sts: { type: 'TXT', name: `_mta-sts.${p.domain}`, value: `v=STSv1; id=${mtaStsId(p.mtaStsMode ?? 'testing', host)}` },
          mta_sts_host: { type: 'CNAME', name: `mta-sts.${p.domain}`, value: host },
          tls_rpt: { type: 'TXT', name: `_smtp._tls.${p.domain}`, value: `v=TLSRPTv1; rua=mailto:${TLS_RUA_LOCAL}@${p.domain}` },
        }
      : {}),
  } as RecordPlan;
}

export const sendingRecords = (plan: RecordPlan): DnsRecord[] => [plan.ownership, plan.dkim, plan.spf, plan.dmarc].filter((r): r is DnsRecord => !!r);
export const receivingRecords = (plan: RecordPlan): DnsRecord[] => [plan.mx, plan.mta_sts, plan.mta_sts_host, plan.tls_rpt].filter((r): r is DnsRecord => !!r);

// ---------------------------------------------------------------------------------------------
// What DNS said about each record.

/**
 * found: published as asked. missing: nothing there (NXDOMAIN/NODATA, or no record of the
 * kind). wrong: something is there that contradicts what was asked. differs: an advisory
 * record (SPF) exists in another form mailroom cannot judge. unknown: DNS did not answer.
 */
export type RecordState = 'found' | 'missing' | 'wrong' | 'differs' | 'unknown';

export interface RecordCheck {
  role: RecordRole;
  type: DnsRecord['type'];
  name: string;
  state: RecordState;
  detail: string;
}

/** A lookup's answer, or the reason there was none (timeout, SERVFAIL). */
export type Answer<T> = { ok: true; values: T[] } | { ok: false; error: string };

export interface Observation {
  ownership?: Answer<string>;
  dkim: Answer<string>;
  spf: Answer<string>;
  dmarc: Answer<string>;
  mx: Answer<MxRecord>;
  mtaSts?: Answer<string>;
  /** Addresses of mta-sts.<domain> and of the hostname (the CNAME, or A records, must lead to the appliance). */
  mtaStsHost?: Answer<{ host: string[]; appliance: string[] }>;
  tlsRpt?: Answer<string>;
}

/** Host names compare case-insensitively, with or without the root's trailing dot. */
export const normalizeHost = (name: string): string => name.trim().toLowerCase().replace(/\.$/, '');

/** RFC 6376 §3.2 tag-list: `tag=value` pairs separated by `;`, whitespace around them ignored. */
export function parseTagList(text: string): Map<string, string> {
  const tags = new Map<string, string>();
  for (const part of text.split(';')) {
    const eq = part.indexOf('=');
    if (eq === -1) continue;
    const tag = part.slice(0, eq).trim().toLowerCase();
    if (tag && !tags.has(tag)) tags.set(tag, part.slice(eq + 1).trim());
  }
  return tags;
}

/**
 * The ownership token: found when any TXT at `_mailroom.<domain>` is our value (other
 * verification tokens may live beside it); wrong when TXT records exist there and none is
 * ours (typically a token from an earlier add of the same domain).
 */
export function checkOwnership(expected: string, txts: string[]): { state: RecordState; detail: string } {
  if (txts.length === 0) return { state: 'missing', detail: 'no TXT record' };
  if (txts.some((t) => t.trim() === expected)) return { state: 'found', detail: 'token matches' };
  return { state: 'wrong', detail: `TXT present but no record holds this domain's token (${txts.length} record(s) seen)` };
}

/**
 * The DKIM key record at `<selector>._domainkey`: found when it is exactly one record with
 * our public key (v=DKIM1 and k=rsa when given). Wrong when a record is there but carries
 * another key, an empty (revoked, RFC 6376 §3.6.1) or unparsable key, another key type, or
 * when several records compete (verifiers may pick either, §3.6.2.2).
 */
export function checkDkim(publicKey: string, txts: string[]): { state: RecordState; detail: string } {
  if (txts.length === 0) return { state: 'missing', detail: 'no TXT record' };
  if (txts.length > 1) return { state: 'wrong', detail: `${txts.length} TXT records at the selector; publish exactly one` };
  const tags = parseTagList(txts[0]);
  const v = tags.get('v');
  if (v !== undefined && v !== 'DKIM1') return { state: 'wrong', detail: `v=${v}, expected DKIM1` };
  const k = tags.get('k');
  if (k !== undefined && k.toLowerCase() !== 'rsa') return { state: 'wrong', detail: `k=${k}, expected rsa` };
  const p = tags.get('p')?.replace(/\s+/g, '');
  if (!p) return { state: 'wrong', detail: 'no public key (p=) in the record' };
  if (p !== publicKey) return { state: 'wrong', detail: "the published public key is not this domain's key" };
  return { state: 'found', detail: 'public key matches' };
}

/**
 * SPF is advisory (it does not gate `verified`): found when the domain's single v=spf1
 * record names `hostname` (a:/include:) or `mx`; several v=spf1 records are a permerror
 * (RFC 7208 §4.5), so wrong; any other single record "differs" and is the operator's call.
 */
export function checkSpf(hostname: string, txts: string[]): { state: RecordState; detail: string } {
  const spf = txts.filter((t) => /^v=spf1(\s|$)/i.test(t.trim()));
  if (spf.length === 0) return { state: 'missing', detail: 'no v=spf1 record' };
  if (spf.length > 1) return { state: 'wrong', detail: `${spf.length} v=spf1 records (RFC 7208 §4.5: permerror); merge them into one` };
  const host = normalizeHost(hostname);
  // A passing (not `-`) bare `mx`, or `a:`/`include:` naming this host.
  const authorizes = (term: string) => {
    const m = /^[+~?]?(mx|a|include)(?::([^/]+))?(?:\/\d+)?$/.exec(term);
    if (!m) return false;
    return m[1] === 'mx' ? !m[2] : !!m[2] && normalizeHost(m[2]) === host;
  };
  return spf[0].trim().toLowerCase().split(/\s+/).some(authorizes)
    ? { state: 'found', detail: `authorizes ${host}` }
    : { state: 'differs', detail: `v=spf1 record present but it does not name ${host} or mx; make sure it authorizes this host` };
}

/**
 * DMARC is advisory: found when exactly one v=DMARC1 record exists (RFC 7489 §6.6.3). With
 * `rua` (custom domains), a record whose rua does not name it "differs": its aggregate reports
 * go elsewhere and GET /domains/{id}/dmarc stays empty.
 */
export function checkDmarc(txts: string[], rua?: string): { state: RecordState; detail: string } {
  const d = txts.filter((t) => /^v=DMARC1\s*(;|$)/i.test(t.trim()));
  if (d.length === 0) return { state: 'missing', detail: 'no v=DMARC1 record' };
  if (d.length > 1) return { state: 'wrong', detail: `${d.length} v=DMARC1 records; receivers then apply none (RFC 7489 §6.6.3)` };
  if (rua && !ruaNames(d[0], rua)) return { state: 'differs', detail: `${d[0].trim()}: its rua does not name ${rua}, so this appliance sees no aggregate report` };
  return { state: 'found', detail: d[0].trim() };
}

/** True when the record's rua= list names mailto:`address` (any case, size limits ignored). */
const ruaNames = (record: string, address: string): boolean =>
  (parseTagList(record).get('rua') ?? '').split(',').some(
    (u) =>
      u
        .trim()
        .toLowerCase()
        .replace(/!\d+[kmgt]?$/, '') === `mailto:${address.toLowerCase()}`,
  );

/** MTA-STS TXT (RFC 8461 §3.1): one v=STSv1 record whose id is the policy's. */
export function checkMtaSts(expected: string, txts: string[]): { state: RecordState; detail: string } {
  const sts = txts.filter((t) => /^v=STSv1\s*(;|$)/i.test(t.trim()));
  if (sts.length === 0) return { state: 'missing', detail: 'no v=STSv1 record' };
  if (sts.length > 1) return { state: 'wrong', detail: `${sts.length} v=STSv1 records; senders then use none (RFC 8461 §3.1)` };
  const id = parseTagList(sts[0]).get('id');
  const want = parseTagList(expected).get('id');
  if (id !== want) return { state: 'wrong', detail: `id=${id ?? '(none)'}, but the policy served now has id=${want}: senders keep a stale policy` };
  return { state: 'found', detail: sts[0].trim() };
}

/** The policy host: found when mta-sts.<domain> resolves to an address of the hostname. */
export function checkMtaStsHost(hostname: string, v: { host: string[]; appliance: string[] }): { state: RecordState; detail: string } {
  if (!v.host.length) return { state: 'missing', detail: 'no address (CNAME or A record)' };
  if (v.host.some((a) => v.appliance.includes(a))) return { state: 'found', detail: `resolves to ${v.host.join(', ')}, an address of ${normalizeHost(hostname)}` };
  return { state: 'wrong', detail: `resolves to ${v.host.join(', ')}, not to ${normalizeHost(hostname)} (${v.appliance.join(', ') || 'no address'})` };
}

/** TLS-RPT TXT (RFC 8460 §3): one v=TLSRPTv1 record; "differs" when its rua does not name `rua`. */
export function checkTlsRpt(rua: string, txts: string[]): { state: RecordState; detail: string } {
  const r = txts.filter((t) => /^v=TLSRPTv1\s*(;|$)/i.test(t.trim()));
  if (r.length === 0) return { state: 'missing', detail: 'no v=TLSRPTv1 record' };
  if (r.length > 1) return { state: 'wrong', detail: `${r.length} v=TLSRPTv1 records; senders then report nowhere (RFC 8460 §3)` };
  if (!ruaNames(r[0], rua)) return { state: 'differs', detail: `${r[0].trim()}: its rua does not name ${rua}, so this appliance sees no TLS report` };
  return { state: 'found', detail: r[0].trim() };
}

/** MX: found when one of the domain's MX hosts is `hostname`; wrong when MX point elsewhere. */
export function checkMx(hostname: string, mxs: MxRecord[]): { state: RecordState; detail: string } {
  if (mxs.length === 0) return { state: 'missing', detail: 'no MX record' };
  const host = normalizeHost(hostname);
  if (mxs.some((m) => normalizeHost(m.exchange) === host)) return { state: 'found', detail: `MX points at ${host}` };
  const seen = mxs.map((m) => normalizeHost(m.exchange) || '.').join(', ');
  return { state: 'wrong', detail: `MX points at ${seen}, not ${host}` };
}

function judge<T>(answer: Answer<T>, fn: (values: T[]) => { state: RecordState; detail: string }) {
  return answer.ok ? fn(answer.values) : { state: 'unknown' as const, detail: answer.error };
}

/** Per-record states, in the order the records are listed (sending, then receiving). */
export function checkRecords(plan: RecordPlan, hostname: string, publicKey: string, obs: Observation): RecordCheck[] {
  const out: RecordCheck[] = [];
  const add = (role: RecordRole, r: DnsRecord, res: { state: RecordState; detail: string }) => out.push({ role, type: r.type, name: r.name, ...res });
  if (plan.ownership && obs.ownership) {
    const expected = plan.ownership.value;
    add(
      'ownership',
      plan.ownership,
      judge(obs.ownership, (v) => checkOwnership(expected, v)),
    );
  }
  add(
    'dkim',
    plan.dkim,
    judge(obs.dkim, (v) => checkDkim(publicKey, v)),
  );
  add(
    'spf',
    plan.spf,
    judge(obs.spf, (v) => checkSpf(hostname, v)),
  );
  const rua = (r: DnsRecord | undefined) => (r ? /mailto:([^;,\s]+)/.exec(r.value)?.[1] : undefined);
  add(
    'dmarc',
    plan.dmarc,
    judge(obs.dmarc, (v) => checkDmarc(v, rua(plan.dmarc))),
  );
  add(
    'mx',
    plan.mx,
    judge(obs.mx, (v) => checkMx(hostname, v)),
  );
  if (plan.mta_sts && obs.mtaSts)
    add(
      'mta_sts',
      plan.mta_sts,
      judge(obs.mtaSts, (v) => checkMtaSts(plan.mta_sts!.value, v)),
    );
  if (plan.mta_sts_host && obs.mtaStsHost)
    add(
      'mta_sts_host',
      plan.mta_sts_host,
      judge(obs.mtaStsHost, ([v]) => checkMtaStsHost(hostname, v)),
    );
  if (plan.tls_rpt && obs.tlsRpt)
    add(
      'tls_rpt',
      plan.tls_rpt,
      judge(obs.tlsRpt, (v) => checkTlsRpt(rua(plan.tls_rpt)!, v)),
    );
  return out;
}

export type SendingStatus = 'pending' | 'pending_dkim' | 'verified' | 'failed';
export type ReceivingStatus = 'pending' | 'verified' | 'failed';

/**
 * Sending status from the ownership and DKIM states; undefined = DNS did not answer, keep the
 * stored status. A record that is present but wrong fails the domain even while the other is
 * missing; ownership found + DKIM missing is `pending_dkim` (the key has not propagated yet).
 */
export function sendingStatusFrom(ownership: RecordState, dkim: RecordState): SendingStatus | undefined {
  if (ownership === 'unknown' || dkim === 'unknown') return undefined;
  if (ownership === 'wrong' || dkim === 'wrong') return 'failed';
  if (ownership === 'found') return dkim === 'found' ? 'verified' : 'pending_dkim';
  return 'pending';
}

/** Receiving status from the MX state; undefined = DNS did not answer, keep the stored status. */
export function receivingStatusFrom(mx: RecordState): ReceivingStatus | undefined {
  if (mx === 'unknown') return undefined;
  return mx === 'found' ? 'verified' : mx === 'wrong' ? 'failed' : 'pending';
}

// ---------------------------------------------------------------------------------------------
// The one impure part: asking DNS.

async function ask<T>(fn: () => Promise<T[]>): Promise<Answer<T>> {
  try {
    return { ok: true, values: await fn() };
  } catch (err) {
    if (err instanceof DnsUnavailableError) return { ok: false, error: err.message };
    throw err;
  }
}

/** Looks every record of the plan up at once; outages are answers, not exceptions. */
export async function observeRecords(dns: Resolver, plan: RecordPlan): Promise<Observation> {
  const [ownership, dkim, spf, dmarc, mx, mtaSts, mtaStsHost, tlsRpt] = await Promise.all([
    plan.ownership ? ask(() => dns.txt(plan.ownership!.name)) : Promise.resolve(undefined),
    ask(() => dns.txt(plan.dkim.name)),
    ask(() => dns.txt(plan.spf.name)),
    ask(() => dns.txt(plan.dmarc.name)),
    ask(() => dns.mx(plan.mx.name)),
    plan.mta_sts ? ask(() => dns.txt(plan.mta_sts!.name)) : Promise.resolve(undefined),
    // The resolver follows a CNAME to its addresses; what counts is where they lead.
    plan.mta_sts_host ? ask(async () => [{ host: await dns.a(plan.mta_sts_host!.name), appliance: await dns.a(plan.mta_sts_host!.value) }]) : Promise.resolve(undefined),
    plan.tls_rpt ? ask(() => dns.txt(plan.tls_rpt!.name)) : Promise.resolve(undefined),
  ]);
  return { ownership, dkim, spf, dmarc, mx, mtaSts, mtaStsHost, tlsRpt };
}

// ---------------------------------------------------------------------------------------------
// Zone-file presentation (RFC 1035 §5.1), for operators to paste.

/** A TXT value as quoted character-strings of at most 255 octets each (RFC 1035 §3.3.14). */
export function quoteTxt(value: string): string {
  const chunks = value.match(/[\s\S]{1,255}/g) ?? [''];
  return chunks.map((c) => `"${c.replace(/[\\"]/g, (ch) => `\\${ch}`)}"`).join(' ');
}

/** One record as a zone-file line with an absolute (dot-terminated) owner name. */
export function zoneLine(r: DnsRecord, ttl = RECORD_TTL): string {
  const rdata = r.type === 'TXT' ? quoteTxt(r.value) : r.type === 'MX' ? `${r.priority ?? MX_PRIORITY} ${r.value}.` : `${r.value}.`;
  return `${r.name}. ${ttl} IN ${r.type} ${rdata}`;
}

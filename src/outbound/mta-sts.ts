// Outbound MTA-STS (RFC 8461): a recipient domain publishing `_mta-sts` TXT and a policy at
// https://mta-sts.<domain>/.well-known/mta-sts.txt asks senders to deliver only to the MX hosts
// the policy names, over TLS with a certificate valid for the MX name. The policy is fetched
// with WebPKI validation (system roots plus `outbound.tls_ca_file`), bounded in time and size,
// and kept until its max_age, in memory and in the database (a restart or another node keeps
// it: §5.1's defence against an attacker who blocks the next fetch); a new TXT id fetches it sooner.
// A fetch that fails leaves the domain without a policy unless a cached one is still valid
// (RFC 8461 §5.1: a failure never blocks delivery on its own, it is reported by TLS-RPT).
import { request } from 'node:https';
import { readFileSync } from 'node:fs';
import { rootCertificates } from 'node:tls';
import type { LookupFunction } from 'node:net';
import type { AppContext } from '../context.ts';
import { findMtaStsPolicy, saveMtaStsPolicy } from '../store/repo/transport.ts';

export type StsMode = 'enforce' | 'testing' | 'none';

export interface StsPolicy {
  id: string;
  mode: StsMode;
  /** MX patterns: a host name, or `*.` and a domain (one leftmost label). */
  mx: string[];
  /** Seconds. */
  maxAge: number;
  /** The policy text as served (TLS-RPT's `policy-string` is its lines). */
  text: string;
  /** ctx.clock time (ms) after which the policy is no longer used. */
  expires: number;
}

/** RFC 8460 §4.3 failure types that concern the policy itself. */
export type StsFailure = 'sts-policy-fetch-error' | 'sts-policy-invalid' | 'sts-webpki-invalid';

export type StsLookup =
  /** No policy (no TXT record, mode none, or a failed first fetch: `failure` says which). */
  { kind: 'none'; failure?: { type: StsFailure; detail: string } } | { kind: 'policy'; policy: StsPolicy };

/** RFC 8461 §3.2: max_age is at most 31557600 seconds (a year). */
const MAX_AGE_LIMIT = 31_557_600;

const caches = new WeakMap<AppContext, Map<string, StsPolicy>>();
/**
 * Domains found without a usable policy (no TXT record, or a fetch that failed) are not asked
 * again for this long, as MX answers are kept: a burst of mail to a domain costs one lookup,
 * and a policy server that never answers costs one `outbound.mta_sts_timeout`, not one per message.
 */
const ABSENT_MS = 60_000;
const absences = new WeakMap<AppContext, Map<string, number>>();

function cacheOf(ctx: AppContext): Map<string, StsPolicy> {
  let c = caches.get(ctx);
  if (!c) caches.set(ctx, (c = new Map()));
  return c;
}

/** `v=STSv1; id=...` → the id; undefined when there is not exactly one valid record. */
export function parseStsTxt(records: string[]): string | undefined {
  const sts = records.filter((r) => /^v=STSv1\s*(;|$)/.test(r.trim()));
  if (sts.length !== 1) return undefined;
  const id = /(?:^|;)\s*id=([A-Za-z0-9]{1,32})\s*(;|$)/.exec(sts[0])?.[1];
  return id;
}

/** `v` without the spaces and tabs (RFC 8461's WSP) at its ends. */
function trimBlanks(v: string): string {
  let start = 0;
  let end = v.length;
  while (start < end && (v[start] === ' ' || v[start] === '\t')) start++;
  while (end > start && (v[end - 1] === ' ' || v[end - 1] === '\t')) end--;
  return v.slice(start, end);
}

/** Parses a policy file; throws with the reason when it is not a valid STSv1 policy. */
export function parseStsPolicy(text: string): Omit<StsPolicy, 'id' | 'expires' | 'text'> {
  let version: string | undefined;
  let mode: string | undefined;
  let maxAge: number | undefined;
  const mx: string[] = [];
  for (const line of text.split(/\r?\n/)) {
    if (!line.trim()) continue;
    // The key by a regex, the blanks around the value by a scan: a regex ending in `[ \t]*$`
    // is quadratic in a run of blanks followed by more text (a 64 KB policy took 1.9 s).
    const m = /^([A-Za-z0-9_]+):/.exec(line);
    if (!m) throw new Error(`malformed line: ${line.slice(0, 80)}`);
    const key = m[1];
    const value = trimBlanks(line.slice(m[0].length));
    if (key === 'version') version = value;
    else if (key === 'mode') mode = value;
    else if (key === 'max_age') maxAge = /^\d{1,10}$/.test(value) ? Number(value) : NaN;
    else if (key === 'mx') mx.push(value.toLowerCase().replace(/\.$/, ''));
    // Unknown keys are ignored (§3.2 extensions).
  }
  if (version !== 'STSv1') throw new Error('version is not STSv1');
  if (mode !== 'enforce' && mode !== 'testing' && mode !== 'none') throw new Error(`invalid mode ${JSON.stringify(mode)}`);
  if (maxAge === undefined || !Number.isFinite(maxAge)) throw new Error('missing or invalid max_age');
  if (mode !== 'none' && !mx.length) throw new Error('no mx line');
  return { mode, mx, maxAge: Math.min(maxAge, MAX_AGE_LIMIT) };
}

/** RFC 8461 §4.1: a pattern `*.example.com` matches one extra leftmost label. */
export function mxMatches(policy: Pick<StsPolicy, 'mx'>, host: string): boolean {
  const h = host.toLowerCase().replace(/\.$/, '');
  return policy.mx.some((p) => {
    if (!p.startsWith('*.')) return h === p;
    const suffix = p.slice(1); // ".example.com"
    const label = h.slice(0, -suffix.length);
    return h.endsWith(suffix) && label.length > 0 && !label.includes('.');
  });
}

let caFile: { path: string; certs: string[] } | undefined;

/** System roots plus `outbound.tls_ca_file` (a private PKI, the tests' CA): read once per path. */
export function trustedCas(ctx: AppContext): string[] | undefined {
  const path = ctx.config.outbound.tls_ca_file;
  if (!path) return undefined;
  if (caFile?.path !== path) caFile = { path, certs: [...rootCertificates, readFileSync(path, 'utf8')] };
  return caFile.certs;
}

/** Host names resolved through `dns.servers`, like every other lookup of the sender. */
const lookupVia =
  (ctx: AppContext): LookupFunction =>
  (hostname, options, cb) => {
    ctx.dns.a(hostname).then(
      (addrs) => {
        if (!addrs.length) return cb(Object.assign(new Error(`no address for ${hostname}`), { code: 'ENOTFOUND' }), '', 4);
        if ((options as { all?: boolean }).all)
          return (cb as unknown as (e: null, a: Array<{ address: string; family: number }>) => void)(
            null,
            addrs.map((address) => ({ address, family: 4 })),
          );
        cb(null, addrs[0], 4);
      },
      (err) => cb(err as NodeJS.ErrnoException, '', 4),
    );
  };

/** Fetches the policy text; rejects with an error whose `stsFailure` is the RFC 8460 type. */
function fetchPolicyText(ctx: AppContext, domain: string): Promise<string> {
  const o = ctx.config.outbound;
  const host = `mta-sts.${domain}`;
  return new Promise((resolve, reject) => {
    const failure = (type: StsFailure, message: string) => Object.assign(new Error(message), { stsFailure: type });
    const req = request(
      {
        host,
        port: o.mta_sts_port,
        path: '/.well-known/mta-sts.txt',
        method: 'GET',
        servername: host,
        ca: trustedCas(ctx),
        rejectUnauthorized: true,
        lookup: lookupVia(ctx),
        headers: { 'user-agent': 'mailroom', accept: 'text/plain' },
        signal: AbortSignal.timeout(o.mta_sts_timeout),
      },
      (res) => {
        // §3.3: redirects are not followed; only 200 is a policy.
        if (res.statusCode !== 200) {
          res.resume();
          return reject(failure('sts-policy-fetch-error', `HTTP ${res.statusCode} from ${host}`));
        }
        const chunks: Buffer[] = [];
        let size = 0;
        res.on('data', (c: Buffer) => {
          size += c.length;
          if (size > o.mta_sts_max_bytes) {
            req.destroy();
            reject(failure('sts-policy-invalid', `policy of ${domain} larger than outbound.mta_sts_max_bytes (${o.mta_sts_max_bytes})`));
          } else chunks.push(c);
        });
        res.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
        res.on('error', (err) => reject(failure('sts-policy-fetch-error', err.message)));
      },
    );
    req.on('error', (err: NodeJS.ErrnoException) => {
      // A TLS certificate the roots do not vouch for, or not for this name.
      const webpki = /CERT|SELF_SIGNED|UNABLE_TO|ALTNAME|certificate/i.test(`${err.code ?? ''} ${err.message}`);
      reject(
        failure(
          webpki ? 'sts-webpki-invalid' : 'sts-policy-fetch-error',
          `${host}: ${err.name === 'TimeoutError' || err.name === 'AbortError' ? `no policy within outbound.mta_sts_timeout` : err.message}`,
        ),
      );
    });
    req.end();
  });
}

/** The policy stored by an earlier fetch (this process before a restart, or another node). */
async function storedPolicy(ctx: AppContext, domain: string): Promise<StsPolicy | undefined> {
  const row = await findMtaStsPolicy(ctx.store.db, domain);
  if (!row) return undefined;
  try {
    const policy = { id: row.policyId, ...parseStsPolicy(row.policy), text: row.policy, expires: row.expiresAt };
    cacheOf(ctx).set(domain, policy);
    return policy;
  } catch {
    return undefined;
  }
}

/**
 * The MTA-STS policy of `domain` in force now (from the cache, or discovered and fetched).
 * DNS that cannot answer keeps a cached policy in force and otherwise means no policy.
 */
export async function stsPolicyFor(ctx: AppContext, domain: string): Promise<StsLookup> {
  const cache = cacheOf(ctx);
  const now = ctx.clock.now().getTime();
  let absent = absences.get(ctx);
  if (!absent) absences.set(ctx, (absent = new Map()));
  if ((absent.get(domain) ?? 0) > now) return { kind: 'none' };
  absent.delete(domain);
  const noPolicy = (failure?: { type: StsFailure; detail: string }): StsLookup => {
    absent.set(domain, now + ABSENT_MS);
    return { kind: 'none', failure };
  };
  let cached = cache.get(domain) ?? (await storedPolicy(ctx, domain));
  if (cached && cached.expires <= now) {
    cache.delete(domain);
    cached = undefined;
  }
  const fromCache = (): StsLookup => (cached && cached.mode !== 'none' ? { kind: 'policy', policy: cached } : { kind: 'none' });
  let id: string | undefined;
  try {
    id = parseStsTxt(await ctx.dns.txt(`_mta-sts.${domain}`));
  } catch {
    return fromCache();
  }
  // §5.1: no TXT record while a policy is cached: the cached policy holds until max_age.
  if (!id) return cached ? fromCache() : noPolicy();
  if (cached?.id === id) return fromCache();
  let text: string;
  let parsed: ReturnType<typeof parseStsPolicy>;
  try {
    text = await fetchPolicyText(ctx, domain);
  } catch (err) {
    const e = err as Error & { stsFailure?: StsFailure };
    ctx.log.warn('MTA-STS policy fetch failed', { domain, error: e.message });
    return cached ? fromCache() : noPolicy({ type: e.stsFailure ?? 'sts-policy-fetch-error', detail: e.message });
  }
  try {
    parsed = parseStsPolicy(text);
  } catch (err) {
    const detail = `policy of ${domain} is invalid: ${(err as Error).message}`;
    ctx.log.warn('MTA-STS policy invalid', { domain, error: detail });
    return cached ? fromCache() : noPolicy({ type: 'sts-policy-invalid', detail });
  }
  const policy: StsPolicy = { id, ...parsed, text, expires: now + parsed.maxAge * 1000 };
  cache.set(domain, policy);
  await saveMtaStsPolicy(ctx.store.db, { domain, policyId: id, policy: text, expiresAt: policy.expires });
  cached = policy;
  return fromCache();
}

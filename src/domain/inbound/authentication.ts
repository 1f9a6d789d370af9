// Sender authenticity of inbound mail: SPF (RFC 7208), DKIM (RFC 6376) and DMARC (RFC 7489)
// evaluated by mailauth with DNS through ctx.dns (dns.servers). The outcome is recorded, never
// enforced: a DNS outage yields `temperror` and the message is still accepted.
import type { Readable } from 'node:stream';
import type { AppContext } from '../../context.ts';

/**
 * What authentication needs of the application: its log, its resolver and two settings. The
 * main thread passes its AppContext; the analysis worker (analysis-worker.ts) passes one whose
 * lookups are answered by the main thread's resolver.
 */
export type AuthenticationEnv = Pick<AppContext, 'log'> & { dns: Pick<AppContext['dns'], 'raw'>; config: { hostname: string; dns: { timeout: number } } };

// mailauth, with what it pulls in, is loaded by the first inbound message rather than at
// start-up: bench/ measured ~34 MB of resident memory and ~0.65 s of start time for it.
let mailauth: Promise<typeof import('mailauth')> | undefined;
const loadMailauth = () => (mailauth ??= import('mailauth'));

export interface AuthenticationResults {
  /** pass | fail | softfail | neutral | none | temperror | permerror */
  spf: string;
  /** pass | fail | neutral | none | temperror | permerror (the best signature's result) */
  dkim: string;
  /** pass | fail | none | temperror | permerror */
  dmarc: string;
  /**
   * The header From's domain (lowercase) when the message proves it: DMARC pass, or a passing
   * DKIM signature or SPF check aligned with it; absent otherwise. Allow lists that require an
   * authenticated sender read it (src/domain/inboxes/lists.ts); it is not part of the stored record.
   */
  fromDomain?: string;
  /** The DMARC policy applied to the From domain (none | quarantine | reject), when one is published; read by the screener, not stored. */
  dmarcPolicy?: string;
}

/**
 * Relaxed alignment without a public-suffix list: equal, or one a subdomain of the other. It
 * misses two siblings (a.example.com, b.example.com); DMARC, when published, covers those.
 */
const aligned = (a: string, b: string) => a === b || a.endsWith(`.${b}`) || b.endsWith(`.${a}`);

/** The header From domain mailauth's result authenticates, if any (see AuthenticationResults.fromDomain). */
function authenticatedFromDomain(res: {
  dkim?: { headerFrom?: string[]; results?: Array<{ status?: { result?: string; aligned?: string | false } }> };
  spf?: { domain?: string; status?: { result?: string } } | false;
  dmarc?: { status?: { result?: string } } | false;
}): string | undefined {
  const from = res.dkim?.headerFrom ?? [];
  if (from.length !== 1) return undefined;
  const domain = String(from[0])
    .slice(String(from[0]).lastIndexOf('@') + 1)
    .toLowerCase();
  if (!domain) return undefined;
  if (res.dmarc && res.dmarc.status?.result === 'pass') return domain;
  if ((res.dkim?.results ?? []).some((r) => r.status?.result === 'pass' && r.status.aligned)) return domain;
  if (res.spf && res.spf.status?.result === 'pass' && res.spf.domain && aligned(res.spf.domain.toLowerCase(), domain)) return domain;
  return undefined;
}

const TEMPERROR: AuthenticationResults = { spf: 'temperror', dkim: 'temperror', dmarc: 'temperror' };

/**
 * mailauth 4.13.3 (pinned) joins folded header lines with repeated Array concat and splice,
 * quadratic in the lines of the header section and synchronous: one 400 KB message whose
 * header is folded over 100,000 lines blocked the event loop (HTTP and SMTP alike) for about
 * 40 s in the fuzz run (test/reliability/fuzz.ts). Real headers are a few hundred lines; past
 * this many the message is not evaluated, and recorded as `permerror` (it cannot be judged).
 */
export const MAX_HEADER_LINES = 10_000;
const UNJUDGED: AuthenticationResults = { spf: 'permerror', dkim: 'permerror', dmarc: 'permerror' };

/** Lines of the header section (up to the first empty line, RFC 5322 §2.1), counting to `limit` + 1 at most. */
export function headerLineCount(raw: Buffer, limit = MAX_HEADER_LINES): number {
  let lines = 0;
  let pos = 0;
  while (lines <= limit) {
    const nl = raw.indexOf(10, pos);
    if (nl === -1 || nl === pos || (nl === pos + 1 && raw[pos] === 13)) return lines;
    lines++;
    pos = nl + 1;
  }
  return lines;
}

/** The header section up to and including the empty line that ends it (all of `raw` if none). */
export function headerSection(raw: Buffer): Buffer {
  const crlf = raw.indexOf('\r\n\r\n');
  const lf = raw.indexOf('\n\n');
  const ends = [crlf === -1 ? -1 : crlf + 4, lf === -1 ? -1 : lf + 2].filter((i) => i !== -1);
  return ends.length ? raw.subarray(0, Math.min(...ends)) : raw;
}

/**
 * What mailauth needs to see: the whole message when its header section has a DKIM-Signature
 * field (RFC 6376 §3.5), else the header section alone (the body cannot change any result).
 */
function authenticationInput(raw: Buffer): Buffer {
  const head = headerSection(raw);
  return /^dkim-signature[ \t]*:/im.test(head.toString('latin1')) ? raw : head;
}

/**
 * SPF and DMARC records of a sending domain are looked up for every message it sends; answers
 * ("no such record" included) are kept this long, as a caching resolver would, well under the
 * TTLs such records use. Failures (timeout, SERVFAIL) are not kept.
 */
const LOOKUP_CACHE_MS = 30_000;
const LOOKUP_CACHE_MAX = 5_000;
const lookupCaches = new WeakMap<AuthenticationEnv, Map<string, { until: number; answer: Promise<unknown> }>>();

export function cachedLookup(ctx: AuthenticationEnv): (name: string, rrtype: string) => Promise<string[] | string[][]> {
  let cache = lookupCaches.get(ctx);
  if (!cache) lookupCaches.set(ctx, (cache = new Map()));
  const entries = cache;
  return (name, rrtype) => {
    const key = `${rrtype} ${name.toLowerCase()}`;
    const now = Date.now();
    const hit = entries.get(key);
    if (hit && hit.until > now) return hit.answer as Promise<string[] | string[][]>;
    if (entries.size >= LOOKUP_CACHE_MAX) entries.clear();
    const answer = ctx.dns.raw(name, rrtype);
    entries.set(key, { until: now + LOOKUP_CACHE_MS, answer });
    answer.catch((err: NodeJS.ErrnoException) => {
      // Only "no such name/record" is an answer worth keeping.
      if (!['ENOTFOUND', 'ENODATA'].includes(err?.code ?? '')) entries.delete(key);
    });
    return answer as Promise<string[] | string[][]>;
  };
}

/** Orders DKIM results so one passing signature makes the message's DKIM result `pass`. */
const DKIM_RANK = ['pass', 'temperror', 'fail', 'permerror', 'policy', 'neutral', 'none'];

export async function authenticateMessage(
  ctx: AuthenticationEnv,
  /** `raw`: the message; for a large one, its first bytes, and `whole` opens all of it (a DKIM signature covers the body). */
  input: { raw: Buffer; whole?: () => Readable; mailFrom: string; remoteAddress?: string; heloName?: string },
): Promise<AuthenticationResults> {
  if (headerLineCount(input.raw) > MAX_HEADER_LINES) {
    ctx.log.warn('sender authentication skipped: header section too long', { maxLines: MAX_HEADER_LINES });
    return { ...UNJUDGED };
  }
  const { authenticate } = await loadMailauth();
  const started = performance.now();
  let timer: NodeJS.Timeout | undefined;
  // Every lookup is already bounded by dns.timeout; this bounds the whole evaluation (an SPF
  // record may chain up to 10 lookups) so a slow resolver cannot hold the SMTP transaction.
  const deadline = new Promise<'timeout'>((resolve) => {
    timer = setTimeout(() => resolve('timeout'), Math.max(1000, ctx.config.dns.timeout * 4));
  });
  try {
    // Without a DKIM-Signature the body cannot change any result: mailauth gets the header
    // section alone instead of hashing the body for nothing (bench/: ~0.2 ms per 10 KB message).
    const message = authenticationInput(input.raw);
    const run = authenticate(message === input.raw && input.whole ? input.whole() : message, {
      ip: input.remoteAddress ? input.remoteAddress.replace(/^::ffff:/, '') : undefined,
      helo: input.heloName || undefined,
      sender: input.mailFrom || undefined,
      mta: ctx.config.hostname,
      resolver: cachedLookup(ctx),
      disableArc: true,
      disableBimi: true,
    });
    run.catch(() => undefined);
    const res = await Promise.race([run, deadline]);
    if (res === 'timeout') {
      ctx.log.warn('sender authentication timed out', { ms: Math.round(performance.now() - started) });
      return { ...TEMPERROR };
    }
    const fromDomain = authenticatedFromDomain(res as Parameters<typeof authenticatedFromDomain>[0]);
    const dkimResults = (res.dkim?.results ?? []).map((r) => String(r.status?.result ?? 'none'));
    dkimResults.sort((a, b) => rank(a) - rank(b));
    return {
      spf: res.spf ? String(res.spf.status?.result ?? 'none') : 'none',
      dkim: dkimResults[0] ?? 'none',
      dmarc: res.dmarc ? String(res.dmarc.status?.result ?? 'none') : 'none',
      ...(fromDomain ? { fromDomain } : {}),
      ...(res.dmarc && typeof (res.dmarc as { policy?: unknown }).policy === 'string' ? { dmarcPolicy: String((res.dmarc as { policy?: unknown }).policy) } : {}),
    };
  } catch (err) {
    ctx.log.warn('sender authentication failed', { error: (err as Error).message });
    return { ...TEMPERROR };
  } finally {
    clearTimeout(timer);
  }
}

function rank(result: string): number {
  const i = DKIM_RANK.indexOf(result);
  return i === -1 ? DKIM_RANK.length : i;
}

// Sender authenticity of inbound mail: SPF (RFC 7208), DKIM (RFC 6376) and DMARC (RFC 7489)
// evaluated by mailauth with DNS through ctx.dns (dns.servers). The outcome is recorded, never
// enforced: a DNS outage yields `temperror` and the message is still accepted.
import type { AppContext } from '../context.ts';

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

/** Orders DKIM results so one passing signature makes the message's DKIM result `pass`. */
const DKIM_RANK = ['pass', 'temperror', 'fail', 'permerror', 'policy', 'neutral', 'none'];

export async function authenticateMessage(
  ctx: AppContext,
  input: { raw: Buffer; mailFrom: string; remoteAddress?: string; heloName?: string },
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
    const run = authenticate(input.raw, {
      ip: input.remoteAddress ? input.remoteAddress.replace(/^::ffff:/, '') : undefined,
      helo: input.heloName || undefined,
      sender: input.mailFrom || undefined,
      mta: ctx.config.hostname,
      resolver: (name: string, rrtype: string) => ctx.dns.raw(name, rrtype) as Promise<string[] | string[][]>,
      disableArc: true,
      disableBimi: true,
    });
    run.catch(() => undefined);
    const res = await Promise.race([run, deadline]);
    if (res === 'timeout') {
      ctx.log.warn('sender authentication timed out', { ms: Math.round(performance.now() - started) });
      return { ...TEMPERROR };
    }
    const dkimResults = (res.dkim?.results ?? []).map((r) => String(r.status?.result ?? 'none'));
    dkimResults.sort((a, b) => rank(a) - rank(b));
    return {
      spf: res.spf ? String(res.spf.status?.result ?? 'none') : 'none',
      dkim: dkimResults[0] ?? 'none',
      dmarc: res.dmarc ? String(res.dmarc.status?.result ?? 'none') : 'none',
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

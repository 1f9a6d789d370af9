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

/** Orders DKIM results so one passing signature makes the message's DKIM result `pass`. */
const DKIM_RANK = ['pass', 'temperror', 'fail', 'permerror', 'policy', 'neutral', 'none'];

export async function authenticateMessage(
  ctx: AppContext,
  input: { raw: Buffer; mailFrom: string; remoteAddress?: string; heloName?: string },
): Promise<AuthenticationResults> {
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

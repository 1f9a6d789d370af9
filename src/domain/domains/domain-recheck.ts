// Background work for domains: makes the shared domain's DKIM key just after start (so the operator
// can publish it before the first send), and re-checks domains that are not verified yet
// every `domains.recheck_interval`, so a domain turns verified without anyone calling verify.
import type { AppContext } from '../../context.ts';
import { errorFields } from '../../log.ts';
import type { Service } from '../../context.ts';
import { ensureSharedDkimKey } from './dkim-keys.ts';
import { recheckDueDomains } from './domains.ts';
import { AFTER_START_MS } from '../../startup.ts';

export function createDomainRecheck(ctx: AppContext): Service {
  const every = ctx.config.domains.recheck_interval;
  let first: NodeJS.Timeout | undefined;
  let timer: NodeJS.Timeout | undefined;
  let pass: Promise<unknown> = Promise.resolve();
  let keyReady: Promise<unknown> = Promise.resolve();
  let running = false;

  const tick = () => {
    if (running) return; // a slow DNS pass is still going; skip rather than pile up
    running = true;
    // One node at a time on a shared database (the others find the lock taken and skip).
    pass = ctx.store
      .exclusive('domain-recheck', () => recheckDueDomains(ctx, every))
      .catch((err) => ctx.log.error('domain re-check pass failed', errorFields(err)))
      .finally(() => {
        running = false;
      });
  };

  return {
    name: 'domain-recheck',
    async start() {
      // The key a moment after start-up, not during it: its RSA generation (first start) would
      // take CPU from it. signingKeyFor copes if a send comes first (it then generates the key
      // itself, and the first file written wins). The first pass runs now (one indexed read when
      // nothing is due): deferred, it re-checked domains created in the meantime, a write nobody
      // asked for a second after start.
      first = setTimeout(
        () => {
          keyReady = ensureSharedDkimKey(ctx).catch((err) => ctx.log.error('shared DKIM key generation failed', errorFields(err)));
        },
        Math.min(AFTER_START_MS, every),
      );
      tick();
      timer = setInterval(tick, every);
      timer.unref();
    },
    async stop(graceMs) {
      clearTimeout(first);
      clearInterval(timer);
      let cut: NodeJS.Timeout | undefined;
      const grace = new Promise((resolve) => (cut = setTimeout(resolve, graceMs)));
      await Promise.race([Promise.all([pass, keyReady]), grace]);
      clearTimeout(cut);
    },
  };
}

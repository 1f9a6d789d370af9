// Failed SMTP submission logins per client address (IPv6: its /64), so API keys cannot be
// guessed at line speed: after MAX_AUTH_FAILURES failures within AUTH_COOL_DOWN_MS, AUTH from
// that address is answered 454 4.7.0 until AUTH_COOL_DOWN_MS after the last failure (Postfix's
// anvil and fail2ban setups do the same job). A successful login clears the count. Time comes
// from the context's clock, so tests can pass the cool-down.
import type { Clock } from '../context.ts';

export const MAX_AUTH_FAILURES = 5;
export const AUTH_COOL_DOWN_MS = 15 * 60_000;
/** Addresses remembered at most (a scan from many addresses cannot grow memory without bound). */
const MAX_TRACKED = 10_000;

export class AuthFailures {
  private readonly recent = new Map<string, { count: number; last: number }>();
  constructor(private readonly clock: Clock) {}

  private current(client: string): { count: number; last: number } | undefined {
    const entry = this.recent.get(client);
    if (entry && this.clock.now().getTime() - entry.last >= AUTH_COOL_DOWN_MS) {
      this.recent.delete(client);
      return undefined;
    }
    return entry;
  }

  /** True while `client` may not try to log in. */
  blocked(client: string): boolean {
    return (this.current(client)?.count ?? 0) >= MAX_AUTH_FAILURES;
  }

  failed(client: string): void {
    const now = this.clock.now().getTime();
    const entry = this.current(client);
    if (!entry && this.recent.size >= MAX_TRACKED) {
      for (const [key, e] of this.recent) if (now - e.last >= AUTH_COOL_DOWN_MS) this.recent.delete(key);
      // Still full: forget the oldest (a Map keeps insertion order).
      if (this.recent.size >= MAX_TRACKED) this.recent.delete(this.recent.keys().next().value!);
    }
    this.recent.set(client, { count: (entry?.count ?? 0) + 1, last: now });
  }

  succeeded(client: string): void {
    this.recent.delete(client);
  }
}

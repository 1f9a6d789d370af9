// Failed SMTP submission logins per (username, client address) pair (IPv6: its /64), so API
// keys cannot be guessed at line speed: after MAX_AUTH_FAILURES failures within
// AUTH_COOL_DOWN_MS, AUTH for that username from that address is answered 454 4.7.0 until
// AUTH_COOL_DOWN_MS after the last failure (Postfix's anvil and fail2ban setups do the same
// job). A successful login clears the count of its own pair only: logging in as another inbox
// from the same address does not wipe the failures of the one being guessed. Only refused
// credentials count; a login that could not be checked (the database failing) is not the
// client's fault. Time comes from the context's clock, so tests can pass the cool-down.
import type { Clock } from '../context.ts';

export const MAX_AUTH_FAILURES = 5;
export const AUTH_COOL_DOWN_MS = 15 * 60_000;
/** The key of a login attempt: the username as typed (case-insensitive) and the client's address. */
export const loginKey = (username: string, client: string): string => `${username.trim().toLowerCase().slice(0, 320)}\n${client}`;

/** Pairs remembered at most (a scan from many addresses cannot grow memory without bound). */
const MAX_TRACKED = 10_000;

export class AuthFailures {
  private readonly recent = new Map<string, { count: number; last: number }>();
  private readonly clock: Clock;
  constructor(clock: Clock) {
    this.clock = clock;
  }

  private current(key: string): { count: number; last: number } | undefined {
    const entry = this.recent.get(key);
    if (entry && this.clock.now().getTime() - entry.last >= AUTH_COOL_DOWN_MS) {
      this.recent.delete(key);
      return undefined;
    }
    return entry;
  }

  /** True while the pair `key` (loginKey) may not try to log in. */
  blocked(key: string): boolean {
    return (this.current(key)?.count ?? 0) >= MAX_AUTH_FAILURES;
  }

  failed(key: string): void {
    const now = this.clock.now().getTime();
    const entry = this.current(key);
    if (!entry && this.recent.size >= MAX_TRACKED) {
      for (const [k, e] of this.recent) if (now - e.last >= AUTH_COOL_DOWN_MS) this.recent.delete(k);
      // Still full: forget the oldest (a Map keeps insertion order).
      if (this.recent.size >= MAX_TRACKED) this.recent.delete(this.recent.keys().next().value!);
    }
    this.recent.set(key, { count: (entry?.count ?? 0) + 1, last: now });
  }

  succeeded(key: string): void {
    this.recent.delete(key);
  }
}

// Per-key fixed-window rate limiting (one window per UTC minute). Unauthenticated requests are
// limited per client address. Every response carries the three X-RateLimit-* headers.

export interface RateDecision {
  limit: number;
  remaining: number;
  /** Unix seconds at which the window resets. */
  reset: number;
  allowed: boolean;
}

export class RateLimiter {
  private windowStart = 0;
  private counts = new Map<string, number>();
  private readonly perMinute: number;
  constructor(perMinute: number) {
    this.perMinute = perMinute;
  }

  hit(identity: string, nowMs: number): RateDecision {
    const window = Math.floor(nowMs / 60_000) * 60_000;
    if (window !== this.windowStart) {
      // A new minute: every count starts again (and the map never grows past one window).
      this.windowStart = window;
      this.counts.clear();
    }
    const used = (this.counts.get(identity) ?? 0) + 1;
    this.counts.set(identity, used);
    return {
      limit: this.perMinute,
      remaining: Math.max(0, this.perMinute - used),
      reset: (window + 60_000) / 1000,
      allowed: used <= this.perMinute,
    };
  }
}

// Who "one client" is, for the per-address connection limits of the SMTP listeners
// (src/smtp/session-limits.ts) and the HTTP listener (src/http/app.ts): IPv4 as is, IPv6 by
// its /64 (one host usually holds a whole /64), and a count of the open connections of each.

/** IPv4 as is; IPv6 by its /64 (one host usually holds a whole /64). */
export function clientKey(address: string | undefined): string {
  const a = (address ?? '').replace(/^::ffff:(?=\d+\.)/, '');
  if (!a.includes(':')) return a;
  const [head, tail = ''] = a.split('::');
  const left = head ? head.split(':') : [];
  const right = tail ? tail.split(':') : [];
  const groups = [...left, ...Array(Math.max(0, 8 - left.length - right.length)).fill('0'), ...right];
  return (
    groups
      .slice(0, 4)
      .map((g) => g.toLowerCase().replace(/^0+(?=.)/, ''))
      .join(':') + '::/64'
  );
}

/** Open connections per client key; a key leaves the map with its last connection. */
export class OpenPerClient {
  private readonly open = new Map<string, number>();

  /** Counts one more connection of `key`; answers how many it has now. */
  add(key: string): number {
    const n = (this.open.get(key) ?? 0) + 1;
    this.open.set(key, n);
    return n;
  }

  remove(key: string): void {
    const n = (this.open.get(key) ?? 1) - 1;
    if (n > 0) this.open.set(key, n);
    else this.open.delete(key);
  }

  count(key: string): number {
    return this.open.get(key) ?? 0;
  }
}

// LIST and LSUB mailbox patterns (RFC 9051 §6.3.9): `*` matches anything, `%` anything but the
// hierarchy delimiter `/`. Matched without a regular expression: a regex of many wildcards
// backtracks exponentially ("*****…x" took minutes). Runs of wildcards are one wildcard, and the
// name is read once while the pattern positions it could have reached are carried along: after k
// characters at most 2(k + 1) of them, so a name of n characters costs O(n²) at worst, however
// long the pattern.

/** A matcher of names for `pattern`; `caseless`: letters match either case (INBOX). */
export function mailboxMatcher(pattern: string, caseless = false): (name: string) => boolean {
  const fold = (s: string) => (caseless ? s.toLowerCase() : s);
  // "**", "%*" and "*%" are "*"; "%%" is "%".
  const tokens = fold(pattern).replace(/[*%]+/g, (run) => (run.includes('*') ? '*' : '%'));
  const end = tokens.length;
  const wild = (p: number) => p < end && (tokens[p] === '*' || tokens[p] === '%');
  // Positions ascending, each with the one after it when it is a wildcard (matching nothing).
  const closure = (positions: number[]) => {
    const out: number[] = [];
    for (const p of positions) {
      if (out[out.length - 1] !== p) out.push(p);
      if (wild(p)) out.push(p + 1);
    }
    return out;
  };
  return (name: string) => {
    const text = fold(name);
    let at = closure([0]);
    for (let i = 0; i < text.length && at.length; i++) {
      const c = text[i];
      // Positions ascend and each stays or moves on by one, so `moved` ascends too.
      const moved: number[] = [];
      for (const p of at) {
        if (p === end) continue;
        const t = tokens[p];
        const q = t === '*' || (t === '%' && c !== '/') ? p : t === c ? p + 1 : -1;
        if (q !== -1 && moved[moved.length - 1] !== q) moved.push(q);
      }
      at = closure(moved);
    }
    return at[at.length - 1] === end;
  };
}

// Sequence sets (RFC 9051 §9 sequence-set): "1:3,7,9:*" against a folder's sequence numbers or
// UIDs. Answers the UIDs named, ascending, without building the ranges out.

/** The UIDs of `uids` (ascending) that `set` names; `byUid`: the set holds UIDs, else sequence numbers. */
export function resolveSet(set: string, uids: readonly number[], byUid: boolean): number[] | undefined {
  const last = byUid ? (uids.length ? uids[uids.length - 1] : 0) : uids.length;
  const ranges: Array<[number, number]> = [];
  for (const part of set.split(',')) {
    const m = /^(\d+|\*)(?::(\d+|\*))?$/.exec(part);
    if (!m) return undefined;
    const a = m[1] === '*' ? last : Number(m[1]);
    const b = m[2] === undefined ? a : m[2] === '*' ? last : Number(m[2]);
    if (!Number.isSafeInteger(a) || !Number.isSafeInteger(b)) return undefined;
    // "0" is no sequence number nor UID (a "*" of an empty folder gives 0: nothing).
    if ((a === 0 || b === 0) && !(m[1] === '*' || m[2] === '*')) return undefined;
    ranges.push(a <= b ? [a, b] : [b, a]);
  }
  const inSet = (n: number) => ranges.some(([a, b]) => n >= a && n <= b);
  const out: number[] = [];
  uids.forEach((uid, i) => {
    if (inSet(byUid ? uid : i + 1)) out.push(uid);
  });
  return out;
}

/** "1:3,7" for a list of numbers (ascending): COPYUID and APPENDUID answers. */
export function compactSet(numbers: readonly number[]): string {
  const parts: string[] = [];
  for (let i = 0; i < numbers.length; i++) {
    let j = i;
    while (j + 1 < numbers.length && numbers[j + 1] === numbers[j] + 1) j++;
    parts.push(i === j ? String(numbers[i]) : `${numbers[i]}:${numbers[j]}`);
    i = j;
  }
  return parts.join(',');
}

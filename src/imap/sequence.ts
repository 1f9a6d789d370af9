// Sequence sets (RFC 9051 §9 sequence-set): "1:3,7,9:*" against a folder's sequence numbers or
// UIDs. Answers the UIDs named, ascending, without building the ranges out: the ranges are
// sorted and merged, then walked with the folder once, so the work is linear in both (a set
// naming "1" two million times costs what the set's length does, not that times the folder).

/** Ranges a sequence set holds at most; past it, a BAD (a client names runs as "a:b"). */
export const MAX_SET_RANGES = 10_000;

/**
 * The UIDs of `uids` (ascending) that `set` names; `byUid`: the set holds UIDs, else sequence
 * numbers. A string: why the set is refused (answered as BAD).
 */
export function resolveSet(set: string, uids: readonly number[], byUid: boolean): number[] | string {
  let count = 1;
  for (let i = set.indexOf(','); i !== -1; i = set.indexOf(',', i + 1)) count++;
  if (count > MAX_SET_RANGES) return `sequence set of ${count} ranges is over the ${MAX_SET_RANGES} range limit`;
  const invalid = `not a sequence set: ${set.length > 100 ? `${set.slice(0, 100)}...` : set}`;
  const last = byUid ? (uids.length ? uids[uids.length - 1] : 0) : uids.length;
  const ranges: Array<[number, number]> = [];
  for (const part of set.split(',')) {
    const m = /^(\d+|\*)(?::(\d+|\*))?$/.exec(part);
    if (!m) return invalid;
    const a = m[1] === '*' ? last : Number(m[1]);
    const b = m[2] === undefined ? a : m[2] === '*' ? last : Number(m[2]);
    if (!Number.isSafeInteger(a) || !Number.isSafeInteger(b)) return invalid;
    // "0" is no sequence number nor UID (a "*" of an empty folder gives 0: nothing).
    if ((a === 0 || b === 0) && !(m[1] === '*' || m[2] === '*')) return invalid;
    ranges.push(a <= b ? [a, b] : [b, a]);
  }
  const out: number[] = [];
  let i = 0;
  for (const [a, b] of mergeRanges(ranges)) {
    if (!byUid) {
      // Sequence number n is uids[n - 1].
      for (let n = Math.max(a, 1); n <= Math.min(b, uids.length); n++) out.push(uids[n - 1]);
      continue;
    }
    while (i < uids.length && uids[i] < a) i++;
    while (i < uids.length && uids[i] <= b) out.push(uids[i++]);
  }
  return out;
}

/** The ranges sorted, overlapping and adjacent ones joined: "5:3,1,2,4" → [1, 5]. */
export function mergeRanges(ranges: Array<[number, number]>): Array<[number, number]> {
  const sorted = [...ranges].sort((x, y) => x[0] - y[0]);
  const merged: Array<[number, number]> = [];
  for (const [a, b] of sorted) {
    const top = merged[merged.length - 1];
    if (top && a <= top[1] + 1) top[1] = Math.max(top[1], b);
    else merged.push([a, b]);
  }
  return merged;
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

// Rows that nearly every request or message reads and that seldom change, kept in memory so
// that they are not read from the database (on PostgreSQL: a round trip) every time: who an API
// key is (src/domain/accounts/auth-cache.ts), and the allow and block lists that apply to an
// inbox (src/domain/inboxes/lists.ts). An entry is dropped, and read again, when:
// - a change is committed in this process (`changed`, called once the change has committed);
// - another process committed anything to a SQLite database (the CLI revoking a key): its
//   `PRAGMA data_version` changes, read at the first lookup of each turn of the event loop;
// - another node on PostgreSQL committed a change: `changed` announces it (NOTIFY) and every
//   other node empties that memory when it hears it, milliseconds later;
// - it is TTL_MS old, whatever happened: the bound for a change nobody announced (a NOTIFY
//   sent while a node's LISTEN connection was down, a row edited by hand).
// A read begun before an emptying does not store what it read (`generation`).
import type { AppContext } from '../context.ts';
import type { Store } from '../store/store.ts';

export const TTL_MS = 10_000;

export class Remembered<V> {
  private readonly entries = new Map<string, { value: V; filled: number; weight: number }>();
  private weight = 0;
  /** Bumped on every emptying; a read started under another generation is not stored. */
  generation = 0;

  /**
   * `budget`: the most kept at once, each value counting `weigh(value)` (1 by default); beyond
   * it the oldest entries go, and a value heavier than the whole budget is not kept.
   */
  private readonly committedElsewhere: () => boolean;
  private readonly budget: number;
  private readonly weigh: (value: V) => number;

  constructor(committedElsewhere: () => boolean, budget: number, weigh: (value: V) => number = () => 1) {
    this.committedElsewhere = committedElsewhere;
    this.budget = budget;
    this.weigh = weigh;
  }

  /** True while this turn of the event loop has looked at commits made elsewhere already. */
  private looked = false;
  private readonly lookAgain = () => {
    this.looked = false;
  };

  /** The value kept for `key`, if it is still to be trusted at `now` (Unix ms). */
  get(key: string, now: number): V | undefined {
    // Once per turn, not per lookup: the pragma is a statement step (~2.5 µs, 6% of a GET's
    // CPU in bench (b)), and the lookups of one turn came together, before or after a commit.
    if (!this.looked) {
      this.looked = true;
      setImmediate(this.lookAgain);
      if (this.committedElsewhere()) this.clear();
    }
    const entry = this.entries.get(key);
    if (entry && !(now - entry.filled < TTL_MS && now >= entry.filled)) {
      this.drop(key);
      return undefined;
    }
    return entry?.value;
  }

  /** Keeps `value`, read at `now` under `generation` (the one current when the read began). */
  put(key: string, value: V, generation: number, now: number): void {
    const weight = this.weigh(value);
    if (generation !== this.generation || weight > this.budget) return;
    this.drop(key);
    // The oldest go first (a Map keeps the order entries were put in).
    for (const oldest of this.entries.keys()) {
      if (this.weight + weight <= this.budget) break;
      this.drop(oldest);
    }
    this.entries.set(key, { value, filled: now, weight });
    this.weight += weight;
  }

  /** The generation, after looking at commits made elsewhere: it changes whenever something kept may have changed. */
  current(): number {
    if (this.committedElsewhere()) this.clear();
    return this.generation;
  }

  clear(): void {
    this.generation++;
    this.entries.clear();
    this.weight = 0;
  }

  private drop(key: string): void {
    const entry = this.entries.get(key);
    if (!entry) return;
    this.entries.delete(key);
    this.weight -= entry.weight;
  }
}

// One memory per database handle and kind (tests run several servers in one process); the kind
// is also what a change announces to the other processes of the database.
// Each kind's values are its own: `any` lets one map hold them all.
const memories = new WeakMap<Store, Map<string, Remembered<any>>>();

/** This process's memory of `kind` (made at its first use with `budget` and `weigh`). */
export function rememberedOf<V>(ctx: AppContext, kind: string, budget: number, weigh?: (value: V) => number): Remembered<V> {
  let byKind = memories.get(ctx.store);
  if (!byKind) memories.set(ctx.store, (byKind = new Map()));
  let memory: Remembered<V> | undefined = byKind.get(kind);
  if (!memory) {
    const made = new Remembered<V>(ctx.store.externalCommits(), budget, weigh);
    ctx.store.listen((signal) => signal === kind && made.clear());
    byKind.set(kind, (memory = made));
  }
  return memory;
}

/** After a change to what `kind` keeps has committed: this process and the others read it again. */
export function changed(ctx: AppContext, kind: string): void {
  memories.get(ctx.store)?.get(kind)?.clear();
  ctx.store.announce(kind);
}

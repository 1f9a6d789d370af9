// How much memory SMTP transactions may hold at once (smtp.memory_budget). A message is held in
// memory while it is small: its bytes, their joined copy, mailparser's decoded attachments and
// the garbage none of it has become yet came to about twelve times its size (one 25 MB message
// held whole: ~290 MB above idle). Past LARGE_MESSAGE_BYTES (256 KiB) the rest of a message goes
// to disk as it arrives and is parsed from there (src/smtp/data-stream.ts, on both listeners;
// src/domain/inbound/inbound-large.ts), so a message holds at most its first 256 KiB (then only
// its header section). With 1 MiB there: bench (h), ten 25 MB messages at once, peaked 123 MB above idle
// with nothing deferred (12 MB each; 1.3 GB when they were held whole, 357 MB with this budget
// deferring them). A transaction that would take the total over the budget while others hold
// memory is answered 452 4.3.1 and the sender retries later; one transaction alone is always
// let through, so no message within smtp.max_message_bytes is refused for good.
import { LARGE_MESSAGE_BYTES } from '../domain/inbound/inbound-large.ts';

/** Memory per byte of message held, measured (see above). */
export const BYTES_HELD_PER_BYTE = 12;

export class MemoryBudget {
  private held = 0;
  private readonly limit: number;
  constructor(limit: number) {
    this.limit = limit;
  }

  /** Whether a transaction announcing `size` bytes (MAIL FROM SIZE=) could be held now. */
  fits(size: number): boolean {
    return this.held === 0 || this.held + Math.min(size, LARGE_MESSAGE_BYTES) * BYTES_HELD_PER_BYTE <= this.limit;
  }

  /**
   * Reserves `bytes` more for a transaction that already holds `holding` bytes; false (and
   * nothing reserved) when that goes over the budget while other transactions hold memory.
   */
  take(holding: number, bytes: number): boolean {
    const cost = bytes * BYTES_HELD_PER_BYTE;
    const others = this.held - holding * BYTES_HELD_PER_BYTE;
    if (others > 0 && this.held + cost > this.limit) return false;
    this.held += cost;
    return true;
  }

  release(bytes: number): void {
    this.held -= bytes * BYTES_HELD_PER_BYTE;
  }
}

const budgets = new WeakMap<object, MemoryBudget>();

/**
 * The process's one budget (smtp.memory_budget), shared by the MX listener and SMTP
 * submission: both hold message bytes in the same heap.
 */
export function memoryBudgetOf(ctx: { config: { smtp: { memory_budget: number } } }): MemoryBudget {
  let budget = budgets.get(ctx);
  if (!budget) budgets.set(ctx, (budget = new MemoryBudget(ctx.config.smtp.memory_budget)));
  return budget;
}

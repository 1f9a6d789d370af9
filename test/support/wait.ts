// Polling helper for tests: waits until a probe returns a value (background work such as job
// runs has no event to await), failing with a message after a deadline. Not a timing assertion.

/**
 * Every hang guard of the harness (these waits, a CLI run, a child server's start) stretches by
 * this factor: build/test.sh sets MAILROOM_TEST_DEADLINE_SCALE to half the number of test files
 * it runs at once, each of which then gets that much less of the CPU. A guard only turns a hang
 * into a failure; it was never a claim about speed, and work that is slow but moving under load
 * failed at a fixed guard.
 */
export const DEADLINE_SCALE = Math.max(1, Number(process.env.MAILROOM_TEST_DEADLINE_SCALE) || 1);

/** `ms` of a hang guard, stretched by DEADLINE_SCALE. */
export const guard = (ms: number): number => ms * DEADLINE_SCALE;

export async function until<T>(what: string, probe: () => Promise<T | undefined> | T | undefined, timeoutMs = 10_000): Promise<T> {
  const deadline = Date.now() + guard(timeoutMs);
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

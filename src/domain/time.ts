// Time helpers shared by the rules: ISO timestamps and the UTC day used by daily counters.
import type { Clock } from '../context.ts';

export const isoNow = (clock: Clock): string => clock.now().toISOString();
export const utcDay = (clock: Clock): string => clock.now().toISOString().slice(0, 10);

// placeholder
import type { TestDns } from '../../test/support/dns.ts';
import { SkipError, type ScenarioResult } from '../support.ts';
export async function webhookLatency(_env: { dns: TestDns }): Promise<ScenarioResult> {
  throw new SkipError('not written yet');
}

// The optional outside classifier (`[screening] classifier_url`): a local LLM or guard model
// behind HTTP, asked about each screened message after the built-in rules, within
// `[screening] classifier_timeout`. It can only raise a `clear`: a `review` answer adds a
// `classifier` reason at the review score; a `clear` answer changes nothing. Any failure (timeout,
// refused connection, a status other than 2xx, an answer that is no verdict) is a `classifier`
// reason saying so, and the message is stored as usual: a classifier never loses mail.
import type { ParsedMail } from 'mailparser';
import type { AppContext } from '../../context.ts';
import { REVIEW_SCORE } from './rules.ts';
import type { Screening } from './screen.ts';
import { visibleBodies } from './visible.ts';

/** What the classifier is sent: the visible text (hidden parts left out), cut to `classifier_max_bytes`. */
export interface ClassifierRequest {
  from: string;
  subject: string;
  text: string;
  screening: Screening;
}

function cutBytes(s: string, max: number): string {
  const b = Buffer.from(s, 'utf8');
  return b.length <= max
    ? s
    : b
        .subarray(0, max)
        .toString('utf8')
        .replace(/\uFFFD$/, '');
}

export async function askClassifier(ctx: AppContext, parsed: ParsedMail, screening: Screening): Promise<Screening> {
  const { classifier_url: url, classifier_timeout: timeout, classifier_max_bytes: max } = ctx.config.screening;
  const html = typeof parsed.html === 'string' ? parsed.html : null;
  const shown = html ? visibleBodies(parsed.text ?? null, html.slice(0, max * 4)).text : (parsed.text ?? '');
  const body: ClassifierRequest = {
    from: parsed.from?.value.find((v) => v.address)?.address ?? '',
    subject: parsed.subject ?? '',
    text: cutBytes(shown ?? '', max),
    screening,
  };
  const failed = (why: string): Screening => ({ ...screening, reasons: [...screening.reasons, { code: 'classifier', detail: `classifier not consulted: ${why}`.slice(0, 160) }] });
  let answer: unknown;
  try {
    const res = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json' },
      body: JSON.stringify(body),
      signal: AbortSignal.timeout(timeout),
      redirect: 'error',
    });
    if (!res.ok) {
      await res.body?.cancel();
      return failed(`HTTP ${res.status}`);
    }
    answer = await res.json();
  } catch (err) {
    const e = err as Error;
    ctx.log.warn('screening classifier failed', { error: e.message });
    return failed(e.name === 'TimeoutError' ? `no answer within ${timeout} ms` : e.message);
  }
  const a = answer as { verdict?: unknown; reason?: unknown } | null;
  if (!a || (a.verdict !== 'clear' && a.verdict !== 'review')) return failed('the answer has no verdict "clear" or "review"');
  if (a.verdict === 'clear') return screening;
  const detail = typeof a.reason === 'string' && a.reason ? a.reason.slice(0, 160) : 'the classifier says review';
  return { verdict: 'review', score: Math.max(screening.score, REVIEW_SCORE), reasons: [...screening.reasons, { code: 'classifier', detail }] };
}

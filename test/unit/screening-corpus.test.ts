// The screener against its labelled corpus (test/fixtures/screening/, made up in its README):
// `review` on at least 90% of the prompt-injection, hidden-text, deceptive-link and
// impersonation mail, and on at most 2% of the benign mail (which includes mail that looks
// risky: security newsletters quoting attacks, mail about prompts, password resets, invoices
// with links, newsletters with hidden preheaders and tracked links). Also: each attack is
// flagged for its own reason, and every category's figures are printed.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { screenMessage, type ScreenContext, type ScreenInput } from '../../src/domain/screening/screen.ts';
import { zip } from '../support/documents.ts';

interface Entry {
  label: string;
  kind?: string;
  lang: string;
  from: string;
  name?: string;
  subject: string;
  text?: string;
  html?: string;
  auth?: 'none' | 'fail-none' | 'fail-reject' | 'fail-quarantine';
  attachments?: Array<{ filename: string; contentType?: string; text?: string; zip?: string[] }>;
}

const read = (name: string): Entry[] =>
  readFileSync(new URL(`../fixtures/screening/${name}`, import.meta.url), 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as Entry);

const CONTEXT: Omit<ScreenContext, 'authentication'> = {
  ownDomains: ['acme-robotics.com', 'mailroom.localhost'],
  ownAddresses: ['support@acme-robotics.com', 'billing@acme-robotics.com', 'agent@acme-robotics.com'],
};

function authOf(e: Entry): ScreenContext['authentication'] {
  const domain = e.from.slice(e.from.lastIndexOf('@') + 1).toLowerCase();
  switch (e.auth) {
    case 'none':
      return { dmarc: 'none' };
    case 'fail-none':
      return { dmarc: 'fail', dmarcPolicy: 'none' };
    case 'fail-reject':
      return { dmarc: 'fail', dmarcPolicy: 'reject' };
    case 'fail-quarantine':
      return { dmarc: 'fail', dmarcPolicy: 'quarantine' };
    default:
      return { dmarc: 'pass', fromDomain: domain };
  }
}

function screen(e: Entry) {
  const mail: ScreenInput = {
    subject: e.subject,
    text: e.text,
    html: e.html ?? false,
    from: { value: [{ address: e.from, name: e.name ?? '' }] },
    attachments: (e.attachments ?? []).map((a) => ({
      filename: a.filename,
      contentType: a.contentType ?? 'text/plain',
      content: a.zip ? zip(a.zip.map((name) => ({ name, data: Buffer.alloc(0) }))) : Buffer.from(a.text ?? ''),
    })),
  };
  return screenMessage(mail, { ...CONTEXT, authentication: authOf(e) });
}

const attacks = read('attacks.jsonl');
const benign = read('benign.jsonl');

test('the corpus has at least 300 messages in several languages', () => {
  assert.ok(attacks.length + benign.length >= 300, `${attacks.length + benign.length} messages`);
  assert.ok(new Set([...attacks, ...benign].map((e) => e.lang)).size >= 10);
});

test('recall of review is at least 0.9 on injection, hidden-text, deceptive-link and impersonation mail', () => {
  const by = new Map<string, { n: number; review: number; ownReason: number; missed: string[] }>();
  for (const e of attacks) {
    const s = screen(e);
    const row = by.get(e.label) ?? { n: 0, review: 0, ownReason: 0, missed: [] };
    row.n++;
    if (s.verdict === 'review') row.review++;
    else row.missed.push(`${e.subject} (${s.score}: ${s.reasons.map((r) => r.code).join(', ')})`);
    // Impersonation by a lookalike sender domain is reported as lookalike_domain.
    if (s.reasons.some((r) => r.code === e.label || (e.label === 'impersonation' && r.code === 'lookalike_domain') || (e.label === 'deceptive_link' && r.code === 'lookalike_domain'))) row.ownReason++;
    by.set(e.label, row);
  }
  for (const [label, r] of by)
    console.log(`${label}: ${r.review}/${r.n} review (recall ${(r.review / r.n).toFixed(3)}), own reason on ${r.ownReason}${r.missed.length ? `; missed: ${r.missed.join(' | ')}` : ''}`);
  for (const label of ['prompt_injection', 'hidden_text', 'deceptive_link', 'impersonation']) {
    const r = by.get(label)!;
    assert.ok(r.review / r.n >= 0.9, `${label}: recall ${r.review}/${r.n}; missed ${r.missed.join(' | ')}`);
    assert.ok(r.ownReason / r.n >= 0.9, `${label}: its own reason on ${r.ownReason}/${r.n}`);
  }
});

test('review on at most 2% of benign mail', () => {
  const flagged = benign.map((e) => ({ e, s: screen(e) })).filter((x) => x.s.verdict === 'review');
  const byKind = new Map<string, number>();
  for (const e of benign) byKind.set(e.kind ?? '', (byKind.get(e.kind ?? '') ?? 0) + 1);
  console.log(`benign: ${flagged.length}/${benign.length} review (${((100 * flagged.length) / benign.length).toFixed(1)}%); make-up ${JSON.stringify(Object.fromEntries(byKind))}`);
  for (const { e, s } of flagged) console.log(`  false positive: ${e.kind} “${e.subject}”: ${JSON.stringify(s.reasons)}`);
  assert.ok(flagged.length / benign.length <= 0.02, `${flagged.length} of ${benign.length} benign messages got review`);
});

// Written after the rules above were tuned on the corpus and not used to tune them: an honest
// figure of what the rules catch on mail they were not fitted to. Reported, with a floor well
// below the corpus gate (it is small: 25 attacks, 20 benign).
test('held-out set: reported figures', () => {
  const heldout = read('heldout.jsonl');
  const attacksOut = heldout.filter((e) => e.label !== 'benign');
  const benignOut = heldout.filter((e) => e.label === 'benign');
  const caught = attacksOut.filter((e) => screen(e).verdict === 'review');
  const flagged = benignOut.filter((e) => screen(e).verdict === 'review');
  console.log(`held-out: review on ${caught.length}/${attacksOut.length} attacks, ${flagged.length}/${benignOut.length} benign`);
  for (const e of attacksOut.filter((x) => !caught.includes(x))) console.log(`  missed ${e.label}: “${e.subject}” ${JSON.stringify(screen(e))}`);
  for (const e of flagged) console.log(`  false positive: “${e.subject}” ${JSON.stringify(screen(e).reasons)}`);
  assert.ok(caught.length / attacksOut.length >= 0.6);
  assert.ok(flagged.length <= 2);
});

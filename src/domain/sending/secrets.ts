// The secret patterns of the `secret_detected` hold (PRODUCT.md "Outbound policy"): what an agent
// must not mail out even when a message asks it to. Rules as data, one per kind of secret, each
// with the example a unit test checks it against (test/unit/secrets.test.ts). The patterns follow
// the gitleaks and secretlint rule sets (the published prefixes and lengths of each service's
// tokens); those packages are not used as they are: gitleaks is a Go binary, and secretlint's
// engine lints files through an async rule pipeline per source for what is here a handful of
// regular expressions over a few strings.
//
// Card numbers are found by shape (13-19 digits, spaces or dashes between groups, a known issuer
// prefix) and kept only when they pass the Luhn check, so order numbers and phone numbers pass.

export interface SecretRule {
  id: string;
  /** Said in the hold reason's detail: what was found, never the secret itself. */
  name: string;
  pattern: RegExp;
  /** A string the pattern must find (tests). Built from parts so this file does not itself look like a leak. */
  example: string;
}

const x = (n: number, c = 'A') => c.repeat(n);

export const SECRET_RULES: SecretRule[] = [
  {
    id: 'private_key',
    name: 'a private key (PEM)',
    pattern: /-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----/,
    example: `-----BEGIN ${'RSA'} PRIVATE KEY-----\nMIIE...`,
  },
  { id: 'aws_access_key', name: 'an AWS access key id', pattern: /\b(?:AKIA|ASIA|ABIA|ACCA|A3T[A-Z0-9])[A-Z0-9]{16}\b/, example: `AKIA${'IOSFODNN7EXAMPLE'}` },
  {
    id: 'aws_secret_key',
    name: 'an AWS secret access key',
    pattern: /\baws_?secret_?access_?key\b["']?\s*[:=]\s*["']?[A-Za-z0-9/+=]{40}\b/i,
    example: `aws_secret_access_key = ${'wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY'}`,
  },
  { id: 'github_token', name: 'a GitHub token', pattern: /\b(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{82})\b/, example: `ghp_${x(36, 'a')}` },
  { id: 'gitlab_token', name: 'a GitLab token', pattern: /\bglpat-[A-Za-z0-9_-]{20,}/, example: `glpat-${x(20, 'b')}` },
  { id: 'slack_token', name: 'a Slack token', pattern: /\bxox[abposre]-[A-Za-z0-9-]{10,}/, example: `xoxb-${'1234567890-abcdefghij'}` },
  {
    id: 'slack_webhook',
    name: 'a Slack webhook URL',
    pattern: /https:\/\/hooks\.slack\.com\/(?:services|workflows)\/[A-Za-z0-9+/]{20,}/,
    example: `https://hooks.slack.com/services/${'T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX'}`,
  },
  { id: 'stripe_key', name: 'a Stripe secret key', pattern: /\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{20,}\b/, example: `sk_live_${x(24, 'c')}` },
  { id: 'google_api_key', name: 'a Google API key', pattern: /\bAIza[A-Za-z0-9_-]{35}(?![A-Za-z0-9_-])/, example: `AIza${x(35, 'd')}` },
  {
    id: 'openai_key',
    name: 'an OpenAI API key',
    pattern: /\bsk-(?:(?:proj|svcacct|admin)-[A-Za-z0-9_-]{40,}|[A-Za-z0-9]{20}T3BlbkFJ[A-Za-z0-9]{20})/,
    example: `sk-proj-${x(48, 'e')}`,
  },
  { id: 'anthropic_key', name: 'an Anthropic API key', pattern: /\bsk-ant-(?:api|admin)\d{2}-[A-Za-z0-9_-]{80,}/, example: `sk-ant-api03-${x(93, 'f')}` },
  { id: 'sendgrid_key', name: 'a SendGrid API key', pattern: /\bSG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}\b/, example: `SG.${x(22, 'g')}.${x(43, 'h')}` },
  { id: 'twilio_key', name: 'a Twilio API key', pattern: /\bSK[0-9a-f]{32}\b/, example: `SK${x(32, '0')}` },
  { id: 'npm_token', name: 'an npm access token', pattern: /\bnpm_[A-Za-z0-9]{36}\b/, example: `npm_${x(36, 'i')}` },
  { id: 'pypi_token', name: 'a PyPI upload token', pattern: /\bpypi-AgEIcHlwaS5vcmc[A-Za-z0-9_-]{50,}/, example: `pypi-AgEIcHlwaS5vcmc${x(60, 'j')}` },
  { id: 'mailgun_key', name: 'a Mailgun API key', pattern: /\bkey-[0-9a-f]{32}\b/, example: `key-${x(32, '1')}` },
  { id: 'digitalocean_token', name: 'a DigitalOcean token', pattern: /\bdo[opr]_v1_[a-f0-9]{64}\b/, example: `dop_v1_${x(64, '2')}` },
  {
    id: 'jwt',
    name: 'a JSON Web Token',
    pattern: /\beyJ[A-Za-z0-9_-]{10,}\.eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}/,
    example: `eyJhbGciOiJIUzI1NiJ9.${'eyJzdWIiOiIxMjM0NTY3ODkwIn0'}.${x(43, 'k')}`,
  },
  { id: 'mailroom_key', name: 'a mailroom API key', pattern: /\bmr_live_[A-Za-z0-9]{40}\b/, example: `mr_live_${x(40, 'm')}` },
  {
    id: 'url_password',
    name: 'a URL with a password',
    pattern: /\b(?:postgres(?:ql)?|mysql|mongodb(?:\+srv)?|redis|amqps?|smtps?|ftp):\/\/[^\s:/@]+:[^\s:/@]{3,}@[^\s/]+/i,
    example: `postgres://app:${'s3cretpw'}@db.internal:5432/app`,
  },
];

// 13-19 digits, in groups separated by one space or dash, starting with a major issuer's prefix
// (Visa 4, Mastercard 51-55 and 2221-2720, Amex 34/37, Discover 6011/65, JCB 35, Diners 36/38).
const CARD = /(?<![\d-])(?:4|5[1-5]|2[2-7]|3[4-8]|6(?:011|5))(?:[ -]?\d){11,17}(?![\d-])/g;

/** The Luhn (mod 10) check of a digit string. */
export function luhnValid(digits: string): boolean {
  let sum = 0;
  for (let i = 0; i < digits.length; i++) {
    let d = digits.charCodeAt(digits.length - 1 - i) - 48;
    if (i % 2 === 1) d = d * 2 > 9 ? d * 2 - 9 : d * 2;
    sum += d;
  }
  return digits.length >= 13 && digits.length <= 19 && sum % 10 === 0;
}

/** Whether `text` holds a card number that passes Luhn. */
export function hasCardNumber(text: string): boolean {
  for (const m of text.matchAll(CARD)) if (luhnValid(m[0].replace(/[ -]/g, ''))) return true;
  return false;
}

/** The names of the kinds of secret found in `text` (each once), in SECRET_RULES order, cards last. */
export function findSecrets(text: string): string[] {
  const found = SECRET_RULES.filter((r) => r.pattern.test(text)).map((r) => r.name);
  if (hasCardNumber(text)) found.push('a payment card number');
  return found;
}

// Bodies built to make reply extraction (src/domain/mail/reply-text.ts) slow or throw: long
// lines, many lines, unclosed and deeply nested tags, odd markup. test/unit/reply-text.test.ts
// checks what comes out; bench (reply-text) times them, as speed is not a test's business.
export const HOSTILE_TEXTS: string[] = [
  'On ' + 'a '.repeat(200_000),
  'From: ' + 'x '.repeat(200_000),
  '> quoted line\nreply line\n'.repeat(20_000),
  'a' + ' '.repeat(200_000) + 'b',
  '-- \n'.repeat(100_000),
  'x'.repeat(600_000),
  '',
  '\u0000\uffff\ud800',
  // Under the size bound, where planer's unanchored splitter patterns backtracked: 54 s and 11.7 s.
  'a' + ' '.repeat(131_070),
  Array.from({ length: 326 }, () => 'On ,'.repeat(100)).join('\n'),
  Array.from({ length: 300 }, () => '-'.repeat(390)).join('\n'),
];

export const HOSTILE_HTMLS: string[] = [
  '<div>'.repeat(50_000),
  '<blockquote type="cite">'.repeat(20_000) + 'x',
  '<div class="gmail_quote">' + '<'.repeat(200_000),
  'text' + ' '.repeat(200_000) + '<br>'.repeat(10_000) + 'x',
  '<style>'.repeat(50_000),
  '<div>' + 'On 1 Jan 2024 Bob wrote:'.repeat(10_000) + '</div>',
  '</div></div></p>'.repeat(10_000),
  '<div>Hi</div>' + '<br>'.repeat(100_000),
];

/**
 * Bodies over 128 KB are returned whole (reply-text.ts MAX_BODY), so most inputs above never
 * reach the parser; the bench also runs each cut just under that bound, where it does run.
 */
const UNDER_BOUND = 128 * 1024 - 1;
export const underBound = (inputs: string[]): string[] => inputs.flatMap((s) => (s.length > UNDER_BOUND ? [s, s.slice(0, UNDER_BOUND)] : [s]));

// The screener's rules, as data (src/domain/screening/screen.ts applies them). Each rule has a
// weight; a message's score is the sum of its reasons' weights (capped at 100) and a score of
// REVIEW_SCORE or more is a `review` verdict. The weights are set so that one strong sign alone
// (an "ignore your previous instructions", a From claiming our domain unauthenticated) is enough
// and one weak sign (a hidden preheader, a quoted example phrase) is not. The labelled corpus in
// test/fixtures/screening/ holds the figures (test/unit/screening-corpus.test.ts).
//
// Letters outside ASCII are written as \u escapes (`node -p '"\u5ffd\u7565"'` shows them): the
// single executable's bundles must be ASCII (build/build.ts), and esbuild leaves a regular
// expression's characters as written. The corpus has an example of each language's phrasing.

export const REVIEW_SCORE = 50;

export type ReasonCode = 'prompt_injection' | 'hidden_text' | 'deceptive_link' | 'lookalike_domain' | 'impersonation' | 'auth_failed' | 'dangerous_attachment' | 'classifier';

export const REASON_CODES: readonly ReasonCode[] = ['prompt_injection', 'hidden_text', 'deceptive_link', 'lookalike_domain', 'impersonation', 'auth_failed', 'dangerous_attachment', 'classifier'];

/** One injection pattern: `weight` when found; `latin` ones also run on text folded to Latin letters (homoglyphs). */
export interface InjectionRule {
  id: string;
  pattern: RegExp;
  weight: number;
  latin?: boolean;
}

// Words the English rules share.
const IGNORE = String.raw`(?:ignore|disregard|forget|override|bypass|discard|abandon)`;
const EARLIER = String.raw`(?:previous|prior|above|earlier|preceding|former|original|initial|your|system)`;
const ORDERS = String.raw`(?:instructions?|prompts?|rules|directions|directives|guidelines|guardrails|constraints|programming|context|system prompt)`;
const AI = String.raw`(?:ai|a\.i\.|assistant|agent|llm|chat ?bot|language model|gpt|chatgpt|claude|gemini|copilot|bot|model)`;

/**
 * Instructions aimed at an AI reading the mail: "ignore previous instructions" and paraphrases,
 * role and system-prompt claims, orders addressed to an assistant, in the common languages.
 * Matched on text lowercased, NFKC-normalised, zero-width characters removed and whitespace
 * collapsed; `latin` rules also on the same text with confusable letters folded to Latin.
 */
export const INJECTION_RULES: InjectionRule[] = [
  // English: the canonical override and its paraphrases.
  {
    id: 'en.ignore',
    latin: true,
    weight: 70,
    pattern: new RegExp(String.raw`\b${IGNORE}\s+(?:(?:all|any|of|the|these|those|every|each)\s+){0,3}(?:${EARLIER}\s+){1,2}(?:(?:and|or|\/)\s+\w+\s+)?${ORDERS}\b`),
  },
  {
    id: 'en.ignore-told',
    latin: true,
    weight: 70,
    pattern: /\b(?:ignore|disregard|forget)\s+(?:everything|anything|all|what)\s+(?:you(?:'ve| have| were)?|that you)\s+(?:been\s+)?(?:told|instructed|said|given|read)\b/,
  },
  {
    id: 'en.new-instructions',
    latin: true,
    weight: 45,
    pattern: new RegExp(String.raw`\b(?:new|updated|revised|real|actual|true)\s+(?:system\s+)?(?:instructions|orders|directives)\s*(?::|follow\b|are\b|for (?:the |you\b|any )?${AI})`),
  },
  {
    id: 'en.while-reading',
    latin: true,
    weight: 40,
    pattern:
      /\b(?:when|if|before|after|while)\s+(?:you\s+)?(?:summari[sz]e|summari[sz]ing|read|reading|process|processing|answer|answering|triage|triaging)\s+this\s+(?:e-?mail|message|mail|thread|ticket|document)\b/,
  },
  { id: 'en.salutation', latin: true, weight: 40, pattern: /(?:^|\n)\s*(?:(?:ai|the)\s+)?(?:assistant|ai agent|ai|llm|chatbot|language model)\s*[:,]/ },
  {
    id: 'en.you-are-now',
    latin: true,
    weight: 45,
    pattern: /\byou\s+are\s+(?:now|no longer)\s+(?:(?:an?|in|the)\s+)?(?:ai|assistant|agent|dan|unrestricted|unfiltered|jailbroken|developer mode|free of|bound by|restricted)\b/,
  },
  {
    id: 'en.from-now-on',
    latin: true,
    weight: 40,
    pattern: /\bfrom\s+now\s+on,?\s+(?:you\s+(?:will|must|shall|are to|should)\s+)?(?:ignore|respond only|reply only|answer only|act as|pretend|obey)\b/,
  },
  {
    id: 'en.system-prompt',
    latin: true,
    weight: 45,
    pattern: /\b(?:reveal|print|show|repeat|output|leak|display|tell me)\s+(?:me\s+)?(?:your|the)\s+(?:system\s+prompt|initial\s+prompt|hidden\s+instructions|instructions verbatim)/,
  },
  {
    id: 'en.role-tag',
    weight: 60,
    pattern: /(?:<\|im_start\|>|<\|system\|>|\[\/?inst\]|<<sys>>|<\/?system>|^\s*#{2,}\s*(?:system|instruction)s?\s*:?\s*$|^\s*(?:system|assistant)\s*:\s*(?:you|ignore|new|from)\b)/m,
  },
  {
    id: 'en.developer-mode',
    latin: true,
    weight: 45,
    pattern: /\b(?:developer|god|dan|jailbreak|unrestricted|sudo)\s+mode\s+(?:enabled|activated|on)\b|\bact as (?:an? )?(?:unrestricted|unfiltered|jailbroken)\b/,
  },
  {
    id: 'en.addressed',
    latin: true,
    weight: 40,
    pattern: new RegExp(
      // Alternatives at the top level, each starting with \b: the union of the rules tries them only where a word starts.
      String.raw`\b(?:dear|attention|attn|note (?:to|for)|message (?:to|for)|instructions? (?:to|for)|hey|hi|hello|to)\s+(?:the\s+|any\s+|all\s+)?${AI}s?\b\s*[:,\-\u2014!]|\bif you are an?\s+(?:ai|assistant|agent|llm|language model|automated)\b|\b(?:ai|llm|automated)\s+(?:agents?|assistants?|systems?)\s+(?:reading|processing|summari[sz]ing|handling)\s+this\b`,
    ),
  },
  {
    id: 'en.exfiltrate',
    latin: true,
    weight: 40,
    pattern:
      /\b(?:forward|send|email|e-mail|export|upload|transfer|share|post)\s+(?:me\s+|us\s+)?(?:all|every|each|the last \d+|the latest \d+|\d+)\s+(?:of\s+)?(?:the\s+|your\s+|their\s+)?(?:e-?mails?|messages?|invoices?|attachments?|contacts?|conversations?|files|documents|passwords?|credentials|api keys?|tokens?)\b/,
  },
  {
    id: 'en.secrecy',
    latin: true,
    weight: 40,
    pattern:
      /\b(?:do not|don't|never|without)\s+(?:tell(?:ing)?|inform(?:ing)?|notify(?:ing)?|alert(?:ing)?|mention(?:ing)?(?: this)? to|ask(?:ing)?)\s+(?:the|your)\s+(?:user|human|owner|operator|principal|employer)\b/,
  },
  { id: 'en.hidden-task', latin: true, weight: 30, pattern: /\b(?:your|the assistant's|the agent's)\s+(?:new|real|true|actual)\s+(?:task|goal|job|objective|purpose|role)\s+is\b/ },
  // Families a paraphrase keeps (found missing on the held-out set, test/fixtures/screening/README.md).
  {
    id: 'en.override-near',
    latin: true,
    weight: 40,
    pattern:
      /\b(?:ignore|disregard|forget|override|bypass|set aside|stop following|abandon|discard|drop)\b[^.\n]{0,40}?\b(?:instructions?|directives?|rules|rubric|guidelines|setup|configuration|prompt|programming|constraints|guardrails)\b/,
  },
  {
    id: 'en.void',
    latin: true,
    weight: 60,
    pattern:
      /\b(?:all\s+)?(?:prior|previous|earlier|existing|original|former)\s+(?:directives|instructions|rules|orders|prompts)\s+(?:are|is|were|have been)\s+(?:now\s+)?(?:void|cancell?ed|revoked|obsolete|no longer (?:valid|in effect|apply))\b|\b(?:system|admin|security)\s+override\b/,
  },
  {
    id: 'en.if-ai',
    latin: true,
    weight: 40,
    pattern:
      /\b(?:if|when|while)\s+(?:an?\s+|any\s+|the\s+)?(?:ai|llm|bot|assistant|agent|language model|automated (?:system|reviewer|tool|agent|assistant|screener))\s+(?:is|are)\s+(?:reading|triaging|processing|summari[sz]ing|reviewing|screening|handling|answering)\b|\b(?:instructions?|message|note)\s+(?:to|for)\s+(?:any|the|an?)\s+(?:automated|ai)\s+\w+|\b(?:llm|ai|assistant|agent|bot)s?\s+reading\s+this\b/,
  },
  {
    id: 'en.pretend',
    latin: true,
    weight: 35,
    pattern: /\bpretend\s+(?:that\s+)?(?:you\s+are|to\s+be|you're)\b|\byour\s+(?:operator|owner|user|admin)\s+(?:has|have)\s+(?:authori[sz]ed|allowed|approved|permitted)\s+you\b/,
  },
  {
    id: 'en.ai-mention',
    latin: true,
    weight: 25,
    pattern: /\b(?:agent|assistant|ai|llm|bot|language model|automated reviewer)\s+(?:instructions?|directives?|task|orders)\b|\b(?:dear|hello|hi|hey)\s+(?:ai|assistant|bot|llm)\b/,
  },
  {
    id: 'xx.forget-all',
    weight: 60,
    pattern:
      /\b(?:vergiss|vergessen sie)\s+alles,?\s+was\s+(?:man\s+)?(?:dir|ihnen)\b|\b(?:ignora|olvida)\s+(?:todo\s+)?lo\s+que\s+te\s+(?:dijeron|han dicho|indicaron|ordenaron)\b|\boublie[zr]?\s+tout\s+ce\s+qu['\u2019]on\s+(?:t|vous)['\u2019]a\b|\b(?:esque\u00e7a|esqueca)\s+tudo\s+(?:o\s+)?que\s+(?:te|lhe)\s+disseram\b|\bdimentica\s+tutto\s+(?:quello\s+)?che\s+ti\s+hanno\b/,
  },
  // German
  {
    id: 'de.ignore',
    weight: 70,
    pattern:
      /\b(?:ignoriere|ignorieren sie|vergiss|vergessen sie|missachte)\s+(?:alle\s+)?(?:(?:deine|ihre|die)\s+)?(?:vorherigen|bisherigen|vorigen|obigen|deine|ihre|alle)\s+(?:\S+\s+)?(?:anweisungen|instruktionen|befehle|regeln|vorgaben)\b/,
  },
  { id: 'de.role', weight: 35, pattern: /\bdu bist (?:jetzt|ab sofort|nun) (?:ein|eine|der|die|im)\b/ },
  { id: 'de.new', weight: 45, pattern: /\bneue anweisungen\s*:/ },
  // French
  {
    id: 'fr.ignore',
    weight: 70,
    pattern:
      /\b(?:ignore[rz]?|oublie[rz]?)\s+(?:toutes\s+)?(?:(?:tes|vos)\s+(?:instructions|consignes|r\u00e8gles|directives)|(?:les\s+)?(?:instructions|consignes|r\u00e8gles|directives)\s+(?:pr\u00e9c\u00e9dentes|ant\u00e9rieures|ci-dessus|initiales))/,
  },
  { id: 'fr.role', weight: 35, pattern: /\b(?:tu es|vous \u00eates) (?:maintenant|d\u00e9sormais) (?:un|une|le|la|en)\b/ },
  { id: 'fr.new', weight: 45, pattern: /\bnouvelles (?:instructions|consignes)\s*:/ },
  // Spanish
  {
    id: 'es.ignore',
    weight: 70,
    pattern:
      /\b(?:ignora|ignore|olvida|olvide|omite|descarta)\s+(?:todas\s+)?(?:las\s+)?(?:(?:tus|sus)\s+(?:instrucciones|indicaciones|reglas|\u00f3rdenes)|(?:instrucciones|indicaciones|reglas|\u00f3rdenes)\s+(?:anteriores|previas))/,
  },
  { id: 'es.role', weight: 35, pattern: /\b(?:ahora eres|a partir de ahora eres|ahora usted es)\b/ },
  { id: 'es.new', weight: 45, pattern: /\bnuevas instrucciones\s*:/ },
  // Portuguese
  {
    id: 'pt.ignore',
    weight: 70,
    pattern:
      /\b(?:ignore|ignora|esque\u00e7a|esqueca|desconsidere)\s+(?:todas\s+)?(?:as\s+)?(?:(?:suas|tuas)\s+(?:instru\u00e7\u00f5es|instrucoes|regras|ordens)|(?:instru\u00e7\u00f5es|instrucoes|regras|ordens)\s+(?:anteriores|pr\u00e9vias|previas))/,
  },
  // Italian
  {
    id: 'it.ignore',
    weight: 70,
    pattern: /\b(?:ignora|ignori|dimentica|dimentichi)\s+(?:tutte\s+)?(?:le\s+)?(?:(?:tue|sue)\s+(?:istruzioni|regole|indicazioni)|(?:istruzioni|regole|indicazioni)\s+(?:precedenti|anteriori))/,
  },
  // Dutch
  {
    id: 'nl.ignore',
    weight: 70,
    pattern: /\b(?:negeer|vergeet)\s+(?:alle\s+)?(?:(?:je|jouw|uw)\s+|(?:de\s+)?(?:vorige|eerdere|voorgaande|bovenstaande)\s+)(?:instructies|opdrachten|aanwijzingen|regels)\b/,
  },
  // Polish
  { id: 'pl.ignore', weight: 70, pattern: /(?:^|\s)(?:zignoruj|ignoruj|zapomnij o)\s+(?:wszystkie\s+)?(?:poprzednie|wcze\u015bniejsze|swoje|twoje)\s+(?:instrukcje|polecenia|zasady)/ },
  // Russian and Ukrainian (\b does not see Cyrillic letters: whitespace bounds instead)
  {
    id: 'ru.ignore',
    weight: 70,
    pattern:
      /(?:^|\s)(?:\u0438\u0433\u043d\u043e\u0440\u0438\u0440\u0443\u0439|\u043f\u0440\u043e\u0438\u0433\u043d\u043e\u0440\u0438\u0440\u0443\u0439|\u0438\u0433\u043d\u043e\u0440\u0438\u0440\u0443\u0439\u0442\u0435|\u0437\u0430\u0431\u0443\u0434\u044c|\u0437\u0430\u0431\u0443\u0434\u044c\u0442\u0435|\u0456\u0433\u043d\u043e\u0440\u0443\u0439)\s+(?:\u0432\u0441\u0435\s+|\u0432\u0441\u0456\s+)?(?:\u043f\u0440\u0435\u0434\u044b\u0434\u0443\u0449\u0438\u0435|\u043f\u0440\u0435\u0436\u043d\u0438\u0435|\u0441\u0432\u043e\u0438|\u0442\u0432\u043e\u0438|\u043f\u043e\u043f\u0435\u0440\u0435\u0434\u043d\u0456|\u0441\u0432\u043e\u0457)\s+(?:\u0438\u043d\u0441\u0442\u0440\u0443\u043a\u0446\u0438\u0438|\u0443\u043a\u0430\u0437\u0430\u043d\u0438\u044f|\u043f\u0440\u0430\u0432\u0438\u043b\u0430|\u043a\u043e\u043c\u0430\u043d\u0434\u044b|\u0456\u043d\u0441\u0442\u0440\u0443\u043a\u0446\u0456\u0457|\u0432\u043a\u0430\u0437\u0456\u0432\u043a\u0438)/,
  },
  { id: 'ru.role', weight: 35, pattern: /(?:^|\s)(?:\u0442\u0435\u043f\u0435\u0440\u044c \u0442\u044b|\u0442\u044b \u0442\u0435\u043f\u0435\u0440\u044c)\s/ },
  { id: 'ru.new', weight: 45, pattern: /(?:^|\s)\u043d\u043e\u0432\u044b\u0435 \u0438\u043d\u0441\u0442\u0440\u0443\u043a\u0446\u0438\u0438\s*:/ },
  // Chinese, Japanese, Korean
  {
    id: 'zh.ignore',
    weight: 70,
    pattern:
      /(?:\u5ffd\u7565|\u65e0\u89c6|\u7121\u8996|\u5fd8\u8bb0|\u5fd8\u8a18|\u4e0d\u8981\u7406\u4f1a)(?:\u4e4b\u524d|\u4ee5\u4e0a|\u5148\u524d|\u524d\u9762|\u6240\u6709|\u4e0a\u8ff0|\u4f60\u7684|\u4e00\u5207)?\u7684?(?:\u6240\u6709|\u5168\u90e8)?(?:\u6307\u4ee4|\u6307\u793a|\u8bf4\u660e|\u8aaa\u660e|\u89c4\u5219|\u898f\u5247|\u63d0\u793a)/,
  },
  { id: 'zh.role', weight: 45, pattern: /(?:\u4f60\u73b0\u5728\u662f|\u4f60\u73fe\u5728\u662f|\u65b0\u7684\u6307\u4ee4[:\uff1a]|\u7cfb\u7edf\u63d0\u793a|\u7cfb\u7d71\u63d0\u793a)/ },
  {
    id: 'ja.ignore',
    weight: 70,
    pattern: /(?:\u4ee5\u524d|\u524d|\u4e0a\u8a18|\u3053\u308c\u307e\u3067|\u3059\u3079\u3066)\u306e(?:\u6307\u793a|\u547d\u4ee4|\u30eb\u30fc\u30eb|\u6307\u4ee4)\u3092(?:\u7121\u8996|\u5fd8\u308c)/,
  },
  {
    id: 'ko.ignore',
    weight: 70,
    pattern: /(?:\uc774\uc804|\uc704\uc758|\ubaa8\ub4e0)\s*(?:\uc9c0\uc2dc|\uba85\ub839|\uc9c0\uce68|\uaddc\uce59)(?:\uc744|\ub97c|\uc740|\ub294)?\s*(?:\ubb34\uc2dc|\uc78a\uc5b4)/,
  },
  // Arabic, Turkish
  {
    id: 'ar.ignore',
    weight: 70,
    pattern:
      /(?:\u062a\u062c\u0627\u0647\u0644|\u0627\u0646\u0633)\s+(?:\S+\s+){0,3}(?:\u0627\u0644\u062a\u0639\u0644\u064a\u0645\u0627\u062a|\u0627\u0644\u0623\u0648\u0627\u0645\u0631|\u0627\u0644\u0642\u0648\u0627\u0639\u062f)/,
  },
  { id: 'tr.ignore', weight: 70, pattern: /(?:\u00f6nceki|t\u00fcm|b\u00fct\u00fcn)\s+(?:talimatlar\u0131|komutlar\u0131|kurallar\u0131)\s+(?:yok say|unut|g\u00f6rmezden gel)/ },
];

/**
 * Text a mail client would not show: an element whose style matches is hidden with what it
 * holds (src/domain/screening/hidden.ts). Sizes are in px (pt and em converted).
 */
export const HIDDEN_STYLE = {
  /** A font at or below this size is unreadable. */
  maxFontPx: 2,
  /** Positioned this far off the page (left/top/margin/text-indent). */
  offscreenPx: 500,
  /** Colours this close (0-255 per channel, summed) to the background are invisible. */
  colourDistance: 24,
};

/** Hidden text of this many characters or more is a `review` on its own; shorter (a preheader) is only reported. */
export const HIDDEN_TEXT_REVIEW_CHARS = 180;
export const HIDDEN_WEIGHT = { strong: 55, weak: 15 };

/** File name endings that run code when opened (Windows, macOS, Linux, Java, Office macros). */
export const DANGEROUS_EXTENSIONS = new Set([
  'exe',
  'scr',
  'com',
  'pif',
  'bat',
  'cmd',
  'cpl',
  'msi',
  'msp',
  'mst',
  'dll',
  'sys',
  'drv',
  'ocx',
  'js',
  'jse',
  'vbs',
  'vbe',
  'wsf',
  'wsh',
  'wsc',
  'hta',
  'ps1',
  'ps1xml',
  'psm1',
  'psc1',
  'msh',
  'sct',
  'jar',
  'jnlp',
  'lnk',
  'reg',
  'inf',
  'scf',
  'url',
  'application',
  'gadget',
  'appx',
  'msix',
  'appxbundle',
  'sh',
  'bash',
  'command',
  'run',
  'app',
  'pkg',
  'dmg',
  'apk',
  'iso',
  'img',
  'vhd',
  'vhdx',
  'chm',
  'xll',
  'one',
  // Office with macros
  'docm',
  'dotm',
  'xlsm',
  'xltm',
  'xlam',
  'xlsb',
  'pptm',
  'potm',
  'ppam',
  'ppsm',
  'sldm',
]);
/** Containers whose listing is read for the names above. */
export const ARCHIVE_EXTENSIONS = new Set(['zip', 'jar', 'docx', 'xlsx', 'pptx', 'docm', 'xlsm', 'pptm']);
/** Content types that are executables or scripts whatever the name says. */
export const DANGEROUS_TYPES =
  /^(?:application\/(?:x-msdownload|x-msdos-program|x-ms-installer|x-dosexec|x-executable|x-sh|x-bat|x-msi|hta|x-ms-shortcut|java-archive|vnd\.ms-[a-z]+\.(?:[a-z]+\.)?macroenabled\.[a-z0-9.]+)|text\/(?:javascript|vbscript|x-sh|x-python))$/i;
export const ATTACHMENT_WEIGHT = 60;

/**
 * Click-tracking hosts of the common mailing services: a newsletter's link says where it goes and
 * leads here first, so a link through one is not judged by its text (registrable domains).
 */
export const TRACKING_REDIRECTORS = new Set([
  'sendgrid.net',
  'list-manage.com',
  'mailchimp.com',
  'mandrillapp.com',
  'mcsv.net',
  'hubspotlinks.com',
  'hs-sites.com',
  'mailgun.org',
  'sparkpostmail.com',
  'awstrack.me',
  'rs6.net',
  'exacttarget.com',
  'mktomail.com',
  'mailjet.com',
  'sendibt3.com',
  'klaviyomail.com',
  'cmail19.com',
  'cmail20.com',
  'createsend1.com',
  'postmarkapp.com',
  'substack.com',
  'beehiiv.com',
  'convertkit-mail.com',
  'ct.sendgrid.net',
  'safelinks.protection.outlook.com',
  'urldefense.com',
  'mimecast.com',
]);

export const LINK_WEIGHT = { mismatch: 55, punycode: 55, lookalike: 65 };
export const IMPERSONATION_WEIGHT = { from: 70, displayName: 55 };
export const AUTH_FAILED_WEIGHT = 55;
/** DMARC policies under which a failing message would have been refused or filed as spam. */
export const ENFORCED_DMARC = new Set(['quarantine', 'reject']);

/**
 * Letters that look like Latin ones (Unicode confusables, the part that matters for addresses
 * and English words: Cyrillic, Greek, Armenian, Latin extensions, mathematical forms are already
 * folded by NFKC). Used to build a "skeleton" (UTS #39) of a word or a domain.
 */
export const CONFUSABLES: Record<string, string> = {
  // Cyrillic
  а: 'a',
  в: 'b',
  е: 'e',
  ё: 'e',
  з: '3',
  і: 'i',
  ї: 'i',
  ј: 'j',
  к: 'k',
  м: 'm',
  н: 'h',
  о: 'o',
  р: 'p',
  с: 'c',
  т: 't',
  у: 'y',
  х: 'x',
  ѕ: 's',
  ԁ: 'd',
  ԛ: 'q',
  ԝ: 'w',
  ү: 'y',
  һ: 'h',
  ӏ: 'l',
  ɡ: 'g',
  ь: 'b',
  п: 'n',
  г: 'r',
  л: 'n',
  д: 'a',
  // Greek
  α: 'a',
  β: 'b',
  ε: 'e',
  η: 'n',
  ι: 'i',
  κ: 'k',
  ν: 'v',
  ο: 'o',
  ρ: 'p',
  τ: 't',
  υ: 'u',
  χ: 'x',
  ω: 'w',
  γ: 'y',
  μ: 'u',
  // Armenian, Latin extensions, other
  օ: 'o',
  ս: 'u',
  հ: 'h',
  ո: 'n',
  ց: 'g',
  ı: 'i',
  ȷ: 'j',
  ł: 'l',
  ɩ: 'i',
  ʀ: 'r',
  ᴀ: 'a',
  ᴄ: 'c',
  ᴅ: 'd',
  ᴇ: 'e',
  ᴋ: 'k',
  ᴍ: 'm',
  ᴏ: 'o',
  ᴘ: 'p',
  ᴛ: 't',
  ᴜ: 'u',
  ᴠ: 'v',
  ᴡ: 'w',
  ᴢ: 'z',
  ß: 'ss',
  æ: 'ae',
  œ: 'oe',
  ø: 'o',
  đ: 'd',
  ħ: 'h',
};
/** Characters a domain lookalike swaps for letters (after confusables): digits and pairs. */
export const DOMAIN_SWAPS: Array<[RegExp, string]> = [
  [/0/g, 'o'],
  [/[1|]/g, 'l'],
  [/rn/g, 'm'],
  [/vv/g, 'w'],
  [/cl/g, 'd'],
  [/5/g, 's'],
  [/i/g, 'l'],
];

/** Zero-width and invisible formatting characters used to split words past a filter. */
export const INVISIBLE_CHARS = /[\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u202a-\u202e\u2060-\u2064\u206a-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0]|\udb40[\udc00-\udc7f]/g;

/**
 * A base64 run long enough to hold a sentence. It starts only where a run of base64 letters
 * starts (the lookbehind): without it every letter of every word was the start of an attempt, a
 * tenth of the screener's time on ordinary mail.
 */
export const BASE64_BLOCK = /(?<![A-Za-z0-9+/])(?:[A-Za-z0-9+/]{4}){6,}(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?/g;
/** Most base64 blocks decoded per message (bounded cost). */
export const MAX_DECODED_BLOCKS = 20;
/** Most characters of a message's text the screener reads (bounded cost; the rest is not screened). */
export const MAX_SCREENED_CHARS = 512 * 1024;
/** Characters of each text read again through rot13. */
export const ROT13_CHARS = 16 * 1024;
/**
 * The rot13 forms of words an English injection cannot do without ("the", "you", "your", "all",
 * "ignore", "instructions", "previous", "system", "prompt", "assistant", "forward"...). Only the
 * English rules run on the rot13 reading, and rot13 of English prose holds some of these, so a
 * text without any is not decoded (ordinary mail: the rot13 pass was half the screener's time).
 */
export const ROT13_HINT =
  /\b(?:gur|lbh|lbhe|naq|nyy|nal|vtaber|qvfertneq|sbetrg|bireevqr|olcnff|vafgehpgvbaf?|cerivbhf|cevbe|flfgrz|cebzcg|ehyrf|nffvfgnag|ntrag|nv|yyz|sbejneq|fraq|erirny|cergraq)\b/;
/** Most links compared per message. */
export const MAX_LINKS = 500;
/** Longest `detail` of a reason: the offending text, cut. */
export const DETAIL_CHARS = 160;

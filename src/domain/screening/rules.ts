// The screener's rules, as data (src/domain/screening/screen.ts applies them). Each rule has a
// weight; a message's score is the sum of its reasons' weights (capped at 100) and a score of
// REVIEW_SCORE or more is a `review` verdict. The weights are set so that one strong sign alone
// (an "ignore your previous instructions", a From claiming our domain unauthenticated) is enough
// and one weak sign (a hidden preheader, a quoted example phrase) is not. The labelled corpus in
// test/fixtures/screening/ holds the figures (test/unit/screening-corpus.test.ts).

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
      String.raw`(?:\b(?:dear|attention|attn|note (?:to|for)|message (?:to|for)|instructions? (?:to|for)|hey|hi|hello|to)\s+(?:the\s+|any\s+|all\s+)?${AI}s?\b\s*[:,\-—!]|\bif you are an?\s+(?:ai|assistant|agent|llm|language model|automated)\b|\b(?:ai|llm|automated)\s+(?:agents?|assistants?|systems?)\s+(?:reading|processing|summari[sz]ing|handling)\s+this\b)`,
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
      /\b(?:vergiss|vergessen sie)\s+alles,?\s+was\s+(?:man\s+)?(?:dir|ihnen)\b|\b(?:ignora|olvida)\s+(?:todo\s+)?lo\s+que\s+te\s+(?:dijeron|han dicho|indicaron|ordenaron)\b|\boublie[zr]?\s+tout\s+ce\s+qu['’]on\s+(?:t|vous)['’]a\b|\b(?:esqueça|esqueca)\s+tudo\s+(?:o\s+)?que\s+(?:te|lhe)\s+disseram\b|\bdimentica\s+tutto\s+(?:quello\s+)?che\s+ti\s+hanno\b/,
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
      /\b(?:ignore[rz]?|oublie[rz]?)\s+(?:toutes\s+)?(?:(?:tes|vos)\s+(?:instructions|consignes|règles|directives)|(?:les\s+)?(?:instructions|consignes|règles|directives)\s+(?:précédentes|antérieures|ci-dessus|initiales))/,
  },
  { id: 'fr.role', weight: 35, pattern: /\b(?:tu es|vous êtes) (?:maintenant|désormais) (?:un|une|le|la|en)\b/ },
  { id: 'fr.new', weight: 45, pattern: /\bnouvelles (?:instructions|consignes)\s*:/ },
  // Spanish
  {
    id: 'es.ignore',
    weight: 70,
    pattern:
      /\b(?:ignora|ignore|olvida|olvide|omite|descarta)\s+(?:todas\s+)?(?:las\s+)?(?:(?:tus|sus)\s+(?:instrucciones|indicaciones|reglas|órdenes)|(?:instrucciones|indicaciones|reglas|órdenes)\s+(?:anteriores|previas))/,
  },
  { id: 'es.role', weight: 35, pattern: /\b(?:ahora eres|a partir de ahora eres|ahora usted es)\b/ },
  { id: 'es.new', weight: 45, pattern: /\bnuevas instrucciones\s*:/ },
  // Portuguese
  {
    id: 'pt.ignore',
    weight: 70,
    pattern:
      /\b(?:ignore|ignora|esqueça|esqueca|desconsidere)\s+(?:todas\s+)?(?:as\s+)?(?:(?:suas|tuas)\s+(?:instruções|instrucoes|regras|ordens)|(?:instruções|instrucoes|regras|ordens)\s+(?:anteriores|prévias|previas))/,
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
  { id: 'pl.ignore', weight: 70, pattern: /(?:^|\s)(?:zignoruj|ignoruj|zapomnij o)\s+(?:wszystkie\s+)?(?:poprzednie|wcześniejsze|swoje|twoje)\s+(?:instrukcje|polecenia|zasady)/ },
  // Russian and Ukrainian (\b does not see Cyrillic letters: whitespace bounds instead)
  {
    id: 'ru.ignore',
    weight: 70,
    pattern:
      /(?:^|\s)(?:игнорируй|проигнорируй|игнорируйте|забудь|забудьте|ігноруй)\s+(?:все\s+|всі\s+)?(?:предыдущие|прежние|свои|твои|попередні|свої)\s+(?:инструкции|указания|правила|команды|інструкції|вказівки)/,
  },
  { id: 'ru.role', weight: 35, pattern: /(?:^|\s)(?:теперь ты|ты теперь)\s/ },
  { id: 'ru.new', weight: 45, pattern: /(?:^|\s)новые инструкции\s*:/ },
  // Chinese, Japanese, Korean
  { id: 'zh.ignore', weight: 70, pattern: /(?:忽略|无视|無視|忘记|忘記|不要理会)(?:之前|以上|先前|前面|所有|上述|你的|一切)?的?(?:所有|全部)?(?:指令|指示|说明|說明|规则|規則|提示)/ },
  { id: 'zh.role', weight: 45, pattern: /(?:你现在是|你現在是|新的指令[:：]|系统提示|系統提示)/ },
  { id: 'ja.ignore', weight: 70, pattern: /(?:以前|前|上記|これまで|すべて)の(?:指示|命令|ルール|指令)を(?:無視|忘れ)/ },
  { id: 'ko.ignore', weight: 70, pattern: /(?:이전|위의|모든)\s*(?:지시|명령|지침|규칙)(?:을|를|은|는)?\s*(?:무시|잊어)/ },
  // Arabic, Turkish
  { id: 'ar.ignore', weight: 70, pattern: /(?:تجاهل|انس)\s+(?:\S+\s+){0,3}(?:التعليمات|الأوامر|القواعد)/ },
  { id: 'tr.ignore', weight: 70, pattern: /(?:önceki|tüm|bütün)\s+(?:talimatları|komutları|kuralları)\s+(?:yok say|unut|görmezden gel)/ },
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

/** A base64 run long enough to hold a sentence. */
export const BASE64_BLOCK = /(?:[A-Za-z0-9+/]{4}){6,}(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?/g;
/** Most base64 blocks decoded per message (bounded cost). */
export const MAX_DECODED_BLOCKS = 20;
/** Most characters of a message's text the screener reads (bounded cost; the rest is not screened). */
export const MAX_SCREENED_CHARS = 512 * 1024;
/** Characters of each text read again through rot13. */
export const ROT13_CHARS = 16 * 1024;
/** Most links compared per message. */
export const MAX_LINKS = 500;
/** Longest `detail` of a reason: the offending text, cut. */
export const DETAIL_CHARS = 160;

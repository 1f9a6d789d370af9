// The dashboard's HTML shell and stylesheet, embedded as strings so the single executable
// (bundled with esbuild) carries them without reading files at run time. The page loads only
// its own script and stylesheet from /dashboard/: no CDN, no inline code (strict CSP).

export const DASHBOARD_HTML = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>mailroom dashboard</title>
<link rel="icon" href="/dashboard/favicon.svg" type="image/svg+xml">
<link rel="stylesheet" href="/dashboard/app.css">
<script src="/dashboard/app.js" defer></script>
</head>
<body>
<header class="top">
  <span class="brand">mailroom</span>
  <nav id="nav" hidden>
    <a href="#mail" data-view="mail">Mail</a>
    <a href="#drafts" data-view="drafts">Drafts</a>
    <a href="#inboxes" data-view="inboxes">Inboxes</a>
    <a href="#webhooks" data-view="webhooks">Webhooks</a>
    <a href="#domains" data-view="domains">Domains</a>
    <a href="#keys" data-view="keys">Keys</a>
  </nav>
  <span class="who" id="who"></span>
  <span class="live" id="live" role="status" hidden></span>
  <button type="button" id="help-toggle" class="ghost" title="Keyboard shortcuts (?)" hidden>?</button>
  <button type="button" id="signout" class="ghost" hidden>Sign out</button>
</header>
<div id="notice" role="status" hidden><span id="notice-text"></span><button type="button" id="notice-close" class="link" title="Dismiss">Dismiss</button></div>
<aside id="help" class="card" hidden>
  <h2>Keyboard shortcuts</h2>
  <dl class="keys">
    <dt><kbd>j</kbd> / <kbd>k</kbd></dt><dd>next / previous conversation</dd>
    <dt><kbd>r</kbd></dt><dd>reply to the last message of the open conversation</dd>
    <dt><kbd>u</kbd></dt><dd>mark the last message of the open conversation unread (or read)</dd>
    <dt><kbd>#</kbd></dt><dd>delete the last message of the open conversation (press twice)</dd>
    <dt><kbd>e</kbd></dt><dd>archive the open conversation (or move it back to the inbox)</dd>
    <dt><kbd>l</kbd></dt><dd>add a label to the open conversation</dd>
    <dt><kbd>/</kbd></dt><dd>search</dd>
    <dt><kbd>c</kbd></dt><dd>compose a new message</dd>
    <dt><kbd>?</kbd></dt><dd>show or hide this help</dd>
    <dt><kbd>Esc</kbd></dt><dd>close this help, leave a text field</dd>
  </dl>
</aside>
<main id="main">
  <section id="signin" class="card narrow" hidden>
    <h1>Sign in</h1>
    <p class="muted">Paste an API key (<code>mailroom keys create</code> or <code>mailroom init</code> makes one). It is kept in this tab's session storage only and sent to this server alone.</p>
    <form id="signin-form" autocomplete="off">
      <label for="key">API key</label>
      <input id="key" name="key" type="password" placeholder="mr_live_\u2026" required spellcheck="false">
      <button type="submit">Sign in</button>
      <p id="signin-error" class="error" hidden></p>
    </form>
  </section>
  <section id="view"></section>
</main>
<noscript>The dashboard needs JavaScript; the API and the CLI work without it.</noscript>
</body>
</html>
`;

export const DASHBOARD_CSS = `:root {
  --bg: #f6f7f9; --fg: #1d2330; --muted: #667085; --line: #e3e6eb; --card: #fff;
  --accent: #2456d3; --accentbg: #eaf0fd; --ok: #1a7f47; --okbg: #e3f5ea; --warn: #9a6300; --warnbg: #fdf1d8;
  --bad: #b42318; --badbg: #fde7e5; --idle: #475467; --idlebg: #eef0f3;
  font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif;
}
* { box-sizing: border-box; }
/* hidden wins over a rule's display (nav#nav is a flex box): the sign-in page shows no navigation. */
[hidden] { display: none !important; }
body { margin: 0; background: var(--bg); color: var(--fg); }
header.top { display: flex; align-items: center; flex-wrap: wrap; gap: 8px 24px; padding: 10px 24px; background: #111827; color: #fff; }
.brand { font-weight: 700; letter-spacing: .02em; }
nav#nav { display: flex; gap: 4px; flex: 1; flex-wrap: wrap; }
nav#nav a { color: #cbd5e1; text-decoration: none; padding: 6px 12px; border-radius: 6px; white-space: nowrap; }
nav#nav a:hover { color: #fff; background: #1f2937; }
nav#nav a.active { color: #fff; background: #374151; }
.who { color: #cbd5e1; font-size: 12px; margin-left: auto; }
.live { color: #86efac; font-size: 12px; }
main { max-width: 1440px; margin: 0 auto; padding: 20px 24px 48px; overflow-wrap: anywhere; }
h1 { font-size: 20px; margin: 0 0 12px; }
h2 { font-size: 16px; margin: 24px 0 8px; }
.card { background: var(--card); border: 1px solid var(--line); border-radius: 10px; padding: 16px 18px; margin-bottom: 16px; }
.card > h2:first-child, .card > h1:first-child { margin-top: 0; }
form.create { margin-top: 16px; }
.narrow { max-width: 460px; margin: 48px auto; }
.muted { color: var(--muted); }
label { display: block; font-weight: 600; margin: 12px 0 4px; }
label.check { display: inline-flex; gap: 6px; align-items: center; font-weight: 400; margin: 4px 16px 4px 0; }
input[type=password], input[type=text], input[type=search], input[type=email], input[type=url], select, textarea { width: 100%; padding: 8px 10px; border: 1px solid var(--line); border-radius: 6px; font: inherit; background: #fff; }
textarea { min-height: 120px; resize: vertical; }
select { width: auto; max-width: 100%; }
button { font: inherit; padding: 6px 14px; border-radius: 6px; border: 1px solid var(--accent); background: var(--accent); color: #fff; cursor: pointer; }
button:disabled { opacity: .55; cursor: default; }
button.ghost { background: transparent; border-color: #4b5563; color: #e5e7eb; }
button.quiet { background: #fff; color: var(--accent); }
button.danger { background: #fff; color: var(--bad); border-color: var(--bad); }
button.small { padding: 2px 10px; font-size: 12px; }
button.link { background: none; border: 0; padding: 0 4px; color: inherit; text-decoration: underline; }
.actions { display: flex; flex-wrap: wrap; gap: 8px; margin-top: 12px; }
form .actions { margin-top: 14px; }
.scroll { max-width: 100%; overflow-x: auto; }
table { width: 100%; border-collapse: collapse; background: var(--card); }
th, td { text-align: left; padding: 7px 10px; border-bottom: 1px solid var(--line); vertical-align: top; }
th { font-size: 12px; text-transform: uppercase; letter-spacing: .04em; color: var(--muted); font-weight: 600; overflow-wrap: normal; white-space: nowrap; }
tr.clickable { cursor: pointer; }
tr.clickable:hover td { background: #f2f5fc; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
td.host { min-width: 190px; word-break: normal; overflow-wrap: anywhere; }
td.addr, td.when { white-space: nowrap; }
td.mono, .mono { font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size: 12px; overflow-wrap: anywhere; }
td.long { word-break: break-all; }
.badge { display: inline-block; padding: 1px 8px; border-radius: 999px; font-size: 12px; font-weight: 600; background: var(--idlebg); color: var(--idle); white-space: nowrap; }
.badge.ok { background: var(--okbg); color: var(--ok); }
.badge.warn { background: var(--warnbg); color: var(--warn); }
.badge.bad { background: var(--badbg); color: var(--bad); }
.stats { display: grid; grid-template-columns: repeat(auto-fit, minmax(150px, 1fr)); gap: 12px; margin-bottom: 16px; }
.stat { background: var(--card); border: 1px solid var(--line); border-radius: 10px; padding: 12px 14px; }
.stat b { display: block; font-size: 22px; }
.stat span { color: var(--muted); font-size: 12px; }
.error { color: var(--bad); }
#notice { max-width: 1440px; margin: 12px auto 0; padding: 8px 14px; border-radius: 8px; background: var(--okbg); color: var(--ok); display: flex; gap: 12px; align-items: baseline; }
#notice span { flex: 1; }
#notice.bad { background: var(--badbg); color: var(--bad); }
#help { max-width: 520px; margin: 12px auto 0; }
#help h2 { margin-top: 0; }
dl.keys { display: grid; grid-template-columns: 90px 1fr; gap: 6px 12px; margin: 0; }
dl.keys dd { margin: 0; }
kbd { font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size: 12px; border: 1px solid var(--line); border-bottom-width: 2px; border-radius: 4px; padding: 0 5px; background: #fff; }
.toolbar { display: flex; flex-wrap: wrap; gap: 8px 12px; align-items: center; margin: 8px 0 12px; }
.toolbar .spacer { flex: 1; }
.toolbar h2 { margin: 0; }
.domain-head { display: flex; align-items: center; gap: 12px; flex-wrap: wrap; }
.domain-head h2 { margin: 0; flex: 1; }
pre.body { white-space: pre-wrap; word-break: break-word; background: var(--bg); padding: 12px; border-radius: 8px; max-height: 520px; overflow: auto; margin: 8px 0; font-size: 13px; }
iframe.html-body { width: 100%; height: 360px; border: 1px solid var(--line); border-radius: 8px; background: #fff; resize: vertical; margin: 8px 0; display: block; }
dl.meta { display: grid; grid-template-columns: 110px 1fr; gap: 4px 12px; margin: 0 0 12px; }
dl.meta dt { color: var(--muted); }
dl.meta dd { margin: 0; word-break: break-word; }
.empty { color: var(--muted); padding: 16px 0; }
.once { border-color: var(--warn); background: var(--warnbg); }
.once code { display: block; margin: 8px 0; font-size: 13px; word-break: break-all; }
.grid2 { display: grid; grid-template-columns: 1fr 1fr; gap: 0 16px; }

/* The mail client: mailboxes | conversations | the open conversation. */
.mail { display: grid; grid-template-columns: 210px minmax(260px, 360px) minmax(0, 1fr); gap: 16px; align-items: start; }
.mailboxes { display: flex; flex-direction: column; gap: 2px; }
.mailboxes a { display: flex; justify-content: space-between; gap: 8px; padding: 6px 10px; border-radius: 6px; color: var(--fg); text-decoration: none; min-width: 0; }
.mailboxes a span.name { overflow: hidden; text-overflow: ellipsis; white-space: nowrap; }
.mailboxes a:hover { background: #e9edf5; }
.mailboxes a.active { background: var(--accentbg); color: var(--accent); font-weight: 600; }
.count { font-size: 12px; font-weight: 700; color: var(--accent); font-variant-numeric: tabular-nums; }
.count:empty { display: none; }
.mailboxes .compose { margin-bottom: 10px; }
form.search { display: flex; gap: 6px; flex: 1; min-width: 0; }
form.search input { flex: 1; min-width: 0; }
.hint { font-size: 12px; color: var(--muted); }
ul.threads { list-style: none; margin: 0; padding: 0; background: var(--card); border: 1px solid var(--line); border-radius: 10px; overflow: hidden; }
ul.threads li a { display: block; padding: 9px 12px; border-bottom: 1px solid var(--line); color: var(--fg); text-decoration: none; }
ul.threads li:last-child a { border-bottom: 0; }
ul.threads li a:hover { background: #f2f5fc; }
ul.threads li.selected a { background: var(--accentbg); box-shadow: inset 3px 0 var(--accent); }
ul.threads li.unread .from, ul.threads li.unread .subject { font-weight: 700; }
.line { display: flex; justify-content: space-between; gap: 8px; min-width: 0; }
.line .from, .line .subject { overflow: hidden; text-overflow: ellipsis; white-space: nowrap; min-width: 0; }
.line .when { color: var(--muted); font-size: 12px; white-space: nowrap; }
.snippet { color: var(--muted); font-size: 12px; overflow: hidden; text-overflow: ellipsis; white-space: nowrap; }
.thread-pane { min-width: 0; }
.thread-pane h1 { overflow-wrap: anywhere; }
.thread-head { display: flex; gap: 12px; align-items: baseline; flex-wrap: wrap; }
.back { display: none; }
article.message { background: var(--card); border: 1px solid var(--line); border-radius: 10px; padding: 12px 16px; margin-bottom: 12px; }
article.message.outbound { border-left: 3px solid var(--accent); }
article.message header { display: flex; justify-content: space-between; gap: 4px 12px; flex-wrap: wrap; }
article.message .sender b { margin-right: 6px; }
article.message .to { color: var(--muted); font-size: 12px; }
.badges { display: flex; flex-wrap: wrap; gap: 4px; margin: 6px 0; }
ul.attachments { list-style: none; padding: 0; margin: 8px 0; display: flex; flex-wrap: wrap; gap: 6px; }
ul.attachments a { display: inline-block; padding: 3px 10px; border: 1px solid var(--line); border-radius: 6px; color: var(--accent); text-decoration: none; background: var(--bg); }
.labels { display: inline-flex; flex-wrap: wrap; gap: 4px; margin: 0 4px; }
.label-chip { display: inline-flex; align-items: center; gap: 2px; padding: 0 8px; border-radius: 999px; font-size: 12px; background: var(--accentbg); color: var(--accent); white-space: nowrap; }
.line .labels { margin: 0 auto 0 0; flex: none; }
.label-chip button.link { padding: 0 2px; text-decoration: none; font-weight: 700; }
form.label-form { display: flex; gap: 6px; align-items: center; margin: 8px 0; max-width: 420px; }
form.label-form input { flex: 1; min-width: 0; }
.thread-actions { margin: 0 0 12px; }
.draft iframe.html-body { height: 200px; }
.draft h3 { font-size: 13px; margin: 12px 0 4px; color: var(--muted); }
blockquote.answered { margin: 0; padding: 8px 12px; border-left: 3px solid var(--line); background: var(--bg); border-radius: 0 8px 8px 0; }
ul.attachments.picked li { padding: 3px 10px; border: 1px solid var(--line); border-radius: 6px; background: var(--bg); }
.composer { border-top: 1px solid var(--line); margin-top: 12px; padding-top: 4px; }
.tabs { display: flex; gap: 4px; }
.tabs button { background: #fff; color: var(--fg); border-color: var(--line); }
.tabs button.on { background: var(--accentbg); color: var(--accent); border-color: var(--accent); }

@media (max-width: 980px) {
  .mail { grid-template-columns: minmax(0, 1fr) minmax(0, 1.4fr); }
  .mailboxes { grid-column: 1 / -1; flex-direction: row; flex-wrap: wrap; }
  .mailboxes .compose { margin: 0 8px 0 0; }
}
@media (max-width: 720px) {
  header.top { padding: 8px 12px; gap: 6px 12px; }
  nav#nav { order: 5; flex-basis: 100%; }
  nav#nav a { padding: 4px 8px; }
  main { padding: 12px 12px 40px; }
  .mail { grid-template-columns: minmax(0, 1fr); }
  .mail.reading .mailboxes, .mail.reading .list-pane { display: none; }
  .mail:not(.reading) .thread-pane { display: none; }
  .back { display: inline; }
  dl.meta { grid-template-columns: 84px minmax(0, 1fr); }
  .grid2 { grid-template-columns: minmax(0, 1fr); }
  td.addr, td.when { white-space: normal; }
}
`;

/** An envelope on the brand colour; served by the page itself so the browser asks nothing else. */
export const DASHBOARD_ICON = `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 32"><rect width="32" height="32" rx="7" fill="#2456d3"/><path d="M7 10h18v12H7z" fill="none" stroke="#fff" stroke-width="2" stroke-linejoin="round"/><path d="M7 10l9 7 9-7" fill="none" stroke="#fff" stroke-width="2" stroke-linejoin="round"/></svg>
`;

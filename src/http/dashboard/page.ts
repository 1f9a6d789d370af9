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
    <a href="#inboxes" data-view="inboxes">Inboxes</a>
    <a href="#messages" data-view="messages">Messages</a>
    <a href="#webhooks" data-view="webhooks">Webhooks</a>
    <a href="#domains" data-view="domains">Domains</a>
  </nav>
  <span class="who" id="who"></span>
  <button type="button" id="signout" class="ghost" hidden>Sign out</button>
</header>
<div id="notice" role="status" hidden></div>
<main id="main">
  <section id="signin" class="card narrow" hidden>
    <h1>Sign in</h1>
    <p class="muted">Paste an API key (<code>mailroom keys create</code> makes one). It is kept in this tab's session storage only and sent to this server alone.</p>
    <form id="signin-form" autocomplete="off">
      <label for="key">API key</label>
      <input id="key" name="key" type="password" placeholder="mr_live_…" required spellcheck="false">
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
  --accent: #2456d3; --ok: #1a7f47; --okbg: #e3f5ea; --warn: #9a6300; --warnbg: #fdf1d8;
  --bad: #b42318; --badbg: #fde7e5; --idle: #475467; --idlebg: #eef0f3;
  font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif;
}
* { box-sizing: border-box; }
body { margin: 0; background: var(--bg); color: var(--fg); }
header.top { display: flex; align-items: center; gap: 24px; padding: 10px 24px; background: #111827; color: #fff; }
.brand { font-weight: 700; letter-spacing: .02em; }
nav { display: flex; gap: 4px; flex: 1; }
nav a { color: #cbd5e1; text-decoration: none; padding: 6px 12px; border-radius: 6px; }
nav a:hover { color: #fff; background: #1f2937; }
nav a.active { color: #fff; background: #374151; }
.who { color: #cbd5e1; font-size: 12px; margin-left: auto; }
main { max-width: 1180px; margin: 0 auto; padding: 20px 24px 48px; }
h1 { font-size: 20px; margin: 0 0 12px; }
h2 { font-size: 16px; margin: 24px 0 8px; }
.card { background: var(--card); border: 1px solid var(--line); border-radius: 10px; padding: 16px 18px; margin-bottom: 16px; }
.narrow { max-width: 460px; margin: 48px auto; }
.muted { color: var(--muted); }
label { display: block; font-weight: 600; margin: 12px 0 4px; }
input[type=password], input[type=text], select { width: 100%; padding: 8px 10px; border: 1px solid var(--line); border-radius: 6px; font: inherit; }
select { width: auto; }
button { font: inherit; padding: 6px 14px; border-radius: 6px; border: 1px solid var(--accent); background: var(--accent); color: #fff; cursor: pointer; }
button:disabled { opacity: .55; cursor: default; }
button.ghost { background: transparent; border-color: #4b5563; color: #e5e7eb; }
button.small { padding: 2px 10px; font-size: 12px; }
form button[type=submit] { margin-top: 12px; }
table { width: 100%; border-collapse: collapse; background: var(--card); }
th, td { text-align: left; padding: 7px 10px; border-bottom: 1px solid var(--line); vertical-align: top; }
th { font-size: 12px; text-transform: uppercase; letter-spacing: .04em; color: var(--muted); font-weight: 600; }
tr.clickable { cursor: pointer; }
tr.clickable:hover td { background: #f2f5fc; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
td.host { min-width: 190px; word-break: normal; overflow-wrap: anywhere; }
td.addr, td.when { white-space: nowrap; }
td.mono, .mono { font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size: 12px; overflow-wrap: break-word; }
td.long { word-break: break-all; }
.badge { display: inline-block; padding: 1px 8px; border-radius: 999px; font-size: 12px; font-weight: 600; background: var(--idlebg); color: var(--idle); }
.badge.ok { background: var(--okbg); color: var(--ok); }
.badge.warn { background: var(--warnbg); color: var(--warn); }
.badge.bad { background: var(--badbg); color: var(--bad); }
.stats { display: grid; grid-template-columns: repeat(auto-fit, minmax(150px, 1fr)); gap: 12px; margin-bottom: 16px; }
.stat { background: var(--card); border: 1px solid var(--line); border-radius: 10px; padding: 12px 14px; }
.stat b { display: block; font-size: 22px; }
.stat span { color: var(--muted); font-size: 12px; }
.error { color: var(--bad); }
#notice { max-width: 1180px; margin: 12px auto 0; padding: 8px 14px; border-radius: 8px; background: var(--okbg); color: var(--ok); }
#notice.bad { background: var(--badbg); color: var(--bad); }
.toolbar { display: flex; gap: 12px; align-items: center; margin: 8px 0 12px; }
.toolbar .spacer { flex: 1; }
.domain-head { display: flex; align-items: center; gap: 12px; flex-wrap: wrap; }
.domain-head h2 { margin: 0; flex: 1; }
pre.body { white-space: pre-wrap; word-break: break-word; background: var(--bg); padding: 12px; border-radius: 8px; max-height: 420px; overflow: auto; }
dl.meta { display: grid; grid-template-columns: 110px 1fr; gap: 4px 12px; margin: 0 0 12px; }
dl.meta dt { color: var(--muted); }
dl.meta dd { margin: 0; word-break: break-word; }
.empty { color: var(--muted); padding: 16px 0; }
`;

/** An envelope on the brand colour; served by the page itself so the browser asks nothing else. */
export const DASHBOARD_ICON = `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 32"><rect width="32" height="32" rx="7" fill="#2456d3"/><path d="M7 10h18v12H7z" fill="none" stroke="#fff" stroke-width="2" stroke-linejoin="round"/><path d="M7 10l9 7 9-7" fill="none" stroke="#fff" stroke-width="2" stroke-linejoin="round"/></svg>
`;

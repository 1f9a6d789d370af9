// The dashboard's browser script, served as one asset (/dashboard/app.js): the parts below,
// each a String.raw template kept beside the others by concern, joined inside one function
// scope. It talks to the public API with the key kept in sessionStorage, plus the one
// dashboard-only endpoint (replay of a failed webhook delivery).
// (Plain ES2020 without template literals, so each part can live inside a template string;
// ASCII only, non-ASCII written as \u escapes: see build/build.ts on why the bundle must be ASCII.)
import { ADMIN_JS } from './admin.ts';
import { COMPOSE_JS } from './compose.ts';
import { CORE_JS } from './core.ts';
import { DRAFTS_JS } from './drafts.ts';
import { LIVE_JS } from './live.ts';
import { MAIL_JS } from './mail.ts';
import { SHELL_JS } from './shell.ts';

export const DASHBOARD_JS = ['\n(function () {\n  \'use strict\';', CORE_JS, MAIL_JS, COMPOSE_JS, DRAFTS_JS, ADMIN_JS, LIVE_JS, SHELL_JS, '})();\n'].join('\n');

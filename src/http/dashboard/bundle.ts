// The dashboard's files, from real sources in ./client/: the page (index.html), its stylesheet
// (app.css), its icon (favicon.svg) and its script, TypeScript modules (checked by the
// project's tsc with the DOM types, linted with the rest of src/) that esbuild bundles for the
// browser into one script defining no global. The single executable carries the files as they
// were at build time (build/build.ts stands a module handing them out in for this one, so it
// carries no esbuild and reads no file); run from source, the server makes them at the first
// request for one.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { BuildOptions, Plugin } from 'esbuild';

export interface DashboardFiles {
  html: string;
  js: string;
  css: string;
  icon: string;
}

const CLIENT = (file: string) => fileURLToPath(new URL(`./client/${file}`, import.meta.url));

/** How the script and the stylesheet are bundled. */
const CLIENT_BUILD: BuildOptions = {
  entryPoints: [CLIENT('shell.ts'), CLIENT('app.css')],
  outdir: '/',
  bundle: true,
  format: 'iife',
  platform: 'browser',
  target: 'es2020',
  // ASCII only: a non-ASCII character makes V8 hold the whole script two bytes per character
  // (build/build.ts, assertAscii); esbuild writes them as escapes.
  charset: 'ascii',
  legalComments: 'none',
  write: false,
  logLevel: 'silent',
};

/** Bundles the script and the stylesheet, reads the page and the icon. esbuild comes with tsx: only a run from source gets here. */
export async function bundleDashboard(): Promise<DashboardFiles> {
  const { build } = await import('esbuild');
  const out = (await build(CLIENT_BUILD)).outputFiles!;
  const file = (ext: string) => out.find((f) => f.path.endsWith(ext))!.text;
  return { html: readFileSync(CLIENT('index.html'), 'utf8'), js: file('.js'), css: file('.css'), icon: readFileSync(CLIENT('favicon.svg'), 'utf8') };
}

let made: Promise<DashboardFiles> | undefined;

/** The dashboard's files, made once. */
export function dashboardFiles(): Promise<DashboardFiles> {
  return (made ??= bundleDashboard());
}

/**
 * For the single executable's bundle (build/build.ts): this module becomes one handing out
 * `files`, made at build time.
 */
export function bundledDashboard(files: DashboardFiles): Plugin {
  return {
    name: 'dashboard-files',
    setup(b) {
      b.onLoad({ filter: /[\\/]src[\\/]http[\\/]dashboard[\\/]bundle\.ts$/ }, () => ({
        contents: `export const dashboardFiles = () => Promise.resolve(${JSON.stringify(files)});`,
        loader: 'ts',
      }));
    },
  };
}

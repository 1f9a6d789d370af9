// The dashboard's browser script, /dashboard/app.js: TypeScript modules in ./client/ (checked
// by the project's tsc with the DOM types, linted with the rest of src/), bundled for the
// browser by esbuild into one script that defines no global. The single executable carries the
// bundle made at build time (build/build.ts stands a module exporting it in for this one); run
// from source, the server bundles it at the first request for it.
import { fileURLToPath } from 'node:url';
import type { BuildOptions, Plugin } from 'esbuild';

/** How the browser script is bundled, here and in build/build.ts. */
export const CLIENT_BUILD: BuildOptions = {
  entryPoints: [fileURLToPath(new URL('./client/shell.ts', import.meta.url))],
  bundle: true,
  format: 'iife',
  platform: 'browser',
  target: 'es2020',
  // ASCII only: a non-ASCII character makes V8 hold the whole script two bytes per character
  // (build/build.ts, assertAscii); esbuild writes them as \u escapes.
  charset: 'ascii',
  legalComments: 'none',
  write: false,
  logLevel: 'silent',
};

/** The bundled script. esbuild is a development dependency: only a run from source gets here. */
export async function bundleDashboardScript(): Promise<string> {
  const { build } = await import('esbuild');
  const result = await build(CLIENT_BUILD);
  return result.outputFiles![0].text;
}

let bundled: Promise<string> | undefined;

/** /dashboard/app.js, bundled once. */
export function dashboardScript(): Promise<string> {
  return (bundled ??= bundleDashboardScript());
}

/**
 * For the single executable's bundle (build/build.ts): this module becomes one handing out
 * `js`, the script bundled at build time, so the executable carries no esbuild.
 */
export function bundledDashboardScript(js: string): Plugin {
  return {
    name: 'dashboard-script',
    setup(b) {
      b.onLoad({ filter: /[\\/]src[\\/]http[\\/]dashboard[\\/]script\.ts$/ }, () => ({
        contents: `export const dashboardScript = () => Promise.resolve(${JSON.stringify(js)});`,
        loader: 'ts',
      }));
    },
  };
}

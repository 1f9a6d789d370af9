// Preloaded into every Node process of `npm test` (build/test.sh puts `--import` of this file in
// NODE_OPTIONS, so test files, child servers and CLI runs all get it): it halves what loading the
// sources from .ts costs each process, and a pass starts a few hundred of them.
//
// - V8's compile cache on disk (module.enableCompileCache): a process compiles and strips the
//   types of only what no earlier process did (1.3 s of CPU to import the harness, 0.85 s after).
// - Node 26 works out the format of each file it loads from its package's package.json, and the
//   result it builds for that file copies every field (`...data` in getPackageScopeConfig), which
//   parses `exports` again: drizzle-orm's is 179 KB, and a process loads about 180 of its files,
//   about 0.2 s of CPU and as much garbage each time. Its relative imports are answered here,
//   from its manifest's `"type": "module"`, read once; bare imports of it once per process.
import { enableCompileCache, registerHooks, type ResolveFnOutput } from 'node:module';

enableCompileCache();

const DRIZZLE = '/node_modules/drizzle-orm/';
const bare = new Map<string, ResolveFnOutput>();

registerHooks({
  resolve(specifier, context, nextResolve) {
    const parent = context.parentURL;
    if (parent?.includes(DRIZZLE) && specifier.startsWith('.') && specifier.endsWith('.js')) {
      return { url: new URL(specifier, parent).href, format: 'module', shortCircuit: true };
    }
    if (!specifier.startsWith('drizzle-orm') || parent?.includes('/node_modules/')) return nextResolve(specifier, context);
    const key = `${specifier}\0${context.conditions.join()}`;
    let found = bare.get(key);
    if (!found) bare.set(key, (found = { ...nextResolve(specifier, context), shortCircuit: true }));
    return found;
  },
});

// Imported first by the single executable's entry (src/sea.ts). Run from source, Node does not
// print DEP0005 (`Buffer()` is deprecated) for code under node_modules; bundled, every module
// lives in one file outside node_modules, so iconv-lite 0.4 (under dkim-signer's libmime)
// would trigger it at run time. Only that warning is dropped; every other one still prints.
const emitWarning = process.emitWarning.bind(process);

process.emitWarning = ((warning: string | Error, ...rest: unknown[]) => {
  const code = typeof rest[0] === 'object' && rest[0] !== null ? (rest[0] as { code?: string }).code : rest[1];
  if (code === 'DEP0005') return;
  (emitWarning as (w: string | Error, ...r: unknown[]) => void)(warning, ...rest);
}) as typeof process.emitWarning;

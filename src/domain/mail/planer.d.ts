// planer ships no typings; this is the step of its extractFromPlain that reply-text.ts uses.
declare module 'planer' {
  /** The lines without the quotation that `markers` (a letter a line: `e` empty, `m` quoted, `f` forwarded, `s` splitter, `t` text) show; `flags` says which lines went (firstLine up to, not including, lastLine). */
  function processMarkedLines(lines: string[], markers: string, flags: { wereLinesDeleted?: boolean; firstLine?: number; lastLine?: number }): string[];
  const planer: { processMarkedLines: typeof processMarkedLines };
  export default planer;
}

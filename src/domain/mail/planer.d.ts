// planer ships no typings; this is the one function reply-text.ts uses.
declare module 'planer' {
  /** The text without its `>` quotation and the splitter line above it (talon's algorithm). */
  function extractFromPlain(text: string): string;
  const planer: { extractFromPlain: typeof extractFromPlain };
  export default planer;
}

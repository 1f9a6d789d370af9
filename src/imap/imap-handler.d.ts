// Types of imap-handler (MIT, no types of its own): the parser this project uses; its compiler is
// not used (it writes strings with JSON escapes, and literal lengths in characters, not bytes).
declare module 'imap-handler' {
  interface ParserOptions {
    literalPlus?: boolean;
    allowUntagged?: boolean;
    allowSection?: string[];
  }
  const imapHandler: {
    parser(command: string, options?: ParserOptions): unknown;
  };
  export default imapHandler;
}

// What dkim-signer asks of the deprecated built-in `punycode` module, for the single executable
// (build/build.ts aliases `punycode` here): a domain name in its ASCII (A-label) form.
const { domainToASCII } = require('node:url');
exports.toASCII = (domain) => domainToASCII(domain) || domain;

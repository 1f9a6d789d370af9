#!/usr/bin/env node
// Finds promises used as plain values. The move from synchronous to async database calls turns
// `res.json(getInbox(...))` into a response body of `{}`, `JSON.stringify(listX())` into "{}",
// `${p}` into "[object Promise]" and `p === undefined` into a test that is always false. tsc
// accepts all of these when the receiving type is unknown/any/object, and typescript-eslint's
// promise rules (npm run lint:promises) miss most of them. This script walks every place that
// consumes a value (arguments, returns, literal members, templates, spreads, operators,
// conditions, annotated initializers and assignments) and reports a thenable that lands where no
// thenable is expected. Floating promises (expression statements) are left to lint:promises.
// A condition or comparison is reported only when the value is always a promise (testing a
// `Promise<T> | undefined` for presence is legitimate), and never when both sides are promises.
// "tsc reports it too" marks findings that are also type errors (not assignable to the target).
//
// Usage: node build/lint-promise-values.mjs [--project tsconfig.json] [path ...]
//   paths default to src/, cli/ and test/ (or the project's directory with --project).
// Exit status: 0 clean, 1 findings, 2 TypeScript missing or the config did not load.
import { createRequire } from 'node:module';
import { existsSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const lintDir = process.env.MAILROOM_LINT_DIR || join(process.env.XDG_CACHE_HOME || join(process.env.HOME, '.cache'), 'mailroom-lint');
const tsPath = join(lintDir, 'node_modules', 'typescript');
if (!existsSync(tsPath)) {
  console.error(`TypeScript 5 not found at ${tsPath}.\nRun \`npm run lint:promises\` once to install it (or set MAILROOM_LINT_DIR).`);
  process.exit(2);
}
const ts = createRequire(join(lintDir, 'package.json'))(tsPath);

const args = process.argv.slice(2);
const p = args.indexOf('--project');
const project = p >= 0 ? resolve(args.splice(p, 2)[1] ?? '') : join(root, 'tsconfig.json');
const targets = args.length ? args.map((a) => resolve(a)) : p >= 0 ? [dirname(project)] : ['src', 'cli', 'test'].map((d) => join(root, d));
const config = ts.getParsedCommandLineOfConfigFile(
  project,
  {},
  {
    ...ts.sys,
    onUnRecoverableConfigFileDiagnostic: (d) => {
      console.error(ts.flattenDiagnosticMessageText(d.messageText, '\n'));
      process.exit(2);
    },
  },
);
const program = ts.createProgram({ rootNames: config.fileNames, options: config.options, projectReferences: config.projectReferences });
const checker = program.getTypeChecker();
const K = ts.SyntaxKind;

const parts = (t) => (t.isUnion() ? t.types : [t]);
const thenable1 = (t) => {
  if (t.flags & (ts.TypeFlags.Any | ts.TypeFlags.Unknown)) return false;
  const then = checker.getPropertyOfType(checker.getApparentType(t), 'then');
  return !!then && checker.getTypeOfSymbol(then).getNonNullableType().getCallSignatures().length > 0;
};
const someThenable = (t) => !!t && parts(t).some(thenable1);
const allThenable = (t) => !!t && parts(t).every(thenable1);
const generic = (t) => parts(t).some((u) => u.flags & ts.TypeFlags.TypeParameter);
const show = (t) => {
  const s = checker.typeToString(t);
  return s.length > 60 ? s.slice(0, 57) + '...' : s;
};
const LOGICAL = [K.QuestionQuestionToken, K.BarBarToken, K.AmpersandAmpersandToken];
const COMPARISON = [
  K.EqualsEqualsEqualsToken,
  K.ExclamationEqualsEqualsToken,
  K.EqualsEqualsToken,
  K.ExclamationEqualsToken,
  K.LessThanToken,
  K.GreaterThanToken,
  K.LessThanEqualsToken,
  K.GreaterThanEqualsToken,
];
const ARITHMETIC = [
  K.PlusToken,
  K.MinusToken,
  K.AsteriskToken,
  K.SlashToken,
  K.PercentToken,
  K.AsteriskAsteriskToken,
  K.AmpersandToken,
  K.BarToken,
  K.CaretToken,
  K.LessThanLessThanToken,
  K.GreaterThanGreaterThanToken,
  K.GreaterThanGreaterThanGreaterThanToken,
  K.PlusEqualsToken,
  K.MinusEqualsToken,
  K.AsteriskEqualsToken,
  K.AsteriskAsteriskEqualsToken,
  K.SlashEqualsToken,
  K.PercentEqualsToken,
  K.LessThanLessThanEqualsToken,
  K.GreaterThanGreaterThanEqualsToken,
  K.GreaterThanGreaterThanGreaterThanEqualsToken,
  K.AmpersandEqualsToken,
  K.BarEqualsToken,
  K.CaretEqualsToken,
];
const ASSIGNMENT = [K.EqualsToken, K.BarBarEqualsToken, K.AmpersandAmpersandEqualsToken, K.QuestionQuestionEqualsToken];

// The expressions whose value actually reaches a slot: look through (), as, !, ?:, ??, ||, &&.
function leaves(e, out = []) {
  if (ts.isParenthesizedExpression(e) || ts.isAsExpression(e) || ts.isSatisfiesExpression(e) || ts.isNonNullExpression(e) || ts.isTypeAssertionExpression(e)) return leaves(e.expression, out);
  if (ts.isConditionalExpression(e)) return leaves(e.whenFalse, leaves(e.whenTrue, out));
  if (ts.isBinaryExpression(e) && LOGICAL.includes(e.operatorToken.kind)) return leaves(e.right, leaves(e.left, out));
  out.push(e);
  return out;
}
// The outermost expression whose value is e's value (the inverse of leaves()).
function outer(e) {
  const q = e.parent;
  const through =
    ts.isParenthesizedExpression(q) ||
    ts.isAsExpression(q) ||
    ts.isSatisfiesExpression(q) ||
    ts.isNonNullExpression(q) ||
    ts.isTypeAssertionExpression(q) ||
    (ts.isConditionalExpression(q) && q.condition !== e) ||
    (ts.isBinaryExpression(q) && LOGICAL.includes(q.operatorToken.kind));
  return through ? outer(q) : e;
}
// Verdict for a value placed at the contextual type ct: undefined = fine, otherwise what was expected.
const byContext = (ct, fallback) => (!ct ? fallback : someThenable(ct) || generic(ct) ? undefined : { expected: show(ct), ct });
const condition = { expected: 'a condition', always: true };

// What the slot holding expression s expects; undefined when s is not a slot or a thenable is fine there.
function slot(s) {
  const q = s.parent;
  if ((ts.isCallExpression(q) || ts.isNewExpression(q)) && q.arguments?.includes(s)) return byContext(checker.getContextualType(s), { expected: 'any' });
  if (ts.isTemplateSpan(q)) return { expected: 'string' };
  if (ts.isSpreadElement(q) || ts.isSpreadAssignment(q)) return { expected: 'a spreadable value' };
  if (ts.isIfStatement(q) || ts.isWhileStatement(q) || ts.isDoStatement(q) || ts.isForStatement(q)) return q.expression === s || q.condition === s ? condition : undefined;
  if (ts.isConditionalExpression(q)) return q.condition === s ? condition : undefined;
  if (ts.isPrefixUnaryExpression(q)) return q.operator === K.ExclamationToken ? condition : { expected: 'number' };
  if (ts.isSwitchStatement(q) || ts.isCaseClause(q)) return { expected: 'a comparison', always: true };
  if (ts.isBinaryExpression(q)) {
    const op = q.operatorToken.kind;
    if ((op === K.BarBarToken || op === K.AmpersandAmpersandToken) && q.left === s) return condition;
    // Identity of two promises (`map.get(k) === p`) is a fair question; a promise against anything else is not.
    const other = q.left === s ? q.right : q.left;
    if (COMPARISON.includes(op)) return someThenable(checker.getTypeAtLocation(other)) ? undefined : { expected: 'a comparison', always: true };
    if (ARITHMETIC.includes(op)) return { expected: 'a number or string operand' };
    if (op === K.InKeyword) return q.right === s ? { expected: 'an object' } : undefined;
    if (!ASSIGNMENT.includes(op) || q.right !== s) return undefined;
    const decl = ts.isIdentifier(q.left) && checker.getSymbolAtLocation(q.left)?.valueDeclaration;
    return decl && !decl.type ? undefined : byContext(checker.getContextualType(s));
  }
  if (ts.isReturnStatement(q) || (ts.isArrowFunction(q) && q.body === s)) {
    let fn = q;
    while (fn && !ts.isFunctionLike(fn)) fn = fn.parent;
    if (!fn || fn.asteriskToken || ts.isConstructorDeclaration(fn) || fn.modifiers?.some((m) => m.kind === K.AsyncKeyword)) return undefined;
    const sig = checker.getSignatureFromDeclaration(fn);
    const rt = sig && checker.getReturnTypeOfSignature(sig);
    return !rt || someThenable(rt) || generic(rt) ? undefined : { expected: `${show(rt)} (return type)`, ct: rt };
  }
  if ((ts.isVariableDeclaration(q) || ts.isPropertyDeclaration(q) || ts.isParameter(q)) && q.initializer === s) return q.type ? byContext(checker.getTypeFromTypeNode(q.type)) : undefined;
  // Literal members: their own contextual type if any, else whatever the enclosing literal flows into.
  if ((ts.isPropertyAssignment(q) && q.initializer === s) || (ts.isShorthandPropertyAssignment(q) && q.name === s) || ts.isArrayLiteralExpression(q)) {
    const literal = ts.isArrayLiteralExpression(q) ? q : q.parent;
    const ct = checker.getContextualType(s);
    return ct ? byContext(ct) : slot(outer(literal));
  }
  return undefined;
}

const inTargets = (f) => targets.some((t) => f === t || f.startsWith(t + '/'));
const seen = new Set();
let count = 0;
for (const sf of program.getSourceFiles()) {
  if (sf.isDeclarationFile || !inTargets(resolve(sf.fileName))) continue;
  const visit = (node) => {
    const verdict = ts.isExpression(node) || ts.isIdentifier(node) ? slot(node) : undefined;
    for (const leaf of verdict ? leaves(node) : []) {
      const type = checker.getTypeAtLocation(leaf);
      if (seen.has(leaf) || !(verdict.always ? allThenable(type) : someThenable(type))) continue;
      seen.add(leaf);
      count++;
      const { line, character } = sf.getLineAndCharacterOfPosition(leaf.getStart(sf));
      let text = leaf.getText(sf).replace(/\s+/g, ' ');
      if (text.length > 70) text = text.slice(0, 67) + '...';
      const tsc = verdict.ct && !checker.isTypeAssignableTo(type, verdict.ct) ? '; tsc reports it too' : '';
      console.log(`${relative(process.cwd(), sf.fileName)}:${line + 1}:${character + 1}  ${text}  (expected ${verdict.expected}; got ${show(type)}${tsc})`);
    }
    ts.forEachChild(node, visit);
  };
  visit(sf);
}
console.log(count ? `${count} promise value finding${count === 1 ? '' : 's'}` : 'no promise value findings');
process.exit(count ? 1 : 0);

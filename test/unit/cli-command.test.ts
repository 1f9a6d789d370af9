// Which command an argv names (cli/mailroom.ts): `serve` is built alone when it is the one, so
// the answer must never mistake an option's value or a global flag for the command.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { commandOf } from '../../cli/mailroom.ts';

const argv = (...args: string[]) => ['/usr/bin/node', 'mailroom', ...args];

describe('commandOf', () => {
  it('finds the command after the global --config, in both spellings', () => {
    assert.equal(commandOf(argv('serve')), 'serve');
    assert.equal(commandOf(argv('--config', 'serve', 'keys', 'list')), 'keys', 'a config file named "serve" is not the command');
    assert.equal(commandOf(argv('--config=m.toml', 'serve', '--help')), 'serve');
  });

  it('leaves everything else to the whole program', () => {
    assert.equal(commandOf(argv()), undefined);
    assert.equal(commandOf(argv('--help', 'serve')), undefined);
    assert.equal(commandOf(argv('-V')), undefined);
    assert.equal(commandOf(argv('--config')), undefined);
  });
});

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { commandPrefix, suggestCommand } from '../../cli/invocation.ts';

test('suggested commands: npm run from a source checkout, the binary path when built', () => {
  assert.equal(commandPrefix({ binary: false, execPath: '/usr/bin/node', cwd: '/src/mailroom' }), 'npm run -s mailroom --');
  assert.equal(commandPrefix({ binary: true, execPath: '/src/mailroom/build/mailroom', cwd: '/src/mailroom' }), 'build/mailroom');
  assert.equal(commandPrefix({ binary: true, execPath: '/opt/mailroom/mailroom', cwd: '/opt/mailroom' }), './mailroom');
  assert.equal(commandPrefix({ binary: true, execPath: '/usr/local/bin/mailroom', cwd: '/srv/mail' }), '/usr/local/bin/mailroom');
  assert.equal(commandPrefix({ binary: true, execPath: '/opt/my apps/mailroom', cwd: '/srv' }), `'/opt/my apps/mailroom'`);
  // This process runs from source: npm run, and --config only when one was given.
  assert.equal(suggestCommand('keys create', undefined), 'npm run -s mailroom -- keys create');
  assert.equal(suggestCommand('keys create', 'conf/mail room.toml'), `npm run -s mailroom -- keys create --config 'conf/mail room.toml'`);
});

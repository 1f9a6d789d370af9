// src/http/routes.ts finds a request's route in its own table (method, first segment, then the
// patterns in the order registered), as tinyhttp's router found it: first registered wins, so
// fixed words beat `/:id`; case-insensitive; one optional trailing slash; HEAD runs GET routes.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { AppContext } from '../../src/context.ts';
import { Routes } from '../../src/http/routes.ts';

function table(): Routes {
  const r = new Routes({} as AppContext);
  const reply = () => ({ status: 204 });
  r.get('/webhooks/catalog', reply);
  r.get('/webhooks/:id', reply);
  r.put('/webhooks/:id', reply);
  r.get('/inboxes/:inboxId/messages', reply);
  r.delete('/suppressions/:address', reply);
  r.get('/dashboard/app.js', reply);
  r.get('/', reply, { public: true });
  return r;
}

const routeOf = (r: Routes, method: string, path: string) => r.match(method, path)?.route.path ?? 'unmatched';

test('the first matching registration wins; the method matters; HEAD runs the GET route; unknown paths match nothing', () => {
  const r = table();
  assert.equal(routeOf(r, 'GET', '/webhooks/catalog'), '/webhooks/catalog');
  assert.equal(routeOf(r, 'GET', '/webhooks/whk_1'), '/webhooks/:id');
  assert.equal(routeOf(r, 'PUT', '/webhooks/whk_1'), '/webhooks/:id');
  assert.equal(routeOf(r, 'DELETE', '/webhooks/whk_1'), 'unmatched');
  assert.equal(routeOf(r, 'HEAD', '/inboxes/inb_1/messages'), '/inboxes/:inboxId/messages');
  // HEAD never reaches a route of another method (HEAD /webhooks/x must not run PUT).
  assert.equal(routeOf(r, 'HEAD', '/suppressions/a@b.example'), 'unmatched');
  assert.equal(routeOf(r, 'GET', '/inboxes/inb_1/messages/extra'), 'unmatched');
  assert.equal(routeOf(r, 'GET', '/inboxes'), 'unmatched');
  assert.equal(routeOf(r, 'GET', '/nothing/here'), 'unmatched');
  assert.equal(routeOf(r, 'POST', '/webhooks/catalog'), 'unmatched');
  // A dot in a pattern is literal, not "any character".
  assert.equal(routeOf(r, 'GET', '/dashboard/appXjs'), 'unmatched');
  assert.equal(routeOf(r, 'GET', '/dashboard/app.js'), '/dashboard/app.js');
  assert.equal(routeOf(r, 'GET', '/'), '/');
  assert.equal(routeOf(r, 'GET', '//webhooks/catalog'), 'unmatched');
});

test('as tinyhttp: case-insensitive, one trailing slash allowed, an empty parameter matches nothing', () => {
  const r = table();
  assert.equal(routeOf(r, 'GET', '/Webhooks/CATALOG'), '/webhooks/catalog');
  assert.equal(routeOf(r, 'GET', '/webhooks/whk_1/'), '/webhooks/:id');
  assert.equal(routeOf(r, 'GET', '/webhooks/whk_1//'), 'unmatched');
  assert.equal(routeOf(r, 'GET', '/inboxes//messages'), 'unmatched');
});

test('parameters come back as sent (%-encoded); the pattern of every route starts with a literal segment', () => {
  const r = table();
  assert.deepEqual(r.match('DELETE', '/suppressions/a%40b.example')?.values, ['a%40b.example']);
  assert.deepEqual(r.match('GET', '/inboxes/inb_%2F1/messages')?.values, ['inb_%2F1']);
  assert.throws(() => r.get('/:id', () => ({ status: 204 })), /starts with a literal segment/);
  assert.throws(() => r.get('inboxes', () => ({ status: 204 })), /starts with a literal segment/);
});

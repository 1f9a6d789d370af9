// The metric primitives: label escaping of the text format, histogram buckets.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Counter, Histogram } from '../../src/metrics.ts';

test('counter labels are escaped as the text format requires', () => {
  const c = new Counter('x_total', 'help');
  c.inc({ route: 'a"b\\c\nd' }, 2);
  c.inc({ route: 'a"b\\c\nd' });
  assert.equal(c.get({ route: 'a"b\\c\nd' }), 3);
  assert.deepEqual(c.render(), ['# HELP x_total help', '# TYPE x_total counter', 'x_total{route="a\\"b\\\\c\\nd"} 3']);
});

test('histogram buckets are cumulative, with +Inf, sum and count', () => {
  const h = new Histogram('d_seconds', 'help', [0.1, 1]);
  h.observe({ r: 'x' }, 0.05);
  h.observe({ r: 'x' }, 0.5);
  h.observe({ r: 'x' }, 5);
  assert.deepEqual(h.render().slice(2), [
    'd_seconds_bucket{r="x",le="0.1"} 1',
    'd_seconds_bucket{r="x",le="1"} 2',
    'd_seconds_bucket{r="x",le="+Inf"} 3',
    'd_seconds_sum{r="x"} 5.55',
    'd_seconds_count{r="x"} 3',
  ]);
});

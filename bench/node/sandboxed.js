// The sandboxed processor of bench.js's `proc` case: BullMQ runs this file in a child
// process of the Worker (its sandbox), one job at a time per child. A job named `cpu`
// runs the same linear congruential loop as bench/peers/cpu_tasks.py, with its own
// iteration count, calibrated separately to about 20 ms of V8 on the bench machine (the
// same time, not the same instructions); any other job does nothing.
'use strict';

const ITERATIONS = 11500000; // about 1.74 ns an iteration here: ~20 ms

function burn(n) {
  let x = 1;
  for (let i = 0; i < n; i++) x = (Math.imul(x, 1103515245) + 12345) & 0x7fffffff;
  return x;
}

module.exports = async (job) => (job.name === 'cpu' ? burn(ITERATIONS) : null);
module.exports.burn = burn;
module.exports.ITERATIONS = ITERATIONS;

// webpack loader for zod's core util module: its `allowsEval` probe runs `new Function("")` to
// learn whether eval is allowed. In the extension's pages and content scripts it never is (the
// manifest's CSP has no 'unsafe-eval'), so the probe always answered false; this loader makes it
// say so without the Function constructor, which `web-ext lint` (AMO) reports as eval. The build
// fails if the probe is no longer where it was (a zod upgrade): look again then.
const PROBE = /const F = Function;\s*new F\(""\);\s*return true;/;

/* global module */
module.exports = function noEvalProbe(source) {
  if (!PROBE.test(source)) {
    throw new Error('no-eval-probe: zod’s allowsEval probe not found; check the zod version and this loader');
  }
  return source.replace(PROBE, 'return false; // the extension CSP forbids eval (build/no-eval-probe.cjs)');
};

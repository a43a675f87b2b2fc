#!/usr/bin/env node
// Browser checks of a page written by `probelake report`.
//
//   node tests/report/interact.mjs REPORT.html [--expect-op OP] [--screenshot OUT.png]
//
// Drives the system Chromium (Debian's chromium or chromium-headless-shell, or
// $PROBELAKE_CHROMIUM) through playwright-core; no browser is ever downloaded. Prints one line
// per check and exits non-zero at the first failure, saying what was expected.
import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

process.env.PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD = '1';
const { chromium } = await import('playwright-core');

// ---- arguments ----
const args = process.argv.slice(2);
let report = null;
let expectOp = null;
let screenshot = null;
for (let i = 0; i < args.length; i++) {
  if (args[i] === '--expect-op') expectOp = args[++i];
  else if (args[i] === '--screenshot') screenshot = args[++i];
  else if (!report) report = args[i];
  else usage(`unexpected argument ${args[i]}`);
}
if (!report) usage('no report file given');
if (expectOp === undefined) usage('--expect-op needs a value');
if (!existsSync(report)) usage(`no such file: ${report}`);

function usage(msg) {
  console.error(`interact.mjs: ${msg}\nusage: node interact.mjs REPORT.html [--expect-op OP] [--screenshot OUT.png]`);
  process.exit(2);
}

function findChromium() {
  const env = process.env.PROBELAKE_CHROMIUM;
  if (env) {
    if (!existsSync(env)) fail(`PROBELAKE_CHROMIUM=${env} does not exist`);
    return env;
  }
  for (const p of ['/usr/bin/chromium', '/usr/bin/chromium-headless-shell']) if (existsSync(p)) return p;
  fail('no system Chromium: apt-get install chromium-headless-shell (or set PROBELAKE_CHROMIUM)');
}

// ---- reporting ----
// A failed check throws CheckFailure; the handler at the bottom prints it and exits 1.
class CheckFailure extends Error {}
let browser = null;
function ok(msg) { console.log(`ok   ${msg}`); }
function fail(msg) { throw new CheckFailure(msg); }
function check(cond, okMsg, failMsg) { if (cond) ok(okMsg); else fail(failMsg); }

// ---- run ----
const url = pathToFileURL(resolve(report)).href;
const t0 = Date.now();
try {
  // The browser's own background traffic (updates, sync, safe browsing) is switched off: the
  // machine may have no network, and only the page's requests are under test.
  const args = ['--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking',
    '--disable-component-update', '--disable-sync', '--disable-quic'];
  browser = await chromium.launch({ executablePath: findChromium(), headless: true, args });
  const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
  const requests = []; // every URL the page asks for: must all be file: or data:
  const pageErrors = [];
  page.on('request', (r) => requests.push(r.url()));
  page.on('pageerror', (e) => pageErrors.push(String(e)));
  page.on('console', (m) => { if (m.type() === 'error') pageErrors.push(`console: ${m.text()}`); });

  await page.goto(url, { waitUntil: 'domcontentloaded', timeout: 120_000 });
  await page.waitForSelector('body[data-ready="1"]', { state: 'attached', timeout: 60_000 })
    .catch(() => fail('page never reached body[data-ready="1"] (60 s)'));
  const wall = Date.now() - t0;
  const readyMs = await page.getAttribute('body', 'data-ready-ms');
  ok(`page ready: performance.now() ${readyMs} ms at data-ready, ${wall} ms wall from launch`);

  // Only file: and data: URLs may be asked for, while loading and after each interaction.
  const checkRequests = (when) => {
    const bad = requests.filter((u) => !u.startsWith('file:') && !u.startsWith('data:'));
    check(bad.length === 0, `all ${requests.length} requests ${when} are file: or data:`, `the page made other requests ${when}:\n${bad.join('\n')}`);
  };
  checkRequests('while loading');

  const errs = await page.getAttribute('body', 'data-errors');
  check(errs === '', 'body[data-errors] is empty', `body[data-errors] is not empty:\n${errs}`);
  check(pageErrors.length === 0, 'no page errors or console errors', `page errors:\n${pageErrors.join('\n')}`);

  // What the tests need of the data: read through the page's own handle.
  const info = await page.evaluate(() => {
    const d = window.probelakeReport.data;
    const n = d.units && d.units.step ? d.units.step.length : 0;
    // A unit with embedded detail and a node that has a stack, to exercise the tree and detail.
    let stackUnit = -1;
    let stackNode = -1;
    let plainNode = -1;
    for (let u = 0; u < n && stackUnit < 0; u++) {
      const k = (d.units.detail || [])[u];
      const det = Number.isInteger(k) ? d.details[k] : null;
      if (!det) continue;
      const i = (det.nodes.stack || []).findIndex((s) => s >= 0 && Array.isArray((det.stacks || [])[s]));
      if (i >= 0) { stackUnit = u; stackNode = i; plainNode = det.nodes.parent.indexOf(-1); }
    }
    const det = stackUnit >= 0 ? d.details[d.units.detail[stackUnit]] : null;
    return {
      bare: d.units.detail ? d.units.detail.findIndex((k) => k === null) : -1,
      units: n,
      first: d.first,
      worst: d.worst && d.worst.name ? d.worst.name.length : 0,
      trends: d.trends && d.trends.name ? d.trends.name.length : 0,
      stackUnit, stackNode, plainNode,
      stackName: det ? det.nodes.name[stackNode] : null,
      stackFrames: det ? det.stacks[det.nodes.stack[stackNode]].length : 0,
      stages: Array.from({ length: n }, (_, u) => String(d.units.stage[u])),
      steps: Array.from({ length: n }, (_, u) => d.units.step[u]),
    };
  });

  // ---- verdict ----
  if (info.first) {
    const op = await page.textContent('#verdict-op');
    check(op === info.first.op, `#verdict-op shows the first diverging op: ${op}`, `#verdict-op is "${op}", data says "${info.first.op}"`);
    if (expectOp !== null) check(op === expectOp, `verdict op equals --expect-op`, `verdict op "${op}" is not the expected "${expectOp}"`);
    if (info.first.unit >= 0 && info.first.unit < info.units) {
      await page.click('#verdict-op');
      const u = await page.getAttribute('#unit-view', 'data-unit');
      check(u === String(info.first.unit), `clicking the verdict op opens unit ${u}`, `clicking #verdict-op left #unit-view at unit ${u}, not ${info.first.unit}`);
    }
  } else {
    const text = await page.textContent('#verdict');
    check(/No unit pair diverged/.test(text), 'verdict says no unit pair diverged', 'first is null but the verdict does not say so');
    if (expectOp !== null) fail(`--expect-op ${expectOp} given, but the report has no first divergence`);
  }
  for (const id of ['count-errors', 'count-nan', 'count-unmatched']) {
    check(await page.$(`#${id}`), `#${id} present`, `#${id} missing from the verdict`);
  }

  // ---- heatmap ----
  if (info.units) {
    const open = await page.getAttribute('#unit-view', 'data-unit');
    const cells = await page.$$eval('#heatmap .cell[data-unit]', (cs) => cs.map((c) => c.dataset.unit));
    check(cells.length > 0, `heatmap shows ${cells.length} cells for the current stage`, 'heatmap has no cells');
    const pick = cells.find((u) => u !== open) ?? cells[0];
    await page.click(`#heatmap .cell[data-unit="${pick}"]`);
    const now = await page.getAttribute('#unit-view', 'data-unit');
    const summary = await page.textContent('#unit-summary');
    check(now === pick && summary.includes(`step ${info.steps[+pick]}`),
      `clicking heatmap cell ${pick} opens that unit`, `clicked cell ${pick}; #unit-view shows unit ${now} ("${summary.slice(0, 80)}")`);
  }

  // ---- tree and node detail ----
  if (info.stackUnit >= 0) {
    // Reach the unit through its stage tab and heatmap cell, as a person would.
    await page.click(`#stage-tabs button[data-stage="${cssEscape(info.stages[info.stackUnit])}"]`);
    await page.click(`#heatmap .cell[data-unit="${info.stackUnit}"]`);
    check(await page.getAttribute('#unit-view', 'data-unit') === String(info.stackUnit),
      `opened unit ${info.stackUnit} (it has embedded detail)`, `could not open unit ${info.stackUnit}`);

    // A root: expand it lazily, then select it.
    // The tree opens scrolled to the first divergence, and only rows on screen exist (virtual
    // scrolling): scroll back to the top, where the roots are.
    await page.$eval('#tree', (el) => { el.scrollTop = 0; });
    const root = `#tree [data-node="${info.plainNode}"]`;
    await page.waitForSelector(root, { timeout: 5000 }).catch(() => fail(`root node ${info.plainNode} is not in the tree`));
    await page.click(root);
    const dn = await page.getAttribute('#node-detail', 'data-node');
    check(dn === String(info.plainNode), `opening tree node ${info.plainNode} shows its detail`, `#node-detail shows node ${dn}, not ${info.plainNode}`);

    // Lazy expansion: a closed group's children appear once its toggle is clicked.
    const closed = await page.getAttribute('#tree .trow[aria-expanded="false"]', 'data-node').catch(() => null);
    if (closed !== null) {
      const child = await page.evaluate(([u, i]) => {
        const d = window.probelakeReport.data;
        return d.details[d.units.detail[u]].nodes.parent.indexOf(i);
      }, [info.stackUnit, +closed]);
      await page.click(`#tree .trow[data-node="${closed}"] .tog`);
      await page.waitForSelector(`#tree [data-node="${child}"]`, { timeout: 5000 })
        .catch(() => fail(`expanding node ${closed} does not show its child ${child}`));
      ok(`expanding node ${closed} shows its child ${child}`);
    }

    // The node with a stack: find it with the search box, open it, read its stack.
    await page.fill('#tree-search', info.stackName);
    const sel = `#tree [data-node="${info.stackNode}"]`;
    await page.waitForSelector(sel, { timeout: 5000 }).catch(() => fail(`searching "${info.stackName}" does not show node ${info.stackNode}`));
    ok(`search shows node ${info.stackNode} (${info.stackName})`);
    await page.click(sel);
    const title = await page.textContent('#node-detail h3');
    check(title === info.stackName, `node detail shows ${title}`, `node detail title is "${title}", not "${info.stackName}"`);
    const frames = await page.$$eval('#node-stack li', (items) => items.length).catch(() => 0);
    check(frames === info.stackFrames, `#node-stack shows ${frames} frames, one item each`, `#node-stack shows ${frames} items, the data has ${info.stackFrames} frames`);
  } else {
    ok('no unit has a node with a stack: tree checks skipped');
  }

  // ---- a unit without embedded detail ----
  if (info.bare >= 0) {
    await page.evaluate((u) => window.probelakeReport.openUnit(u), info.bare);
    const text = await page.textContent('#tree');
    check(/compare's CSV/.test(text), `unit ${info.bare} (no embedded detail) points to compare's CSV`, `unit ${info.bare} has no detail, but #tree says "${text}"`);
  }

  // ---- worst rows and trends ----
  if (info.worst) {
    const r = await page.getAttribute('#worst-body .wrow', 'data-row');
    await page.click('#worst-body .wrow');
    const u = await page.getAttribute('#unit-view', 'data-unit');
    const want = await page.evaluate((k) => String(window.probelakeReport.data.worst.unit[k]), +r);
    check(u === want, `clicking worst row ${r} opens unit ${u}`, `worst row ${r} opened unit ${u}, not ${want}`);
  }
  if (info.trends) {
    check(await page.$('#trend-chart canvas'), 'trend chart drawn (uPlot canvas in #trend-chart)', 'no uPlot canvas in #trend-chart');
  }

  checkRequests('after interaction');
  const errs2 = await page.getAttribute('body', 'data-errors');
  check(errs2 === '' && pageErrors.length === 0, 'no errors after interaction', `errors after interaction:\n${errs2}\n${pageErrors.join('\n')}`);

  if (screenshot) {
    await page.evaluate(() => window.scrollTo(0, 0));
    await page.screenshot({ path: screenshot, fullPage: true });
    ok(`screenshot written to ${screenshot}`);
  }
  await browser.close();
  console.log('all checks passed');
} catch (e) {
  console.log(e instanceof CheckFailure ? `FAIL ${e.message}` : `FAIL unexpected error: ${(e && e.stack) || e}`);
  if (browser) await browser.close().catch(() => {});
  process.exit(1);
}

function cssEscape(s) { return s.replace(/["\\]/g, '\\$&'); }

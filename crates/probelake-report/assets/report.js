/* probelake report: the page's script.
 *
 * Plain ES2020, no framework, no modules, no network: the page is one offline HTML file under a
 * strict CSP, so everything is built with the DOM API and all handlers are attached with
 * addEventListener (inline handler attributes would be blocked). uPlot (vendor/) is loaded just
 * before this file as the global `uPlot`.
 *
 * Sections: 1 errors and boot · 2 helpers · 3 verdict · 4 legend and heatmap · 5 unit model ·
 * 6 virtual list · 7 tree view · 8 node detail · 9 trends · 10 worst rows · 11 start.
 *
 * Scale: a report can hold ~250k nodes and ~30 MB of JSON, so nothing is rendered per node up
 * front: a unit's tree is indexed only when opened, and the long lists (tree, worst rows) only
 * keep the rows that are on screen in the DOM.
 */
(function () {
  'use strict';

  /* ================= 1. Errors and boot ================= */

  // Tests read body[data-errors]; it must be "" unless something failed.
  const errors = [];
  document.body.dataset.errors = '';

  function recordError(msg) {
    errors.push(String(msg));
    document.body.dataset.errors = errors.join('\n');
    // Say so on the page too: a half-rendered report should not look complete.
    let banner = document.getElementById('errors');
    if (!banner) {
      banner = h('div', { id: 'errors', class: 'headline', role: 'alert' });
      document.body.prepend(banner);
    }
    banner.textContent = 'This report hit script errors; some parts may be missing:\n' + errors.join('\n');
  }
  window.addEventListener('error', (e) =>
    recordError(`${e.message}${e.filename ? ` (${e.filename}:${e.lineno})` : ''}`));
  window.addEventListener('unhandledrejection', (e) =>
    recordError(`unhandled rejection: ${(e.reason && e.reason.stack) || e.reason}`));

  /** Runs one rendering step; a failure is recorded and the other sections still render. */
  function guard(what, fn) {
    try {
      return fn();
    } catch (err) {
      recordError(`${what}: ${(err && err.stack) || err}`);
      return undefined;
    }
  }

  /* ================= 2. Helpers ================= */

  const ROW_H = 22; // px; equals --row-h in report.css (virtual lists place rows by it)
  const $ = (id) => document.getElementById(id);

  /** Creates an element. `text` sets textContent (never innerHTML: report data is untrusted). */
  function h(tag, attrs, ...kids) {
    const el = document.createElement(tag);
    if (attrs) {
      for (const k in attrs) {
        const v = attrs[k];
        if (v === null || v === undefined || v === false) continue;
        if (k === 'text') el.textContent = v;
        else el.setAttribute(k, v === true ? '' : v);
      }
    }
    for (const c of kids.flat()) if (c !== null && c !== undefined && c !== false) el.append(c);
    return el;
  }

  /** A column value, tolerant of absent columns (keys absent for a mode are left out). */
  const col = (obj, key, i) => (obj && Array.isArray(obj[key]) && i < obj[key].length ? obj[key][i] : null);
  const len = (obj, key) => (obj && Array.isArray(obj[key]) ? obj[key].length : 0);

  /** Decodes a number of the contract: number | "nan" | "inf" | "-inf" | null. */
  function num(v) {
    if (v === null || v === undefined) return null;
    if (typeof v === 'number') return v;
    if (v === 'nan') return NaN;
    if (v === 'inf') return Infinity;
    if (v === '-inf') return -Infinity;
    const x = Number(v);
    return Number.isNaN(x) ? null : x;
  }

  /** Severity, one comparable number: -1 nothing to compare, |r| if finite, Infinity for NaN/inf. */
  function sev(v) {
    const x = num(v);
    if (x === null) return -1;
    return Number.isFinite(x) ? Math.abs(x) : Infinity;
  }

  // msprobe's buckets. Compared with `<` rather than computed as floor(r / 0.2), which puts
  // 0.6 in the wrong bucket through rounding.
  const BUCKETS = [
    { key: 'b0', label: 'r < 20 %' },
    { key: 'b1', label: '20 ≤ r < 40 %' },
    { key: 'b2', label: '40 ≤ r < 60 %' },
    { key: 'b3', label: '60 ≤ r < 80 %' },
    { key: 'b4', label: 'r ≥ 80 %' },
    { key: 'nan', label: 'NaN / inf' },
    { key: 'unm', label: 'unmatched' },
    { key: 'none', label: 'nothing to compare' },
  ];
  function bucket(s, unmatched) {
    if (s === Infinity) return 'nan';
    if (s < 0) return unmatched ? 'unm' : 'none';
    return s < 0.2 ? 'b0' : s < 0.4 ? 'b1' : s < 0.6 ? 'b2' : s < 0.8 ? 'b3' : 'b4';
  }
  const bucketLabel = (k) => (BUCKETS.find((b) => b.key === k) || { label: k }).label;
  const chip = (k, title) => h('span', { class: `chip c-${k}`, title: title || bucketLabel(k), 'aria-hidden': 'true' });

  function fmt(v) {
    const x = num(v);
    if (x === null) return typeof v === 'string' ? v : '—';
    if (Number.isNaN(x)) return 'NaN';
    if (!Number.isFinite(x)) return x > 0 ? 'inf' : '-inf';
    if (x === 0) return '0';
    const a = Math.abs(x);
    if (Number.isInteger(x) && a < 1e9) return String(x);
    if (a >= 1e6 || a < 1e-3) return x.toExponential(3);
    return String(+x.toPrecision(5));
  }
  /** Relative errors are fractions in the data; people read msprobe's percentages. */
  function fmtRel(v) {
    const x = num(v);
    if (x === null || !Number.isFinite(x)) return fmt(v);
    const p = x * 100;
    const a = Math.abs(p);
    if (a === 0) return '0 %';
    return `${a >= 100 ? p.toFixed(0) : a >= 0.01 ? +p.toPrecision(3) : p.toExponential(1)} %`;
  }

  /** A severity (see sev) as text: the sign and NaN-vs-inf are gone by then. */
  const fmtSev = (s) => (s === Infinity ? 'NaN/inf' : s < 0 ? '—' : fmtRel(s));

  /* ================= 3. Data and verdict ================= */

  let D = null; // the report
  let NU = 0; // number of units
  const unitLabel = (u) => `step ${col(D.units, 'step', u)} · ${col(D.units, 'stage', u)} · rank ${col(D.units, 'rank', u)}`;

  function loadData() {
    const el = $('probelake-data');
    const d = JSON.parse(el.textContent);
    // Drop the text now that it is parsed: it can be tens of MB held twice otherwise.
    el.textContent = '';
    if (!d || typeof d !== 'object' || Array.isArray(d)) throw new Error('no report data is embedded in this page');
    d.units = d.units || {};
    d.details = Array.isArray(d.details) ? d.details : [];
    d.counts = d.counts || {};
    return d;
  }

  /** A link that opens a unit (and optionally one of its nodes) in the unit view. */
  function unitLink(text, unit, opts) {
    const a = h('a', { href: '#unit-section', 'data-unit': unit, text });
    a.addEventListener('click', (e) => {
      e.preventDefault();
      openUnit(unit, opts || {});
      $('unit-section').scrollIntoView({ block: 'start' });
    });
    return a;
  }

  /** The unit with the largest value of a units column (for the count links), or -1. */
  function unitWithMost(key) {
    let best = -1;
    for (let u = 0; u < NU; u++) if ((col(D.units, key, u) || 0) > 0 && (best < 0 || col(D.units, key, u) > col(D.units, key, best))) best = u;
    return best;
  }

  function renderVerdict() {
    const body = $('verdict-body');
    const f = D.first;
    const thr = fmtRel(D.threshold);
    const fu = f && Number.isInteger(f.unit) && f.unit >= 0 && f.unit < NU ? f.unit : -1;
    let head;
    if (f) {
      const op = h('a', { id: 'verdict-op', href: '#unit-section', 'data-unit': fu, text: f.op });
      op.addEventListener('click', (e) => {
        e.preventDefault();
        if (fu >= 0) openUnit(fu, { node: f.node });
        $('unit-section').scrollIntoView({ block: 'start' });
      });
      head = h('p', { class: 'headline' }, 'Earliest divergence: ', op,
        fu >= 0 ? [' at ', unitLink(unitLabel(fu), fu)] : '',
        ` — relative error ${fmtRel(f.rel_err)}, past the threshold of ${thr}.`);
    } else {
      head = h('p', { class: 'headline ok' }, `No unit pair diverged past the threshold of ${thr}.`);
    }
    const c = D.counts;
    const count = (id, key, label, filter) => {
      const item = h('span', null, h('span', { id, class: 'n', text: String(c[key] ?? 0) }), ` ${label}`);
      const u = unitWithMost(key);
      if (u < 0) return item;
      // The count links to the unit that has the most of it, with the matching tree filter.
      const a = unitLink('', u, { filter });
      a.append(item);
      a.title = `open ${unitLabel(u)}, the unit with the most`;
      return a;
    };
    const dl = h('dl');
    const row = (k, ...v) => dl.append(h('dt', { text: k }), h('dd', null, ...v));
    const run = (r) => (r ? [h('strong', { text: r.label || '' }), ' ', h('code', { text: r.uri || '' })] : '—');
    row('Target', run(D.target));
    row('Golden', run(D.golden));
    row('Mode', D.mode || '—');
    row('Threshold', thr);
    row('Units compared', String(c.units ?? NU), c.rows !== undefined ? ` (${c.rows} rows)` : '');
    if (f && Array.isArray(f.chain) && f.chain.length) {
      const det = fu >= 0 ? detailOf(fu) : null;
      const ol = h('ol', { class: 'chain mono' });
      for (const name of f.chain) {
        const node = det ? det.nodes.name.indexOf(name) : -1;
        ol.append(h('li', null, fu >= 0 ? unitLink(name, fu, { node: node >= 0 ? node : undefined }) : name));
      }
      row('Module chain', ol);
    }
    row('Rows', h('span', { class: 'counts' },
      count('count-errors', 'errors', 'with Result error', null),
      count('count-nan', 'nan_inf', 'NaN/inf', 'nan'),
      count('count-unmatched', 'unmatched', 'unmatched', 'unm'),
      h('span', null, h('span', { class: 'n', text: String(c.warnings ?? 0) }), ' warnings')));
    if (Array.isArray(D.notes) && D.notes.length) row('Pairing', h('ul', { class: 'chain' }, D.notes.map((n) => h('li', { text: n }))));
    body.replaceChildren(head, dl);
  }

  function renderHeader() {
    $('title').textContent = D.title || 'probelake report';
    $('generated').textContent = `generated ${D.generated || '?'} by probelake ${D.probelake || '?'}`;
  }

  /* ================= 4. Legend and heatmap ================= */

  const hm = { stages: [], stage: null, byFirst: false };
  const tip = $('tip'); // the heatmap's hover box

  function renderLegend() {
    const items = hm.byFirst
      ? [['p0', 'p < 20 %'], ['p1', '20 ≤ p < 40 %'], ['p2', '40 ≤ p < 60 %'], ['p3', '60 ≤ p < 80 %'],
        ['p4', 'p ≥ 80 %'], ['none', 'no divergence']]
      : BUCKETS.map((b) => [b.key, b.label]);
    const lead = hm.byFirst ? 'first divergence at p of execution order (darker = earlier):' : 'relative error r (msprobe buckets):';
    $('legend').replaceChildren(h('span', { class: 'muted', text: lead }),
      ...items.map(([k, t]) => h('span', { class: 'swatch' }, chip(k, t), t)));
  }

  function unitColour(u) {
    if (hm.byFirst) {
      const p = num(col(D.units, 'first_pos', u));
      if (p === null || !Number.isFinite(p)) return 'none';
      return p < 0.2 ? 'p0' : p < 0.4 ? 'p1' : p < 0.6 ? 'p2' : p < 0.8 ? 'p3' : 'p4';
    }
    return unitBucket(u);
  }
  const unitBucket = (u) => bucket(sev(col(D.units, 'worst', u)), (col(D.units, 'unmatched', u) || 0) > 0);

  function setupHeatmap() {
    for (let u = 0; u < NU; u++) {
      const s = String(col(D.units, 'stage', u));
      if (!hm.stages.includes(s)) hm.stages.push(s);
    }
    const tabs = $('stage-tabs');
    for (const s of hm.stages) {
      const b = h('button', { type: 'button', role: 'tab', 'data-stage': s, text: s });
      b.addEventListener('click', () => { hm.stage = s; renderHeatmap(); });
      tabs.append(b);
    }
    $('heatmap-by-first').addEventListener('change', (e) => {
      hm.byFirst = e.target.checked;
      renderLegend();
      renderHeatmap();
    });
    const grid = $('heatmap');
    grid.addEventListener('click', (e) => {
      const c = e.target.closest('.cell');
      if (c) openUnit(+c.dataset.unit, {});
    });
    grid.addEventListener('mouseover', (e) => {
      const c = e.target.closest('.cell');
      if (!c) return;
      const u = +c.dataset.unit;
      const t = `${unitLabel(u)}\nworst ${fmtRel(col(D.units, 'worst', u))} at ${col(D.units, 'worst_op', u) || '—'}` +
        `\nfirst divergence: ${col(D.units, 'first_op', u) || 'none'}` +
        (col(D.units, 'first_op', u) ? ` (${fmtRel(col(D.units, 'first_rel', u))})` : '');
      $('heatmap-info').textContent = t.replace(/\n/g, ' · ');
      tip.textContent = t;
      tip.hidden = false;
    });
    grid.addEventListener('mousemove', (e) => {
      tip.style.left = `${Math.min(e.clientX + 14, window.innerWidth - 300)}px`;
      tip.style.top = `${e.clientY + 16}px`;
    });
    grid.addEventListener('mouseleave', () => { tip.hidden = true; });
  }

  function renderHeatmap() {
    const grid = $('heatmap');
    if (!NU) {
      grid.replaceChildren(h('p', { class: 'empty', text: 'No units were compared.' }));
      return;
    }
    if (!hm.stages.includes(hm.stage)) hm.stage = hm.stages[0];
    for (const b of $('stage-tabs').children) b.setAttribute('aria-selected', String(b.dataset.stage === hm.stage));
    const us = [];
    for (let u = 0; u < NU; u++) if (String(col(D.units, 'stage', u)) === hm.stage) us.push(u);
    const steps = [...new Set(us.map((u) => col(D.units, 'step', u)))].sort((a, b) => a - b);
    const ranks = [...new Set(us.map((u) => col(D.units, 'rank', u)))].sort((a, b) => a - b);
    const at = new Map(us.map((u) => [`${col(D.units, 'step', u)}/${col(D.units, 'rank', u)}`, u]));
    // Cells shrink with the grid size, but not below a clickable few pixels.
    grid.style.gridTemplateColumns = `max-content repeat(${steps.length}, minmax(6px, ${steps.length > 40 ? '1fr' : '40px'}))`;
    grid.style.gridAutoRows = ranks.length > 32 ? '8px' : ranks.length > 12 ? '14px' : '22px';
    const frag = document.createDocumentFragment();
    // Step labels: one every `k` columns so that they never overlap.
    const k = Math.max(1, Math.ceil(steps.length / 25));
    frag.append(h('div', { class: 'axis', text: 'rank \\ step' }));
    for (let i = 0; i < steps.length; i += k) {
      const lab = h('div', { class: 'axis x', text: String(steps[i]) });
      lab.style.gridColumn = `span ${Math.min(k, steps.length - i)}`;
      frag.append(lab);
    }
    const firstUnit = D.first ? D.first.unit : -1;
    const rk = Math.max(1, Math.ceil(ranks.length / 32)); // rank labels, likewise
    ranks.forEach((r, ri) => {
      frag.append(h('div', { class: 'axis', text: ri % rk === 0 ? String(r) : '' }));
      for (const s of steps) {
        const u = at.get(`${s}/${r}`);
        if (u === undefined) { frag.append(h('div', { class: 'gap' })); continue; }
        const c = document.createElement('div');
        c.className = `cell c-${unitColour(u)}${u === firstUnit ? ' first' : ''}${u === openUnitIndex ? ' open' : ''}`;
        c.dataset.unit = u;
        frag.append(c);
      }
    });
    grid.replaceChildren(frag);
  }

  /** Marks the open unit's cell without rebuilding the grid. */
  function markOpenCell(u) {
    const grid = $('heatmap');
    for (const c of grid.querySelectorAll('.cell.open')) c.classList.remove('open');
    const c = grid.querySelector(`.cell[data-unit="${u}"]`);
    if (c) c.classList.add('open');
  }

  /* ================= 5. Unit model ================= */

  function detailOf(u) {
    const k = col(D.units, 'detail', u);
    const det = Number.isInteger(k) && k >= 0 && k < D.details.length ? D.details[k] : null;
    return det && det.nodes && Array.isArray(det.nodes.name) ? det : null;
  }

  /**
   * Indexes a unit's nodes once, in typed arrays: children lists (CSR form), a pre-order walk
   * with depths, each node's own severity and the worst over its descendants. O(nodes).
   */
  function buildModel(u, det) {
    const N = det.nodes;
    const n = N.name.length;
    const parent = new Int32Array(n);
    const nchild = new Int32Array(n + 1);
    for (let i = 0; i < n; i++) {
      const p = col(N, 'parent', i);
      parent[i] = Number.isInteger(p) && p >= 0 && p < n && p !== i ? p : -1;
      if (parent[i] >= 0) nchild[parent[i]]++;
    }
    const cstart = new Int32Array(n + 1);
    for (let i = 0; i < n; i++) cstart[i + 1] = cstart[i] + nchild[i];
    const clist = new Int32Array(cstart[n]);
    const fill = cstart.slice(0, n);
    const roots = [];
    for (let i = 0; i < n; i++) { // execution order is kept within each children list
      if (parent[i] >= 0) clist[fill[parent[i]]++] = i;
      else roots.push(i);
    }
    // Pre-order walk from the roots; nodes in a parent cycle are never reached and not shown.
    const order = new Int32Array(n);
    const depth = new Uint16Array(n);
    let m = 0;
    const stack = roots.slice().reverse();
    while (stack.length) {
      const i = stack.pop();
      order[m++] = i;
      for (let c = cstart[i + 1] - 1; c >= cstart[i]; c--) {
        depth[clist[c]] = depth[i] + 1;
        stack.push(clist[c]);
      }
    }
    const own = new Float64Array(n);
    const flags = new Uint8Array(n);
    for (let i = 0; i < n; i++) {
      own[i] = sev(col(N, 'worst', i));
      flags[i] = col(N, 'flags', i) || 0;
    }
    // Worst over descendants, children before parents (reverse pre-order).
    const below = new Float64Array(n).fill(-1);
    const belowFlags = new Uint8Array(n);
    for (let k = m - 1; k >= 0; k--) {
      const i = order[k];
      const p = parent[i];
      if (p < 0) continue;
      below[p] = Math.max(below[p], own[i], below[i]);
      belowFlags[p] |= flags[i] | belowFlags[i];
    }
    return {
      u, det, n, parent, cstart, clist, roots, order: order.subarray(0, m), depth, own, flags, below, belowFlags,
      open: new Set(), rowsOf: null, lower: null,
    };
  }

  const ownBucket = (M, i) => bucket(M.own[i], (M.flags[i] & 2) !== 0);
  const hasKids = (M, i) => M.cstart[i + 1] > M.cstart[i];

  /** Compare-row indices of each node (CSR), built on first use. */
  function rowsOf(M, i) {
    if (!M.rowsOf) {
      const rows = M.det.rows || {};
      const rn = len(rows, 'node');
      const cnt = new Int32Array(M.n + 1);
      for (let r = 0; r < rn; r++) { const x = rows.node[r]; if (x >= 0 && x < M.n) cnt[x + 1]++; }
      for (let i = 0; i < M.n; i++) cnt[i + 1] += cnt[i];
      const list = new Int32Array(cnt[M.n]);
      const fill = cnt.slice(0, M.n);
      for (let r = 0; r < rn; r++) { const x = rows.node[r]; if (x >= 0 && x < M.n) list[fill[x]++] = r; }
      M.rowsOf = { start: cnt, list };
    }
    return M.rowsOf.list.subarray(M.rowsOf.start[i], M.rowsOf.start[i + 1]);
  }

  /* ================= 6. Virtual list ================= */

  /**
   * A scroll container that keeps only the rows on screen (plus a margin) in the DOM.
   * `render(k)` builds row k; rows are `ROW_H` px tall and placed by one transform.
   */
  function VList(el, render) {
    const spacer = h('div', { class: 'spacer' });
    const rows = h('div', { class: 'rows' });
    el.append(spacer, rows);
    let count = 0;
    let raf = 0;
    function draw() {
      raf = 0;
      const height = el.clientHeight || 480;
      const a = Math.max(0, Math.floor(el.scrollTop / ROW_H) - 8);
      const b = Math.min(count, Math.ceil((el.scrollTop + height) / ROW_H) + 8);
      rows.style.transform = `translateY(${a * ROW_H}px)`;
      const frag = document.createDocumentFragment();
      for (let k = a; k < b; k++) frag.append(render(k));
      rows.replaceChildren(frag);
    }
    el.addEventListener('scroll', () => { if (!raf) raf = requestAnimationFrame(draw); }, { passive: true });
    return {
      el,
      setCount(c) { count = c; spacer.style.height = `${c * ROW_H}px`; draw(); },
      /** Shows a line of text instead of rows (an empty list says why it is empty). */
      showMessage(text) { this.setCount(0); rows.replaceChildren(h('p', { class: 'empty', text })); },
      redraw: draw,
      /** Scrolls row k into view (centred when it was off screen). */
      reveal(k) {
        const height = el.clientHeight || 480;
        const y = k * ROW_H;
        if (y < el.scrollTop || y + ROW_H > el.scrollTop + height) el.scrollTop = Math.max(0, y - height / 2);
        draw();
      },
    };
  }

  /* ================= 7. Unit view: summary and tree ================= */

  let openUnitIndex = -1;
  let M = null; // model of the open unit, null when it has no embedded detail
  let tree = null; // the tree's VList, made once by setupTree
  let visible = new Int32Array(0); // node index of each tree row on display
  let selNode = -1;
  const models = new Map(); // small cache: reopening a big unit stays instant
  const filters = { text: '', bucket: '', nan: false, unm: false };
  const filtering = () => filters.text !== '' || filters.bucket !== '' || filters.nan || filters.unm;

  /** Opens unit `u`; opts: node (select it), filter ('nan' | 'unm'), row (select that row name). */
  function openUnit(u, opts) {
    if (!(u >= 0 && u < NU)) return;
    openUnitIndex = u;
    const view = $('unit-view');
    view.dataset.unit = String(u);
    const stage = String(col(D.units, 'stage', u));
    if (stage !== hm.stage) { hm.stage = stage; guard('heatmap', renderHeatmap); } else markOpenCell(u);
    renderSummary(u);
    const det = detailOf(u);
    M = null;
    if (det) {
      M = models.get(u) || buildModel(u, det);
      models.set(u, M);
      if (models.size > 4) models.delete(models.keys().next().value);
    }
    // A fresh unit starts unfiltered, except when a link asks for one.
    Object.assign(filters, { text: '', bucket: '', nan: opts.filter === 'nan', unm: opts.filter === 'unm' });
    $('tree-search').value = '';
    $('tree-bucket').value = '';
    $('tree-nan').checked = filters.nan;
    $('tree-unmatched').checked = filters.unm;
    $('tree-filters').hidden = !M;
    selNode = -1;
    tree.el.scrollTop = 0;
    if (!M) {
      tree.showMessage('This unit\'s rows are not embedded in the report: they are in compare\'s CSV.');
      $('node-detail').replaceChildren(h('p', { class: 'empty', text: 'No node detail for this unit.' }));
      $('node-detail').removeAttribute('data-node');
      return;
    }
    let target = Number.isInteger(opts.node) ? opts.node : M.det.first_node;
    if (!(Number.isInteger(target) && target >= 0 && target < M.n)) target = -1;
    if (target >= 0) expandTo(target);
    else for (const r of M.roots.slice(0, 1)) M.open.add(r); // show the top level opened once
    refreshTree();
    if (target >= 0) selectNode(target, opts.row);
    else renderDetail();
  }

  function renderSummary(u) {
    const U = D.units;
    const fop = col(U, 'first_op', u);
    const parts = [
      h('strong', { text: unitLabel(u) }), `, compared with “${col(U, 'golden', u) ?? '?'}”: `,
      `${col(U, 'rows', u) ?? '?'} rows, ${col(U, 'errors', u) ?? 0} errors, ${col(U, 'nan_inf', u) ?? 0} NaN/inf, ` +
      `${col(U, 'unmatched', u) ?? 0} unmatched; worst `,
      chip(unitBucket(u)), ` ${fmtRel(col(U, 'worst', u))} at `, h('code', { text: col(U, 'worst_op', u) || '—' }),
      '; first divergence: ',
      fop ? [h('code', { text: fop }), ` (${fmtRel(col(U, 'first_rel', u))}, at ${fmtRel(col(U, 'first_pos', u))} of execution)`] : 'none',
      '.',
    ];
    $('unit-summary').replaceChildren(h('p', null, ...parts));
  }

  function expandTo(i) {
    // Bounded: a parent cycle in bad data must not hang the page.
    for (let p = M.parent[i], k = 0; p >= 0 && k < M.n; p = M.parent[p], k++) M.open.add(p);
  }

  /** Does node i pass the filters by itself? */
  function matches(i) {
    if (filters.nan && !((M.flags[i] & 1) || M.own[i] === Infinity)) return false;
    if (filters.unm && !(M.flags[i] & 2)) return false;
    if (filters.bucket && ownBucket(M, i) !== filters.bucket) return false;
    if (filters.text) {
      if (!M.lower) M.lower = M.det.nodes.name.map((s) => String(s).toLowerCase());
      if (!M.lower[i].includes(filters.text)) return false;
    }
    return true;
  }

  /**
   * Rebuilds the list of rows on display. Unfiltered: the roots, and the children of open
   * nodes only (lazy: a closed subtree costs nothing). Filtered: every match with its
   * ancestors, fully expanded, found in one reverse pass.
   */
  function refreshTree() {
    if (!M) return;
    const out = [];
    if (filtering()) {
      const keep = new Uint8Array(M.n);
      for (let k = M.order.length - 1; k >= 0; k--) {
        const i = M.order[k];
        if (keep[i] || matches(i)) { keep[i] = 1; if (M.parent[i] >= 0) keep[M.parent[i]] = 1; }
      }
      for (const i of M.order) if (keep[i]) out.push(i);
      let hits = 0;
      for (const i of out) if (matches(i)) hits++;
      $('tree-count').textContent = `${hits} matching of ${M.n} nodes`;
    } else {
      const stack = M.roots.slice().reverse();
      while (stack.length) {
        const i = stack.pop();
        out.push(i);
        if (M.open.has(i)) for (let c = M.cstart[i + 1] - 1; c >= M.cstart[i]; c--) stack.push(M.clist[c]);
      }
      $('tree-count').textContent = `${M.n} nodes`;
    }
    visible = Int32Array.from(out);
    if (visible.length) tree.setCount(visible.length);
    else tree.showMessage(M.n ? 'No node matches the filters.' : 'This unit has no nodes.');
  }

  function renderTreeRow(k) {
    const i = visible[k];
    const kids = hasKids(M, i);
    const open = filtering() || M.open.has(i);
    const row = h('div', {
      class: 'trow', role: 'treeitem', 'data-node': i, 'aria-level': M.depth[i] + 1,
      'aria-selected': String(i === selNode), 'aria-expanded': kids ? String(open) : null,
    });
    row.style.paddingLeft = `${4 + M.depth[i] * 14}px`;
    const name = String(M.det.nodes.name[i]);
    row.append(
      h('span', { class: 'tog', text: kids ? (open ? '▾' : '▸') : '' }),
      chip(ownBucket(M, i), `own worst: ${fmtRel(col(M.det.nodes, 'worst', i))}`),
      M.flags[i] & 4 ? h('span', { class: 'crit', title: 'critical: inputs within threshold, an output past it', text: '!' }) : '',
      h('span', { class: 'name', text: name, title: name }),
      M.own[i] >= 0 ? h('span', { class: 'muted', text: fmtRel(col(M.det.nodes, 'worst', i)) }) : '',
    );
    if (kids) {
      const b = bucket(M.below[i], (M.belowFlags[i] & 2) !== 0);
      row.append(h('span', { class: 'sub muted', title: 'worst over its descendants' }, '(below: ', chip(b), ` ${fmtSev(M.below[i])})`));
    }
    return row;
  }

  function toggle(i) {
    if (!M || !hasKids(M, i) || filtering()) return;
    if (M.open.has(i)) M.open.delete(i); else M.open.add(i);
    refreshTree();
  }

  function selectNode(i, rowName) {
    selNode = i;
    if (!filtering()) expandTo(i);
    refreshTree();
    const k = visible.indexOf(i);
    if (k >= 0) tree.reveal(k);
    renderDetail(rowName);
  }

  function setupTree() {
    const sel = $('tree-bucket');
    sel.append(h('option', { value: '', text: 'any colour' }), ...BUCKETS.map((b) => h('option', { value: b.key, text: b.label })));
    const el = $('tree');
    tree = VList(el, renderTreeRow);
    el.addEventListener('click', (e) => {
      const row = e.target.closest('.trow');
      if (!row) return;
      const i = +row.dataset.node;
      if (e.target.classList.contains('tog')) toggle(i);
      else if (i === selNode) toggle(i);
      else selectNode(i);
    });
    el.addEventListener('keydown', (e) => {
      if (!M || !visible.length) return;
      const k = Math.max(0, visible.indexOf(selNode));
      const i = visible[k];
      let next = -1;
      if (e.key === 'ArrowDown') next = visible[Math.min(visible.length - 1, k + 1)];
      else if (e.key === 'ArrowUp') next = visible[Math.max(0, k - 1)];
      else if (e.key === 'ArrowRight' && hasKids(M, i) && !M.open.has(i)) toggle(i);
      else if (e.key === 'ArrowLeft' && M.open.has(i)) toggle(i);
      else if (e.key === 'ArrowLeft' && M.parent[i] >= 0) next = M.parent[i];
      else if (e.key === 'Enter' || e.key === ' ') toggle(i);
      else return;
      e.preventDefault();
      if (next >= 0) selectNode(next);
    });
    // Search waits for a pause in typing: matching 100k names on every key would stutter.
    let timer = 0;
    $('tree-search').addEventListener('input', (e) => {
      clearTimeout(timer);
      timer = setTimeout(() => { filters.text = e.target.value.trim().toLowerCase(); guard('tree filter', refreshTree); }, 150);
    });
    const onChange = (id, key, get) => $(id).addEventListener('change', (e) => { filters[key] = get(e.target); guard('tree filter', refreshTree); });
    onChange('tree-bucket', 'bucket', (t) => t.value);
    onChange('tree-nan', 'nan', (t) => t.checked);
    onChange('tree-unmatched', 'unm', (t) => t.checked);
  }

  /* ================= 8. Node detail ================= */

  const STATS = ['max', 'min', 'mean', 'norm'];

  function renderDetail(rowName) {
    const box = $('node-detail');
    if (!M || selNode < 0) {
      box.removeAttribute('data-node');
      box.replaceChildren(h('p', { class: 'empty', text: M ? 'Select a node to see its rows.' : '' }));
      return;
    }
    const i = selNode;
    const N = M.det.nodes;
    const name = String(N.name[i]);
    box.dataset.node = String(i);
    const out = [h('h3', { class: 'mono', text: name })];
    const fl = M.flags[i];
    out.push(h('p', null, chip(ownBucket(M, i)), ` own worst ${fmtRel(col(N, 'worst', i))}`,
      hasKids(M, i) ? [' · worst below ', chip(bucket(M.below[i], (M.belowFlags[i] & 2) !== 0)), ` ${fmtSev(M.below[i])}`] : '',
      fl & 1 ? ' · NaN/inf in the target' : '', fl & 2 ? ' · has unmatched rows' : '', ' ',
      fl & 4 ? [h('span', { class: 'critical', text: 'critical' }), ' inputs within the threshold, an output past it'] : ''));
    const rs = rowsOf(M, i);
    if (!rs.length) {
      out.push(h('p', { class: 'muted', text: 'No compare rows of this node are embedded in the report: any it has are in compare\'s CSV.' }));
    }
    const shown = Math.min(rs.length, 200);
    for (let k = 0; k < shown; k++) out.push(renderIo(rs[k], name, rowName));
    if (rs.length > shown) out.push(h('p', { class: 'muted', text: `… and ${rs.length - shown} more rows (see compare's CSV).` }));
    const si = col(N, 'stack', i);
    const frames = Number.isInteger(si) && si >= 0 && Array.isArray(M.det.stacks) ? M.det.stacks[si] : null;
    // One item per frame: msprobe's frames hold a newline of their own (`line 39, in forward, \n x = ...`).
    if (Array.isArray(frames)) {
      out.push(h('h3', { text: 'Call stack' }), h('ol', { id: 'node-stack' }, frames.map((f) => h('li', { text: f }))));
    }
    out.push(h('div', { id: 'node-trend', class: 'chart' }));
    box.replaceChildren(...out);
    // Show a trend at once when one of the rows has one (the named row first); the big chart
    // in #trends only follows an explicit click, so browsing nodes does not move it.
    const withTrend = [...rs].filter((r) => trendOf(M.u, M.det.rows.name[r]) >= 0);
    const pick = withTrend.find((r) => M.det.rows.name[r] === rowName) ?? withTrend[0];
    if (pick !== undefined) showRowTrend(pick, false);
  }

  /** One compare row of the node: target and golden side by side, differences, Result. */
  function renderIo(r, nodeName, rowName) {
    const R = M.det.rows;
    const name = String(col(R, 'name', r));
    const short = name.startsWith(`${nodeName}.`) ? name.slice(nodeName.length + 1) : name;
    const gname = col(R, 'golden_name', r);
    const res = String(col(R, 'result', r) ?? '');
    const t = trendOf(M.u, name);
    const head = h('div', { class: 'io-head' },
      h('strong', { class: 'mono', text: short, title: name }),
      h('span', { class: 'muted', text: `${col(R, 'dtype', r) ?? ''} ${col(R, 'shape', r) ?? ''}` }),
      h('span', { class: `result-${res.toLowerCase()}`, text: res || '—' }),
      gname === null ? h('span', { class: 'muted', text: 'unmatched: no golden row' })
        : gname !== name ? h('span', { class: 'muted mono', text: `golden: ${gname}` }) : '');
    if (t >= 0) {
      const b = h('button', { type: 'button', class: 'link', 'data-trend': t, text: 'trend across steps' });
      b.addEventListener('click', () => showRowTrend(r, true));
      head.append(b);
    }
    const parts = [head];
    const cell = (v, rel) => h('td', { text: rel ? fmtRel(v) : fmt(v) });
    if (R.t_max || R.g_max) {
      const tb = h('table', { class: 'detail-table' },
        h('tr', null, ...['', 'target', 'golden', 'abs diff', 'rel diff'].map((x) => h('th', { text: x }))));
      for (const s of STATS) {
        tb.append(h('tr', null, h('th', { text: s }), cell(col(R, `t_${s}`, r)), cell(col(R, `g_${s}`, r)),
          cell(col(R, `abs_${s}`, r)), cell(col(R, `rel_${s}`, r), true)));
      }
      parts.push(tb);
    }
    if (R.t_md5 || R.g_md5) {
      const a = col(R, 't_md5', r);
      const b = col(R, 'g_md5', r);
      parts.push(h('table', { class: 'detail-table' },
        h('tr', null, h('th', { text: '' }), h('th', { text: 'target' }), h('th', { text: 'golden' }), h('th', { text: 'equal' })),
        h('tr', null, h('th', { text: 'md5' }), h('td', { text: a ?? '—' }), h('td', { text: b ?? '—' }),
          h('td', { class: a !== null && a === b ? '' : 'bad', text: a === null || b === null ? '—' : a === b ? 'yes' : 'no' }))));
    }
    if (R.metrics && typeof R.metrics === 'object') {
      const keys = Object.keys(R.metrics);
      if (keys.length) {
        parts.push(h('table', { class: 'detail-table' },
          h('tr', null, ...keys.map((k) => h('th', { text: k }))),
          h('tr', null, ...keys.map((k) => cell(col(R.metrics, k, r))))));
      }
    }
    const msg = col(R, 'message', r);
    if (msg && msg !== '[]') parts.push(h('div', { class: 'muted' }, 'Err_message: ', h('span', { class: 'mono', text: String(msg) })));
    return h('div', { class: `io${name === rowName ? ' sel' : ''}`, 'data-row': r }, ...parts);
  }

  /* ================= 9. Trends ================= */

  const trendIndex = new Map(); // "stage\0rank\0name" -> trend index
  const NT = () => len(D.trends, 'name');
  const trendKey = (stage, rank, name) => `${stage}\u0000${rank}\u0000${name}`;
  const trendOf = (u, name) => trendIndex.get(trendKey(col(D.units, 'stage', u), col(D.units, 'rank', u), name)) ?? -1;
  const trendTitle = (t) => `${col(D.trends, 'stage', t)} · rank ${col(D.trends, 'rank', t)} · ${col(D.trends, 'name', t)}`;

  function setupTrends() {
    for (let t = 0; t < NT(); t++) trendIndex.set(trendKey(D.trends.stage[t], D.trends.rank[t], D.trends.name[t]), t);
    const sel = $('trend-select');
    if (!NT()) {
      sel.hidden = true;
      $('trend-chart').replaceChildren(h('p', { class: 'empty', text: 'This report has no trends.' }));
      return;
    }
    for (let t = 0; t < NT(); t++) sel.append(h('option', { value: t, text: trendTitle(t) }));
    sel.addEventListener('change', () => drawTrend($('trend-chart'), +sel.value, false));
    // Start on the trend of the first divergence when there is one.
    let t0 = 0;
    const f = D.first;
    if (f && f.unit >= 0 && f.unit < NU) {
      for (let t = 0; t < NT(); t++) {
        if (D.trends.stage[t] === col(D.units, 'stage', f.unit) && D.trends.rank[t] === col(D.units, 'rank', f.unit) &&
          String(D.trends.name[t]).startsWith(`${f.op}.`)) { t0 = t; break; }
      }
    }
    sel.value = String(t0);
    drawTrend($('trend-chart'), t0, false);
  }

  /** Draws row r's trend in the node detail, and in the #trends chart too when `main`. */
  function showRowTrend(r, main) {
    const t = trendOf(M.u, M.det.rows.name[r]);
    if (t < 0) return;
    for (const io of $('node-detail').querySelectorAll('.io')) io.classList.toggle('sel', +io.dataset.row === r);
    const el = $('node-trend');
    el.replaceChildren(h('div', { class: 'muted', text: `${D.trends.stat || 'norm'} across steps: ${col(D.trends, 'name', t)}` }));
    drawTrend(el, t, true);
    if (main) {
      $('trend-select').value = String(t);
      drawTrend($('trend-chart'), t, false);
    }
  }

  // uPlot cannot draw NaN or inf; they become gaps.
  const plotNum = (v) => { const x = num(v); return x !== null && Number.isFinite(x) ? x : null; };

  /** Draws trend t into el with uPlot: target and golden on the left scale, rel. error on the right. */
  function drawTrend(el, t, small) {
    if (el.plot) { el.plot.destroy(); el.plot = null; }
    for (const old of el.querySelectorAll('.uplot, .empty')) old.remove();
    if (typeof uPlot !== 'function') {
      el.append(h('p', { class: 'empty', text: 'The chart library is not embedded in this page.' }));
      return;
    }
    const T = D.trends;
    const xs = (col(T, 'step', t) || []).map(Number);
    const series = (k) => xs.map((_, j) => plotNum((col(T, k, t) || [])[j]));
    const stat = T.stat || 'norm';
    const width = Math.max(280, Math.min(el.clientWidth || 600, small ? 520 : 1100));
    const opts = {
      width, height: small ? 180 : 300,
      scales: { x: { time: false }, v: {}, rel: {} },
      series: [
        { label: 'step' },
        { label: `target ${stat}`, scale: 'v', stroke: '#1a56b0', width: 2, points: { show: true } },
        { label: `golden ${stat}`, scale: 'v', stroke: '#555', dash: [6, 4], width: 2, points: { show: true } },
        { label: 'rel. error', scale: 'rel', stroke: '#d7301f', width: 1.5, value: (u, v) => fmtRel(v) },
      ],
      axes: [
        { label: small ? null : 'step', incrs: [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000] },
        { scale: 'v', label: small ? null : stat },
        { scale: 'rel', side: 1, grid: { show: false }, values: (u, vals) => vals.map(fmtRel), size: 60 },
      ],
    };
    el.plot = new uPlot(opts, [xs, series('t'), series('g'), series('rel')], el);
  }

  /* ================= 10. Worst rows ================= */

  const W = { view: new Int32Array(0), sort: 'rel', dir: -1, text: '', list: null };
  const WCOLS = [['unit', 'unit'], ['name', 'row'], ['rel', 'rel. error'], ['result', 'Result']];

  function worstValue(k, key) {
    if (key === 'rel') return sev(col(D.worst, 'rel', k));
    if (key === 'unit') return col(D.worst, 'unit', k);
    return String(col(D.worst, key, k) ?? '');
  }

  function refreshWorst() {
    const n = len(D.worst, 'name');
    const idx = [];
    const q = W.text;
    for (let k = 0; k < n; k++) {
      if (!q) { idx.push(k); continue; }
      const u = col(D.worst, 'unit', k);
      const hay = `${col(D.worst, 'name', k)} ${u >= 0 && u < NU ? unitLabel(u) : ''} ${col(D.worst, 'result', k)}`.toLowerCase();
      if (hay.includes(q)) idx.push(k);
    }
    const key = W.sort;
    idx.sort((a, b) => {
      const x = worstValue(a, key);
      const y = worstValue(b, key);
      return (x < y ? -1 : x > y ? 1 : a - b) * W.dir;
    });
    W.view = Int32Array.from(idx);
    $('worst-count').textContent = `${idx.length} of ${n} rows`;
    for (const b of $('worst-head').querySelectorAll('button')) {
      b.setAttribute('aria-sort', b.dataset.key === key ? (W.dir > 0 ? 'ascending' : 'descending') : 'none');
    }
    W.list.setCount(idx.length);
  }

  function renderWorstRow(k) {
    const r = W.view[k];
    const u = col(D.worst, 'unit', r);
    const res = String(col(D.worst, 'result', r) ?? '');
    const rel = col(D.worst, 'rel', r);
    return h('div', { class: 'wrow', role: 'row', 'data-row': r },
      h('span', { text: u >= 0 && u < NU ? unitLabel(u) : String(u) }),
      h('span', { class: 'mono', text: String(col(D.worst, 'name', r)), title: String(col(D.worst, 'name', r)) }),
      h('span', { class: 'num' }, chip(bucket(sev(rel), false)), ` ${fmtRel(rel)}`),
      h('span', { class: `result-${res.toLowerCase()}`, text: res }));
  }

  function setupWorst() {
    const head = $('worst-head');
    for (const [key, label] of WCOLS) {
      const b = h('button', { type: 'button', 'data-key': key, text: label });
      b.addEventListener('click', () => {
        W.dir = W.sort === key ? -W.dir : key === 'rel' ? -1 : 1;
        W.sort = key;
        refreshWorst();
      });
      head.append(h('span', { role: 'columnheader' }, b));
    }
    W.list = VList($('worst-body'), renderWorstRow);
    $('worst-body').addEventListener('click', (e) => {
      const row = e.target.closest('.wrow');
      if (!row) return;
      const r = +row.dataset.row;
      const node = col(D.worst, 'node', r);
      openUnit(col(D.worst, 'unit', r), { node: Number.isInteger(node) ? node : undefined, row: col(D.worst, 'name', r) });
      $('unit-section').scrollIntoView({ block: 'start' });
    });
    let timer = 0;
    $('worst-filter').addEventListener('input', (e) => {
      clearTimeout(timer);
      timer = setTimeout(() => { W.text = e.target.value.trim().toLowerCase(); guard('worst filter', refreshWorst); }, 120);
    });
    if (len(D.worst, 'name')) refreshWorst();
    else W.list.showMessage('No rows to list.');
  }

  /* ================= 11. Start ================= */

  function start() {
    D = loadData();
    NU = len(D.units, 'step');
    guard('header', renderHeader);
    guard('verdict', renderVerdict);
    guard('legend', renderLegend);
    guard('heatmap', () => { setupHeatmap(); renderHeatmap(); });
    guard('tree', setupTree);
    guard('trends', setupTrends);
    guard('worst rows', setupWorst);
    // Open the unit of the first divergence, or else the first unit.
    const f = D.first;
    const u0 = f && f.unit >= 0 && f.unit < NU ? f.unit : NU ? 0 : -1;
    if (u0 >= 0) guard('unit view', () => openUnit(u0, { node: f && f.unit === u0 ? f.node : undefined }));
    else $('unit-summary').textContent = 'No units were compared.';
  }

  guard('report', start);
  // A small handle for debugging and the browser tests (read-only use: data, open a unit).
  window.probelakeReport = { data: D, openUnit: (u, opts) => openUnit(u, opts || {}) };
  document.body.dataset.readyMs = String(Math.round(performance.now()));
  document.body.dataset.ready = '1';
}());

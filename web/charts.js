/* charts: curves of EpochMetrics against epoch. chart() draws one job's series on a <canvas>
 * (data-points: the epochs drawn, for the browser test); overlayChart() draws several jobs on
 * one SVG with shared axes, linear or log (one <polyline> per job and metric, with data-job,
 * data-metric and data-points; the svg with data-scale and data-y-min/max). Colours go in as
 * SVG attributes or through CSSOM, which the CSP allows where a style attribute would not. */
import {el} from './core.js';

/* ---- curves ---------------------------------------------------------------------------- */

const SERIES_CLASSES = ['train', 'validation'];
/* EpochMetrics' own members; any other is a script's metric (drawn on a curve of its own). */
export const KNOWN_METRICS = new Set(['epoch', 'loss', 'val_loss', 'accuracy', 'val_accuracy',
                               'seconds', 'samples_per_second']);

/* A tick label that fits the margin: three significant digits, exponent form when tiny. */
function tick(v) {
  const a = Math.abs(v);
  return a !== 0 && (a < 0.01 || a >= 1e5) ? v.toExponential(1) : String(+v.toPrecision(3));
}

/* A figure with a canvas drawing series [[key, label], ...] of EpochMetrics against epoch.
 * The canvas carries data-points (epochs drawn) for tests and assistive text for people. */
export function chart(id, label, series) {
  const canvas = el('canvas', {id, width: 480, height: 260, role: 'img', 'data-points': 0,
                               'aria-label': `${label}: no epochs yet`});
  const legend = el('ul', {class: 'legend'}, ...series.map(([, name], i) =>
    el('li', {class: SERIES_CLASSES[i]}, name)));
  const figure = el('figure', {class: 'chart'}, el('figcaption', {}, label), canvas, legend);
  const colors = () => {
    const cs = getComputedStyle(canvas);
    return {axis: cs.getPropertyValue('--axis').trim() || '#666',
            grid: cs.getPropertyValue('--grid').trim() || '#ddd',
            text: cs.getPropertyValue('--text').trim() || '#222',
            lines: [cs.getPropertyValue('--train').trim() || '#1f6fd1',
                    cs.getPropertyValue('--validation').trim() || '#d9730d']};
  };

  function draw(points) {
    const ratio = window.devicePixelRatio || 1;
    const w = canvas.clientWidth || 480, h = canvas.clientHeight || 260;
    if (canvas.width !== Math.round(w * ratio)) canvas.width = Math.round(w * ratio);
    if (canvas.height !== Math.round(h * ratio)) canvas.height = Math.round(h * ratio);
    const g = canvas.getContext('2d');
    g.setTransform(ratio, 0, 0, ratio, 0, 0);
    g.clearRect(0, 0, w, h);
    const c = colors();
    const pad = {l: 52, r: 12, t: 10, b: 30};
    const vals = [];
    for (const p of points)
      for (const [key] of series)
        if (typeof p[key] === 'number' && isFinite(p[key])) vals.push(p[key]);
    canvas.dataset.points = String(points.length);
    const last = points[points.length - 1];
    canvas.setAttribute('aria-label', last
      ? `${label} after epoch ${last.epoch}: ` + series.map(([k, n]) =>
        `${n} ${typeof last[k] === 'number' ? last[k].toPrecision(4) : 'none'}`).join(', ')
      : `${label}: no epochs yet`);
    g.font = '12px system-ui, sans-serif';
    g.fillStyle = c.text;
    if (vals.length === 0) {
      g.fillText(points.length ? 'not measured for this job' : 'waiting for the first epoch',
                 pad.l, h / 2);
      return;
    }
    let lo = Math.min(...vals), hi = Math.max(...vals);
    if (hi - lo < 1e-9) { lo -= 0.5; hi += 0.5; }
    const x1 = Math.max(points[points.length - 1].epoch, 2), x0 = 1;
    const px = (e) => pad.l + (e - x0) / (x1 - x0) * (w - pad.l - pad.r);
    const py = (v) => pad.t + (hi - v) / (hi - lo) * (h - pad.t - pad.b);
    /* grid and y ticks */
    g.strokeStyle = c.grid;
    g.lineWidth = 1;
    g.textAlign = 'right';
    g.textBaseline = 'middle';
    for (let i = 0; i <= 4; i++) {
      const v = lo + (hi - lo) * i / 4, y = py(v);
      g.beginPath(); g.moveTo(pad.l, y); g.lineTo(w - pad.r, y); g.stroke();
      g.fillText(tick(v), pad.l - 6, y);
    }
    /* x ticks: epochs */
    g.textAlign = 'center';
    g.textBaseline = 'top';
    const step = Math.max(1, Math.ceil((x1 - x0) / 8));
    for (let e = x0; e <= x1; e += step) g.fillText(String(e), px(e), h - pad.b + 6);
    g.fillText('epoch', (pad.l + w - pad.r) / 2, h - 14);
    /* axes */
    g.strokeStyle = c.axis;
    g.beginPath(); g.moveTo(pad.l, pad.t); g.lineTo(pad.l, h - pad.b);
    g.lineTo(w - pad.r, h - pad.b); g.stroke();
    /* series */
    series.forEach(([key], i) => {
      g.strokeStyle = g.fillStyle = c.lines[i];
      g.lineWidth = 2;
      g.setLineDash(i === 1 ? [6, 4] : []);
      g.beginPath();
      let started = false;
      for (const p of points) {
        if (typeof p[key] !== 'number') { started = false; continue; }
        if (started) g.lineTo(px(p.epoch), py(p[key]));
        else g.moveTo(px(p.epoch), py(p[key]));
        started = true;
      }
      g.stroke();
      g.setLineDash([]);
      for (const p of points)
        if (typeof p[key] === 'number') g.fillRect(px(p.epoch) - 2, py(p[key]) - 2, 4, 4);
    });
  }

  draw([]);
  return {figure, draw};
}

/* ---- overlaid curves (compare, sweep) ------------------------------------------------- */

const SVG_NS = 'http://www.w3.org/2000/svg';

function svgEl(tag, attrs, ...children) {
  const e = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs || {}))
    if (v !== null && v !== undefined && v !== false) e.setAttribute(k, String(v));
  for (const c of children) e.append(c instanceof Node ? c : String(c));
  return e;
}

/* One colour per job: a fixed set that reads on light and dark backgrounds, then hues a
 * golden angle apart. Set as SVG attributes or through CSSOM, which the CSP allows (a style
 * attribute in markup it would not). */
const PALETTE = ['#1f77d0', '#e0720b', '#2a9d3f', '#d0342c', '#8c56c8', '#12a0a0', '#b8860b',
                 '#d63384', '#6b8e23', '#5c6bc0'];
export function color(i) {
  return i < PALETTE.length ? PALETTE[i] : `hsl(${Math.round(i * 137.508) % 360} 65% 50%)`;
}

export function swatch(c, dashed) {
  const s = el('span', {class: 'swatch' + (dashed ? ' dashed' : ''), 'aria-hidden': 'true'});
  s.style.borderColor = c;
  return s;
}

export function fmt(v) {
  if (typeof v !== 'number') return v === undefined ? '—' : v === null ? 'null' : String(v);
  return Number.isInteger(v) ? String(v) : String(+v.toPrecision(4));
}

/* Ticks for [lo, hi]: about five at 1, 2, 2.5 or 5 times a power of ten (linear), or the
 * powers of ten themselves with 2..9 between them as unlabelled lines (log). */
function linearTicks(lo, hi) {
  if (hi - lo < 1e-12) {
    const d = Math.abs(lo) * 0.1 || 0.5;
    lo -= d; hi += d;
  }
  const raw = (hi - lo) / 5, mag = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 2.5, 5, 10].map((m) => m * mag).find((x) => x >= raw);
  const a = Math.floor(lo / step) * step, b = Math.ceil(hi / step) * step;
  const major = [];
  for (let i = 0; a + i * step <= b + step / 2; i++) major.push(+(a + i * step).toPrecision(12));
  return {lo: a, hi: b, major, minor: []};
}

/* A power of ten as people write it: 0.001 … 10000, else 1e-5. */
function decade(v) {
  const k = Math.round(Math.log10(v));
  return k >= -3 && k <= 4 ? String(+(10 ** k).toPrecision(1)) : `1e${k}`;
}

function logTicks(lo, hi) {
  const a = Math.floor(Math.log10(lo));
  const b = Math.max(Math.ceil(Math.log10(hi)), a + 1);
  const every = Math.ceil((b - a) / 8);
  const major = [], minor = [];
  for (let k = a; k <= b; k++) {
    if ((k - a) % every === 0) major.push(+(10 ** k).toPrecision(12));
    if (k < b && every === 1) for (let m = 2; m < 10; m++) minor.push(m * 10 ** k);
  }
  return {lo: 10 ** a, hi: 10 ** b, major, minor};
}

/* A figure with an SVG that draws several series on one pair of axes: epochs across, values
 * up, linear or (with `canLog`, a box in the caption) log, in a W × H viewBox that scales
 * to the figure's width. draw(series) takes
 * [{job, metric, label, color, dashed, bold, points: [[epoch, value], ...]}]; each becomes a
 * <polyline> carrying data-job, data-metric and data-points (values drawn), and the svg
 * carries data-scale, data-y-min and data-y-max (the axis' ends), for tests and tools.
 * A value that cannot be drawn (not a number; ≤ 0 on a log axis) breaks nothing, it is left
 * out and the aria-label says how many were. */
export function overlayChart(id, label, canLog, W = 640, H = 300) {
  const pad = {l: 58, r: 14, t: 12, b: 40};
  const svg = svgEl('svg', {id, class: 'overlay', viewBox: `0 0 ${W} ${H}`, role: 'img',
                            'data-scale': 'linear', 'aria-label': `${label}: no epochs yet`});
  const caption = el('figcaption', {}, el('span', {}, label));
  let scale = 'linear', last = [];
  if (canLog) {
    const box = el('input', {type: 'checkbox', id: id + '-log'});
    caption.append(el('label', {class: 'toggle', for: id + '-log'}, box, ' Log scale'));
    box.addEventListener('change', () => {
      scale = box.checked ? 'log' : 'linear';
      draw(last);
    });
  }
  const figure = el('figure', {class: 'chart'}, caption, svg);

  function draw(series) {
    last = series;
    const log = scale === 'log';
    const usable = (v) => typeof v === 'number' && isFinite(v) && (!log || v > 0);
    let lo = Infinity, hi = -Infinity, x1 = 2, left = 0;
    for (const s of series)
      for (const [e, v] of s.points) {
        if (!usable(v)) { left++; continue; }
        lo = Math.min(lo, v); hi = Math.max(hi, v); x1 = Math.max(x1, e);
      }
    svg.replaceChildren();
    svg.dataset.scale = scale;
    if (lo > hi) {
      svg.dataset.yMin = svg.dataset.yMax = '';
      svg.append(svgEl('text', {x: pad.l, y: H / 2, class: 'note'},
                       series.some((s) => s.points.length) ? 'nothing to draw on this axis'
                         : 'waiting for the first epoch'));
      svg.setAttribute('aria-label', `${label}: no values`);
      return;
    }
    const t = log ? logTicks(lo, hi) : linearTicks(lo, hi);
    svg.dataset.yMin = String(t.lo);
    svg.dataset.yMax = String(t.hi);
    const f = log ? Math.log10 : (v) => v;
    const x0 = 1;
    const px = (e) => pad.l + (e - x0) / (x1 - x0) * (W - pad.l - pad.r);
    const py = (v) => pad.t + (f(t.hi) - f(v)) / (f(t.hi) - f(t.lo)) * (H - pad.t - pad.b);
    const r2 = (n) => Math.round(n * 100) / 100;
    for (const v of t.minor)
      svg.append(svgEl('line', {class: 'grid minor', x1: pad.l, x2: W - pad.r,
                                y1: r2(py(v)), y2: r2(py(v))}));
    for (const v of t.major) {
      svg.append(svgEl('line', {class: 'grid', x1: pad.l, x2: W - pad.r,
                                y1: r2(py(v)), y2: r2(py(v))}));
      svg.append(svgEl('text', {class: 'tick y', x: pad.l - 6, y: r2(py(v))},
                       log ? decade(v) : tick(v)));
    }
    const step = Math.max(1, Math.ceil((x1 - x0) / 10));
    for (let e = x0; e <= x1; e += step)
      svg.append(svgEl('text', {class: 'tick x', x: r2(px(e)), y: H - pad.b + 16}, e));
    svg.append(svgEl('text', {class: 'axis-label', x: (pad.l + W - pad.r) / 2, y: H - 6},
                     'epoch'));
    svg.append(svgEl('path', {class: 'axis',
                              d: `M${pad.l} ${pad.t}V${H - pad.b}H${W - pad.r}`}));
    const said = [];
    for (const s of series) {
      const pts = s.points.filter(([, v]) => usable(v));
      if (pts.length === 0) continue;
      const line = svgEl('polyline', {
        class: 'series', fill: 'none', stroke: s.color, 'stroke-width': s.bold ? 3.5 : 2,
        'stroke-dasharray': s.dashed ? '7 4' : null, 'data-job': s.job,
        'data-metric': s.metric, 'data-points': pts.length,
        points: pts.map(([e, v]) => `${r2(px(e))},${r2(py(v))}`).join(' ')},
      svgEl('title', {}, s.label));
      svg.append(line);
      if (pts.length <= 60)
        for (const [e, v] of pts)
          svg.append(svgEl('circle', {class: 'dot', cx: r2(px(e)), cy: r2(py(v)), r: 2.5,
                                      fill: s.color},
                           svgEl('title', {}, `${s.label}, epoch ${e}: ${fmt(v)}`)));
      const [le, lv] = pts[pts.length - 1];
      said.push(`${s.label} ${fmt(lv)} at epoch ${le}`);
    }
    if (left)
      svg.append(svgEl('text', {class: 'note left-out', x: W - pad.r, y: pad.t + 4},
                       `${left} value${left === 1 ? '' : 's'} ` +
                       (log ? '≤ 0 not drawn on a log scale' : 'not drawn')));
    svg.setAttribute('aria-label', `${label}, ${scale} scale, ${said.length} curves on shared ` +
                     `axes: ${said.join('; ')}` + (left ? `; ${left} values not drawn` : ''));
  }

  draw([]);
  return {figure, draw};
}

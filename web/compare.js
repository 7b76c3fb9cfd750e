/* compare: the #compare=ID,ID,... view: picked jobs side by side, their curves overlaid on
 * shared axes and their hyperparameters flattened to leaves, a row whose values differ marked
 * with a visible "≠" and text for screen readers. An unfinished job is read again every
 * SWEEP_POLL_MS. */
import {$, AuthError, MAX_PICKED, SWEEP_POLL_MS, TERMINAL, apiJson, badge, el, mount} from './core.js';
import {KNOWN_METRICS, color, fmt, overlayChart, swatch} from './charts.js';

/* A job document's leaves by path: "hyperparameters.learning_rate", "model.layers[0].units".
 * An empty object or list is a leaf of its own, so it still shows. */
function flatten(v, prefix, out) {
  if (Array.isArray(v)) {
    if (v.length === 0 && prefix) out.set(prefix, []);
    v.forEach((x, i) => flatten(x, `${prefix}[${i}]`, out));
  } else if (v !== null && typeof v === 'object') {
    const keys = Object.keys(v);
    if (keys.length === 0 && prefix) out.set(prefix, {});
    for (const k of keys) flatten(v[k], prefix ? `${prefix}.${k}` : k, out);
  } else {
    out.set(prefix, v);
  }
  return out;
}

const show = (v) => v === undefined ? '—' : typeof v === 'string' ? v : JSON.stringify(v);

/* ---- #compare=ID,ID,... ---------------------------------------------------------------- */

export function compareView(scope, ids) {
  document.title = 'Compare · trainyard';
  ids = [...new Set(ids)].slice(0, MAX_PICKED);
  const loss = overlayChart('compare-loss', 'Loss', true);
  const acc = overlayChart('compare-accuracy', 'Accuracy', false);
  const charts = el('div', {class: 'charts'}, loss.figure, acc.figure);
  const legend = el('ul', {id: 'compare-legend', class: 'legend jobs',
                           'aria-label': 'Jobs and their colours'});
  const summary = el('table', {id: 'compare-summary', class: 'grid'});
  const hp = el('table', {id: 'hp-table', class: 'grid hp'});
  const onlyDiff = el('input', {type: 'checkbox', id: 'hp-only-diff'});
  const hpNote = el('p', {class: 'note', id: 'hp-note'});
  const n = ids.length;
  mount(el('div', {class: 'bar'}, el('h1', {}, `Compare ${n} job${n === 1 ? '' : 's'}`),
           el('a', {href: '#/jobs'}, 'Back to the jobs')),
        legend,
        el('p', {class: 'note'}, 'Solid lines: training; dashed: validation.'),
        el('h2', {}, 'Curves'), charts,
        el('h2', {}, 'Summary'), summary,
        el('div', {class: 'bar'}, el('h2', {}, 'Job documents'),
           el('label', {for: 'hp-only-diff'}, onlyDiff, ' Only rows that differ')),
        hpNote, hp);
  onlyDiff.addEventListener('change', () => hp.classList.toggle('only-diff', onlyDiff.checked));
  if (ids.length === 0) {
    $('view-error').textContent = 'No jobs to compare: pick them in the jobs table.';
    return;
  }

  const runs = new Map(ids.map((id, i) => [id, {id, color: color(i), job: null, epochs: []}]));
  const extra = new Map(); /* base name → chart, for metrics of a script's own names */

  async function load(r) {
    const base = '/jobs/' + encodeURIComponent(r.id);
    try {
      const [job, m] = await Promise.all([apiJson(base, {signal: scope.signal}),
                                          apiJson(base + '/metrics', {signal: scope.signal})]);
      r.job = job;
      r.epochs = m.epochs;
    } catch (e) {
      if (e instanceof AuthError || scope.stopped) throw e;
      r.error = String(e.message || e);
    }
  }

  const name = (r) => r.job ? r.job.name || r.id.slice(0, 12) : r.id.slice(0, 12);
  const series = (keys) => [...runs.values()].flatMap((r) => keys.map((k, i) => ({
    job: r.id, metric: k, label: `${name(r)} ${k}`, color: r.color, dashed: i === 1,
    points: r.epochs.map((m) => [m.epoch, m[k]])})));

  function render() {
    const list = [...runs.values()];
    legend.replaceChildren(...list.map((r) => el('li', {'data-job': r.id},
      swatch(r.color), el('a', {href: '#/jobs/' + encodeURIComponent(r.id)}, name(r)), ' ',
      r.job ? badge(r.job.status) : el('span', {class: 'error'}, r.error || 'loading'))));
    loss.draw(series(['loss', 'val_loss']));
    const accSeries = series(['accuracy', 'val_accuracy']);
    acc.figure.hidden = !accSeries.some((s) => s.points.some(([, v]) => typeof v === 'number'));
    acc.draw(accSeries);
    for (const r of list)
      for (const m of r.epochs)
        for (const key of Object.keys(m)) {
          if (KNOWN_METRICS.has(key)) continue;
          const b = key.startsWith('val_') ? key.slice(4) : key;
          if (!extra.has(b)) {
            const c = overlayChart(`compare-metric-${extra.size + 1}`, b, true);
            c.figure.dataset.metric = b;
            extra.set(b, c);
            charts.append(c.figure);
          }
        }
    for (const [b, c] of extra) c.draw(series([b, 'val_' + b]));

    const head = el('tr', {}, el('th', {scope: 'col'}, ''), ...list.map((r) =>
      el('th', {scope: 'col', 'data-job': r.id}, swatch(r.color), name(r))));
    const last = (r, k) => {
      for (let i = r.epochs.length - 1; i >= 0; i--)
        if (typeof r.epochs[i][k] === 'number') return r.epochs[i][k];
      return undefined;
    };
    const best = (r) => {
      let b = null;
      for (const m of r.epochs)
        if (typeof m.val_loss === 'number' && (!b || m.val_loss < b.val_loss)) b = m;
      return b ? `${fmt(b.val_loss)} (epoch ${b.epoch})` : '—';
    };
    const facts = [
      ['Status', (r) => r.job ? badge(r.job.status) : '—'],
      ['Epochs', (r) => String(r.epochs.length)],
      ['Last loss', (r) => fmt(last(r, 'loss'))],
      ['Last val_loss', (r) => fmt(last(r, 'val_loss'))],
      ['Best val_loss', best],
      ['Last val_accuracy', (r) => fmt(last(r, 'val_accuracy'))],
      ['Stopped early', (r) => r.job && r.job.stop_reason ? r.job.stop_reason : '—'],
    ];
    summary.replaceChildren(el('caption', {class: 'sr-only'}, 'Summary of each job'),
      el('thead', {}, head.cloneNode(true)),
      el('tbody', {}, ...facts.map(([k, fn]) => el('tr', {},
        el('th', {scope: 'row'}, k), ...list.map((r) => el('td', {}, fn(r)))))));

    /* Every leaf of every resolved document, in the order they first appear. */
    const flat = list.map((r) => flatten(r.job ? r.job.document : {}, '', new Map()));
    const keys = [];
    const seen = new Set();
    for (const f of flat)
      for (const k of f.keys()) if (!seen.has(k)) { seen.add(k); keys.push(k); }
    let differ = 0;
    const rows = keys.map((k) => {
      const vals = flat.map((f) => f.has(k) ? f.get(k) : undefined);
      const as = (v) => v === undefined ? '\u0000' : JSON.stringify(v); /* missing ≠ null */
      const d = new Set(vals.map(as)).size > 1;
      if (d) differ++;
      return el('tr', {'data-key': k, 'data-differs': d ? 'true' : 'false',
                       class: d ? 'differs' : null},
                el('th', {scope: 'row', class: 'mono'}, k,
                   d ? el('span', {class: 'mark', title: 'differs'}, ' ≠') : null,
                   d ? el('span', {class: 'sr-only'}, ' (differs)') : null),
                ...vals.map((v) => el('td', {class: 'mono'}, show(v))));
    });
    hp.replaceChildren(el('caption', {class: 'sr-only'},
                          'Every field of the resolved job documents; differing rows marked'),
                       el('thead', {}, head), el('tbody', {id: 'hp-body'}, ...rows));
    hpNote.textContent = `${differ} of ${keys.length} fields differ.`;
  }

  let first = true;
  scope.every(SWEEP_POLL_MS, async () => {
    /* A finished job's curves are final: only the others are read again. */
    const due = [...runs.values()].filter((r) => first || (r.job && !TERMINAL.has(r.job.status)));
    if (due.length === 0) return;
    first = false;
    await Promise.all(due.map(load));
    if (scope.stopped) return;
    const bad = [...runs.values()].filter((r) => r.error);
    $('view-error').textContent = bad.map((r) => `${r.id}: ${r.error}`).join('; ');
    render();
  });
}

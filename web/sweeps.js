/* sweeps: the #/sweeps view (the sweeps, polled) and #sweep=ID (one sweep: its leaderboard,
 * polled every SWEEP_POLL_MS, and every trial's curve, read a few at a time until the trial
 * has ended). */
import {AuthError, SWEEP_POLL_MS, TERMINAL, WORKERS_POLL_MS, apiJson, badge, clearError, el,
        mount, scopeError, when} from './core.js';
import {color, fmt, overlayChart, swatch} from './charts.js';

/* Fetches each of ids with fn, at most `width` at a time (a sweep can have many trials). */
async function eachLimited(ids, width, fn) {
  const queue = [...ids];
  const run = async () => { while (queue.length) await fn(queue.shift()); };
  await Promise.all(Array.from({length: Math.min(width, queue.length)}, run));
}

/* ---- #/sweeps ------------------------------------------------------------------------- */

export function sweepsView(scope) {
  document.title = 'Sweeps · trainyard';
  const body = el('tbody', {id: 'sweeps-body'});
  mount(el('h1', {}, 'Sweeps'),
        el('table', {id: 'sweeps-table', class: 'grid'},
           el('caption', {class: 'sr-only'}, 'Sweeps, newest first'),
           el('thead', {}, el('tr', {}, ...['Name', 'Status', 'Trials', 'Metric', 'Best',
                                            'Epochs', 'Created', 'Finished', 'Id']
             .map((h) => el('th', {scope: 'col'}, h)))),
           body));
  scope.every(WORKERS_POLL_MS, async () => {
    const page = await apiJson('/sweeps?limit=100', {signal: scope.signal});
    if (scope.stopped) return;
    clearError();
    const list = page.sweeps || [];
    body.replaceChildren(...(list.length ? list.map((s) => {
      const href = '#sweep=' + encodeURIComponent(s.id);
      const t = s.trials || {};
      const metric = (s.document && s.document.metric) || {};
      return el('tr', {'data-id': s.id, 'data-status': s.status},
                el('td', {}, el('a', {href}, s.name || '(unnamed)')),
                el('td', {}, badge(s.status)),
                el('td', {class: 'num'}, `${t.succeeded ?? 0} of ${t.created ?? 0}`),
                el('td', {}, metric.name ? `${metric.name} (${metric.mode || 'min'})` : '—'),
                el('td', {class: 'num'}, s.best ? fmt(s.best.value) : '—'),
                el('td', {class: 'num'}, s.epochs_total ?? '—'),
                el('td', {}, when(s.created_at)), el('td', {}, when(s.finished_at)),
                el('td', {class: 'mono'}, el('a', {href}, s.id.slice(0, 12))));
    }) : [el('tr', {}, el('td', {colspan: 9, class: 'note'},
                          'No sweeps yet: trainyard sweep submit starts one.'))]));
  });
}

/* ---- #sweep=ID ----------------------------------------------------------------------- */

export function sweepView(scope, id) {
  document.title = 'Sweep · trainyard';
  const base = '/sweeps/' + encodeURIComponent(id);
  const title = el('h1', {id: 'sweep-title'}, 'Sweep');
  const cancel = el('button', {id: 'sweep-cancel', type: 'button', class: 'danger',
                               disabled: true}, 'Cancel sweep');
  const facts = el('dl', {id: 'sweep-facts', class: 'facts', 'aria-live': 'polite'});
  const board = el('table', {id: 'leaderboard', class: 'grid'});
  const compareTop = el('a', {id: 'sweep-compare', hidden: true}, 'Compare the best three');
  let curves = null;
  const curvesBox = el('div', {class: 'charts one'});
  const failure = el('p', {id: 'sweep-error', class: 'error'});
  mount(el('div', {class: 'bar'}, title, cancel), failure, facts,
        el('div', {class: 'bar'}, el('h2', {}, 'Leaderboard'), compareTop),
        el('div', {class: 'scroll-x'}, board),
        el('h2', {}, 'Curves'), curvesBox);

  let sweep = null;
  const trials = new Map(); /* job id → {id, name, status, created, epochs, final} */
  cancel.addEventListener('click', async () => {
    cancel.disabled = true;
    try {
      showSweep(await apiJson(base + '/cancel', {method: 'POST', signal: scope.signal}));
    } catch (e) {
      if (!(e instanceof AuthError)) { scopeError(e); cancel.disabled = false; }
    }
  });

  function showSweep(s) {
    sweep = s;
    const metric = (s.document && s.document.metric) || {name: 'val_loss', mode: 'min'};
    title.replaceChildren(s.name || '(unnamed)', ' ', badge(s.status));
    document.title = `${s.name || s.id} · sweep · trainyard`;
    cancel.disabled = TERMINAL.has(s.status);
    failure.textContent = s.error || '';
    const t = s.trials || {};
    const rows = [
      ['Id', el('span', {class: 'mono'}, s.id)],
      ['Status', el('span', {id: 'sweep-status'}, s.status)],
      ['Metric', `${metric.name}, ${metric.mode === 'max' ? 'higher' : 'lower'} is better`],
      ['Trials', Object.entries(t).map(([k, v]) => `${v} ${k.replace('_', ' ')}`)
        .join(', ') || '—'],
      ['Epochs run', s.epochs_total ?? '—'],
      ['Best', s.best ? el('span', {}, `${fmt(s.best.value)} at epoch ${s.best.epoch}, `,
                           el('a', {href: '#/jobs/' + encodeURIComponent(s.best.job_id)},
                              trialName(s.best.job_id)))
        : '—'],
      ['Created', when(s.created_at)],
      ['Finished', when(s.finished_at)],
    ];
    facts.replaceChildren(...rows.flatMap(([k, v]) => [el('dt', {}, k), el('dd', {}, v)]));

    /* One column per searched parameter, in the order the sweep document gives them. */
    const params = Object.keys((s.document && s.document.parameters) || {});
    for (const e of s.leaderboard)
      for (const k of Object.keys(e.parameters || {})) if (!params.includes(k)) params.push(k);
    const ranked = s.leaderboard;
    board.replaceChildren(
      el('caption', {class: 'sr-only'}, `Trials, best ${metric.name} first`),
      el('thead', {}, el('tr', {},
        ...['Rank', 'Trial', 'Status'].map((h) => el('th', {scope: 'col'}, h)),
        ...params.map((p) => el('th', {scope: 'col', class: 'mono'}, p)),
        ...[metric.name, 'Epoch', 'Epochs run', 'Stop reason'].map(
          (h) => el('th', {scope: 'col'}, h)))),
      el('tbody', {id: 'leaderboard-body'}, ...ranked.map((e) => el('tr', {
        'data-job': e.job_id, 'data-rank': e.rank, class: s.best && s.best.job_id === e.job_id
          ? 'best' : null},
        el('td', {class: 'num'}, e.rank ?? '—'),
        el('td', {class: 'trial'}, swatch(trialColor(e.job_id)),
           el('a', {href: '#/jobs/' + encodeURIComponent(e.job_id)}, trialName(e.job_id))),
        el('td', {}, badge(e.status)),
        ...params.map((p) => el('td', {class: 'num mono'},
                                fmt((e.parameters || {})[p]))),
        el('td', {class: 'num', 'data-value': e.value ?? ''},
           e.value === null || e.value === undefined ? '—' : fmt(e.value)),
        el('td', {class: 'num'}, e.epoch ?? '—'),
        el('td', {class: 'num'}, e.epochs_run ?? '—'),
        el('td', {class: 'reason'}, e.stop_reason || '—')))));
    const top = ranked.filter((e) => e.value !== null && e.value !== undefined).slice(0, 3);
    compareTop.hidden = top.length < 2;
    compareTop.href = '#compare=' + top.map((e) => encodeURIComponent(e.job_id)).join(',');
    compareTop.textContent = `Compare the best ${top.length}`;

    if (!curves) {
      curves = overlayChart('sweep-chart', `${metric.name} of every trial`, true, 960, 380);
      curvesBox.append(curves.figure);
    }
    curves.draw(ranked.filter((e) => trials.has(e.job_id)).map((e) => {
      const r = trials.get(e.job_id);
      return {job: e.job_id, metric: metric.name, label: r.name, color: trialColor(e.job_id),
              bold: s.best && s.best.job_id === e.job_id,
              points: r.epochs.map((m) => [m.epoch, m[metric.name]])};
    }));
  }

  /* Colours follow the order trials were made (the n of "<sweep>-<n>"), so a trial keeps
   * its colour as ranks move. */
  function trialColor(jobId) {
    const order = [...trials.values()].sort((a, b) => a.seq - b.seq);
    const i = order.findIndex((r) => r.id === jobId);
    return color(i < 0 ? order.length : i);
  }
  function trialName(jobId) {
    const r = trials.get(jobId);
    return r && r.name ? r.name : jobId.slice(0, 12);
  }

  let ended = false;
  scope.every(SWEEP_POLL_MS, async () => {
    if (ended) return;
    const s = await apiJson(base, {signal: scope.signal});
    if (scope.stopped) return;
    clearError();
    /* The leaderboard lists every trial, with or without a value yet. */
    for (const e of s.leaderboard) {
      let r = trials.get(e.job_id);
      if (!r) {
        const n = /-(\d+)$/.exec(e.name || '');
        r = {id: e.job_id, epochs: [], final: false,
             seq: n ? Number(n[1]) : 1e9 + trials.size};
        trials.set(e.job_id, r);
      }
      r.name = e.name;
      r.status = e.status;
    }
    /* A finished trial's curve is read once more, then kept. */
    const due = [...trials.values()].filter((r) => !r.final);
    await eachLimited(due, 4, async (r) => {
      const m = await apiJson(`/jobs/${encodeURIComponent(r.id)}/metrics`,
                              {signal: scope.signal});
      r.epochs = m.epochs;
      if (TERMINAL.has(r.status)) r.final = true;
    });
    if (scope.stopped) return;
    showSweep(s);
    if (TERMINAL.has(s.status) && [...trials.values()].every((r) => r.final)) ended = true;
  });
}

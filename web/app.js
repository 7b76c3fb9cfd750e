/* trainyard's dashboard: one page, hash routes, no framework, nothing from another origin.
 *
 * Routes: #/jobs (the jobs table, polled; boxes pick jobs to compare), #/jobs/{id} (one job:
 * its state, curves, logs, artifacts, cancel), #compare=ID,ID,... (picked jobs side by side:
 * curves overlaid on shared axes, hyperparameters with the differences marked), #/sweeps (the
 * sweeps, polled), #sweep=ID (one sweep: leaderboard and every trial's curve), #/workers
 * (workers and devices, polled). The compare and sweep routes are links a person can share.
 *
 * The token is asked once and kept in sessionStorage; every call sends it as a Bearer header,
 * never in a URL. EventSource cannot send headers, so the event stream and the log follow are
 * read with fetch() and a stream reader; artifacts download through fetch() into a Blob link.
 * A 401 anywhere forgets nothing but sends the page back to the token form with the server's
 * sentence.
 *
 * Each view gets a scope: its timers and fetches stop when the route changes. */
'use strict';

(function () {
  const TOKEN_KEY = 'trainyard.token';
  const TERMINAL = new Set(['succeeded', 'failed', 'cancelled']);
  const JOBS_POLL_MS = 1500;
  const WORKERS_POLL_MS = 3000;
  const MAX_LOG_CHARS = 2000000; /* the log view keeps the tail past this */
  const PICKED_KEY = 'trainyard.picked'; /* the jobs picked for #compare, in sessionStorage */
  const MAX_PICKED = 12;
  const SWEEP_POLL_MS = 2000;

  const $ = (id) => document.getElementById(id);

  /* ---- small DOM helpers ---------------------------------------------------------------- */

  /* el('td', {class: 'x'}, 'text', child): an element with attributes and children. */
  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k === 'class') e.className = v;
      else e.setAttribute(k, v === true ? '' : String(v));
    }
    for (const c of children) {
      if (c === null || c === undefined) continue;
      e.append(c instanceof Node ? c : String(c));
    }
    return e;
  }

  function when(iso) {
    if (!iso) return '—';
    const d = new Date(iso);
    return isNaN(d) ? iso : d.toLocaleString();
  }

  function bytes(n) {
    const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
    let i = 0;
    while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
    return (i === 0 ? String(n) : n.toFixed(1)) + ' ' + units[i];
  }

  function badge(status) {
    return el('span', {class: 'badge st-' + status}, status);
  }

  /* ---- the API --------------------------------------------------------------------------- */

  class AuthError extends Error {}

  function token() { return sessionStorage.getItem(TOKEN_KEY); }

  function picked() {
    try {
      const ids = JSON.parse(sessionStorage.getItem(PICKED_KEY));
      return Array.isArray(ids) ? ids.filter((x) => typeof x === 'string') : [];
    } catch (e) {
      return [];
    }
  }

  function setPicked(ids) { sessionStorage.setItem(PICKED_KEY, JSON.stringify(ids)); }

  /* The sentence of a problem+json answer, else the status line. */
  async function problemText(res) {
    try {
      const p = await res.json();
      return p.detail || p.title || `${res.status} ${res.statusText}`;
    } catch (e) {
      return `${res.status} ${res.statusText}`;
    }
  }

  /* fetch() with the token; a 401 goes back to the token form (AuthError), any other error
   * status throws its problem's sentence. */
  async function api(path, opts) {
    opts = opts || {};
    const headers = Object.assign({Authorization: 'Bearer ' + token()}, opts.headers || {});
    const res = await fetch(path, Object.assign({}, opts, {headers, cache: 'no-store'}));
    if (res.status === 401) {
      const msg = await problemText(res);
      showLogin(msg);
      throw new AuthError(msg);
    }
    if (!res.ok) throw new Error(await problemText(res));
    return res;
  }

  async function apiJson(path, opts) {
    return (await api(path, opts)).json();
  }

  /* Reads a streamed answer, calling onText with each decoded piece, until it ends or the
   * scope stops. */
  async function readStream(scope, path, onText) {
    const res = await api(path, {signal: scope.signal});
    const reader = res.body.getReader();
    const dec = new TextDecoder();
    for (;;) {
      const {value, done} = await reader.read();
      if (done) break;
      onText(dec.decode(value, {stream: true}));
    }
    onText(dec.decode());
  }

  /* ---- scopes: what a view started, stopped when the route changes ------------------------ */

  let current = null;

  function newScope() {
    const ctl = new AbortController();
    const timers = [];
    return {
      signal: ctl.signal,
      get stopped() { return ctl.signal.aborted; },
      every(ms, fn) {
        const run = async () => {
          if (ctl.signal.aborted) return;
          try { await fn(); } catch (e) { if (!(e instanceof AuthError)) scopeError(e); }
          if (!ctl.signal.aborted) timers.push(setTimeout(run, ms));
        };
        run();
      },
      later(ms, fn) { timers.push(setTimeout(() => { if (!ctl.signal.aborted) fn(); }, ms)); },
      stop() { ctl.abort(); timers.forEach(clearTimeout); },
    };
  }

  function scopeError(e) {
    if (e.name === 'AbortError') return;
    const box = $('view-error');
    if (box) box.textContent = String(e.message || e);
  }

  function clearError() {
    const box = $('view-error');
    if (box) box.textContent = '';
  }

  /* ---- token form --------------------------------------------------------------------- */

  function showLogin(message) {
    if (current) current.stop();
    current = null;
    $('view').replaceChildren();
    $('login').hidden = false;
    $('forget').hidden = true;
    $('login-error').textContent = message || '';
    $('token-input').value = '';
    $('token-input').focus();
  }

  function setupLogin() {
    $('login-form').addEventListener('submit', (ev) => {
      ev.preventDefault();
      const t = $('token-input').value.trim();
      if (!t) return;
      sessionStorage.setItem(TOKEN_KEY, t);
      $('login').hidden = true;
      route();
    });
    $('forget').addEventListener('click', (ev) => {
      ev.preventDefault();
      sessionStorage.removeItem(TOKEN_KEY);
      showLogin('');
    });
  }

  /* ---- routing ---------------------------------------------------------------------------- */

  function route() {
    if (current) current.stop();
    current = null;
    if (!token()) {
      showLogin('');
      return;
    }
    $('login').hidden = true;
    $('forget').hidden = false;
    const hash = location.hash.replace(/^#/, '') || '/jobs';
    const parts = hash.split('/').filter(Boolean).map(decodeURIComponent);
    const scope = newScope();
    current = scope;
    let section = 'jobs';
    const compare = /^compare=(.*)$/.exec(hash), sweep = /^sweep=(.+)$/.exec(hash);
    if (compare) {
      compareView(scope, compare[1].split(',').map(decodeURIComponent).filter(Boolean));
    } else if (sweep) {
      section = 'sweeps';
      sweepView(scope, decodeURIComponent(sweep[1]));
    } else if (parts[0] === 'sweeps') {
      section = 'sweeps';
      sweepsView(scope);
    } else if (parts[0] === 'jobs' && parts.length === 2) {
      jobView(scope, parts[1]);
    } else if (parts[0] === 'workers') {
      section = 'workers';
      workersView(scope);
    } else {
      jobsView(scope);
    }
    document.querySelectorAll('[data-nav]').forEach((a) => {
      if (a.dataset.nav === section) a.setAttribute('aria-current', 'page');
      else a.removeAttribute('aria-current');
    });
  }

  function mount(...children) {
    $('view').replaceChildren(...children, el('p', {id: 'view-error', class: 'error',
                                                    role: 'alert'}));
  }

  /* ---- #/jobs ------------------------------------------------------------------------------ */

  function jobsView(scope) {
    document.title = 'Jobs · trainyard';
    const filter = el('select', {id: 'status-filter'},
                      el('option', {value: ''}, 'all'),
                      ...['queued', 'running', 'succeeded', 'failed', 'cancelled'].map(
                        (s) => el('option', {value: s}, s)));
    const body = el('tbody', {id: 'jobs-body'});
    const note = el('p', {class: 'note', id: 'jobs-note', 'aria-live': 'polite'});
    const table = el('table', {id: 'jobs-table', class: 'grid'},
                     el('caption', {class: 'sr-only'}, 'Jobs, newest first'),
                     el('thead', {}, el('tr', {},
                       el('th', {scope: 'col'}, el('span', {class: 'sr-only'}, 'Compare')),
                       ...['Name', 'Status', 'Phase', 'Attempt', 'Device', 'Created', 'Finished',
                           'Id'].map((h) => el('th', {scope: 'col'}, h)))),
                     body);
    const compare = el('button', {id: 'compare', type: 'button'});
    const clear = el('button', {id: 'compare-clear', type: 'button', class: 'link'},
                     'Clear picks');
    mount(el('div', {class: 'bar'}, el('h1', {}, 'Jobs'),
             el('div', {class: 'actions'}, compare, clear,
                el('label', {for: 'status-filter'}, 'Status ', filter))),
          table, note);
    filter.addEventListener('change', () => poll().catch(scopeError));

    /* The picks outlive a poll's new rows, a status filter and a visit to a job's page. */
    function showPicks() {
      const n = picked().length;
      compare.textContent = n ? `Compare ${n} picked` : 'Compare';
      compare.disabled = n < 2;
      compare.title = n < 2 ? 'Pick two or more jobs with the boxes in the table' : '';
      clear.hidden = n === 0;
    }
    showPicks();
    body.addEventListener('change', (ev) => {
      const box = ev.target;
      if (!box.dataset || !box.dataset.pick) return;
      const ids = picked().filter((x) => x !== box.dataset.pick);
      if (box.checked) ids.push(box.dataset.pick);
      if (ids.length > MAX_PICKED) {
        box.checked = false;
        $('view-error').textContent = `At most ${MAX_PICKED} jobs can be compared at once.`;
        return;
      }
      setPicked(ids);
      showPicks();
    });
    compare.addEventListener('click', () => {
      location.hash = 'compare=' + picked().map(encodeURIComponent).join(',');
    });
    clear.addEventListener('click', () => {
      setPicked([]);
      body.querySelectorAll('input[data-pick]').forEach((b) => { b.checked = false; });
      showPicks();
    });

    async function poll() {
      const q = new URLSearchParams({limit: '100'});
      if (filter.value) q.set('status', filter.value);
      const page = await apiJson('/jobs?' + q, {signal: scope.signal});
      if (scope.stopped) return;
      clearError();
      /* New rows every poll: keep the keyboard's place on a pick box. */
      const focused = document.activeElement && document.activeElement.dataset
        ? document.activeElement.dataset.pick : null;
      const picks = new Set(picked());
      body.replaceChildren(...page.jobs.map((j) => jobRow(j, picks)));
      if (focused) {
        const again = [...body.querySelectorAll('input[data-pick]')].find(
          (b) => b.dataset.pick === focused);
        if (again) again.focus();
      }
      note.textContent = page.jobs.length === 0 ? 'No jobs yet.'
        : page.next_cursor ? `The newest ${page.jobs.length} are shown.` : '';
    }
    scope.every(JOBS_POLL_MS, poll);
  }

  function jobRow(j, picks) {
    const href = '#/jobs/' + encodeURIComponent(j.id);
    const box = el('input', {type: 'checkbox', 'data-pick': j.id, checked: picks.has(j.id),
                             'aria-label': `Pick ${j.name || j.id} to compare`});
    return el('tr', {'data-id': j.id, 'data-status': j.status},
              el('td', {}, box),
              el('td', {class: 'name'}, el('a', {href}, j.name || '(unnamed)'),
                 j.sweep_id ? el('a', {href: '#sweep=' + encodeURIComponent(j.sweep_id),
                                       class: 'tag', title: 'The sweep this trial belongs to'},
                                 'sweep') : null),
              el('td', {}, badge(j.status)),
              el('td', {}, j.phase || '—'),
              el('td', {class: 'num'}, `${j.attempt}/${j.max_attempts}`),
              el('td', {}, j.device || '—'),
              el('td', {}, when(j.created_at)),
              el('td', {}, when(j.finished_at)),
              el('td', {class: 'mono'}, el('a', {href}, j.id.slice(0, 12))));
  }

  /* ---- #/jobs/{id} ----------------------------------------------------------------------- */

  function jobView(scope, id) {
    document.title = 'Job · trainyard';
    const base = '/jobs/' + encodeURIComponent(id);
    const title = el('h1', {id: 'job-title'}, 'Job');
    const cancel = el('button', {id: 'cancel', type: 'button', class: 'danger', disabled: true},
                      'Cancel job');
    const facts = el('dl', {id: 'job-facts', class: 'facts', 'aria-live': 'polite'});
    const loss = chart('loss-chart', 'Loss', [['loss', 'train'], ['val_loss', 'validation']]);
    const acc = chart('accuracy-chart', 'Accuracy',
                      [['accuracy', 'train'], ['val_accuracy', 'validation']]);
    const charts = el('div', {class: 'charts'}, loss.figure, acc.figure);
    const logs = el('pre', {id: 'logs', class: 'logs', tabindex: '0', 'aria-label': 'Log'});
    const artifacts = el('tbody', {id: 'artifacts-body'});
    const doc = el('pre', {id: 'job-document', class: 'doc'});
    mount(el('div', {class: 'bar'}, title, cancel),
          facts,
          el('h2', {}, 'Curves'),
          charts,
          el('h2', {}, 'Log'), logs,
          el('h2', {}, 'Artifacts'),
          el('table', {id: 'artifacts-table', class: 'grid'},
             el('thead', {}, el('tr', {}, ...['Name', 'Size', 'SHA-256', '']
               .map((h) => el('th', {scope: 'col'}, h)))),
             artifacts),
          el('h2', {}, 'Job document'), doc);

    let job = null;
    const epochs = new Map(); /* epoch → EpochMetrics; a resumed attempt replaces an epoch */

    function showJob(j) {
      /* An ended job never runs again, so a non-final state arriving after a final one is stale:
       * the cancel button's answer (the job as it was when the request was taken) can arrive
       * after the event stream has delivered "cancelled" and ended. */
      if (job && TERMINAL.has(job.status) && !TERMINAL.has(j.status)) return;
      const wasTerminal = job && TERMINAL.has(job.status);
      job = j;
      title.replaceChildren(j.name || '(unnamed)', ' ', badge(j.status));
      document.title = `${j.name || j.id} · trainyard`;
      const rows = [
        ['Id', el('span', {class: 'mono'}, j.id)],
        ['Status', el('span', {id: 'job-status'}, j.status +
                      (j.cancel_requested && !TERMINAL.has(j.status) ? ' (cancelling)' : ''))],
        ['Phase', j.phase || '—'],
        ['Attempt', `${j.attempt} of ${j.max_attempts}`],
        ['Priority', j.priority],
        ['Device', j.device || '—'],
        ['Worker', j.worker || '—'],
        ['Created', when(j.created_at)],
        ['Started', when(j.started_at)],
        ['Finished', when(j.finished_at)],
      ];
      if (j.sweep_id)
        rows.push(['Sweep', el('a', {id: 'job-sweep', class: 'mono',
                                     href: '#sweep=' + encodeURIComponent(j.sweep_id)},
                               j.sweep_id)]);
      if (j.stop_reason)
        rows.push(['Stopped early', j.stop_reason +
                   (j.stopped_epoch ? ` after epoch ${j.stopped_epoch}` : '')]);
      if (j.best_epoch) rows.push(['Best epoch', j.best_epoch]);
      if (j.error) rows.push(['Error', el('span', {class: 'error'}, j.error)]);
      facts.replaceChildren(...rows.flatMap(([k, v]) => [el('dt', {}, k), el('dd', {}, v)]));
      cancel.disabled = TERMINAL.has(j.status) || j.cancel_requested;
      const text = JSON.stringify(j.document, null, 2);
      if (doc.textContent !== text) doc.textContent = text;
      if (TERMINAL.has(j.status) && !wasTerminal) loadArtifacts().catch(scopeError);
    }

    /* A script's metrics under names of its own get a curve each, made when the name first
     * appears: X and val_X share one (train and validation), like loss and val_loss. */
    const extra = new Map(); /* base name → chart */
    function extraChart(key) {
      const base = key.startsWith('val_') ? key.slice(4) : key;
      if (!extra.has(base)) {
        const c = chart(`metric-chart-${extra.size + 1}`, base,
                        [[base, base], ['val_' + base, 'val_' + base]]);
        c.figure.dataset.metric = base;
        extra.set(base, c);
        charts.append(c.figure);
      }
    }

    function addEpoch(m) {
      epochs.set(m.epoch, m);
      for (const key of Object.keys(m))
        if (!KNOWN_METRICS.has(key)) extraChart(key);
      const points = [...epochs.values()].sort((a, b) => a.epoch - b.epoch);
      loss.draw(points);
      acc.draw(points);
      for (const c of extra.values()) c.draw(points);
    }

    async function loadArtifacts() {
      const list = (await apiJson(base + '/artifacts', {signal: scope.signal})).artifacts;
      artifacts.replaceChildren(...list.map((a) => {
        const button = el('button', {type: 'button', class: 'link'}, 'Download');
        button.addEventListener('click', () => download(scope, base, a.name, button));
        return el('tr', {'data-name': a.name},
                  el('td', {class: 'mono'}, a.name),
                  el('td', {class: 'num'}, bytes(a.size)),
                  el('td', {class: 'mono hash', title: a.sha256}, a.sha256.slice(0, 16) + '…'),
                  el('td', {}, button));
      }));
      if (list.length === 0)
        artifacts.replaceChildren(el('tr', {}, el('td', {colspan: 4, class: 'note'},
                                                  'None yet: they are uploaded when the job ends.')));
    }

    /* The event stream: status and per-epoch metrics as they happen. It ends when the job
     * does; cut earlier (a restart, a proxy), it is read again, which repeats the epochs so
     * far — harmless, they are keyed by epoch. */
    async function events() {
      let pending = '';
      await readStream(scope, base + '/events', (text) => {
        pending += text.replace(/\r\n?/g, '\n');
        let at;
        while ((at = pending.indexOf('\n\n')) >= 0) {
          const block = pending.slice(0, at);
          pending = pending.slice(at + 2);
          let name = 'message';
          const data = [];
          for (const line of block.split('\n')) {
            if (line.startsWith(':')) continue;
            const c = line.indexOf(':');
            const field = c < 0 ? line : line.slice(0, c);
            const value = c < 0 ? '' : line.slice(c + 1).replace(/^ /, '');
            if (field === 'event') name = value;
            else if (field === 'data') data.push(value);
          }
          if (data.length === 0) continue;
          const v = JSON.parse(data.join('\n'));
          if (name === 'status') showJob(v);
          else if (name === 'metrics') addEpoch(v);
        }
      });
    }

    async function follow(fn, what) {
      for (;;) {
        try {
          clearError();
          await fn();
        } catch (e) {
          if (e instanceof AuthError || scope.stopped) return;
          scopeError(new Error(`${what}: ${e.message || e}`));
        }
        if (scope.stopped || (job && TERMINAL.has(job.status))) return;
        await new Promise((ok) => scope.later(1000, ok));
        if (scope.stopped) return;
      }
    }

    /* The log, following until the job ends; a re-read starts over, so it replaces. */
    async function followLogs() {
      let first = true;
      await readStream(scope, base + '/logs?follow=true', (text) => {
        if (first) { logs.textContent = ''; first = false; }
        if (!text) return;
        const atEnd = logs.scrollTop + logs.clientHeight >= logs.scrollHeight - 4;
        let all = logs.textContent + text;
        if (all.length > MAX_LOG_CHARS) all = all.slice(all.length - MAX_LOG_CHARS);
        logs.textContent = all;
        if (atEnd) logs.scrollTop = logs.scrollHeight;
      });
    }

    cancel.addEventListener('click', async () => {
      cancel.disabled = true;
      try {
        showJob(await apiJson(base + '/cancel', {method: 'POST', signal: scope.signal}));
      } catch (e) {
        if (!(e instanceof AuthError)) { scopeError(e); cancel.disabled = false; }
      }
    });

    (async () => {
      try {
        showJob(await apiJson(base, {signal: scope.signal}));
      } catch (e) {
        if (!(e instanceof AuthError)) scopeError(e);
        return;
      }
      loadArtifacts().catch(scopeError);
      follow(events, 'events');
      follow(followLogs, 'log');
    })();
  }

  /* Downloads an artifact with the token in the header: fetch → Blob → a temporary link. */
  async function download(scope, base, name, button) {
    button.disabled = true;
    try {
      const res = await api(base + '/artifacts/' + encodeURIComponent(name),
                            {signal: scope.signal});
      const url = URL.createObjectURL(await res.blob());
      const a = el('a', {href: url, download: name, hidden: true});
      document.body.append(a);
      a.click();
      a.remove();
      setTimeout(() => URL.revokeObjectURL(url), 60000);
    } catch (e) {
      if (!(e instanceof AuthError)) scopeError(e);
    } finally {
      button.disabled = false;
    }
  }

  /* ---- curves ---------------------------------------------------------------------------- */

  const SERIES_CLASSES = ['train', 'validation'];
  /* EpochMetrics' own members; any other is a script's metric (drawn on a curve of its own). */
  const KNOWN_METRICS = new Set(['epoch', 'loss', 'val_loss', 'accuracy', 'val_accuracy',
                                 'seconds', 'samples_per_second']);

  /* A tick label that fits the margin: three significant digits, exponent form when tiny. */
  function tick(v) {
    const a = Math.abs(v);
    return a !== 0 && (a < 0.01 || a >= 1e5) ? v.toExponential(1) : String(+v.toPrecision(3));
  }

  /* A figure with a canvas drawing series [[key, label], ...] of EpochMetrics against epoch.
   * The canvas carries data-points (epochs drawn) for tests and assistive text for people. */
  function chart(id, label, series) {
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
  function color(i) {
    return i < PALETTE.length ? PALETTE[i] : `hsl(${Math.round(i * 137.508) % 360} 65% 50%)`;
  }

  function swatch(c, dashed) {
    const s = el('span', {class: 'swatch' + (dashed ? ' dashed' : ''), 'aria-hidden': 'true'});
    s.style.borderColor = c;
    return s;
  }

  function fmt(v) {
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
  function overlayChart(id, label, canLog, W = 640, H = 300) {
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

  /* Fetches each of ids with fn, at most `width` at a time (a sweep can have many trials). */
  async function eachLimited(ids, width, fn) {
    const queue = [...ids];
    const run = async () => { while (queue.length) await fn(queue.shift()); };
    await Promise.all(Array.from({length: Math.min(width, queue.length)}, run));
  }

  /* ---- #compare=ID,ID,... ---------------------------------------------------------------- */

  function compareView(scope, ids) {
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

  /* ---- #/sweeps ------------------------------------------------------------------------- */

  function sweepsView(scope) {
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

  function sweepView(scope, id) {
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

  /* ---- #/workers ------------------------------------------------------------------------- */

  function workersView(scope) {
    document.title = 'Workers · trainyard';
    const workers = el('tbody', {id: 'workers-body'});
    const devices = el('tbody', {id: 'devices-body'});
    const head = (...names) => el('thead', {}, el('tr', {}, ...names.map(
      (h) => el('th', {scope: 'col'}, h))));
    mount(el('h1', {}, 'Workers'),
          el('table', {id: 'workers-table', class: 'grid'},
             head('Name', 'Status', 'Job', 'Devices', 'Registered', 'Last seen', 'Id'), workers),
          el('h2', {}, 'Devices of live workers'),
          el('table', {id: 'devices-table', class: 'grid'},
             head('Device', 'Type', 'Platform', 'Compute units', 'Memory', 'OpenCL C', 'Worker'),
             devices));

    scope.every(WORKERS_POLL_MS, async () => {
      const [w, d] = await Promise.all([apiJson('/workers', {signal: scope.signal}),
                                        apiJson('/devices', {signal: scope.signal})]);
      if (scope.stopped) return;
      clearError();
      const none = (n, text) => el('tr', {}, el('td', {colspan: n, class: 'note'}, text));
      workers.replaceChildren(...(w.workers.length ? w.workers.map((x) => el('tr', {},
        el('td', {}, x.name), el('td', {}, badge(x.status)),
        el('td', {}, x.job ? el('a', {href: '#/jobs/' + encodeURIComponent(x.job),
                                      class: 'mono'}, x.job.slice(0, 12)) : '—'),
        el('td', {}, x.devices.map((v) => v.name).join(', ') || '—'),
        el('td', {}, when(x.registered_at)), el('td', {}, when(x.last_seen_at)),
        el('td', {class: 'mono'}, x.id.slice(0, 12)))) : [none(7, 'No workers.')]));
      devices.replaceChildren(...(d.devices.length ? d.devices.map((x) => el('tr', {},
        el('td', {}, x.name), el('td', {}, x.type), el('td', {}, x.platform || '—'),
        el('td', {class: 'num'}, x.compute_units ?? '—'),
        el('td', {class: 'num'}, x.global_mem_bytes ? bytes(x.global_mem_bytes) : '—'),
        el('td', {}, x.opencl_c_version || '—'),
        el('td', {class: 'mono'}, x.worker.slice(0, 12)))) : [none(7, 'No live devices.')]));
    });
  }

  /* ---- start ------------------------------------------------------------------------------ */

  setupLogin();
  window.addEventListener('hashchange', route);
  route();
})();

/* trainyard's dashboard: one page, hash routes, no framework, nothing from another origin.
 *
 * Routes: #/jobs (the jobs table, polled), #/jobs/{id} (one job: its state, curves, logs,
 * artifacts, cancel), #/workers (workers and devices, polled).
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
    if (parts[0] === 'jobs' && parts.length === 2) {
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
                     el('thead', {}, el('tr', {}, ...['Name', 'Status', 'Phase', 'Attempt',
                                                      'Device', 'Created', 'Finished', 'Id']
                       .map((h) => el('th', {scope: 'col'}, h)))),
                     body);
    mount(el('div', {class: 'bar'}, el('h1', {}, 'Jobs'),
             el('label', {for: 'status-filter'}, 'Status ', filter)),
          table, note);
    filter.addEventListener('change', () => poll().catch(scopeError));

    async function poll() {
      const q = new URLSearchParams({limit: '100'});
      if (filter.value) q.set('status', filter.value);
      const page = await apiJson('/jobs?' + q, {signal: scope.signal});
      if (scope.stopped) return;
      clearError();
      body.replaceChildren(...page.jobs.map(jobRow));
      note.textContent = page.jobs.length === 0 ? 'No jobs yet.'
        : page.next_cursor ? `The newest ${page.jobs.length} are shown.` : '';
    }
    scope.every(JOBS_POLL_MS, poll);
  }

  function jobRow(j) {
    const href = '#/jobs/' + encodeURIComponent(j.id);
    return el('tr', {'data-id': j.id, 'data-status': j.status},
              el('td', {}, el('a', {href}, j.name || '(unnamed)')),
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

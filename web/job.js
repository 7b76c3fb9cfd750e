/* job: the #/jobs/{id} view: one job's state, curves (the event stream read with fetch(),
 * re-read when cut before the job ended), log follow (its tail kept past MAX_LOG_CHARS),
 * artifacts downloaded through fetch() into a Blob, the resolved document, and cancel. */
import {AuthError, TERMINAL, api, apiJson, badge, bytes, clearError, el, mount, readStream,
        scopeError, when} from './core.js';
import {KNOWN_METRICS, chart} from './charts.js';

const MAX_LOG_CHARS = 2000000; /* the log view keeps the tail past this */

/* ---- #/jobs/{id} ----------------------------------------------------------------------- */

export function jobView(scope, id) {
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
    /* the event stream's status carries no reason: a job still queued keeps the last one read */
    if (j.waiting === undefined && job && j.status === 'queued') j.waiting = job.waiting;
    job = j;
    title.replaceChildren(j.name || '(unnamed)', ' ', badge(j.status));
    document.title = `${j.name || j.id} · trainyard`;
    const rows = [
      ['Id', el('span', {class: 'mono'}, j.id)],
      ['Status', el('span', {id: 'job-status'}, j.status +
                    (j.cancel_requested && !TERMINAL.has(j.status) ? ' (cancelling)' : ''))],
      ['Phase', j.phase || '—'],
      ...(j.waiting ? [['Waiting', el('span', {id: 'job-waiting'}, j.waiting.message)]] : []),
      ...(j.retry_at ? [['Retry at', el('span', {id: 'job-retry-at'}, when(j.retry_at))]] : []),
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

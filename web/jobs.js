/* jobs: the #/jobs view, the jobs table polled every JOBS_POLL_MS, with boxes that pick jobs
 * for #compare (kept in sessionStorage across polls). */
import {$, MAX_PICKED, apiJson, badge, clearError, el, mount, picked, scopeError, setPicked, when} from './core.js';

const JOBS_POLL_MS = 1500;

/* ---- #/jobs ------------------------------------------------------------------------------ */

export function jobsView(scope) {
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

/* A queued job's reason in a few words for the table (the whole sentence is its tooltip). */
function waitingShort(w) {
  const words = {no_worker: 'no worker connected', no_capable_worker: 'no worker can take it',
                 workers_busy: 'next: workers busy', starting: 'starting', slurm: 'held by Slurm',
                 retry_backoff: 'retry backing off', token_cap: "token's cap reached"};
  if (w.reason === 'behind_jobs') return `behind ${w.jobs_ahead} job(s)`;
  return words[w.reason] || w.reason;
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
            el('td', {title: j.waiting ? j.waiting.message : ''}, badge(j.status)),
            el('td', {class: j.waiting ? 'waiting' : '', title: j.waiting ? j.waiting.message : ''},
               j.phase || (j.waiting ? waitingShort(j.waiting) : '—')),
            el('td', {class: 'num'}, `${j.attempt}/${j.max_attempts}`),
            el('td', {}, j.device || '—'),
            el('td', {}, when(j.created_at)),
            el('td', {}, when(j.finished_at)),
            el('td', {class: 'mono'}, el('a', {href}, j.id.slice(0, 12))));
}

/* workers: the #/workers view: workers and the devices of live ones, polled every
 * WORKERS_POLL_MS. */
import {WORKERS_POLL_MS, apiJson, badge, bytes, clearError, el, mount, when} from './core.js';

/* ---- #/workers ------------------------------------------------------------------------- */

export function workersView(scope) {
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

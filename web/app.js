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
 * Each view gets a scope: its timers and fetches stop when the route changes.
 *
 * The page loads this file as an ES module, and it imports the rest (all in web/, served from
 * /web/, so the CSP's script-src 'self' admits them): core.js (DOM helpers, the API, scopes),
 * charts.js (canvas and SVG curves), and one file per view: jobs.js, job.js, compare.js,
 * sweeps.js, workers.js. This file holds the token form and the routes. */
import {$, TOKEN_KEY, showLogin, startView, stopView, token} from './core.js';
import {jobsView} from './jobs.js';
import {jobView} from './job.js';
import {compareView} from './compare.js';
import {sweepView, sweepsView} from './sweeps.js';
import {workersView} from './workers.js';

/* ---- token form ------------------------------------------------------------------------ */

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
  stopView();
  if (!token()) {
    showLogin('');
    return;
  }
  $('login').hidden = true;
  $('forget').hidden = false;
  const hash = location.hash.replace(/^#/, '') || '/jobs';
  const parts = hash.split('/').filter(Boolean).map(decodeURIComponent);
  const scope = startView();
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

/* ---- start ------------------------------------------------------------------------------ */

setupLogin();
window.addEventListener('hashchange', route);
route();

/* core: what every view of the dashboard uses: DOM helpers, the API with the token (a 401
 * goes back to the token form with the server's sentence), streamed reads, the jobs picked for
 * #compare (sessionStorage), and scopes: each view gets one, and its timers and fetches stop
 * when the route changes (startView / stopView). */
export const TOKEN_KEY = 'trainyard.token';
export const TERMINAL = new Set(['succeeded', 'failed', 'cancelled']);
export const WORKERS_POLL_MS = 3000;
const PICKED_KEY = 'trainyard.picked'; /* the jobs picked for #compare, in sessionStorage */
export const MAX_PICKED = 12;
export const SWEEP_POLL_MS = 2000;

export const $ = (id) => document.getElementById(id);

/* ---- small DOM helpers ---------------------------------------------------------------- */

/* el('td', {class: 'x'}, 'text', child): an element with attributes and children. */
export function el(tag, attrs, ...children) {
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

export function when(iso) {
  if (!iso) return '—';
  const d = new Date(iso);
  return isNaN(d) ? iso : d.toLocaleString();
}

export function bytes(n) {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return (i === 0 ? String(n) : n.toFixed(1)) + ' ' + units[i];
}

export function badge(status) {
  return el('span', {class: 'badge st-' + status}, status);
}

/* ---- the API --------------------------------------------------------------------------- */

export class AuthError extends Error {}

export function token() { return sessionStorage.getItem(TOKEN_KEY); }

export function picked() {
  try {
    const ids = JSON.parse(sessionStorage.getItem(PICKED_KEY));
    return Array.isArray(ids) ? ids.filter((x) => typeof x === 'string') : [];
  } catch (e) {
    return [];
  }
}

export function setPicked(ids) { sessionStorage.setItem(PICKED_KEY, JSON.stringify(ids)); }

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
export async function api(path, opts) {
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

export async function apiJson(path, opts) {
  return (await api(path, opts)).json();
}

/* Reads a streamed answer, calling onText with each decoded piece, until it ends or the
 * scope stops. */
export async function readStream(scope, path, onText) {
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

let current = null; /* the scope of the view on screen */

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

/* Stops the view on screen: its timers and fetches. */
export function stopView() {
  if (current) current.stop();
  current = null;
}

/* A scope for the view about to be mounted, which becomes the one on screen. */
export function startView() {
  current = newScope();
  return current;
}

export function scopeError(e) {
  if (e.name === 'AbortError') return;
  const box = $('view-error');
  if (box) box.textContent = String(e.message || e);
}

export function clearError() {
  const box = $('view-error');
  if (box) box.textContent = '';
}

export function showLogin(message) {
  stopView();
  $('view').replaceChildren();
  $('login').hidden = false;
  $('forget').hidden = true;
  $('login-error').textContent = message || '';
  $('token-input').value = '';
  $('token-input').focus();
}

export function mount(...children) {
  $('view').replaceChildren(...children, el('p', {id: 'view-error', class: 'error',
                                                  role: 'alert'}));
}

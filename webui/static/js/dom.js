// Small DOM and formatting helpers.

// h builds an element: h('td', {class: 'num', onclick: fn}, 'text', child).
// Attributes starting with "on" become listeners; null/false children are
// skipped; strings become text nodes (never HTML).
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else if (k === 'class') el.className = v;
    else if (k === 'dataset') Object.assign(el.dataset, v);
    else if (k === 'value') el.value = v;
    else if (k === 'checked' || k === 'disabled' || k === 'selected') el[k] = !!v;
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

// replace swaps an element's children.
export function replace(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

// meter is a horizontal bar filled to frac (0..1).
export function meter(frac, cls = '') {
  const fill = h('div');
  fill.style.width = `${Math.max(0, Math.min(1, frac || 0)) * 100}%`;
  return h('div', { class: `meter ${cls}` }, fill);
}

const SI = ['', 'k', 'M', 'G', 'T', 'P'];

// si formats a number with an SI prefix: 1234567 -> "1.23 M".
export function si(n, digits = 3) {
  if (n === null || n === undefined || Number.isNaN(n)) return '–';
  let i = 0;
  let v = Math.abs(n);
  while (v >= 1000 && i < SI.length - 1) { v /= 1000; i++; }
  const s = i === 0 ? (Number.isInteger(v) ? String(v) : v.toFixed(v < 10 ? 1 : 0)) : v.toPrecision(digits);
  return `${n < 0 ? '-' : ''}${s}${SI[i] ? ' ' + SI[i] : ''}`;
}

export function fmtRate(n, unit) {
  const s = si(n);
  return /[kMGTP]$/.test(s) ? s + unit : `${s} ${unit}`;
}
export const fmtPPS = (n) => fmtRate(n, 'pps');
export const fmtBPS = (n) => fmtRate(n, 'b/s');

// count formats an integer with thousands separators.
export function count(n) {
  return n === null || n === undefined ? '–' : Number(n).toLocaleString('en-US');
}

// bytes formats a byte count in binary units.
export function bytes(n) {
  if (!n) return '0 B';
  const u = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
  return `${i === 0 ? n : n.toFixed(n < 10 ? 2 : 1)} ${u[i]}`;
}

// duration formats seconds as "3d 4h", "5m 10s", "42s".
export function duration(s) {
  if (s === null || s === undefined || s < 0) return '–';
  s = Math.floor(s);
  const d = Math.floor(s / 86400), hh = Math.floor(s / 3600) % 24, m = Math.floor(s / 60) % 60, sec = s % 60;
  if (d) return `${d}d ${hh}h`;
  if (hh) return `${hh}h ${m}m`;
  if (m) return `${m}m ${sec}s`;
  return `${sec}s`;
}

// ago formats an RFC 3339 time relative to now ("12s ago"), "never" if empty.
export function ago(t) {
  if (!t) return 'never';
  const s = (Date.now() - Date.parse(t)) / 1000;
  return s < 1 ? 'just now' : `${duration(s)} ago`;
}

export function speed(mbps) {
  if (!mbps) return 'unknown speed';
  return mbps >= 1000 ? `${mbps / 1000} Gb/s` : `${mbps} Mb/s`;
}

export function dateTime(t) {
  if (!t) return '–';
  const d = new Date(t);
  return d.toLocaleString(undefined, { dateStyle: 'medium', timeStyle: 'medium' });
}

// toast shows a short notice in the corner.
export function toast(msg, kind = '') {
  const box = document.getElementById('toasts');
  const t = h('div', { class: `toast ${kind}`, role: 'status' }, msg);
  box.append(t);
  setTimeout(() => t.remove(), kind === 'bad' ? 8000 : 4000);
}

// every runs fn now and then every ms; it returns the function that stops
// it (a page's cleanup).
export function every(ms, fn) {
  fn();
  const timer = setInterval(fn, ms);
  return () => clearInterval(timer);
}

// debounce delays fn until calls stop for ms.
export function debounce(fn, ms) {
  let t;
  return (...a) => { clearTimeout(t); t = setTimeout(() => fn(...a), ms); };
}

// Dashboard entry point: loads /api/info, opens the live stream, routes
// between pages (#/overview, #/rules, ...) and hosts the pending-change
// banner.

import { api } from './api.js';
import { h, replace } from './dom.js';
import { Stream } from './stream.js';
import { PendingBanner } from './pending.js';
import overview from './pages/overview.js';
import rules from './pages/rules.js';
import connections from './pages/connections.js';
import bridge from './pages/bridge.js';
import tuning from './pages/tuning.js';
import system from './pages/system.js';
import config from './pages/config.js';
import devices from './pages/devices.js';
import logs from './pages/logs.js';
import diagnostics from './pages/diagnostics.js';
import admin from './pages/admin.js';

const pages = { overview, devices, rules, connections, bridge, logs, diagnostics, tuning, system, config, admin };

const main = document.getElementById('main');
let current = null; // { page, cleanup }

function setLive(state) {
  const el = document.getElementById('live');
  el.className = `live ${state === 'live' ? 'on' : state === 'offline' ? 'off' : ''}`;
  el.querySelector('.live-text').textContent = state;
}

function applyTheme(t) {
  if (t) document.documentElement.dataset.theme = t;
  else delete document.documentElement.dataset.theme;
}

function isDark() {
  const t = document.documentElement.dataset.theme;
  return t ? t === 'dark' : matchMedia('(prefers-color-scheme: dark)').matches;
}

async function start() {
  applyTheme(localStorage.getItem('e1kbox-theme'));
  let info;
  try {
    info = await api('/api/info');
  } catch (e) {
    replace(main, h('div', { class: 'errors' }, `Cannot reach the box: ${e.message}`));
    return;
  }
  document.getElementById('host').textContent = info.hostname;
  document.getElementById('mode').textContent = info.mode || '';
  document.title = `${info.hostname} · e1kbox`;
  for (const a of document.querySelectorAll('#nav a[data-feature]')) {
    a.hidden = !info.features[a.dataset.feature];
  }

  const stream = new Stream(setLive);
  const banner = new PendingBanner(document.getElementById('banner'));
  stream.subscribe((msg) => banner.onStats(msg));
  const ctx = { info, stream, banner };

  function route() {
    let name = location.hash.replace(/^#\/?/, '').split('?')[0] || 'overview';
    if (!pages[name]) name = 'overview';
    const link = document.querySelector(`#nav a[data-page="${name}"]`);
    if (link && link.hidden) name = 'overview';
    if (current && current.cleanup) current.cleanup();
    for (const a of document.querySelectorAll('#nav a')) a.classList.toggle('active', a.dataset.page === name);
    replace(main);
    main.dataset.page = name;
    current = { name, cleanup: pages[name](main, ctx) };
  }

  document.getElementById('theme').addEventListener('click', () => {
    const next = isDark() ? 'light' : 'dark';
    localStorage.setItem('e1kbox-theme', next);
    applyTheme(next);
    route(); // charts pick their colours when built
  });
  window.addEventListener('hashchange', route);
  route();
  stream.connect();
}

start();

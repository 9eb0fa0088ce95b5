// System: version, build, uptime, memory; config history, backup download
// and restore upload (a restore is applied like any change: commit-confirm).

import { api } from '../api.js';
import { h, replace, bytes, duration, dateTime, meter, toast } from '../dom.js';

function tile(label, value, id, small = false) {
  return h('div', { class: 'tile' }, h('div', { class: 'label' }, label), h('div', { class: `value${small ? ' small' : ''}`, id }, value));
}

// built shows a build timestamp as a date when it is one.
function built(ts) {
  return ts && !Number.isNaN(Date.parse(ts)) ? dateTime(ts) : ts || '–';
}

export default function system(el, { info, banner }) {
  const tiles = h('div', { class: 'tiles', id: 'system-tiles' });
  const mem = h('div', { class: 'card' });
  const history = h('tbody', { id: 'history-body' });
  const restoreErr = h('div', { class: 'errors', hidden: true });
  const file = h('input', { type: 'file', id: 'restore-file', accept: 'application/json,.json', hidden: true, onchange: () => restore() });

  replace(el,
    h('div', { class: 'page-head' }, h('h1', {}, 'System')),
    h('div', { class: 'stack' },
      tiles,
      mem,
      info.features.config ? h('div', { class: 'card stack' },
        h('div', { class: 'row' }, h('h2', {}, 'Configuration'), h('span', { class: 'spacer' })),
        h('div', { class: 'row' },
          h('a', { class: 'btn', href: '/api/config/backup', download: '', id: 'backup' }, '⤓ Download backup'),
          h('button', { class: 'btn', type: 'button', onclick: () => file.click() }, '⤒ Restore from file…'), file),
        restoreErr,
        h('div', { class: 'table-wrap' }, h('table', {},
          h('thead', {}, h('tr', {}, h('th', {}, 'Version'), h('th', {}, 'Saved'), h('th', {}, 'Source'), h('th', {}))),
          history))) : null,
    ),
  );

  async function loadInfo() {
    try {
      const s = await api('/api/system');
      replace(tiles,
        tile('Version', s.version || 'dev', 'sys-version'),
        tile('Built', built(s.build_timestamp), 'sys-build', true),
        tile('Uptime', duration(s.uptime_s), 'sys-uptime'),
        tile('Mode', s.mode || '–', 'sys-mode'),
        tile('Go', s.go_version, 'sys-go', true),
        tile('Dashboard', s.tls ? 'HTTPS' : 'HTTP', 'sys-tls'));
      const used = s.mem_total ? s.mem_total - s.mem_available : 0;
      replace(mem, h('h2', {}, 'Memory'),
        s.mem_total ? [
          meter(used / s.mem_total, used / s.mem_total > 0.9 ? 'bad' : ''),
          h('p', { class: 'muted' }, `${bytes(used)} used of ${bytes(s.mem_total)} · ${bytes(s.mem_available)} available · appliance heap ${bytes(s.go_heap)}`),
        ] : h('p', { class: 'muted' }, `Appliance heap ${bytes(s.go_heap)}`));
    } catch (e) {
      replace(tiles, h('div', { class: 'errors' }, `Cannot load system info: ${e.message}`));
    }
  }

  async function loadHistory() {
    if (!info.features.config) return;
    try {
      const hist = await api('/api/config/history');
      replace(history, hist.versions.length ? hist.versions.map((v) => h('tr', {},
        h('td', { class: 'mono' }, v.id, v.id === hist.current ? [' ', h('span', { class: 'pill ok' }, 'running')] : ''),
        h('td', {}, dateTime(v.time)),
        h('td', {}, v.source || ''),
        h('td', { class: 'actions' },
          h('a', { class: 'btn small', href: `/api/config/history/${encodeURIComponent(v.id)}?download=1`, download: '' }, 'Download'),
          v.id === hist.current ? null : h('button', { class: 'btn small', type: 'button', onclick: () => restoreVersion(v.id) }, 'Restore'))),
      ) : h('tr', {}, h('td', { colspan: 4, class: 'empty' }, 'No stored versions.')));
    } catch (e) {
      replace(history, h('tr', {}, h('td', { colspan: 4, class: 'empty' }, `Cannot load history: ${e.message}`)));
    }
  }

  async function applyText(path, text) {
    restoreErr.hidden = true;
    try {
      const ans = await api(path, { method: 'POST', body: text });
      banner.track(ans.pending);
      toast('Configuration restored: confirm the change to keep it.');
      loadHistory();
    } catch (e) {
      restoreErr.hidden = false;
      replace(restoreErr, h('strong', {}, `Restore refused: ${e.message}`),
        e.errors.length ? h('ul', {}, e.errors.map((fe) => h('li', {}, fe.path ? h('code', {}, fe.path) : null, fe.path ? ': ' : '', fe.message))) : null);
    }
  }

  async function restore() {
    const f = file.files[0];
    if (!f) return;
    const text = await f.text();
    file.value = '';
    applyText('/api/config/restore', text);
  }

  async function restoreVersion(id) {
    try {
      const cfg = await api(`/api/config/history/${encodeURIComponent(id)}`);
      applyText('/api/config/restore', JSON.stringify(cfg));
    } catch (e) {
      toast(`Cannot load version ${id}: ${e.message}`, 'bad');
    }
  }

  loadInfo();
  loadHistory();
  const timer = setInterval(loadInfo, 10000);
  const onChange = () => loadHistory();
  window.addEventListener('config-changed', onChange);
  return () => { clearInterval(timer); window.removeEventListener('config-changed', onChange); };
}

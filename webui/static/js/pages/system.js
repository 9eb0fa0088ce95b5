// System: version, build, uptime, memory, the kernel (its BPF JIT, the
// fast path's cost on it, the watchdog); firmware update upload (a .gaf,
// test-booted by the box and kept only once healthy); config history,
// backup download and restore upload (a restore is applied like any
// change: commit-confirm).

import { api, CSRF_HEADER } from '../api.js';
import { h, replace, bytes, duration, dateTime, meter, toast } from '../dom.js';

function tile(label, value, id, small = false, sub = null) {
  return h('div', { class: 'tile' }, h('div', { class: 'label' }, label), h('div', { class: `value${small ? ' small' : ''}`, id }, value),
    sub === null ? null : h('div', { class: 'sub', id: `${id}-sub` }, sub));
}

const JIT_WORDS = { on: 'on', off: 'off', none: 'none: interpreted', unknown: 'unknown' };

// watchdog says which watchdog resets a hung box, and how soon.
function watchdog(w) {
  if (!w || w.identity === 'none') return 'none';
  return [w.identity, w.timeout_s ? `${w.timeout_s} s` : '', w.state || ''].filter(Boolean).join(', ');
}

// fastPathLine is the fast path's measured cost next to the slow path's.
function fastPathLine(c) {
  if (!c) return 'not measured';
  const ns = (v) => (v ? `${v.toFixed(0)} ns` : 'not measured');
  return `${c.path} frame: ${ns(c.hit_ns)} in the kernel (${c.jit ? 'JIT' : 'interpreted'}), ${ns(c.userspace_ns)} in userspace (without the rings); a miss ${ns(c.miss_ns)}`;
}

// kernelCard lists the running kernel's facts.
function kernelCard(k) {
  const row = (dt, dd, id) => [h('dt', {}, dt), h('dd', { id }, dd)];
  return [h('h2', {}, 'Kernel'), h('dl', { class: 'kv' },
    row('Release', k.release, 'kernel-release'),
    row('Version', k.version, 'kernel-version'),
    row('Source package', k.source || 'not named in the version', 'kernel-source'),
    row('BPF JIT', JIT_WORDS[k.jit] || k.jit, 'kernel-jit'),
    row('Watchdog', watchdog(k.watchdog), 'kernel-watchdog'),
    row('Fast path per frame', fastPathLine(k.fast_path), 'kernel-fast-path'))];
}

// built shows a build timestamp as a date when it is one.
function built(ts) {
  return ts && !Number.isNaN(Date.parse(ts)) ? dateTime(ts) : ts || '–';
}

export default function system(el, { info, banner }) {
  const tiles = h('div', { class: 'tiles', id: 'system-tiles' });
  const permWarning = h('div', { class: 'errors', id: 'perm-warning', hidden: true });
  const mem = h('div', { class: 'card' });
  const kernel = h('div', { class: 'card', id: 'kernel-card', hidden: true });
  const history = h('tbody', { id: 'history-body' });
  const restoreErr = h('div', { class: 'errors', hidden: true });
  const file = h('input', { type: 'file', id: 'restore-file', accept: 'application/json,.json', hidden: true, onchange: () => restore() });

  const update = info.features.update ? updateCard() : null;

  replace(el,
    h('div', { class: 'page-head' }, h('h1', {}, 'System')),
    h('div', { class: 'stack' },
      permWarning,
      tiles,
      mem,
      kernel,
      update ? update.el : null,
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
      permWarning.hidden = !s.perm_problem;
      replace(permWarning, s.perm_problem || '');
      const k = s.kernel;
      const hit = k && k.fast_path && k.fast_path.hit_ns;
      replace(tiles,
        tile('Version', s.version || 'dev', 'sys-version'),
        tile('Built', built(s.build_timestamp), 'sys-build', true),
        tile('Uptime', duration(s.uptime_s), 'sys-uptime'),
        tile('Mode', s.mode || '–', 'sys-mode'),
        tile('Go', s.go_version, 'sys-go', true),
        tile('Dashboard', s.tls ? 'HTTPS' : 'HTTP', 'sys-tls'),
        k ? tile('Kernel', k.release, 'sys-kernel', true, `BPF JIT ${JIT_WORDS[k.jit] || k.jit}${hit ? ` · fast path ${hit.toFixed(0)} ns/frame` : ''}`) : null);
      kernel.hidden = !k;
      if (k) replace(kernel, kernelCard(k));
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
  return () => { clearInterval(timer); window.removeEventListener('config-changed', onChange); if (update) update.stop(); };
}

// SILENT_MS is how long the update card waits for a box in its test boot
// before it says to power-cycle it: longer than a broken build's way back
// (the kexec test boot, the guard's deadline of 2 minutes, a reboot; under
// 5 minutes even under QEMU's TCG).
const SILENT_MS = 8 * 60 * 1000;

// updateCard uploads a .gaf (and its .sig) with a progress bar, then
// follows the box through the test boot and shows the outcome and timings.
function updateCard() {
  const file = h('input', { type: 'file', id: 'update-file', accept: '.gaf,.sig', multiple: true });
  const progress = h('progress', { id: 'update-progress', max: 100, value: 0 });
  const phase = h('p', { id: 'update-phase', class: 'muted' }, 'Choose the .gaf that `firmware build` (or `gok overwrite --gaf`) wrote, and its .gaf.sig if the box takes only signed updates.');
  const error = h('div', { class: 'errors', id: 'update-error', hidden: true });
  const outcome = h('div', { id: 'update-outcome' });
  const start = h('button', { class: 'btn', type: 'button', id: 'update-start', onclick: () => upload() }, '⤒ Upload and install');
  const el = h('div', { class: 'card stack', id: 'update-card' },
    h('div', { class: 'row' }, h('h2', {}, 'Firmware update'), h('span', { class: 'spacer' })),
    h('div', { class: 'row' }, file, start),
    progress, phase, error, outcome);
  let poll = null;
  let waiting = null; // the update ID the page waits for
  let answered = 0; // when the box last answered while the page waits

  function showPhase(text) { replace(phase, text); }

  function showRecord(r) {
    if (!r) { replace(outcome); return; }
    const good = r.outcome === 'committed';
    const total = r.finished && r.started ? (Date.parse(r.finished) - Date.parse(r.started)) / 1000 : null;
    replace(outcome,
      h('p', {},
        h('span', { class: `pill ${good ? 'ok' : r.outcome === 'testing' || r.outcome === 'installing' ? 'warn' : 'bad'}`, id: 'update-result', 'data-outcome': r.outcome }, r.outcome),
        ' ', `Update ${r.id} by ${r.client}: ${r.from.timestamp || '?'} → ${r.to.timestamp || r.to.sbom_hash || '?'}`,
        r.boot_written ? ' (new boot file system)' : ' (boot partition unchanged)',
        total !== null ? ` in ${total.toFixed(1)} s` : ''),
      r.reason ? h('p', { class: 'muted', id: 'update-reason' }, r.reason) : null,
      h('div', { class: 'table-wrap' }, h('table', { id: 'update-steps' },
        h('thead', {}, h('tr', {}, h('th', {}, 'Step'), h('th', {}, 'Seconds'))),
        h('tbody', {}, (r.steps || []).map((s) => h('tr', {}, h('td', {}, s.name), h('td', { class: 'mono' }, s.seconds.toFixed(1))))))));
  }

  async function refresh() {
    if (waiting && Date.now() - answered > SILENT_MS) {
      // What the update client says of a box silent in its test boot.
      showPhase(`The box has not answered for ${Math.round((Date.now() - answered) / 60000)} minutes. Power-cycle it: an unconfirmed test boot never becomes permanent, so it boots the previous build (or the new one, if it was confirmed healthy just before).`);
      el.dataset.state = 'silent';
    }
    let st;
    try {
      st = await api('/api/system/update');
    } catch {
      if (waiting && el.dataset.state !== 'silent') showPhase('The box is restarting into the new build…');
      return;
    }
    if (waiting) {
      answered = Date.now();
      if (el.dataset.state === 'silent') el.dataset.state = 'running';
    }
    if (st.phase) showPhase(`On the box: ${st.phase}…`);
    if (waiting && st.pending && st.pending.id === waiting) {
      showPhase(`Test boot of the new build: waiting for it to be healthy (${st.pending.outcome})…`);
      return;
    }
    if (waiting && st.last && st.last.id === waiting) {
      showPhase(st.last.outcome === 'committed' ? 'The new build is installed and healthy.' : 'The update was not kept: the box runs the previous build.');
      waiting = null;
      el.dataset.state = 'done';
      clearInterval(poll);
      poll = null;
    }
    if (!waiting) showRecord(st.last);
  }

  async function upload() {
    const files = [...file.files];
    const gaf = files.find((f) => !f.name.endsWith('.sig'));
    const sigFile = files.find((f) => f.name.endsWith('.sig'));
    error.hidden = true;
    if (!gaf) { error.hidden = false; replace(error, 'Choose a .gaf file.'); el.dataset.state = 'refused'; return; }
    const sig = sigFile ? (await sigFile.text()).trim() : '';
    start.disabled = true;
    progress.value = 0;
    el.dataset.state = 'running';
    const xhr = new XMLHttpRequest();
    xhr.open('POST', '/api/system/update');
    xhr.setRequestHeader(CSRF_HEADER, '1');
    xhr.setRequestHeader('Content-Type', 'application/octet-stream');
    if (sig) xhr.setRequestHeader('X-E1kbox-Signature', sig);
    xhr.upload.onprogress = (ev) => {
      if (!ev.lengthComputable) return;
      progress.value = (ev.loaded / ev.total) * 100;
      showPhase(`Uploading: ${bytes(ev.loaded)} of ${bytes(ev.total)}`);
    };
    xhr.upload.onload = () => { progress.value = 100; showPhase('Uploaded; the box checks and writes the update…'); };
    xhr.onload = () => {
      start.disabled = false;
      let ans = null;
      try { ans = JSON.parse(xhr.responseText); } catch { /* not JSON */ }
      if (xhr.status !== 202) {
        error.hidden = false;
        replace(error, h('strong', {}, (ans && ans.error) || `${xhr.status} ${xhr.statusText}`));
        showPhase('Nothing was installed.');
        el.dataset.state = 'refused';
        return;
      }
      waiting = ans.id;
      answered = Date.now();
      showRecord(ans);
      showPhase('Installed beside the running build; the box test-boots it now…');
      if (!poll) poll = setInterval(refresh, 2000);
    };
    // A lost connection installs nothing unless the box got all of it:
    // the box's own record (refresh) says which.
    const lost = (why) => () => {
      start.disabled = false;
      error.hidden = false;
      replace(error, h('strong', {}, `The upload failed (${why}).`));
      showPhase('The box may not have received it; its last update is shown below.');
      el.dataset.state = 'failed';
      refresh();
    };
    xhr.onerror = lost('connection lost');
    xhr.onabort = lost('aborted');
    xhr.send(gaf);
  }

  refresh();
  return { el, stop: () => { if (poll) clearInterval(poll); } };
}

// Config: a form (described by GET /api/config/form) and a raw JSON editor
// over the same document. Validation errors come back as JSON paths and are
// shown next to the field they name; apply is commit-confirm.

import { api } from '../api.js';
import { h, replace, toast } from '../dom.js';

// parsePath("nat.port_forwards[0].to") -> ["nat", "port_forwards", 0, "to"]
function parsePath(p) {
  const out = [];
  for (const part of p.split('.')) {
    const m = part.match(/^([^[\]]*)((?:\[\d+\])*)$/);
    if (!m) { out.push(part); continue; }
    if (m[1]) out.push(m[1]);
    for (const i of m[2].matchAll(/\[(\d+)\]/g)) out.push(Number(i[1]));
  }
  return out;
}

function getPath(obj, path) {
  let v = obj;
  for (const k of parsePath(path)) {
    if (v === null || typeof v !== 'object') return undefined;
    v = v[k];
  }
  return v;
}

// setPath sets a value, creating objects on the way; undefined deletes.
function setPath(obj, path, value) {
  const ks = parsePath(path);
  let v = obj;
  for (let i = 0; i < ks.length - 1; i++) {
    if (v[ks[i]] === null || typeof v[ks[i]] !== 'object') {
      if (value === undefined) return;
      v[ks[i]] = typeof ks[i + 1] === 'number' ? [] : {};
    }
    v = v[ks[i]];
  }
  const last = ks[ks.length - 1];
  if (value === undefined) delete v[last];
  else v[last] = value;
}

const join = (base, p) => (base ? `${base}.${p}` : p);

export default function configPage(el, { info, banner }) {
  let doc = null;      // the config being edited
  let sections = [];
  let errors = [];     // [{path, message}]
  let tab = 'form';
  let version = null;
  let orig = null;     // the running config, to see what an apply changes
  let nics = [];       // GET /api/nics for the interface picker

  const formBox = h('div', { class: 'form', id: 'config-form' });
  const raw = h('textarea', { class: 'json', id: 'config-json', spellcheck: 'false', hidden: true });
  const errBox = h('div', { class: 'errors', id: 'config-errors', hidden: true });
  const addrNotice = h('div', { class: 'notice', id: 'address-notice', role: 'alert', hidden: true });
  const formTab = h('button', { type: 'button', class: 'active', onclick: () => switchTab('form') }, 'Form');
  const rawTab = h('button', { type: 'button', id: 'tab-json', onclick: () => switchTab('json') }, 'JSON');
  const timeout = h('input', { type: 'number', id: 'confirm-timeout', min: 5, max: 3600, value: info.confirm_timeout_s || 60 });
  timeout.style.width = '90px';
  const ver = h('span', { class: 'muted', id: 'config-version' });

  replace(el,
    h('div', { class: 'page-head' },
      h('h1', {}, 'Configuration'), ver, h('span', { class: 'spacer' }),
      h('div', { class: 'tabs' }, formTab, rawTab)),
    h('div', { class: 'stack' },
      addrNotice,
      errBox,
      formBox,
      raw,
      h('div', { class: 'card row' },
        h('button', { class: 'btn', type: 'button', onclick: reset }, 'Reset'),
        h('button', { class: 'btn', type: 'button', id: 'config-validate', onclick: validate }, 'Validate'),
        h('span', { class: 'spacer' }),
        h('label', { class: 'row muted' }, 'Confirm within', timeout, 's'),
        h('button', { class: 'btn primary', type: 'button', id: 'config-apply', onclick: apply }, 'Apply')),
    ),
  );

  function switchTab(t) {
    if (t === tab) return;
    if (t === 'form') {
      if (!readRaw()) return;
    } else {
      raw.value = JSON.stringify(doc, null, 2);
    }
    tab = t;
    formTab.classList.toggle('active', t === 'form');
    rawTab.classList.toggle('active', t === 'json');
    formBox.hidden = t !== 'form';
    raw.hidden = t !== 'json';
    render();
  }

  // readRaw takes the JSON editor's text into doc; false if it is not JSON.
  function readRaw() {
    try {
      doc = JSON.parse(raw.value);
      return true;
    } catch (e) {
      errors = [{ path: '', message: `not valid JSON: ${e.message}` }];
      showErrors();
      return false;
    }
  }

  function text() {
    if (tab === 'json') return raw.value;
    return JSON.stringify(doc, null, 2);
  }

  function field(f, base) {
    const path = join(base, f.path);
    const cur = getPath(doc, path);
    let input;
    switch (f.kind) {
      case 'select':
        input = h('select', { 'data-path': path, onchange: (e) => { setPath(doc, path, e.target.value || undefined); if (path === 'mode') render(); } },
          (f.options.includes(cur ?? '') ? f.options : [...f.options, cur]).map((o) => h('option', { value: o, selected: (cur ?? '') === o }, o || '—')));
        break;
      case 'bool': {
        // Absent means the default; only a value that differs is written.
        const def = !!f.default;
        input = h('input', { type: 'checkbox', 'data-path': path, checked: cur ?? def,
          onchange: (e) => setPath(doc, path, e.target.checked === def && cur === undefined ? undefined : e.target.checked) });
        return h('label', { class: 'field check' }, input, h('span', {}, f.label), errFor(path));
      }
      case 'strings':
        input = h('input', { 'data-path': path, value: Array.isArray(cur) ? cur.join(', ') : cur ?? '', placeholder: f.placeholder || '', spellcheck: 'false',
          oninput: (e) => {
            const list = e.target.value.split(',').map((x) => x.trim()).filter(Boolean);
            setPath(doc, path, list.length ? list : undefined);
          } });
        break;
      case 'numbers':
        input = h('input', { 'data-path': path, value: Array.isArray(cur) ? cur.join(', ') : cur ?? '', placeholder: f.placeholder || '', inputmode: 'numeric',
          oninput: (e) => {
            const list = e.target.value.split(',').map((x) => x.trim()).filter(Boolean).map((x) => (/^\d+$/.test(x) ? Number(x) : x));
            setPath(doc, path, list.length ? list : undefined);
          } });
        break;
      case 'nic': {
        // The NIC picker: every interface with driver, MAC and link.
        const known = nics.some((n) => n.name === cur);
        input = h('select', { 'data-path': path, onchange: (e) => setPath(doc, path, e.target.value || undefined) },
          h('option', { value: '', selected: !cur }, '— pick an interface —'),
          nics.map((n) => h('option', { value: n.name, selected: n.name === cur },
            [n.name, n.driver, n.mac, n.up ? `link up${n.speed_mbps ? ` ${n.speed_mbps} Mb/s` : ''}` : 'no link', n.use ? `${n.use}${n.port ? ` ${n.port}` : ''}` : 'free'].filter(Boolean).join(' · '))),
          cur && !known ? h('option', { value: cur, selected: true }, `${cur} (not on this box)`) : null);
        break;
      }
      case 'password': {
        // The API shows a stored secret as a placeholder (the server keeps
        // the secret when the placeholder comes back): the input starts
        // empty, and left empty keeps what is stored.
        const stored = cur === f.placeholder;
        input = h('input', { type: 'password', 'data-path': path, value: stored ? '' : cur ?? '', autocomplete: 'new-password',
          placeholder: stored ? 'unchanged' : '',
          oninput: (e) => setPath(doc, path, e.target.value === '' ? (stored ? f.placeholder : undefined) : e.target.value) });
        break;
      }
      case 'number':
        input = h('input', { type: 'number', 'data-path': path, value: cur ?? '', placeholder: f.placeholder || '',
          oninput: (e) => setPath(doc, path, e.target.value === '' ? undefined : Number(e.target.value)) });
        break;
      default:
        input = h('input', { 'data-path': path, value: cur ?? '', placeholder: f.placeholder || '', spellcheck: 'false',
          oninput: (e) => setPath(doc, path, e.target.value === '' ? undefined : e.target.value) });
    }
    if (errFor(path)) input.classList.add('invalid');
    if (f.kind === 'number') input.inputMode = 'numeric';
    return h('label', { class: 'field' }, h('span', {}, f.label), input, f.help ? h('small', { class: 'muted' }, f.help) : null, errFor(path));
  }

  // errFor shows the errors about a field, including those about one
  // element of it ("ports[0].addresses[1]" for the addresses input).
  function errFor(path) {
    const es = errors.filter((x) => x.path === path || (x.path.startsWith(`${path}[`) && /^\[\d+\]$/.test(x.path.slice(path.length))));
    return es.length ? h('div', { class: 'err' }, es.map((e) => e.message).join('; ')) : null;
  }

  function list(f, base) {
    const path = join(base, f.path);
    const items = Array.isArray(getPath(doc, path)) ? getPath(doc, path) : [];
    return h('div', { class: 'field list', 'data-path': path },
      h('span', {}, f.label),
      items.map((item, i) => h('div', { class: 'list-item', 'data-path': `${path}[${i}]` },
        f.item.map((sub) => field(sub, `${path}[${i}]`)),
        h('button', { class: 'btn small danger', type: 'button', onclick: () => { items.splice(i, 1); render(); } }, 'Remove'),
        errFor(`${path}[${i}]`))),
      h('div', {}, h('button', { class: 'btn small', type: 'button', onclick: () => { setPath(doc, path, [...items, {}]); render(); } }, `+ Add`)),
      errFor(path));
  }

  function render() {
    ver.textContent = version ? `running version ${version.id}` : '';
    if (tab === 'form' && doc) {
      replace(formBox, sections
        .filter((s) => !s.modes || s.modes.includes(doc.mode))
        .map((s) => h('div', { class: 'card section' },
          h('h2', {}, s.title),
          s.help ? h('p', { class: 'help' }, s.help) : null,
          h('div', { class: 'fields' }, s.fields.map((f) => (f.kind === 'list' ? list(f, '') : field(f, '')))))));
    }
    showErrors();
  }

  function showErrors() {
    // In the form, errors with a field are shown there; the box lists the rest.
    const shown = tab === 'form' ? new Set([...formBox.querySelectorAll('[data-path]')].map((e) => e.dataset.path)) : new Set();
    const rest = errors.filter((e) => !shown.has(e.path) && !shown.has(e.path.replace(/\[\d+\]$/, '')));
    errBox.hidden = !rest.length;
    replace(errBox, h('strong', {}, errors.length > rest.length ? 'More problems:' : 'The configuration has problems:'),
      h('ul', {}, rest.map((e) => h('li', {}, e.path ? [h('code', {}, e.path), ': '] : null, e.message))));
  }

  async function validate() {
    if (tab === 'json' && !readRaw()) return;
    try {
      await api('/api/config/validate', { method: 'POST', body: text() });
      errors = [];
      render();
      toast('The configuration is valid.', 'ok');
    } catch (e) {
      errors = e.errors.length ? e.errors : [{ path: '', message: e.message }];
      render();
    }
  }

  async function apply() {
    if (tab === 'json' && !readRaw()) return;
    let moved = null;
    try {
      moved = moves(orig, tab === 'json' ? JSON.parse(raw.value) : doc);
    } catch { /* the server reports bad JSON */ }
    try {
      const ans = await api('/api/config/apply', { method: 'POST', body: text(), query: { confirm_timeout: timeout.value } });
      errors = [];
      banner.track(ans.pending);
      if (moved) showMoved(moved, Number(timeout.value));
      toast('Applied: confirm the change to keep it.');
      await reset();
    } catch (e) {
      errors = e.errors.length ? e.errors : [{ path: '', message: e.message }];
      render();
    }
  }

  async function reset() {
    try {
      const [c, form] = await Promise.all([api('/api/config'), sections.length ? null : api('/api/config/form')]);
      if (form) sections = form.sections;
      if (!nics.length && info.features.nics) nics = (await api('/api/nics').catch(() => ({ nics: [] }))).nics;
      orig = JSON.parse(JSON.stringify(c.config));
      doc = c.config;
      version = c.version;
      raw.value = JSON.stringify(doc, null, 2);
      errors = [];
      render();
    } catch (e) {
      errors = [{ path: '', message: `Cannot load the configuration: ${e.message}` }];
      showErrors();
    }
  }

  // moves says where the dashboard will be after a change that takes away
  // the address (or port) this page uses: null if it stays reachable here.
  function moves(before, after) {
    const addrs = (c) => {
      const out = [];
      for (const p of (c && c.ports) || []) for (const a of p.addresses || []) out.push(a.split('/')[0]);
      for (const a of (c && c.hostPort && c.hostPort.addresses) || []) out.push(a.split('/')[0]);
      return out;
    };
    const port = (c) => ((c && c.dashboard && c.dashboard.listen) || ':8080').split(':').pop();
    const here = location.hostname.replace(/^\[|\]$/g, '');
    const lost = addrs(before).includes(here) && !addrs(after).includes(here);
    const portMoved = port(before) !== port(after) && location.port === port(before);
    if (!lost && !portMoved) return null;
    const hosts = lost ? addrs(after).filter((a) => !addrs(before).includes(a)) : [here];
    const p = portMoved ? port(after) : location.port;
    return (hosts.length ? hosts : addrs(after)).map((a) => `${location.protocol}//${a.includes(':') ? `[${a}]` : a}${p ? `:${p}` : ''}/`);
  }

  function showMoved(urls, seconds) {
    addrNotice.hidden = false;
    replace(addrNotice, h('strong', {}, 'This change moves the dashboard away from this address. '),
      urls.length ? [`Open it at `, urls.map((u, i) => [i ? ' or ' : '', h('a', { href: u, class: 'moved-url' }, u)]),
        ` and confirm the change there within ${seconds} s, or it rolls back by itself and the dashboard is back here.`] :
        'No new address is configured: the change rolls back by itself unless it is confirmed.');
  }

  reset();
  const onChange = () => reset();
  window.addEventListener('config-changed', onChange);
  return () => window.removeEventListener('config-changed', onChange);
}

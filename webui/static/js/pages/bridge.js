// Bridge: the forwarding database (MAC, port, VLAN, age).

import { api } from '../api.js';
import { h, replace, count, duration, every } from '../dom.js';

export default function bridge(el) {
  const filter = h('input', { id: 'fdb-filter', placeholder: 'filter by MAC, port or VLAN', oninput: () => render() });
  const tbody = h('tbody', { id: 'fdb-body' });
  const summary = h('span', { class: 'muted' });
  let entries = [];

  replace(el,
    h('div', { class: 'page-head' }, h('h1', {}, 'Bridge'), summary, h('span', { class: 'spacer' }), filter),
    h('div', { class: 'table-wrap' }, h('table', {},
      h('thead', {}, h('tr', {}, h('th', {}, 'MAC address'), h('th', {}, 'Port'), h('th', { class: 'num' }, 'VLAN'), h('th', { class: 'num' }, 'Age'), h('th', {}, ''))),
      tbody)),
  );

  function render() {
    const f = filter.value.trim().toLowerCase();
    const shown = f ? entries.filter((e) => `${e.mac} ${e.port} ${e.vlan}`.toLowerCase().includes(f)) : entries;
    const ports = new Set(entries.map((e) => e.port));
    summary.textContent = `${count(entries.length)} addresses on ${ports.size} ports`;
    replace(tbody, shown.length ? shown.map((e) => h('tr', {},
      h('td', { class: 'mono' }, e.mac),
      h('td', {}, e.port),
      h('td', { class: 'num' }, e.vlan || '–'),
      h('td', { class: 'num' }, e.static ? '' : duration(e.age_s)),
      h('td', {}, e.static ? h('span', { class: 'pill' }, 'static') : ''))) :
      h('tr', {}, h('td', { colspan: 5, class: 'empty' }, entries.length ? 'No entry matches.' : 'No addresses learned yet.')));
  }

  async function load() {
    try {
      entries = (await api('/api/fdb')).entries;
      render();
    } catch (e) {
      replace(tbody, h('tr', {}, h('td', { colspan: 5, class: 'empty' }, `Cannot load the FDB: ${e.message}`)));
    }
  }
  return every(3000, load);
}

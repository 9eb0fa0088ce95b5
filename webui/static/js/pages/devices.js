// Devices: the LAN's devices from the DHCP server's leases, with what they
// sent and received through the router, and "make static" / "forget"; the
// IPv6 neighbours (the IPv6 router's neighbour cache), named by the lease
// of their MAC.

import { api } from '../api.js';
import { h, replace, bytes, ago, duration, toast, count, every } from '../dom.js';

const STATE = { bound: 'ok', offered: 'warn', reserved: '', expired: 'bad', released: '' };
const NEIGH = { reachable: 'ok', stale: '', incomplete: 'warn' };

export default function devices(el) {
  const filter = h('input', { id: 'dev-filter', placeholder: 'filter by name, MAC or address', 'aria-label': 'filter devices', oninput: () => render() });
  const tbody = h('tbody', { id: 'dev-body' });
  const summary = h('span', { class: 'muted', id: 'dev-summary' });
  const nbody = h('tbody', { id: 'nb6-body' });
  const nsummary = h('span', { class: 'muted', id: 'nb6-summary' });
  let list = [];
  let neigh = null; // IPv6 neighbours, null while unknown
  let neighErr = '';

  replace(el,
    h('div', { class: 'page-head' }, h('h1', {}, 'Devices'), summary, h('span', { class: 'spacer' }), filter),
    h('div', { class: 'table-wrap' }, h('table', { class: 'dense' },
      h('thead', {}, h('tr', {},
        h('th', {}, 'Name'), h('th', {}, 'MAC address'), h('th', {}, 'Address'), h('th', {}, 'State'),
        h('th', {}, 'Lease ends'), h('th', {}, 'Last seen'), h('th', { class: 'num' }, 'Received'), h('th', { class: 'num' }, 'Sent'), h('th', {}))),
      tbody)),
    h('p', { class: 'muted' }, '"Make static" keeps the address for the device for good; "Forget" drops its lease (and a static lease made here), so its address is free again. Static leases of the configuration ("static · config") are changed on the Config page. A lease "not used yet" (no traffic through the box since the device got it) is given to another device first when the pool runs short.'),
    h('div', { class: 'page-head' }, h('h2', {}, 'IPv6 neighbours'), nsummary),
    h('div', { class: 'table-wrap' }, h('table', { id: 'nb6' },
      h('thead', {}, h('tr', {},
        h('th', {}, 'Address'), h('th', {}, 'MAC address'), h('th', {}, 'Device'), h('th', {}, 'Side'), h('th', {}, 'State'), h('th', {}, 'Confirmed'))),
      nbody)),
  );

  function render() {
    const f = filter.value.trim().toLowerCase();
    const shown = f ? list.filter((d) => `${d.hostname} ${d.mac} ${d.address}`.toLowerCase().includes(f)) : list;
    replace(tbody, shown.length ? shown.map((d) => h('tr', { 'data-mac': d.mac },
      h('td', { class: 'name' }, d.hostname || h('span', { class: 'muted' }, '(no name)')),
      h('td', { class: 'mono' }, d.mac),
      h('td', { class: 'mono' }, d.address),
      h('td', { class: 'pills' }, h('span', { class: `pill ${STATE[d.state] || ''}` }, d.state),
        d.static ? [' ', h('span', { class: 'pill', title: d.in_config ? 'a static lease of the configuration' : 'made static here' }, d.in_config ? 'static · config' : 'static')] : null,
        // A starvation's leases look like this: given back first when the pool runs short.
        d.unproven ? [' ', h('span', { class: 'pill warn', title: 'no traffic through the box since it got this address: the lease goes first when the pool runs short' }, 'not used yet')] : null),
      h('td', { class: 'nowrap' }, d.expiry ? (Date.parse(d.expiry) > Date.now() ? `in ${duration((Date.parse(d.expiry) - Date.now()) / 1000)}` : 'ended') : '–'),
      h('td', { class: 'nowrap' }, ago(d.last_seen)),
      h('td', { class: 'num' }, bytes(d.bytes_in)),
      h('td', { class: 'num' }, bytes(d.bytes_out)),
      h('td', { class: 'actions' }, h('div', { class: 'acts' },
        d.static ? null : h('button', { class: 'btn small', type: 'button', 'data-action': 'static', onclick: () => act(d, 'static') }, 'Make static'),
        // A static lease of the config is the config's to drop.
        d.in_config ? h('a', { class: 'btn small', href: '#/config', 'data-action': 'config' }, 'Edit in Config')
          : h('button', { class: 'btn small danger', type: 'button', 'data-action': 'forget', onclick: () => act(d, 'forget') }, 'Forget'))),
    )) : h('tr', {}, h('td', { colspan: 9, class: 'empty' }, list.length ? 'No device matches.' : 'No device has asked for an address yet.')));
    renderNeigh(f);
  }

  function renderNeigh(f) {
    if (neigh === null) return;
    const byMAC = new Map(list.map((d) => [d.mac, d.hostname]));
    const v6 = neigh.filter((n) => n.ip.includes(':'));
    const shown = f ? v6.filter((n) => `${n.ip} ${n.mac || ''} ${byMAC.get(n.mac) || ''}`.toLowerCase().includes(f)) : v6;
    nsummary.textContent = neighErr || `${count(v6.filter((n) => n.side === 'lan').length)} on the LAN · ${count(v6.filter((n) => n.side === 'wan').length)} on the WAN`;
    replace(nbody, shown.length ? shown.map((n) => h('tr', { 'data-ip': n.ip, 'data-side': n.side },
      h('td', { class: 'mono addr' }, n.ip),
      h('td', { class: 'mono' }, n.mac || '–'),
      h('td', { class: 'name' }, byMAC.get(n.mac) || h('span', { class: 'muted' }, n.side === 'wan' ? '(the ISP)' : '–')),
      h('td', {}, n.port ? `${n.side} · ${n.port}` : n.side),
      h('td', {}, h('span', { class: `pill ${NEIGH[n.state] || ''}` }, n.state || (n.resolved ? 'resolved' : 'incomplete'))),
      h('td', { class: 'nowrap' }, n.resolved ? ago(n.confirmed) : '–'),
    )) : h('tr', {}, h('td', { colspan: 6, class: 'empty' }, v6.length ? 'No neighbour matches.' : 'No IPv6 neighbour known.')));
  }

  async function act(d, what) {
    const name = d.hostname || d.mac;
    if (what === 'forget' && !confirm(`Forget ${name}? Its address becomes free for others.`)) return;
    try {
      if (what === 'static') await api(`/api/devices/${encodeURIComponent(d.mac)}/static`, { method: 'POST' });
      else await api(`/api/devices/${encodeURIComponent(d.mac)}`, { method: 'DELETE' });
      toast(what === 'static' ? `${name} keeps ${d.address} from now on.` : `${name} forgotten.`, 'ok');
    } catch (e) {
      toast(`${what === 'static' ? 'Make static' : 'Forget'} failed: ${e.message}`, 'bad');
    }
    load();
  }

  async function load() {
    try {
      const a = await api('/api/devices');
      list = a.devices;
      summary.textContent = `${count(a.online)} online · ${count(list.length)} known`;
      try {
        neigh = (await api('/api/neighbours')).neighbours;
        neighErr = '';
      } catch (e) {
        neigh = [];
        neighErr = `Cannot load the neighbours: ${e.message}`;
      }
      render();
    } catch (e) {
      replace(tbody, h('tr', {}, h('td', { colspan: 9, class: 'empty' }, `Cannot load the devices: ${e.message}`)));
    }
  }
  return every(5000, load);
}

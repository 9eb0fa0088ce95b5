// Connections: the NAT connection table and the IPv6 firewall's (kind
// "routed": untranslated, listed but not killed), filtered, sorted and
// paged on the server (it may hold 100k entries); a NAT connection can be
// killed.

import { api } from '../api.js';
import { h, replace, count, bytes, duration, debounce, toast } from '../dom.js';

// The tables' state names (IPv6 connections use the same ones).
const STATES = ['', 'unreplied', 'replied', 'syn_sent', 'syn_recv', 'established', 'fin_wait', 'close_wait', 'last_ack', 'time_wait', 'close'];

export default function connections(el) {
  const q = { addr: '', port: '', proto: '', state: '', kind: '', sort: 'bytes', order: 'desc', offset: 0, limit: 100 };
  let total = 0;

  const input = (name, attrs) => {
    const i = h('input', { id: `ct-${name}`, ...attrs, oninput: debounce(() => { q[name] = i.value.trim(); q.offset = 0; load(); }, 300) });
    return i;
  };
  const select = (name, options) => h('select', {
    id: `ct-${name}`,
    onchange: (e) => { q[name] = name === 'limit' ? Number(e.target.value) : e.target.value; q.offset = 0; load(); },
  }, options.map(([v, label]) => h('option', { value: v, selected: q[name] === v }, label)));

  const tbody = h('tbody', { id: 'ct-body' });
  const info = h('span', { class: 'muted', id: 'ct-info' });
  const prev = h('button', { class: 'btn', type: 'button', id: 'ct-prev', onclick: () => { q.offset = Math.max(0, q.offset - q.limit); load(); } }, '← Previous');
  const next = h('button', { class: 'btn', type: 'button', id: 'ct-next', onclick: () => { q.offset += q.limit; load(); } }, 'Next →');
  const auto = h('input', { type: 'checkbox', id: 'ct-auto', checked: true });
  const errBox = h('div', { class: 'errors', hidden: true });

  replace(el,
    h('div', { class: 'page-head' }, h('h1', {}, 'Connections'), h('span', { class: 'muted', id: 'ct-total' }),
      h('span', { class: 'spacer' }), h('label', { class: 'row muted' }, auto, 'Auto-refresh')),
    h('div', { class: 'filters' },
      h('label', {}, 'Address or prefix', input('addr', { placeholder: '192.168.1.0/24 or 2001:db8::/48' })),
      h('label', {}, 'Port', input('port', { placeholder: '443', inputmode: 'numeric' })),
      h('label', {}, 'Protocol', select('proto', [['', 'any'], ['tcp', 'TCP'], ['udp', 'UDP'], ['icmp', 'ICMP'], ['icmpv6', 'ICMPv6']])),
      h('label', {}, 'Kind', select('kind', [['', 'any'], ['masquerade', 'masquerade'], ['forward', 'port forward'], ['hairpin', 'hairpin'], ['routed', 'IPv6 (routed)']])),
      h('label', {}, 'State', select('state', STATES.map((s) => [s, s || 'any']))),
      h('label', {}, 'Sort by', select('sort', [['bytes', 'bytes'], ['packets', 'packets'], ['age', 'age']])),
      h('label', {}, 'Order', select('order', [['desc', 'largest / oldest first'], ['asc', 'smallest / newest first']])),
      h('label', {}, 'Per page', select('limit', [['50', '50'], ['100', '100'], ['500', '500']]))),
    errBox,
    h('div', { class: 'table-wrap' }, h('table', {},
      h('thead', {}, h('tr', {},
        h('th', {}, 'Proto'), h('th', {}, 'State'), h('th', {}, 'Source'), h('th', {}, 'Destination'),
        h('th', {}, 'Translated'), h('th', { class: 'num' }, 'Packets'), h('th', { class: 'num' }, 'Bytes'),
        h('th', { class: 'num' }, 'Age'), h('th', {}))),
      tbody)),
    h('div', { class: 'pager' }, info, prev, next),
  );
  el.querySelector('#ct-limit').value = String(q.limit);

  let seq = 0;
  async function load() {
    const mine = ++seq;
    let page;
    try {
      page = await api('/api/conntrack', { query: q });
    } catch (e) {
      if (mine !== seq || !tbody.isConnected) return;
      errBox.hidden = false;
      errBox.textContent = e.message;
      return;
    }
    if (mine !== seq || !tbody.isConnected) return; // a newer query is on its way, or the page is gone
    errBox.hidden = true;
    total = page.total;
    if (q.offset >= total && total > 0) { q.offset = Math.floor((total - 1) / q.limit) * q.limit; load(); return; }
    const now = Date.now();
    replace(tbody, page.entries.length ? page.entries.map((c) => {
      const routed = c.kind === 'routed';
      return h('tr', { 'data-id': c.id, 'data-kind': c.kind || null },
        h('td', {}, c.proto === 'icmpv6' ? 'ICMPv6' : c.proto.toUpperCase()),
        h('td', {}, h('span', { class: `pill ${c.state === 'established' ? 'ok' : ''}` }, c.state)),
        h('td', { class: 'mono addr' }, c.src),
        h('td', { class: 'mono addr' }, c.dst),
        h('td', { class: 'mono muted addr' }, routed ? 'routed (IPv6)' : c.nat_src || c.nat_dst ? `${c.nat_src || '·'} → ${c.nat_dst || '·'}` : ''),
        h('td', { class: 'num' }, count(c.packets)),
        h('td', { class: 'num' }, routed && !c.bytes ? '–' : bytes(c.bytes)),
        // The IPv6 table keeps no creation time: its idle time left instead.
        h('td', { class: 'num', title: c.expires ? `expires ${new Date(c.expires).toLocaleString()}` : null },
          c.created ? duration((now - Date.parse(c.created)) / 1000) : c.expires ? `expires in ${duration((Date.parse(c.expires) - now) / 1000)}` : '–'),
        h('td', { class: 'actions' }, routed ? null : h('button', { class: 'btn small danger', type: 'button', onclick: () => kill(c) }, 'Kill')),
      );
    }) : h('tr', {}, h('td', { colspan: 9, class: 'empty' }, 'No connections match.')));
    const first = total ? page.offset + 1 : 0;
    const last = page.offset + page.entries.length;
    info.textContent = `${count(first)}–${count(last)} of ${count(total)}`;
    document.getElementById('ct-total').textContent = `${count(total)} matching`;
    prev.disabled = page.offset === 0;
    next.disabled = last >= total;
  }

  async function kill(c) {
    if (!confirm(`Kill ${c.proto} ${c.src} → ${c.dst}?`)) return;
    try {
      await api(`/api/conntrack/${c.id}`, { method: 'DELETE' });
      toast('Connection removed.', 'ok');
    } catch (e) {
      toast(`Kill failed: ${e.message}`, 'bad');
    }
    load();
  }

  load();
  const timer = setInterval(() => { if (auto.checked) load(); }, 3000);
  return () => clearInterval(timer);
}

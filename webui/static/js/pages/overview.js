// Overview: the network at a glance (WAN, Internet, devices, alarms), the
// ports with link state and live rates, charts of the last minutes, 24
// hours or 7 days (received and sent apart, one colour per port), drops,
// CPU and interrupts, the in-kernel fast path's state and rate.

import { api } from '../api.js';
import { h, replace, meter, count, fmtPPS, fmtBPS, speed, si, duration } from '../dom.js';
import { TimeChart, PALETTE } from '../chart.js';

const DROP_NAMES = {
  ring: 'RX ring full',
  rules: 'Dropped by rules',
  nat_table_full: 'NAT table full',
  malformed: 'Malformed frames',
  nat_ipv6: 'Dropped by the IPv6 router',
};

function tile(label, id, href) {
  const t = h(href ? 'a' : 'div', { class: 'tile', href },
    h('div', { class: 'label' }, label),
    h('div', { class: 'value', id, 'data-value': '0' }, '–'),
    h('div', { class: 'sub', id: `${id}-sub` }, ''));
  return t;
}

function set(id, text, value, sub) {
  const el = document.getElementById(id);
  if (!el) return;
  el.textContent = text;
  if (value !== undefined) el.dataset.value = String(value);
  if (sub !== undefined) document.getElementById(`${id}-sub`).textContent = sub;
}

// fastPathCost says what the fast path's programs cost a frame of the
// box's kind of flow (a FastPathCost, docs/api.md) and whether the kernel
// compiles them; '' before they were measured.
function fastPathCost(c) {
  if (!c || !c.hit_ns) return '';
  return `${c.hit_ns.toFixed(0)} ns/frame ${c.jit ? 'JIT' : 'interpreted'}`;
}

const until = (t) => (t ? duration((Date.parse(t) - Date.now()) / 1000) : '–');

// Global (not link-local) IPv6 addresses.
const globals = (addrs) => (addrs || []).filter((a) => !a.toLowerCase().startsWith('fe80:'));

// lifetimes is "valid 1h 59m · preferred 59m" of an IPv6 prefix, or "deprecated" past its preferred lifetime.
function lifetimes(p) {
  if (!p.valid) return '';
  const pref = p.preferred && Date.parse(p.preferred) > Date.now() ? `preferred ${until(p.preferred)}` : 'deprecated';
  return `valid ${until(p.valid)} · ${pref}`;
}

const DHCPV6 = { bound: 'ok', requesting: 'warn', none: 'bad' };

const ORIGINS = { 'link-local': 'link-local', slaac: 'SLAAC', dhcpv6: 'DHCPv6' };
const ADDR_STATES = { preferred: 'ok', deprecated: 'warn', tentative: 'warn', duplicate: 'bad' };

// wanAddress is one of the box's WAN addresses: the address and its state, then where it comes from and its
// lifetimes ("SLAAC · valid 1h 29m · preferred 29m").
function wanAddress(a) {
  let life = a.valid ? `valid ${until(a.valid)}` : '';
  if (life && a.state === 'preferred' && a.preferred) life += ` · preferred ${until(a.preferred)}`;
  return h('div', { 'data-address': a.address, 'data-state': a.state },
    h('span', { class: 'mono' }, a.address), ' ', h('span', { class: `pill ${ADDR_STATES[a.state] || ''}` }, a.state),
    h('div', { class: 'muted' }, [ORIGINS[a.origin] || a.origin, life].filter(Boolean).join(' · ')));
}

// ipv6WANRows are the WAN card's IPv6 rows: the DHCPv6 state, the delegated prefixes with their lifetimes, the
// box's WAN addresses (global ones first) and the IPv6 gateway.
function ipv6WANRows(v6) {
  if (!v6) return [];
  const state = v6.dhcpv6_client && v6.dhcpv6_client !== v6.dhcpv6 ? `${v6.dhcpv6} (${v6.dhcpv6_client})` : v6.dhcpv6;
  const del = v6.delegated || [];
  const addrs = v6.wan_addresses || [];
  const wan = [...addrs.filter((a) => a.origin !== 'link-local'), ...addrs.filter((a) => a.origin === 'link-local')];
  return [
    ['DHCPv6', h('span', { class: `pill ${DHCPV6[v6.dhcpv6] || ''}` }, state), 'wan-dhcpv6'],
    ['IPv6 prefix', del.length ? del.map((p) => h('div', { 'data-prefix': p.prefix }, h('span', { class: 'mono' }, p.prefix),
      h('div', { class: 'muted' }, lifetimes(p)))) : 'none delegated', 'wan-ipv6-prefix'],
    ['IPv6 addresses', wan.length ? wan.map(wanAddress) : 'none', 'wan-ipv6-address'],
    ['IPv6 gateway', v6.gateway ? h('span', { class: 'mono' }, v6.gateway) : '–', 'wan-ipv6-gateway'],
  ];
}

// lanCard renders the LAN side: the DHCP pool, the LAN's IPv6 /64 (and deprecated ones still valid), the box's
// IPv6 addresses and the IPv6 router's tables.
function lanCard(el, r, counters) {
  const d = r.dhcp;
  const v6 = r.ipv6;
  const lan = v6 ? v6.lan || [] : [];
  const cur = lan.filter((p) => !p.deprecated);
  const dep = lan.filter((p) => p.deprecated);
  const addrs = v6 ? globals(v6.lan_addresses) : [];
  const prefixRows = (ps) => ps.map((p) => h('div', { 'data-prefix': p.prefix }, h('span', { class: 'mono' }, p.prefix), h('div', { class: 'muted' }, lifetimes(p))));
  const rows = [
    ['DHCP pool', d.enabled ? `${d.pool_start} – ${d.pool_end} · ${count(d.leases_in_use)} of ${count(d.pool_size)} in use` : 'DHCP server off', 'lan-dhcp'],
    v6 ? ['IPv6 prefix', cur.length ? prefixRows(cur) : 'none (no delegation)', 'lan-ipv6-prefix'] : ['IPv6', 'off', 'lan-ipv6-prefix'],
    dep.length ? ['Deprecated', prefixRows(dep), 'lan-ipv6-deprecated'] : null,
    addrs.length ? ['IPv6 address', h('span', { class: 'mono' }, addrs.join(', ')), 'lan-ipv6-address'] : null,
    v6 && counters ? ['IPv6 tables', `${count(counters.conns)} connections · ${count(counters.neighbours)} neighbours`, 'lan-ipv6-tables'] : null,
  ].filter(Boolean);
  replace(el,
    h('div', { class: 'port-head' }, h('span', { class: 'name' }, 'LAN'), h('span', { class: 'iface' }, v6 ? 'IPv4 · IPv6' : 'IPv4')),
    h('dl', { class: 'kv' }, rows.map(([k, v, id]) => [h('dt', {}, k), h('dd', { id }, v)])));
}

// pppoeRows are the WAN card's rows of a PPPoE session.
function pppoeRows(p) {
  return [
    ['PPPoE session', p.state === 'up' ? `up for ${p.up_since ? duration((Date.now() - Date.parse(p.up_since)) / 1000) : '–'} · echo ${(1000 * p.echo_rtt_s).toFixed(1)} ms` : p.state, 'wan-pppoe'],
    p.ac_mac ? ['Access concentrator', `${p.ac_name || '–'} (${p.ac_mac})`] : null,
    ['Reconnects', `${count(p.reconnects)}${p.last_down_reason ? ` · last down: ${p.last_down_reason}` : ''}`, 'wan-pppoe-reconnects'],
  ];
}

// wanCard renders the router's WAN, Internet, DHCP, DNS and time status.
function wanCard(el, r) {
  const w = r.wan;
  const up = w.state === 'bound' || w.state === 'renewing';
  const inet = w.internet || {};
  const link = w.link || {};
  const vlan = link.vlan ? `VLAN ${link.vlan.id}` : '';
  const ppp = link.pppoe;
  const pppLabel = ppp ? `PPPoE (${ppp.session_id ? `${ppp.ac_name || ppp.ac_mac}, session ${ppp.session_id}` : ppp.state})` : '';
  const rows = [
    ['Link', [link.interface || w.port, link.vlan ? `${vlan} (priority ${link.vlan.pcp}, control ${link.vlan.control_pcp})` : (ppp ? '' : 'untagged'), pppLabel].filter(Boolean).join(' › '), 'wan-link'],
    ['Address', w.address || 'none', 'wan-address'],
    ['Gateway', w.gateway || '–', 'wan-gateway'],
    ['DNS servers', (w.dns || []).join(', ') || '–'],
    ...(ppp ? pppoeRows(ppp) : [w.mode === 'dhcp' ? ['Lease', w.expiry ? `expires in ${until(w.expiry)} · renews in ${until(w.t1)}` : '–', 'wan-lease'] : ['Address from', 'static configuration']]),
    w.mtu ? ['MTU', String(w.mtu)] : null,
    ['Internet', inet.probe ? (inet.reachable ? `reachable · ${(1000 * inet.rtt_s).toFixed(1)} ms (${inet.probe})` : `not reachable (${inet.probe})`) : 'not probed', 'wan-internet'],
    ['Clock', r.time.synced ? `synced with ${r.time.server || 'NTP'}, offset ${(1000 * r.time.offset_s).toFixed(1)} ms` : 'not synced'],
    ['DNS server', r.dns.enabled ? `${count(r.dns.queries)} queries · ${r.dns.queries ? Math.round((100 * r.dns.cache_hits) / r.dns.queries) : 0}% from cache` : 'off'],
    ...ipv6WANRows(r.ipv6),
  ].filter(Boolean);
  replace(el,
    h('div', { class: 'port-head' }, h('span', { class: 'name' }, 'WAN'), h('span', { class: 'iface' }, [w.port, vlan, w.mode].filter(Boolean).join(' · ')),
      h('span', { class: `pill ${up ? 'ok' : w.state === 'rebinding' ? 'warn' : 'bad'}`, id: 'wan-state' }, w.state)),
    h('dl', { class: 'kv' }, rows.map(([k, v, id]) => [h('dt', {}, k), h('dd', { id }, v)])));
}

export default function overview(el, { info, stream }) {
  const ports = h('div', { class: 'grid', id: 'ports' });
  const alarm = h('div', { class: 'alarm', id: 'loop-alarm', role: 'alert', hidden: true });
  const alarms = h('ul', { class: 'alarms', id: 'alarms', 'aria-label': 'alarms', hidden: true });
  const wan = h('div', { class: 'card', id: 'wan', hidden: true });
  const lan = h('div', { class: 'card', id: 'lan', hidden: true });
  const drops = h('div', { class: 'bars', id: 'drops' });
  const cpus = h('div', { class: 'bars', id: 'cpus' });
  const irqs = h('div', { class: 'bars', id: 'irqs' });
  const boxes = { rx: h('div', { class: 'chart', id: 'chart-rx' }), tx: h('div', { class: 'chart', id: 'chart-tx' }),
    cpu: h('div', { class: 'chart', id: 'chart-cpu' }), drops: h('div', { class: 'chart', id: 'chart-drops' }),
    conns: h('div', { class: 'chart', id: 'chart-conns' }) };
  let range = 'live';
  let unit = 'bps';
  const rangeBtns = ['live', '24h', '7d'].map((r) => h('button', { type: 'button', id: `range-${r}`, class: r === range ? 'active' : '',
    'aria-pressed': String(r === range), onclick: () => setRange(r) }, { live: '5 min', '24h': '24 h', '7d': '7 days' }[r]));
  const unitBtns = ['bps', 'pps'].map((u) => h('button', { type: 'button', id: `unit-${u}`, class: u === unit ? 'active' : '',
    'aria-pressed': String(u === unit), onclick: () => setUnit(u) }, u === 'bps' ? 'bits/s' : 'packets/s'));

  const router = info.features.router;
  replace(el,
    h('div', { class: 'page-head' }, h('h1', {}, 'Overview')),
    h('div', { class: 'stack' },
      alarm, alarms,
      h('div', { class: 'tiles' },
        router ? tile('Download (WAN)', 'wan-down') : null,
        router ? tile('Upload (WAN)', 'wan-up') : null,
        router ? tile('Devices online', 'devices-online', info.features.devices ? '#/devices' : undefined) : null,
        tile('Received, data ports', 'total-rx-pps'),
        tile('Sent, data ports', 'total-tx-pps'),
        tile('Drops', 'total-drops'),
        info.features.conntrack ? tile('Connections', 'conntrack') : null,
        tile('Fast path', 'fast-path'),
        tile('Worker restarts', 'restarts'),
      ),
      h('div', { class: 'grid wide', id: 'sides' }, wan, lan),
      ports,
      h('div', { class: 'row chart-controls' }, h('h2', {}, 'History'), h('span', { class: 'spacer' }),
        h('div', { class: 'tabs', role: 'group', 'aria-label': 'time range' }, rangeBtns),
        h('div', { class: 'tabs', role: 'group', 'aria-label': 'unit' }, unitBtns)),
      h('div', { class: 'grid wide' },
        h('div', { class: 'card' }, h('div', { class: 'chart-title' }, h('h2', { id: 'title-rx' }, 'Received per port')), boxes.rx),
        h('div', { class: 'card' }, h('div', { class: 'chart-title' }, h('h2', { id: 'title-tx' }, 'Sent per port')), boxes.tx),
        h('div', { class: 'card' }, h('div', { class: 'chart-title' }, h('h2', {}, 'CPU busy per core')), boxes.cpu),
        h('div', { class: 'card' }, h('div', { class: 'chart-title' }, h('h2', {}, 'Drops per second')), boxes.drops),
        info.features.conntrack ? h('div', { class: 'card' }, h('div', { class: 'chart-title' }, h('h2', {}, 'Connections')), boxes.conns) : null,
      ),
      h('div', { class: 'grid three' },
        h('div', { class: 'card' }, h('h2', {}, 'Drops by reason'), drops),
        h('div', { class: 'card' }, h('h2', {}, 'CPU per core'), cpus),
        h('div', { class: 'card' }, h('h2', {}, 'Interrupts per second'), irqs),
      ),
    ),
  );

  const live = info.history_s || 300;
  let charts = {};
  let hist = null; // the history answer shown
  function makeCharts() {
    for (const c of Object.values(charts)) c.destroy();
    const w = range === 'live' ? live : 0;
    const r = { live: live, '24h': 86400, '7d': 7 * 86400 }[range];
    const u = unit === 'bps' ? 'b/s' : 'pps';
    charts = { rx: new TimeChart(boxes.rx, { unit: u, windowS: w, rangeS: r }), tx: new TimeChart(boxes.tx, { unit: u, windowS: w, rangeS: r }),
      cpu: new TimeChart(boxes.cpu, { unit: '%', windowS: w, rangeS: r, height: 180 }), drops: new TimeChart(boxes.drops, { unit: '/s', windowS: w, rangeS: r, height: 180 }) };
    if (info.features.conntrack) charts.conns = new TimeChart(boxes.conns, { unit: '', windowS: w, rangeS: r, height: 180 });
  }
  const colour = (i) => PALETTE[i % PALETTE.length];
  function draw() {
    if (!hist) return;
    const k = unit === 'bps' ? 'bps' : 'pps';
    charts.rx.set(hist.time, hist.ports.map((p, i) => ({ label: p.name, color: colour(i), values: p[`rx_${k}`] })));
    charts.tx.set(hist.time, hist.ports.map((p, i) => ({ label: p.name, color: colour(i), values: p[`tx_${k}`] })));
    charts.cpu.set(hist.time, hist.cpus.map((c, i) => ({ label: `cpu${c.cpu}`, color: colour(i + 4), values: c.busy })));
    charts.drops.set(hist.time, [{ label: 'drops', color: '#dc2626', values: hist.drops }]);
    if (charts.conns) charts.conns.set(hist.time, [{ label: 'connections', color: '#7c3aed', values: hist.conns || hist.time.map(() => null) }]);
  }
  let loaded = false;
  const early = [];
  async function load() {
    loaded = false;
    try {
      hist = await api('/api/stats/history', { query: { range } });
    } catch {
      hist = { time: [], ports: [], cpus: [], drops: [], conns: [] };
    }
    makeCharts();
    draw();
    loaded = true;
    for (const m of early.splice(0)) if (!hist.time.length || Date.parse(m.time) / 1000 > hist.time[hist.time.length - 1]) pushLive(m);
  }
  function setRange(r) {
    range = r;
    rangeBtns.forEach((b) => { b.classList.toggle('active', b.id === `range-${r}`); b.setAttribute('aria-pressed', String(b.id === `range-${r}`)); });
    load();
  }
  function setUnit(u) {
    unit = u;
    unitBtns.forEach((b) => { b.classList.toggle('active', b.id === `unit-${u}`); b.setAttribute('aria-pressed', String(b.id === `unit-${u}`)); });
    makeCharts();
    draw();
  }
  // pushLive appends a stream message to the live charts (and to hist, so
  // that a change of unit redraws it).
  function pushLive(m) {
    if (range !== 'live' || !m.interval_s) return;
    const names = m.ports.map((p) => p.name).join('\n');
    if (names !== hist.ports.map((p) => p.name).join('\n')) { load(); return; }
    const x = Date.parse(m.time) / 1000;
    hist.time.push(x);
    m.ports.forEach((p, i) => { for (const k of ['rx_pps', 'tx_pps', 'rx_bps', 'tx_bps']) hist.ports[i][k].push(p[k]); });
    hist.cpus.forEach((c) => { const cm = m.cpus.find((q) => q.cpu === c.cpu); c.busy.push(cm ? cm.busy : null); });
    hist.drops.push(m.drops.reduce((a, d) => a + d.per_s, 0));
    if (hist.conns) hist.conns.push(m.conntrack ? m.conntrack.entries : null);
    const cut = x - live;
    let drop = 0;
    while (drop < hist.time.length && hist.time[drop] < cut) drop++;
    if (drop) {
      hist.time = hist.time.slice(drop);
      hist.ports.forEach((p) => { for (const k of ['rx_pps', 'tx_pps', 'rx_bps', 'tx_bps']) p[k] = p[k].slice(drop); });
      hist.cpus.forEach((c) => { c.busy = c.busy.slice(drop); });
      hist.drops = hist.drops.slice(drop);
      if (hist.conns) hist.conns = hist.conns.slice(drop);
    }
    draw();
  }
  load();
  const refresh = setInterval(() => { if (range !== 'live') load(); }, 60000);

  const portCards = new Map();
  function portCard(p, i) {
    let c = portCards.get(p.name);
    if (c) return c;
    const swatch = h('span', { class: 'swatch' });
    swatch.style.background = colour(i);
    const state = h('span', { class: 'pill' });
    const rx = h('div', { class: 'value', 'data-metric': 'rx_pps', 'data-port': p.name }, '–');
    const tx = h('div', { class: 'value', 'data-metric': 'tx_pps', 'data-port': p.name }, '–');
    const rxb = h('div', { class: 'sub' });
    const txb = h('div', { class: 'sub' });
    const totals = h('dl', { class: 'kv' });
    const card = h('div', { class: `card port${p.kind === 'host' ? ' host' : ''}`, 'data-port': p.name },
      h('div', { class: 'port-head' }, swatch, h('span', { class: 'name' }, p.name), h('span', { class: 'iface' }, p.iface), state),
      h('div', { class: 'big2' },
        h('div', {}, h('div', { class: 'label' }, 'RX'), rx, rxb),
        h('div', {}, h('div', { class: 'label' }, 'TX'), tx, txb)),
      totals);
    c = { card, state, rx, tx, rxb, txb, totals };
    portCards.set(p.name, c);
    return c;
  }

  function update(msg) {
    if (!loaded) early.push(msg);
    else pushLive(msg);
    updateFigures(msg);
  }

  function portState(p) {
    if (p.kind === 'host') return ['', 'the box itself'];
    if (!p.up) return ['bad', 'down'];
    if (p.blocked) return ['bad', 'blocked: loop'];
    return ['ok', `up · ${speed(p.speed_mbps)}`];
  }

  function updateFigures(msg) {
    let rx = 0, tx = 0, rxb = 0, txb = 0;
    const cards = msg.ports.map((p, i) => {
      if (p.kind !== 'host') { rx += p.rx_pps; tx += p.tx_pps; rxb += p.rx_bps; txb += p.tx_bps; }
      const c = portCard(p, i);
      const [cls, text] = portState(p);
      c.state.className = `pill ${cls}`;
      c.state.textContent = text;
      c.rx.textContent = fmtPPS(p.rx_pps);
      c.rx.dataset.value = String(p.rx_pps);
      c.tx.textContent = fmtPPS(p.tx_pps);
      c.tx.dataset.value = String(p.tx_pps);
      c.rxb.textContent = fmtBPS(p.rx_bps);
      c.txb.textContent = fmtBPS(p.tx_bps);
      replace(c.totals,
        h('dt', {}, 'Received'), h('dd', {}, `${count(p.rx_packets)} pkts`),
        h('dt', {}, 'Transmitted'), h('dd', {}, `${count(p.tx_packets)} pkts`),
        h('dt', {}, 'Ring drops'), h('dd', {}, count(p.ring_drops)));
      return c.card;
    });
    const looped = msg.ports.filter((p) => p.blocked);
    alarm.hidden = looped.length === 0;
    replace(alarm, looped.map((p) => h('div', { 'data-port': p.name },
      p.loop_with && p.loop_with !== p.name ?
        `Loop between ports ${p.loop_with} and ${p.name}: ${p.name} is blocked until the loop is gone.` :
        `Loop in the segment of port ${p.name}: it is blocked until the loop is gone.`)));
    const other = (msg.alarms || []).filter((a) => a.kind !== 'loop');
    alarms.hidden = other.length === 0;
    replace(alarms, other.map((a) => h('li', { class: `alarm-item ${a.severity}`, 'data-kind': a.kind, role: a.severity === 'bad' ? 'alert' : null },
      h('span', { class: `pill ${a.severity}` }, a.severity === 'bad' ? 'alarm' : 'warning'), ' ', a.message)));
    if (cards.length !== ports.children.length || cards.some((c, i) => ports.children[i] !== c)) {
      replace(ports, cards.length ? cards : h('div', { class: 'card empty' }, 'No data ports configured.'));
    }

    set('total-rx-pps', fmtBPS(rxb), rx, fmtPPS(rx));
    set('total-tx-pps', fmtBPS(txb), tx, fmtPPS(tx));
    if (msg.router) {
      wan.hidden = false;
      wanCard(wan, msg.router);
      lan.hidden = false;
      lanCard(lan, msg.router, msg.ipv6);
      const wp = msg.ports.find((p) => p.name === msg.router.wan.port);
      set('wan-down', wp ? fmtBPS(wp.rx_bps) : '–', wp ? wp.rx_bps : 0, wp ? fmtPPS(wp.rx_pps) : '');
      set('wan-up', wp ? fmtBPS(wp.tx_bps) : '–', wp ? wp.tx_bps : 0, wp ? fmtPPS(wp.tx_pps) : '');
      const d = msg.router.dhcp;
      set('devices-online', d.enabled ? count(d.leases_in_use) : '–', d.leases_in_use, d.enabled ? `of ${count(d.pool_size)} pool addresses` : 'DHCP server off');
    }
    const dropRate = msg.drops.reduce((a, d) => a + d.per_s, 0);
    const dropTotal = msg.drops.reduce((a, d) => a + d.packets, 0);
    set('total-drops', `${si(dropRate)}/s`, dropRate, `${count(dropTotal)} total`);
    if (msg.conntrack) {
      set('conntrack', count(msg.conntrack.entries), msg.conntrack.entries,
        `of ${count(msg.conntrack.capacity)} (${((100 * msg.conntrack.entries) / Math.max(1, msg.conntrack.capacity)).toFixed(0)}%)`);
    }
    set('restarts', count(msg.worker_restarts), msg.worker_restarts, '');
    const fp = msg.fast_path;
    if (!fp) {
      set('fast-path', '–', 0, 'no dataplane');
    } else if (fp.mode === 'off') {
      set('fast-path', 'off', 0, `rings carry every frame: ${fp.reason || 'off'}`);
    } else {
      const cost = fastPathCost(fp.cost);
      set('fast-path', fmtPPS(fp.per_s), fp.per_s, `${fp.mode} · ${count(fp.flows)} flows in the kernel${cost ? ` · ${cost}` : ''}`);
    }

    const maxDrop = Math.max(1, ...msg.drops.map((d) => d.per_s));
    replace(drops, msg.drops.length ? msg.drops.map((d) =>
      h('div', { class: 'bar-row', 'data-reason': d.reason },
        h('span', { class: 'name', title: d.reason }, DROP_NAMES[d.reason] || d.reason),
        meter(d.per_s / maxDrop, d.per_s > 0 ? 'bad' : ''),
        h('span', { class: 'num', title: `${count(d.packets)} total` }, `${si(d.per_s)}/s`))) :
      h('p', { class: 'muted' }, 'No drops reported.'));

    replace(cpus, msg.cpus.length ? msg.cpus.map((c) =>
      h('div', { class: 'bar-row' },
        h('span', { class: 'name' }, `cpu${c.cpu}`),
        meter(c.busy, c.busy > 0.9 ? 'bad' : c.busy > 0.7 ? 'warn' : ''),
        h('span', { class: 'num' }, `${(100 * c.busy).toFixed(0)} %`))) :
      h('p', { class: 'muted' }, 'No CPU data.'));

    const maxIrq = Math.max(1, ...msg.irqs.map((q) => q.per_s));
    replace(irqs, msg.irqs.length ? msg.irqs.map((q) =>
      h('div', { class: 'bar-row' },
        h('span', { class: 'name', title: `IRQ ${q.irq}` }, q.name),
        meter(q.per_s / maxIrq),
        h('span', { class: 'num' }, `${si(q.per_s)}/s`))) :
      h('p', { class: 'muted' }, 'No NIC interrupts.'));
  }

  const unsub = stream.subscribe(update);
  return () => { unsub(); clearInterval(refresh); for (const c of Object.values(charts)) c.destroy(); };
}

// Overview: ports with link state and live rates, packets/s and bits/s
// charts over the last minutes, drops by reason, CPU per core, interrupts
// per NIC vector.

import { api } from '../api.js';
import { h, replace, meter, count, fmtPPS, fmtBPS, speed, si } from '../dom.js';
import { RateChart, PALETTE } from '../chart.js';

const DROP_NAMES = {
  ring: 'RX ring full',
  rules: 'Dropped by rules',
  nat_table_full: 'NAT table full',
  malformed: 'Malformed frames',
};

function tile(label, id) {
  return h('div', { class: 'tile' },
    h('div', { class: 'label' }, label),
    h('div', { class: 'value', id, 'data-value': '0' }, '–'),
    h('div', { class: 'sub', id: `${id}-sub` }, ''));
}

function set(id, text, value, sub) {
  const el = document.getElementById(id);
  if (!el) return;
  el.textContent = text;
  if (value !== undefined) el.dataset.value = String(value);
  if (sub !== undefined) document.getElementById(`${id}-sub`).textContent = sub;
}

export default function overview(el, { info, stream }) {
  const ports = h('div', { class: 'grid', id: 'ports' });
  const alarm = h('div', { class: 'alarm', id: 'loop-alarm', role: 'alert', hidden: true });
  const ppsBox = h('div', { class: 'chart', id: 'chart-pps' });
  const bpsBox = h('div', { class: 'chart', id: 'chart-bps' });
  const drops = h('div', { class: 'bars', id: 'drops' });
  const cpus = h('div', { class: 'bars', id: 'cpus' });
  const irqs = h('div', { class: 'bars', id: 'irqs' });

  replace(el,
    h('div', { class: 'page-head' }, h('h1', {}, 'Overview')),
    h('div', { class: 'stack' },
      alarm,
      h('div', { class: 'tiles' },
        tile('Received', 'total-rx-pps'),
        tile('Transmitted', 'total-tx-pps'),
        tile('Drops', 'total-drops'),
        info.features.conntrack ? tile('Connections', 'conntrack') : null,
        tile('Worker restarts', 'restarts'),
      ),
      ports,
      h('div', { class: 'grid wide' },
        h('div', { class: 'card' }, h('div', { class: 'chart-title' }, h('h2', {}, 'Packets per second')), ppsBox),
        h('div', { class: 'card' }, h('div', { class: 'chart-title' }, h('h2', {}, 'Bits per second')), bpsBox),
      ),
      h('div', { class: 'grid three' },
        h('div', { class: 'card' }, h('h2', {}, 'Drops by reason'), drops),
        h('div', { class: 'card' }, h('h2', {}, 'CPU per core'), cpus),
        h('div', { class: 'card' }, h('h2', {}, 'Interrupts per second'), irqs),
      ),
    ),
  );

  const windowS = info.history_s || 300;
  const pps = new RateChart(ppsBox, { kind: 'pps', unit: 'pps', windowS });
  const bps = new RateChart(bpsBox, { kind: 'bps', unit: 'b/s', windowS });
  let loaded = false;
  const early = [];
  api('/api/stats/history').then((hist) => {
    pps.load(hist);
    bps.load(hist);
  }).catch(() => {
    pps.load({ time: [], ports: [] });
    bps.load({ time: [], ports: [] });
  }).finally(() => {
    loaded = true;
    // Messages that arrived while the history loaded: add what it lacks.
    for (const m of early.splice(0)) {
      const xs = pps.data[0];
      if (!xs.length || Date.parse(m.time) / 1000 > xs[xs.length - 1]) update(m);
      else updateFigures(m);
    }
  });

  const portCards = new Map();
  function portCard(p, i) {
    let c = portCards.get(p.name);
    if (c) return c;
    const swatch = h('span', { class: 'swatch' });
    swatch.style.background = PALETTE[i % PALETTE.length];
    const state = h('span', { class: 'pill' });
    const rx = h('div', { class: 'value', 'data-metric': 'rx_pps', 'data-port': p.name }, '–');
    const tx = h('div', { class: 'value', 'data-metric': 'tx_pps', 'data-port': p.name }, '–');
    const rxb = h('div', { class: 'sub' });
    const txb = h('div', { class: 'sub' });
    const totals = h('dl', { class: 'kv' });
    const card = h('div', { class: 'card port', 'data-port': p.name },
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
    if (!loaded) { early.push(msg); return; }
    pps.push(msg);
    bps.push(msg);
    updateFigures(msg);
  }

  function updateFigures(msg) {
    let rx = 0, tx = 0, rxb = 0, txb = 0;
    const cards = msg.ports.map((p, i) => {
      rx += p.rx_pps; tx += p.tx_pps; rxb += p.rx_bps; txb += p.tx_bps;
      const c = portCard(p, i);
      c.state.className = `pill ${p.up && !p.blocked ? 'ok' : 'bad'}`;
      c.state.textContent = !p.up ? 'down' : p.blocked ? 'blocked: loop' : `up · ${speed(p.speed_mbps)}`;
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
    if (cards.length !== ports.children.length || cards.some((c, i) => ports.children[i] !== c)) {
      replace(ports, cards.length ? cards : h('div', { class: 'card empty' }, 'No data ports configured.'));
    }

    set('total-rx-pps', fmtPPS(rx), rx, fmtBPS(rxb));
    set('total-tx-pps', fmtPPS(tx), tx, fmtBPS(txb));
    const dropRate = msg.drops.reduce((a, d) => a + d.per_s, 0);
    const dropTotal = msg.drops.reduce((a, d) => a + d.packets, 0);
    set('total-drops', `${si(dropRate)}/s`, dropRate, `${count(dropTotal)} total`);
    if (msg.conntrack) {
      set('conntrack', count(msg.conntrack.entries), msg.conntrack.entries,
        `of ${count(msg.conntrack.capacity)} (${((100 * msg.conntrack.entries) / Math.max(1, msg.conntrack.capacity)).toFixed(0)}%)`);
    }
    set('restarts', count(msg.worker_restarts), msg.worker_restarts, '');

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
  return () => { unsub(); pps.destroy(); bps.destroy(); };
}


// Tuning: what each NIC and kernel knob looked like before, what was wanted
// and what it is now.

import { api } from '../api.js';
import { h, replace, every } from '../dom.js';

const STATUS = { ok: 'ok', changed: 'ok', differs: 'warn', unavailable: '', error: 'bad' };

export default function tuning(el) {
  const body = h('div', { class: 'stack', id: 'tuning' });
  replace(el, h('div', { class: 'page-head' }, h('h1', {}, 'Tuning')), body);

  async function load() {
    let reports;
    try {
      reports = (await api('/api/tuning')).reports;
    } catch (e) {
      replace(body, h('div', { class: 'errors' }, `Cannot load tuning reports: ${e.message}`));
      return;
    }
    const byTarget = new Map();
    for (const r of reports) {
      if (!byTarget.has(r.target)) byTarget.set(r.target, []);
      byTarget.get(r.target).push(r);
    }
    const counts = {};
    for (const r of reports) counts[r.status] = (counts[r.status] || 0) + 1;
    replace(body,
      h('div', { class: 'row' }, Object.entries(counts).map(([s, n]) => h('span', { class: `pill ${STATUS[s] || ''}` }, `${n} ${s}`))),
      reports.length ? [...byTarget].map(([target, rs]) => h('div', { class: 'table-wrap' }, h('table', {},
        h('thead', {}, h('tr', {}, h('th', {}, target), h('th', {}, 'Before'), h('th', {}, 'Wanted'), h('th', {}, 'Now'), h('th', {}, 'Status'), h('th', {}, 'Notes'))),
        h('tbody', {}, rs.map((r) => h('tr', { 'data-knob': r.knob },
          h('td', { class: 'mono' }, r.knob, r.resetsLink ? h('span', { class: 'muted', title: 'changing it resets the link' }, ' ⟲') : ''),
          h('td', { class: 'mono' }, r.before || ''),
          h('td', { class: 'mono' }, r.wanted || ''),
          h('td', { class: 'mono' }, r.after || ''),
          h('td', {}, h('span', { class: `pill ${STATUS[r.status] || ''}` }, r.status)),
          h('td', { class: 'muted' }, r.message || ''))))))) :
        h('div', { class: 'card empty' }, 'No knobs reported.'));
  }
  return every(10000, load);
}

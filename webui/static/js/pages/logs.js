// Logs: the supervisor's log and the rule `log` records, filtered, with a
// live tail (a long poll of /api/logs).

import { api } from '../api.js';
import { h, replace, count } from '../dom.js';

const LEVEL = { debug: '', info: '', warn: 'warn', error: 'bad' };

function timeOf(t) {
  const d = new Date(t);
  return d.toLocaleTimeString(undefined, { hour12: false }) + '.' + String(d.getMilliseconds()).padStart(3, '0');
}

export default function logs(el) {
  const q = { level: '', source: '', q: '' };
  let entries = [];
  let last = 0;
  let gen = 0; // bumps on every filter change: older polls are dropped
  const max = 1000;
  const tail = h('input', { type: 'checkbox', id: 'log-tail', checked: true, onchange: () => { if (tail.checked) poll(gen); } });
  const text = h('input', { id: 'log-q', placeholder: 'text, rule, address…', 'aria-label': 'search the log',
    oninput: () => { q.q = text.value.trim(); restart(); } });
  const level = h('select', { id: 'log-level', 'aria-label': 'lowest level', onchange: () => { q.level = level.value; restart(); } },
    [['', 'all levels'], ['info', 'info and up'], ['warn', 'warnings and errors'], ['error', 'errors']].map(([v, l]) => h('option', { value: v }, l)));
  const source = h('select', { id: 'log-source', 'aria-label': 'source', onchange: () => { q.source = source.value; restart(); } },
    [['', 'everything'], ['system', 'the box'], ['rule', 'rule log records']].map(([v, l]) => h('option', { value: v }, l)));
  const tbody = h('tbody', { id: 'log-body' });
  const info = h('span', { class: 'muted', id: 'log-info' });

  replace(el,
    h('div', { class: 'page-head' }, h('h1', {}, 'Logs'), info, h('span', { class: 'spacer' }),
      h('label', { class: 'row muted' }, tail, 'Live')),
    h('div', { class: 'filters' },
      h('label', {}, 'Search', text), h('label', {}, 'Level', level), h('label', {}, 'Source', source)),
    h('div', { class: 'table-wrap log-wrap' }, h('table', { class: 'log' },
      h('thead', {}, h('tr', {}, h('th', {}, 'Time'), h('th', {}, 'Level'), h('th', {}, 'Message'))),
      tbody)),
    h('p', { class: 'muted' }, 'A rule logs its matches with the ', h('code', {}, 'log'), ' statement (', h('code', {}, 'tcp dport 22 log drop'),
      '), at most 10 records a second. Remote syslog is set on the Admin page.'),
  );

  function row(e) {
    const attrs = (e.attrs || []).map((a) => h('span', { class: 'attr' }, h('span', { class: 'k' }, a.k), '=', a.v));
    return h('tr', { 'data-seq': e.seq, 'data-source': e.source, class: `lvl-${e.level}` },
      h('td', { class: 'mono nowrap' }, timeOf(e.time)),
      h('td', {}, h('span', { class: `pill ${LEVEL[e.level] || ''}` }, e.source === 'rule' ? 'rule' : e.level)),
      h('td', { class: 'msg' }, h('span', { class: 'text' }, e.msg), ' ', attrs));
  }

  function render() {
    replace(tbody, entries.length ? entries.slice().reverse().map(row) : h('tr', {}, h('td', { colspan: 3, class: 'empty' }, 'No log entries match.')));
    info.textContent = `${count(entries.length)} shown`;
  }

  async function restart() {
    const my = ++gen;
    try {
      const p = await api('/api/logs', { query: { ...q, limit: 500 } });
      if (my !== gen) return;
      entries = p.entries;
      last = p.last;
      render();
    } catch (e) {
      replace(tbody, h('tr', {}, h('td', { colspan: 3, class: 'empty' }, `Cannot load the log: ${e.message}`)));
    }
    if (tail.checked) poll(my);
  }

  let polling = 0;
  async function poll(my) {
    if (polling === my) return;
    polling = my;
    while (my === gen && tail.checked && el.isConnected) {
      try {
        const p = await api('/api/logs', { query: { ...q, after: last, wait: 20 } });
        if (my !== gen) break;
        last = p.last;
        if (p.entries.length) {
          entries = entries.concat(p.entries).slice(-max);
          render();
        }
      } catch {
        await new Promise((r) => setTimeout(r, 3000));
      }
    }
    if (polling === my) polling = 0;
  }

  restart();
  return () => { gen++; };
}

// Rules: the running rule table with per-rule counters, and an editor.
// Edits collect in a draft; "Apply" sends the whole rule set through the
// config store (commit-confirm), errors come back per rule.

import { api } from '../api.js';
import { h, replace, count, bytes, ago, toast } from '../dom.js';

const CHAINS = ['forward', 'input', 'output'];
const key = (r) => `${r.chain}\n${r.text}`;

export default function rulesPage(el, { banner }) {
  let live = null;     // GET /api/rules answer
  let draft = null;    // { policies: {chain: action}, rules: [{chain, text, state}] } while editing
  let editing = null;  // index of the row being edited, -1 for a new row
  let errors = {};     // path -> message

  const summary = h('span', { class: 'muted', id: 'rules-summary' });
  const addBtn = h('button', { class: 'btn', id: 'rule-add', type: 'button', onclick: () => startEdit(-1) }, '+ Add rule');
  const applyBtn = h('button', { class: 'btn primary', id: 'rules-apply', type: 'button', onclick: apply }, 'Apply changes');
  const discardBtn = h('button', { class: 'btn', id: 'rules-discard', type: 'button', onclick: discard }, 'Discard');
  const errBox = h('div', { class: 'errors', hidden: true });
  const policies = h('div', { class: 'row', id: 'policies' });
  const tbody = h('tbody', { id: 'rules-body' });

  replace(el,
    h('div', { class: 'page-head' }, h('h1', {}, 'Rules'), summary, h('span', { class: 'spacer' }), addBtn, discardBtn, applyBtn),
    h('div', { class: 'stack' },
      errBox,
      h('div', { class: 'card' }, h('h2', {}, 'Default policies'), policies),
      h('div', { class: 'table-wrap' }, h('table', {},
        h('thead', {}, h('tr', {},
          h('th', { class: 'num' }, '#'), h('th', {}, 'Chain'), h('th', {}, 'Rule'),
          h('th', { class: 'num' }, 'Packets'), h('th', { class: 'num' }, 'Bytes'), h('th', {}, 'Last hit'), h('th', {}))),
        tbody)),
      h('p', { class: 'muted' }, 'Rules are checked in order; the first match decides. Add ',
        h('code', {}, 'counter'), ' to a rule to count its hits. Syntax: ',
        h('code', {}, 'iif lan0 ip saddr 10.0.0.0/8 tcp dport 22 ct state new counter accept'), '.'),
    ),
  );

  function working() {
    if (!draft) {
      const pol = {};
      for (const p of live.policies) pol[p.chain] = p.action;
      draft = { policies: pol, rules: live.rules.map((r) => ({ chain: r.chain, text: r.text, state: '' })) };
    }
    return draft;
  }

  function render() {
    if (!live) return;
    const stats = new Map(live.rules.map((r) => [key(r), r]));
    const rows = draft ? draft.rules : live.rules;
    summary.textContent = `${live.rules.length} rules · ${live.subtables} hash subtables · generation ${live.generation}`;
    applyBtn.hidden = discardBtn.hidden = !draft;
    addBtn.disabled = editing !== null;

    const polStats = new Map(live.policies.map((p) => [p.chain, p]));
    const pol = draft ? draft.policies : Object.fromEntries(live.policies.map((p) => [p.chain, p.action]));
    replace(policies, CHAINS.map((c) => {
      const sel = h('select', { id: `policy-${c}`, onchange: (e) => { working().policies[c] = e.target.value; render(); } },
        ['accept', 'drop'].map((a) => h('option', { value: a, selected: (pol[c] || 'accept') === a }, a)));
      const st = polStats.get(c);
      return h('label', { class: 'field' }, h('span', {}, c), sel,
        h('small', { class: 'muted' }, st ? `${count(st.packets)} pkts · ${bytes(st.bytes)}` : 'no hits'),
        errors[`policies.${c}`] ? h('div', { class: 'err' }, errors[`policies.${c}`]) : null);
    }));

    const trs = rows.map((r, i) => (editing === i ? editRow(r, i) : ruleRow(r, i, stats.get(key(r)))));
    if (editing === -1) trs.push(editRow({ chain: 'forward', text: '' }, -1));
    if (!trs.length) trs.push(h('tr', {}, h('td', { colspan: 7, class: 'empty' }, 'No rules: every chain follows its policy.')));
    replace(tbody, trs);

    const other = Object.entries(errors).filter(([p]) => !/^rules\[\d+\]/.test(p) && !p.startsWith('policies.'));
    errBox.hidden = !other.length;
    replace(errBox, h('strong', {}, 'The rule set was not applied'),
      h('ul', {}, other.map(([p, m]) => h('li', {}, p ? h('code', {}, p) : null, p ? ': ' : '', m))));
  }

  function ruleRow(r, i, st) {
    const err = errors[`rules[${i}].text`] || errors[`rules[${i}].chain`] || errors[`rules[${i}]`];
    const counted = st && st.counted;
    const last = rows().length - 1;
    return h('tr', { class: r.state || '', 'data-index': i },
      h('td', { class: 'num muted' }, i + 1),
      h('td', {}, r.chain),
      h('td', { class: 'rule' }, r.text, err ? h('div', { class: 'err' }, err) : null),
      h('td', { class: 'num packets' }, counted ? count(st.packets) : '–'),
      h('td', { class: 'num bytes' }, counted ? bytes(st.bytes) : '–'),
      h('td', { class: 'muted nowrap' }, counted ? ago(st.last_hit) : ''),
      h('td', { class: 'actions' },
        h('button', { class: 'btn ghost small', type: 'button', title: 'move up', disabled: i === 0 || editing !== null, onclick: () => move(i, -1) }, '↑'),
        h('button', { class: 'btn ghost small', type: 'button', title: 'move down', disabled: i === last || editing !== null, onclick: () => move(i, 1) }, '↓'),
        h('button', { class: 'btn small', type: 'button', disabled: editing !== null, onclick: () => startEdit(i) }, 'Edit'),
        h('button', { class: 'btn small danger', type: 'button', disabled: editing !== null, onclick: () => remove(i) }, 'Remove')));
  }

  function editRow(r, i) {
    const chain = h('select', { id: 'rule-edit-chain' }, CHAINS.map((c) => h('option', { value: c, selected: c === r.chain }, c)));
    const text = h('input', { class: 'rule-text', id: 'rule-edit-text', value: r.text, placeholder: 'tcp dport 22 counter accept', spellcheck: 'false', autocomplete: 'off' });
    const save = () => {
      const t = text.value.trim();
      if (!t) { text.classList.add('invalid'); return; }
      const d = working();
      if (i === -1) d.rules.push({ chain: chain.value, text: t, state: 'added' });
      else if (d.rules[i].text !== t || d.rules[i].chain !== chain.value) {
        d.rules[i] = { chain: chain.value, text: t, state: d.rules[i].state || 'changed' };
      }
      editing = null;
      errors = {};
      render();
    };
    text.addEventListener('keydown', (e) => {
      if (e.key === 'Enter') save();
      if (e.key === 'Escape') { editing = null; render(); }
    });
    setTimeout(() => text.focus(), 0);
    return h('tr', { class: 'editing', 'data-index': i },
      h('td', { class: 'num muted' }, i === -1 ? 'new' : i + 1),
      h('td', {}, chain),
      h('td', { colspan: 4 }, text),
      h('td', { class: 'actions' },
        h('button', { class: 'btn primary small', id: 'rule-edit-save', type: 'button', onclick: save }, 'Save'),
        h('button', { class: 'btn small', type: 'button', onclick: () => { editing = null; render(); } }, 'Cancel')));
  }

  const rows = () => (draft ? draft.rules : live.rules);

  function startEdit(i) { editing = i; render(); }

  function move(i, dir) {
    const d = working();
    const j = i + dir;
    [d.rules[i], d.rules[j]] = [d.rules[j], d.rules[i]];
    d.rules[i].state ||= 'changed';
    d.rules[j].state ||= 'changed';
    errors = {};
    render();
  }

  function remove(i) {
    working().rules.splice(i, 1);
    errors = {};
    render();
  }

  function discard() {
    draft = null;
    editing = null;
    errors = {};
    render();
  }

  async function apply() {
    const d = working();
    applyBtn.disabled = true;
    try {
      const ans = await api('/api/rules', {
        method: 'PUT',
        body: { policies: d.policies, rules: d.rules.map(({ chain, text }) => ({ chain, text })) },
      });
      draft = null;
      errors = {};
      banner.track(ans.pending);
      toast('Rules applied: confirm the change to keep it.');
      await load();
    } catch (e) {
      errors = {};
      for (const fe of e.errors || []) errors[fe.path] = fe.message;
      if (!e.errors || !e.errors.length) errors[''] = e.message;
      render();
    } finally {
      applyBtn.disabled = false;
    }
  }

  async function load() {
    try {
      live = await api('/api/rules');
      if (editing === null) render();
    } catch (e) {
      replace(tbody, h('tr', {}, h('td', { colspan: 7, class: 'empty' }, `Cannot load rules: ${e.message}`)));
    }
  }

  load();
  const timer = setInterval(load, 2000);
  const onChange = () => load();
  window.addEventListener('config-changed', onChange);
  return () => { clearInterval(timer); window.removeEventListener('config-changed', onChange); };
}

// Admin: the password (shared with gokrazy's UI), logout, reboot, the link
// to gokrazy's UI and the remote syslog target. Each part is its own
// function so that other sections can be added beside them.

import { api } from '../api.js';
import { h, replace, toast } from '../dom.js';

function field(label, input, err) {
  return h('label', { class: 'field' }, h('span', {}, label), input, err);
}

function passwordSection(info) {
  const cur = h('input', { type: 'password', id: 'pw-current', autocomplete: 'current-password' });
  const next = h('input', { type: 'password', id: 'pw-new', autocomplete: 'new-password' });
  const again = h('input', { type: 'password', id: 'pw-again', autocomplete: 'new-password' });
  const errCur = h('div', { class: 'err', id: 'pw-current-err' });
  const errNew = h('div', { class: 'err', id: 'pw-new-err' });
  const done = h('div', { id: 'pw-done', hidden: true, class: 'notice' });
  async function change(ev) {
    ev.preventDefault();
    errCur.textContent = errNew.textContent = '';
    if (next.value !== again.value) { errNew.textContent = 'The two new passwords differ.'; return; }
    try {
      await api('/api/admin/password', { method: 'POST', body: { current: cur.value, new: next.value } });
      cur.value = next.value = again.value = '';
      done.hidden = false;
      replace(done, h('strong', {}, 'Password changed. '),
        'The dashboard takes the new password now (your browser asks for it on the next page load). gokrazy\'s UI and updates (gok, firmware update) take it after a reboot: ',
        info.features.reboot ? h('button', { class: 'btn small', type: 'button', onclick: reboot }, 'Reboot now') : 'reboot the box.');
    } catch (e) {
      for (const fe of e.errors) (fe.path === 'current' ? errCur : errNew).textContent = fe.message;
      if (!e.errors.length) toast(`Password not changed: ${e.message}`, 'bad');
    }
  }
  return h('form', { class: 'card section form', id: 'password-form', onsubmit: change },
    h('h2', {}, 'Password'),
    h('p', { class: 'help' }, 'One password for this dashboard and gokrazy\'s UI (user gokrazy), kept in /perm/gokr-pw.txt. 8 to 128 printable characters, no spaces.'),
    h('div', { class: 'fields' }, field('Current password', cur, errCur), field('New password', next, errNew), field('New password again', again)),
    h('div', { class: 'row' }, h('button', { class: 'btn primary', type: 'submit', id: 'pw-change' }, 'Change password')),
    done);
}

async function reboot() {
  if (!confirm('Reboot the box now? Forwarding stops until it is back (about a minute).')) return;
  try {
    await api('/api/admin/reboot', { method: 'POST' });
    toast('Rebooting: the page reconnects when the box is back.', 'ok');
  } catch (e) {
    toast(`Reboot failed: ${e.message}`, 'bad');
  }
}

// logout makes the browser forget the password: it asks /logout with the
// user "logout", which the server answers with 200, so the browser keeps
// those useless credentials instead of the real ones.
export function logout() {
  return new Promise((resolve) => {
    const x = new XMLHttpRequest();
    x.open('GET', new URL('/logout', location.origin).href, true, 'logout', 'logout');
    x.onloadend = () => resolve(x.status);
    x.send();
  }).then(() => {
    document.getElementById('main').replaceChildren(h('div', { class: 'card empty', id: 'logged-out' },
      h('p', {}, 'You are logged out.'), h('a', { class: 'btn primary', href: '/' }, 'Log in again')));
  });
}

function boxSection(info) {
  const gokrazy = `${location.protocol}//${location.hostname}:${info.gokrazy_port || 80}/`;
  return h('div', { class: 'card section' },
    h('h2', {}, 'The box'),
    h('div', { class: 'row' },
      h('a', { class: 'btn', href: gokrazy, id: 'gokrazy-link', target: '_blank', rel: 'noopener' }, 'gokrazy\'s UI ↗'),
      h('button', { class: 'btn', type: 'button', id: 'logout', onclick: logout }, 'Log out'),
      info.features.reboot ? h('button', { class: 'btn danger', type: 'button', id: 'reboot', onclick: reboot }, 'Reboot') : null),
    h('p', { class: 'muted' }, 'gokrazy\'s UI shows its services, their logs and the update state.'));
}

function syslogSection(state) {
  const target = h('input', { id: 'syslog-target', placeholder: '192.168.1.10:514', value: state.syslog_target || '', spellcheck: 'false' });
  const err = h('div', { class: 'err', id: 'syslog-err' });
  async function save(ev) {
    ev.preventDefault();
    err.textContent = '';
    try {
      await api('/api/admin/syslog', { method: 'PUT', body: { target: target.value.trim() } });
      toast(target.value.trim() ? 'Remote syslog set: gokrazy sends the logs there from the next boot.' : 'Remote syslog off from the next boot.', 'ok');
    } catch (e) {
      err.textContent = e.errors.length ? e.errors[0].message : e.message;
    }
  }
  return h('form', { class: 'card section form', id: 'syslog-form', onsubmit: save },
    h('h2', {}, 'Remote syslog'),
    h('p', { class: 'help' }, 'gokrazy sends the output of every program on the box, this one\'s log and rule log records included, to a syslog server (UDP). It reads the target at boot.'),
    h('div', { class: 'fields' }, field('Syslog server (host:port)', target, err)),
    h('div', { class: 'row' }, h('button', { class: 'btn primary', type: 'submit', id: 'syslog-save' }, 'Save')));
}

export default function admin(el, { info }) {
  const rest = h('div', { class: 'stack' });
  replace(el, h('div', { class: 'page-head' }, h('h1', {}, 'Admin')),
    h('div', { class: 'stack' }, boxSection(info), passwordSection(info), rest));
  api('/api/admin').then((s) => replace(rest, syslogSection(s)))
    .catch((e) => replace(rest, h('div', { class: 'errors' }, `Cannot load the settings: ${e.message}`)));
  return () => {};
}

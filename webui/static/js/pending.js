// Commit-confirm: after an apply the box runs the new config and rolls it
// back by itself unless it is confirmed in time. This banner shows the
// countdown with Confirm / Roll back, and afterwards what happened.
// Pages listen for the "config-changed" event to reload their data.

import { api } from './api.js';
import { h, replace, toast } from './dom.js';

export class PendingBanner {
  constructor(el) {
    this.el = el;
    this.pending = null; // PendingInfo being shown
    this.tracked = null; // id whose outcome we still have to report
    this.skew = 0;
    this.timer = null;
    this.checking = false;
  }

  // track shows a change just applied (the apply answer's "pending").
  track(p) {
    if (!p || !p.id) return;
    this.tracked = p.id;
    if (p.deadline) this.show(p);
    else this.check(p.id);
  }

  // onStats follows the pending change in every stream message.
  onStats(msg) {
    // Correct for a server clock that differs from ours; a message's own
    // delay (well under a second) is not worth it.
    this.skew = Math.abs(msg.skew || 0) > 2000 ? msg.skew : 0;
    const p = msg.config && msg.config.pending;
    if (p) {
      this.tracked = p.id;
      if (!this.pending || this.pending.id !== p.id) this.show(p);
    } else if (this.tracked && !this.checking) {
      this.check(this.tracked);
    }
  }

  show(p) {
    this.pending = p;
    this.el.className = 'banner pending';
    this.el.hidden = false;
    const count = h('span', { class: 'countdown', id: 'countdown' });
    replace(this.el,
      h('span', {}, 'A configuration change is running. Confirm it within '), count,
      h('span', {}, ' s or the box rolls back to the previous config.'),
      h('span', { class: 'spacer' }),
      h('button', { class: 'btn primary', id: 'confirm-change', type: 'button', onclick: () => this.confirm(p.id) }, 'Confirm'),
      h('button', { class: 'btn', id: 'rollback-change', type: 'button', onclick: () => this.rollback(p.id) }, 'Roll back now'),
    );
    const tick = () => {
      const left = Math.max(0, (Date.parse(p.deadline) - (Date.now() + this.skew)) / 1000);
      count.textContent = Math.ceil(left);
      if (left <= 0) {
        clearInterval(this.timer);
        setTimeout(() => this.check(p.id), 1500);
      }
    };
    clearInterval(this.timer);
    this.timer = setInterval(tick, 250);
    tick();
  }

  async check(id) {
    this.checking = true;
    try {
      const a = await api(`/api/config/changes/${encodeURIComponent(id)}`);
      if (a.state === 'pending') {
        if (a.pending && (!this.pending || this.pending.id !== id)) this.show(a.pending);
        return;
      }
      this.finish(id, a.state);
    } catch (e) {
      // Try again with the next message.
    } finally {
      this.checking = false;
    }
  }

  finish(id, state, manual = false) {
    clearInterval(this.timer);
    this.pending = null;
    this.tracked = null;
    if (state === 'rolled_back') {
      this.el.className = 'banner rolledback';
      this.el.hidden = false;
      replace(this.el,
        h('strong', {}, 'Rolled back. '),
        h('span', { id: 'rollback-notice' }, manual
          ? 'The change was rolled back and the previous configuration is running again.'
          : 'The change was not confirmed in time and the previous configuration is running again.'),
        h('span', { class: 'spacer' }),
        h('button', { class: 'btn', type: 'button', onclick: () => { this.el.hidden = true; } }, 'Dismiss'),
      );
    } else {
      this.el.hidden = true;
      if (state === 'confirmed') toast('Configuration change confirmed.', 'ok');
    }
    window.dispatchEvent(new CustomEvent('config-changed', { detail: { id, state } }));
  }

  async confirm(id) {
    try {
      await api(`/api/config/changes/${encodeURIComponent(id)}/confirm`, { method: 'POST' });
      this.finish(id, 'confirmed');
    } catch (e) {
      toast(`Confirm failed: ${e.message}`, 'bad');
      this.check(id);
    }
  }

  async rollback(id) {
    try {
      await api(`/api/config/changes/${encodeURIComponent(id)}/rollback`, { method: 'POST' });
      this.finish(id, 'rolled_back', true);
    } catch (e) {
      toast(`Rollback failed: ${e.message}`, 'bad');
      this.check(id);
    }
  }
}

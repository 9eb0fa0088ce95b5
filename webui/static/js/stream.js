// The live stream: one WebSocket carrying a "stats" message per second
// (schema in docs/api.md). Reconnects with backoff; listeners get every
// message.

import { api } from './api.js';

export class Stream {
  constructor(onState) {
    this.listeners = new Set();
    this.last = null;
    this.onState = onState;
    this.backoff = 1000;
    this.ws = null;
  }

  subscribe(fn) {
    this.listeners.add(fn);
    if (this.last) fn(this.last);
    return () => this.listeners.delete(fn);
  }

  async connect() {
    this.onState('connecting');
    let ticket = '';
    try {
      ticket = (await api('/api/stream/ticket')).ticket;
    } catch (e) {
      this.retry();
      return;
    }
    const proto = location.protocol === 'https:' ? 'wss:' : 'ws:';
    const ws = new WebSocket(`${proto}//${location.host}/api/stream?ticket=${encodeURIComponent(ticket)}`);
    this.ws = ws;
    ws.onopen = () => { this.backoff = 1000; this.onState('live'); };
    ws.onmessage = (ev) => {
      let msg;
      try { msg = JSON.parse(ev.data); } catch { return; }
      if (msg.type !== 'stats') return;
      msg.skew = Date.parse(msg.time) - Date.now(); // server clock minus ours
      this.last = msg;
      for (const fn of this.listeners) {
        try { fn(msg); } catch (e) { console.error(e); }
      }
    };
    ws.onclose = () => { this.ws = null; this.onState('offline'); this.retry(); };
  }

  retry() {
    setTimeout(() => this.connect(), this.backoff);
    this.backoff = Math.min(this.backoff * 2, 10000);
  }
}

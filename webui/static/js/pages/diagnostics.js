// Diagnostics: ping, traceroute and DNS lookups from the box itself, and a
// packet capture on a port downloaded as a pcapng file (Wireshark, tcpdump
// -r).

import { api, apiLines, apiBlob } from '../api.js';
import { h, replace, toast, count, bytes } from '../dom.js';

const ms = (s) => (s < 0 ? '*' : `${(1000 * s).toFixed(s < 0.01 ? 2 : 1)} ms`);

function field(label, input, help) {
  return h('label', { class: 'field' }, h('span', {}, label), input, help ? h('small', { class: 'muted' }, help) : null);
}

export default function diagnostics(el, { info, stream }) {
  const sources = h('select', { id: 'diag-source' });
  const sourceOf = () => sources.value;

  // Ping and traceroute share the target.
  const host = h('input', { id: 'diag-host', placeholder: '1.1.1.1 or example.com', spellcheck: 'false' });
  const pingCount = h('input', { id: 'ping-count', type: 'number', min: 1, max: 100, value: 4 });
  const out = h('div', { class: 'diag-out', id: 'diag-out', 'aria-live': 'polite' });
  const pingBtn = h('button', { class: 'btn primary', type: 'button', id: 'ping-run', onclick: () => run('ping') }, 'Ping');
  const traceBtn = h('button', { class: 'btn', type: 'button', id: 'trace-run', onclick: () => run('traceroute') }, 'Traceroute');
  const stopBtn = h('button', { class: 'btn', type: 'button', id: 'diag-stop', hidden: true, onclick: () => abort && abort.abort() }, 'Stop');
  let abort = null;

  const name = h('input', { id: 'dns-name', placeholder: 'example.com', spellcheck: 'false' });
  const type = h('select', { id: 'dns-type' }, ['A', 'AAAA', 'MX', 'TXT', 'NS', 'CNAME', 'PTR', 'SOA', 'SRV'].map((t) => h('option', { value: t }, t)));
  const server = h('input', { id: 'dns-server', placeholder: 'the box\'s resolver', spellcheck: 'false' });
  const dnsOut = h('div', { class: 'diag-out', id: 'dns-out', 'aria-live': 'polite' });

  const capPort = h('select', { id: 'cap-port' });
  const capHost = h('input', { id: 'cap-host', placeholder: 'any', spellcheck: 'false' });
  const capL4 = h('input', { id: 'cap-l4port', type: 'number', min: 1, max: 65535, placeholder: 'any' });
  const capProto = h('select', { id: 'cap-proto' }, [['', 'any'], ['tcp', 'TCP'], ['udp', 'UDP'], ['icmp', 'ICMP'], ['arp', 'ARP']].map(([v, l]) => h('option', { value: v }, l)));
  const capCount = h('input', { id: 'cap-count', type: 'number', min: 1, max: 100000, value: 1000 });
  const capSecs = h('input', { id: 'cap-seconds', type: 'number', min: 1, max: 300, value: 30 });
  const capBtn = h('button', { class: 'btn primary', type: 'button', id: 'cap-run', onclick: capture }, 'Capture and download');
  const capOut = h('div', { class: 'diag-out', id: 'cap-out', 'aria-live': 'polite' });

  replace(el,
    h('div', { class: 'page-head' }, h('h1', {}, 'Diagnostics')),
    h('div', { class: 'stack' },
      h('div', { class: 'card section form' },
        h('h2', {}, 'Ping and traceroute'),
        h('div', { class: 'fields' }, field('Host', host), field('From', sources), field('Count (ping)', pingCount)),
        h('div', { class: 'row' }, pingBtn, traceBtn, stopBtn),
        out),
      h('div', { class: 'card section form' },
        h('h2', {}, 'DNS lookup'),
        h('div', { class: 'fields' }, field('Name or address', name), field('Type', type), field('Server', server, 'host or host:port; empty: the box\'s resolver')),
        h('div', { class: 'row' }, h('button', { class: 'btn primary', type: 'button', id: 'dns-run', onclick: lookup }, 'Look up')),
        dnsOut),
      info.features.capture ? h('div', { class: 'card section form' },
        h('h2', {}, 'Packet capture'),
        h('p', { class: 'help' }, 'Records the frames of a port into a pcapng file for Wireshark or tcpdump -r. The capture stops at the count or after the seconds, whichever comes first (64 MiB at most).'),
        h('div', { class: 'fields' }, field('Port', capPort), field('Host', capHost), field('Protocol', capProto), field('Port number', capL4),
          field('Packets', capCount), field('Seconds', capSecs)),
        h('div', { class: 'row' }, capBtn),
        capOut) : null,
    ),
  );

  api('/api/diag').then((a) => replace(sources, a.sources.map((s) => h('option', { value: s.id }, s.label))))
    .catch((e) => replace(out, h('div', { class: 'errors' }, `Diagnostics are not available: ${e.message}`)));
  const unsub = stream.subscribe((m) => {
    const names = m.ports.map((p) => p.name);
    if (names.join() === [...capPort.options].map((o) => o.value).join()) return;
    const cur = capPort.value;
    replace(capPort, m.ports.map((p) => h('option', { value: p.name, selected: p.name === cur }, `${p.name} (${p.iface})`)));
  });

  async function run(kind) {
    if (abort) return;
    const target = host.value.trim();
    if (!target) { toast('Name a host first.', 'bad'); host.focus(); return; }
    abort = new AbortController();
    pingBtn.disabled = traceBtn.disabled = true;
    stopBtn.hidden = false;
    const table = h('tbody', { id: `${kind}-body` });
    const foot = h('p', { class: 'muted', id: `${kind}-summary` }, kind === 'ping' ? `Pinging ${target}…` : `Tracing the route to ${target}…`);
    replace(out, h('table', { class: 'diag' },
      h('thead', {}, kind === 'ping' ?
        h('tr', {}, h('th', { class: 'num' }, 'Seq'), h('th', {}, 'From'), h('th', { class: 'num' }, 'TTL'), h('th', { class: 'num' }, 'Time')) :
        h('tr', {}, h('th', { class: 'num' }, 'Hop'), h('th', {}, 'Address'), h('th', {}, 'Times'))), table), foot);
    const body = kind === 'ping' ? { host: target, source: sourceOf(), count: Number(pingCount.value) || 4 } : { host: target, source: sourceOf() };
    try {
      await apiLines(`/api/diag/${kind}`, body, (l) => {
        if (l.type === 'reply') {
          table.append(h('tr', { class: l.error ? 'lost' : '' }, h('td', { class: 'num' }, l.seq), h('td', { class: 'mono' }, l.from || ''),
            h('td', { class: 'num' }, l.ttl || ''), h('td', { class: 'num' }, l.error ? l.error : ms(l.rtt_s))));
        } else if (l.type === 'summary') {
          const loss = l.sent ? Math.round((100 * (l.sent - l.received)) / l.sent) : 0;
          foot.textContent = `${l.target}: ${l.sent} sent, ${l.received} received, ${loss}% lost` + (l.received ? ` · min/avg/max ${ms(l.min_s)} / ${ms(l.avg_s)} / ${ms(l.max_s)}` : '');
        } else if (l.type === 'hop') {
          table.append(h('tr', { class: l.reached ? 'reached' : '' }, h('td', { class: 'num' }, l.ttl), h('td', { class: 'mono' }, l.addr || '*'),
            h('td', { class: 'mono' }, l.rtts_s.map(ms).join('  '))));
        } else if (l.type === 'done') {
          foot.textContent = 'Done.';
        } else if (l.type === 'error') {
          foot.textContent = `Failed: ${l.error}`;
        }
      }, abort.signal);
    } catch (e) {
      foot.textContent = e.name === 'AbortError' ? 'Stopped.' : `Failed: ${e.message}`;
    } finally {
      abort = null;
      pingBtn.disabled = traceBtn.disabled = false;
      stopBtn.hidden = true;
    }
  }

  async function lookup() {
    if (!name.value.trim()) { toast('Name something to look up.', 'bad'); name.focus(); return; }
    replace(dnsOut, h('p', { class: 'muted' }, 'Asking…'));
    try {
      const r = await api('/api/diag/lookup', { method: 'POST', body: { name: name.value.trim(), type: type.value, server: server.value.trim(), source: sourceOf() } });
      replace(dnsOut,
        h('p', { id: 'dns-summary' }, h('span', { class: `pill ${r.rcode === 'NOERROR' ? 'ok' : 'bad'}` }, r.rcode), ` from ${r.server} in ${ms(r.rtt_s)}`),
        r.answer.length ? h('pre', { class: 'mono', id: 'dns-answer' }, r.answer.join('\n')) : h('p', { class: 'muted' }, 'No answer records.'),
        r.authority.length ? h('pre', { class: 'mono muted' }, r.authority.join('\n')) : null);
    } catch (e) {
      replace(dnsOut, h('div', { class: 'errors' }, e.message));
    }
  }

  async function capture() {
    const body = { port: capPort.value, proto: capProto.value, count: Number(capCount.value) || 1000, seconds: Number(capSecs.value) || 30 };
    if (capHost.value.trim()) body.host = capHost.value.trim();
    if (capL4.value) body.l4port = Number(capL4.value);
    capBtn.disabled = true;
    replace(capOut, h('p', { class: 'muted' }, `Capturing on ${body.port} (up to ${count(body.count)} packets or ${body.seconds} s)…`));
    try {
      const { blob, name: file } = await apiBlob('/api/capture', body);
      window.e1kboxCapture = blob; // the newest capture, for scripts
      const a = h('a', { href: URL.createObjectURL(blob), download: file, id: 'cap-file' }, `⤓ ${file}`);
      document.body.append(a);
      a.click();
      replace(capOut, h('p', { id: 'cap-done' }, `Captured ${bytes(blob.size)}: `, a));
    } catch (e) {
      replace(capOut, h('div', { class: 'errors' }, `Capture failed: ${e.message}`));
    } finally {
      capBtn.disabled = false;
    }
  }

  return () => { unsub(); if (abort) abort.abort(); };
}

// Rate charts over the last minutes, drawn with the vendored uPlot (a
// global from uPlot.iife.min.js). One chart shows one quantity (packets/s
// or bits/s) for every port: received solid, transmitted dashed.

import { si } from './dom.js';

export const PALETTE = ['#3b82f6', '#10b981', '#f59e0b', '#ef4444', '#8b5cf6', '#06b6d4', '#ec4899', '#84cc16'];

function cssVar(name) {
  return getComputedStyle(document.documentElement).getPropertyValue(name).trim();
}

export class RateChart {
  // kind is "pps" or "bps"; unit is appended to axis values.
  constructor(el, { kind, unit, windowS }) {
    this.el = el;
    this.kind = kind;
    this.unit = unit;
    this.windowS = windowS;
    this.ports = [];
    this.data = [[]];
    this.plot = null;
    this.resize = new ResizeObserver(() => this.fit());
    this.resize.observe(el);
  }

  destroy() {
    this.resize.disconnect();
    if (this.plot) this.plot.destroy();
    this.plot = null;
  }

  fit() {
    if (!this.plot) return;
    const w = this.el.clientWidth;
    if (w > 0 && Math.abs(w - this.plot.width) > 1) this.plot.setSize({ width: w, height: this.height() });
  }

  height() {
    return this.el.clientWidth < 500 ? 200 : 240;
  }

  // load replaces the data with a history answer (GET /api/stats/history).
  load(hist) {
    this.ports = hist.ports.map((p) => p.name);
    this.data = [hist.time.slice()];
    for (const p of hist.ports) {
      this.data.push(p[`rx_${this.kind}`].slice(), p[`tx_${this.kind}`].slice());
    }
    this.build();
  }

  // push appends one stats message; a change of ports rebuilds the chart.
  push(msg) {
    if (!msg.interval_s) return; // the first sample has no rates
    const names = msg.ports.map((p) => p.name);
    if (names.join('\n') !== this.ports.join('\n')) {
      // Keep the columns of ports that stay, fill new ones with nulls.
      const old = new Map(this.ports.map((n, i) => [n, [this.data[1 + 2 * i], this.data[2 + 2 * i]]]));
      const len = this.data[0].length;
      this.ports = names;
      this.data = [this.data[0]];
      for (const n of names) {
        const cols = old.get(n) || [new Array(len).fill(null), new Array(len).fill(null)];
        this.data.push(cols[0], cols[1]);
      }
      this.build();
    }
    this.data[0].push(Date.parse(msg.time) / 1000);
    msg.ports.forEach((p, i) => {
      this.data[1 + 2 * i].push(p[`rx_${this.kind}`]);
      this.data[2 + 2 * i].push(p[`tx_${this.kind}`]);
    });
    const cutoff = this.data[0][this.data[0].length - 1] - this.windowS;
    let drop = 0;
    while (drop < this.data[0].length && this.data[0][drop] < cutoff) drop++;
    if (drop) this.data = this.data.map((col) => col.slice(drop));
    if (this.plot) {
      this.plot.setData(this.data);
      this.showLatest();
    }
  }

  // showLatest puts the newest values into the legend while the pointer is
  // not over the chart.
  showLatest() {
    const n = this.data[0].length;
    if (n && this.plot.cursor.idx == null) this.plot.setLegend({ idx: n - 1 });
  }

  build() {
    if (this.plot) this.plot.destroy();
    const axis = cssVar('--muted') || '#888';
    const grid = cssVar('--grid') || 'rgba(128,128,128,0.2)';
    const series = [{}];
    this.ports.forEach((name, i) => {
      const c = PALETTE[i % PALETTE.length];
      series.push(
        { label: `${name} rx`, stroke: c, width: 2, fill: `${c}18`, points: { show: false }, value: (u, v) => fmt(v, this.unit) },
        { label: `${name} tx`, stroke: c, width: 1.5, dash: [6, 4], points: { show: false }, value: (u, v) => fmt(v, this.unit) },
      );
    });
    const windowS = this.windowS;
    const opts = {
      width: Math.max(this.el.clientWidth, 200),
      height: this.height(),
      series,
      cursor: { drag: { x: false, y: false }, points: { size: 6 } },
      legend: { live: true },
      scales: {
        // The newest windowS seconds; while there is less, at least a minute.
        x: { time: true, range: (u, min, max) => [Math.max(max - windowS, Math.min(min, max - 60)), max] },
        y: { range: (u, min, max) => [0, max > 0 ? max * 1.15 : 1] },
      },
      axes: [
        { stroke: axis, grid: { stroke: grid, width: 1 }, ticks: { stroke: grid, width: 1 } },
        { stroke: axis, grid: { stroke: grid, width: 1 }, ticks: { show: false }, size: 64,
          values: (u, vals) => vals.map((v) => fmt(v, this.unit)) },
      ],
    };
    this.plot = new uPlot(opts, this.data, this.el);
    this.el.addEventListener('mouseleave', () => setTimeout(() => this.showLatest(), 0));
    this.showLatest();
  }
}

function fmt(v, unit) {
  if (v === null || v === undefined) return '–';
  const s = si(v);
  return /[kMGTP]$/.test(s) ? s + unit : `${s} ${unit}`;
}

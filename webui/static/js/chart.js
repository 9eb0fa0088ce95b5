// Time charts drawn with the vendored uPlot (a global from
// uPlot.iife.min.js). A chart shows one quantity in one unit (received
// bits/s of every port, CPU busy per core, ...), one colour per series, a
// time axis whose labels never crowd (at least 70 px apart, formatted for
// the range shown) and the unit on the value axis.

import { si } from './dom.js';

// PALETTE: distinct hues, readable on light and dark backgrounds.
export const PALETTE = ['#2563eb', '#db2777', '#059669', '#d97706', '#7c3aed', '#0891b2', '#dc2626', '#65a30d'];

function cssVar(name) {
  return getComputedStyle(document.documentElement).getPropertyValue(name).trim();
}

const pad = (n) => String(n).padStart(2, '0');
const DAYS = ['Sun', 'Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat'];

// timeLabel formats an axis tick for a span of spanS seconds: seconds for
// a few minutes, hours and minutes within a day, the weekday beyond.
export function timeLabel(t, spanS) {
  const d = new Date(t * 1000);
  const hm = `${pad(d.getHours())}:${pad(d.getMinutes())}`;
  if (spanS <= 600) return `${hm}:${pad(d.getSeconds())}`;
  if (spanS <= 36 * 3600) return hm;
  return `${DAYS[d.getDay()]} ${hm}`;
}

// fmtValue formats a value with its unit: "1.23 Mb/s", "45 %".
export function fmtValue(v, unit) {
  if (v === null || v === undefined) return '–';
  if (unit === '%') return `${(100 * v).toFixed(v < 0.1 ? 1 : 0)} %`;
  const s = si(v);
  return /[kMGTP]$/.test(s) ? s + unit : `${s} ${unit}`;
}

export class TimeChart {
  // unit: "b/s", "pps", "%", "/s", ""; windowS: the span shown while data
  // arrive live (0: the data's own span); rangeS: the span a history
  // answer covers at most (24 h, 7 days), for its axis while it is young.
  constructor(el, { unit, windowS = 0, rangeS = 0, height = 220 }) {
    this.el = el;
    this.unit = unit;
    this.windowS = windowS;
    this.rangeS = rangeS;
    el.dataset.range = String(rangeS); // for tests and tools: which chart this box shows
    this.h = height;
    this.series = []; // [{label, color}]
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
    return this.el.clientWidth < 500 ? Math.min(this.h, 180) : this.h;
  }

  // set replaces everything: xs are Unix seconds, series [{label, color,
  // values}] (null values break the line).
  set(xs, series) {
    this.el.dataset.points = String(xs.length);
    const labels = series.map((s) => `${s.label}|${s.color}`).join('\n');
    this.data = [xs.slice(), ...series.map((s) => s.values.slice())];
    if (!this.plot || labels !== this.labels) {
      this.labels = labels;
      this.series = series.map((s) => ({ label: s.label, color: s.color }));
      this.build();
    } else {
      this.plot.setData(this.data);
      this.showLatest();
    }
  }

  // push appends one row of values (one per series) at time x, dropping
  // what falls out of the window.
  push(x, values) {
    this.el.dataset.points = String(this.data[0].length + 1);
    this.data[0].push(x);
    values.forEach((v, i) => this.data[i + 1] && this.data[i + 1].push(v));
    if (this.windowS) {
      const cutoff = x - this.windowS;
      let drop = 0;
      while (drop < this.data[0].length && this.data[0][drop] < cutoff) drop++;
      if (drop) this.data = this.data.map((col) => col.slice(drop));
    }
    if (this.plot) {
      this.plot.setData(this.data);
      this.showLatest();
    }
  }

  // showLatest puts the newest values into the legend while the pointer is
  // not over the chart.
  showLatest() {
    const n = this.data[0].length;
    if (n && this.plot && this.plot.cursor.idx == null) this.plot.setLegend({ idx: n - 1 });
  }

  build() {
    if (this.plot) this.plot.destroy();
    const axis = cssVar('--muted') || '#888';
    const grid = cssVar('--grid') || 'rgba(128,128,128,0.2)';
    const unit = this.unit;
    const series = [{ value: (u, v) => (v == null ? '–' : timeLabel(v, 0)) }];
    for (const s of this.series) {
      series.push({ label: s.label, stroke: s.color, width: 2, fill: `${s.color}14`, points: { show: false },
        spanGaps: false, value: (u, v) => fmtValue(v, unit) });
    }
    const windowS = this.windowS;
    // A young history still spans a 24th of its range (an hour of the 24 h
    // view, a minute of the live one), so that its time axis has at least
    // two labels to read whatever the time of day.
    const minSpanS = Math.max(60, (windowS || this.rangeS) / 24);
    const opts = {
      width: Math.max(this.el.clientWidth, 200),
      height: this.height(),
      series,
      cursor: { drag: { x: false, y: false }, points: { size: 6 } },
      legend: { live: true },
      scales: {
        x: { time: true, range: (u, min, max) => [windowS ? Math.max(max - windowS, Math.min(min, max - minSpanS)) : Math.min(min, max - minSpanS), max] },
        y: { range: (u, min, max) => [0, unit === '%' ? Math.max(1, max * 1.1) : max > 0 ? max * 1.15 : 1] },
      },
      axes: [
        { stroke: axis, grid: { stroke: grid, width: 1 }, ticks: { stroke: grid, width: 1 }, space: 70,
          values: (u, vals) => {
            const span = u.scales.x.max - u.scales.x.min;
            const out = vals.map((v) => timeLabel(v, span));
            // For tests and tools: where each label goes, in CSS pixels.
            this.el.dataset.xticks = JSON.stringify(vals.map((v, i) => [u.valToPos(v, 'x'), out[i]]));
            this.el.dataset.xspan = String(span);
            return out;
          } },
        { stroke: axis, grid: { stroke: grid, width: 1 }, ticks: { show: false }, size: 72, space: 40,
          values: (u, vals) => vals.map((v) => fmtValue(v, unit)) },
      ],
    };
    this.plot = new uPlot(opts, this.data, this.el);
    this.el.addEventListener('mouseleave', () => setTimeout(() => this.showLatest(), 0));
    this.showLatest();
  }
}

// LineChart: a small time-series line chart on a <canvas>, for the dashboard.
// new LineChart(canvas, {series: [{name, color}], capacity}) then
// push(values) once per snapshot (one number or null per series) and draw().
// The y axis starts at 0 and ends at a rounded maximum of what is shown;
// null values leave a gap. canvas.dataset.points counts the points pushed
// (the browser test reads it).
'use strict';

class LineChart {
  constructor(canvas, { series, capacity = 120 }) {
    this.canvas = canvas;
    this.series = series;
    this.capacity = capacity;
    this.data = series.map(() => []);
    this.pushed = 0;
  }

  push(values) {
    values.forEach((v, i) => {
      const d = this.data[i];
      d.push(Number.isFinite(v) ? v : null);
      if (d.length > this.capacity) d.shift();
    });
    this.pushed++;
    this.canvas.dataset.points = String(this.pushed);
  }

  // The axis top: four gridline steps of 1, 2 or 5 x 10^k that reach v.
  static niceMax(v) {
    if (!(v > 0)) return 1;
    const raw = v / 4;
    const p = Math.pow(10, Math.floor(Math.log10(raw)));
    for (const m of [1, 2, 5, 10]) if (raw <= m * p * (1 + 1e-9)) return 4 * m * p;
    return 40 * p;
  }

  static label(v) {
    if (v >= 1000) return (v / 1000).toFixed(v >= 10000 ? 0 : 1) + 'k';
    if (v >= 10 || v === 0) return v.toFixed(0);
    return v.toPrecision(2);
  }

  draw() {
    const c = this.canvas;
    const dpr = window.devicePixelRatio || 1;
    const w = c.clientWidth, h = c.clientHeight;
    if (c.width !== Math.round(w * dpr) || c.height !== Math.round(h * dpr)) {
      c.width = Math.round(w * dpr);
      c.height = Math.round(h * dpr);
    }
    const g = c.getContext('2d');
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    g.clearRect(0, 0, w, h);
    const left = 40, right = 8, top = 18, bottom = 16;
    const pw = w - left - right, ph = h - top - bottom;
    let max = 0;
    for (const d of this.data) for (const v of d) if (v !== null && v > max) max = v;
    max = LineChart.niceMax(max);

    g.font = '11px system-ui, sans-serif';
    g.strokeStyle = '#e5e8ed';
    g.fillStyle = '#6b7685';
    g.lineWidth = 1;
    g.textAlign = 'right';
    g.textBaseline = 'middle';
    for (let i = 0; i <= 4; i++) {
      const y = top + ph - (ph * i) / 4;
      g.beginPath();
      g.moveTo(left, y);
      g.lineTo(left + pw, y);
      g.stroke();
      g.fillText(LineChart.label((max * i) / 4), left - 4, y);
    }
    g.textAlign = 'left';
    g.fillText(`last ${this.capacity} s`, left, h - 6);

    const step = pw / Math.max(1, this.capacity - 1);
    this.series.forEach((s, si) => {
      const d = this.data[si];
      const x0 = left + pw - (d.length - 1) * step;
      g.strokeStyle = s.color;
      g.lineWidth = 1.6;
      g.beginPath();
      let pen = false;
      d.forEach((v, i) => {
        if (v === null) { pen = false; return; }
        const x = x0 + i * step, y = top + ph - (ph * v) / max;
        if (pen) g.lineTo(x, y); else g.moveTo(x, y);
        pen = true;
      });
      g.stroke();
      // Legend, with the newest value.
      const last = d.length ? d[d.length - 1] : null;
      const lx = left + 4 + si * 110;
      g.fillStyle = s.color;
      g.fillRect(lx, 4, 10, 3);
      g.fillStyle = '#1c2430';
      g.fillText(`${s.name} ${last === null ? '–' : LineChart.label(last)}`, lx + 14, 6);
    });
  }
}

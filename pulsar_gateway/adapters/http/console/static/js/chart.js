// Hand-written SVG charts: a rate line chart (a topic's rates in and out over time) and a
// histogram (scheduled messages by due time). No library: the console fetches nothing from
// another origin, and these two need little.

const SVG = "http://www.w3.org/2000/svg";

// s("rect", {x: 1, class: "bar"}, child...): an SVG element.
export function s(tag, attrs = {}, ...children) {
  const el = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === undefined || value === null) continue;
    if (name.startsWith("on") && typeof value === "function") {
      el.addEventListener(name.slice(2), value);
    } else {
      el.setAttribute(name, String(value));
    }
  }
  for (const child of children) {
    if (child === undefined || child === null || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

// A "nice" top for an axis: 1, 2 or 5 times a power of ten, at least `max`.
export function niceMax(max) {
  if (!(max > 0)) return 1;
  const power = 10 ** Math.floor(Math.log10(max));
  for (const step of [1, 2, 5, 10]) {
    if (step * power >= max) return step * power;
  }
  return 10 * power;
}

function shortNumber(n) {
  if (n >= 1e6) return `${(n / 1e6).toFixed(n >= 1e7 ? 0 : 1)}M`;
  if (n >= 1e3) return `${(n / 1e3).toFixed(n >= 1e4 ? 0 : 1)}k`;
  // quarters of a small maximum (0.25, 12.5): as many decimals as they need, at most two
  return Number.isInteger(n) ? String(n) : String(+n.toFixed(n >= 10 ? 1 : 2));
}

// A UTC clock label; the console shows every absolute time in UTC (ui.time).
export function clock(ms, spanMs) {
  const iso = new Date(ms).toISOString();
  if (spanMs > 2 * 86400e3) return `${iso.slice(5, 10)} ${iso.slice(11, 16)}`;
  if (spanMs > 20 * 60e3) return iso.slice(11, 16);
  return iso.slice(11, 19);
}

// A datetime-local input's value for a time: the browser's local time, to the minute.
export function localInput(ms) {
  const d = new Date(ms - new Date(ms).getTimezoneOffset() * 60000);
  return d.toISOString().slice(0, 16);
}

function frame(width, height, pad, yMax, label) {
  const plotH = height - pad.top - pad.bottom;
  const parts = [];
  for (let i = 0; i <= 4; i += 1) {
    const y = pad.top + plotH - (plotH * i) / 4;
    parts.push(s("line", { class: i ? "grid-line" : "axis", x1: pad.left, x2: width - pad.right,
      y1: y, y2: y }));
    parts.push(s("text", { x: pad.left - 6, y: y + 4, "text-anchor": "end" },
      shortNumber((yMax * i) / 4)));
  }
  if (label) parts.push(s("text", { x: pad.left, y: pad.top - 6 }, label));
  return parts;
}

// Rates in and out over the last `windowMs` (or since the first point): points [{t, in, out}] (t in ms). The SVG
// says how many points it drew (data-points), for tests and for an empty-state message.
export function rateChart(points, { windowMs = 300e3, now = Date.now(), width = 1200,
  height = 200 } = {}) {
  const pad = { top: 18, right: 12, bottom: 24, left: 48 };
  const shown = points.filter((p) => p.t >= now - windowMs);
  const yMax = niceMax(Math.max(0, ...shown.map((p) => Math.max(p.in, p.out))));
  const plotW = width - pad.left - pad.right;
  const plotH = height - pad.top - pad.bottom;
  // the axis starts at the first sample (at least a minute back) until `windowMs` of them
  // are there: a page just opened draws its few points across the chart, not in a corner
  const span = Math.min(windowMs, Math.max(60e3, now - (shown.length ? shown[0].t : now)));
  const x = (t) => pad.left + (plotW * (t - (now - span))) / span;
  const y = (v) => pad.top + plotH - (plotH * v) / yMax;
  const line = (key) => shown.map((p, i) => `${i ? "L" : "M"}${x(p.t).toFixed(1)},${y(p[key]).toFixed(1)}`).join("");
  const ticks = [];
  for (let i = 0; i <= 5; i += 1) {
    const t = now - span + (span * i) / 5;
    ticks.push(s("text", { x: x(t), y: height - 6,
      "text-anchor": i === 0 ? "start" : i === 5 ? "end" : "middle" }, clock(t, span)));
  }
  return s("svg", { class: "chart rate-chart", viewBox: `0 0 ${width} ${height}`,
    role: "img", "aria-label": "Message rates in and out", "data-test": "rate-chart",
    "data-points": shown.length },
  ...frame(width, height, pad, yMax, "msg/s"),
  ...ticks,
  shown.length ? s("path", { class: "series-in", d: line("in"), "data-test": "series-in" }) : null,
  shown.length ? s("path", { class: "series-out", d: line("out"), "data-test": "series-out" }) : null);
}

// Counts per bucket from `from`, `bucketMs` wide; onBar(index) when a bucket is clicked.
// Each bucket is a <g class="bucket"> with its index, start and count as data attributes,
// and a full-height hit area, so an empty bucket can be clicked as well.
export function histogram(counts, { from, bucketMs, onBar, width = 1200, height = 220,
  now = Date.now() } = {}) {
  const pad = { top: 18, right: 12, bottom: 24, left: 48 };
  // whole messages per grid line: four steps of a nice whole number
  const yMax = 4 * Math.ceil(niceMax(Math.max(0, ...counts) / 4));
  const plotW = width - pad.left - pad.right;
  const plotH = height - pad.top - pad.bottom;
  const barW = plotW / Math.max(1, counts.length);
  const span = bucketMs * counts.length;
  const buckets = counts.map((n, i) => {
    const start = from + i * bucketMs;
    const barH = (plotH * n) / yMax;
    const x0 = pad.left + i * barW;
    return s("g", { class: "bucket", "data-test": "bucket", "data-index": i, "data-start": start,
      "data-count": n, onclick: onBar ? () => onBar(i) : null },
    s("title", {}, `${n} due ${clock(start, span)}–${clock(start + bucketMs, span)} UTC`),
    s("rect", { class: "hit", x: x0, y: pad.top, width: barW, height: plotH }),
    n ? s("rect", { class: "bar", x: x0 + Math.min(1, barW * 0.1), y: pad.top + plotH - barH,
      width: Math.max(1, barW - Math.min(2, barW * 0.2)), height: barH }) : null);
  });
  const ticks = [];
  for (let i = 0; i <= 6; i += 1) {
    const t = from + (span * i) / 6;
    ticks.push(s("text", { x: pad.left + (plotW * i) / 6, y: height - 6,
      "text-anchor": i === 0 ? "start" : i === 6 ? "end" : "middle" }, clock(t, span)));
  }
  // where "now" is, when it is inside the window
  const nowMark = now >= from && now <= from + span
    ? s("line", { class: "now-line", x1: pad.left + (plotW * (now - from)) / span,
      x2: pad.left + (plotW * (now - from)) / span, y1: pad.top - 4, y2: pad.top + plotH })
    : null;
  return s("svg", { class: "chart histogram", viewBox: `0 0 ${width} ${height}`, role: "img",
    "aria-label": "Scheduled messages by due time", "data-test": "histogram",
    "data-from": from, "data-bucket-ms": bucketMs, "data-buckets": counts.length },
  ...frame(width, height, pad, yMax, "messages due"), ...ticks, ...buckets, nowMark);
}

// A subscription's delivery schedule: how many scheduled messages fall due when (a histogram
// of a time window, zoomable and pannable), and the messages of the window, each of which
// can be cancelled or rescheduled. Read from the gateway's `.../scheduled` admin resources.

import { del, get, path, post, topicPath } from "../api.js";
import { clock, histogram, localInput } from "../chart.js";
import { act, bytes, clear, confirmAction, count, dialog, duration, h, notify, time } from "../ui.js";

const PAGE = 50;
const MINUTE = 60e3;
// [label, span, buckets]: windows starting now
const PRESETS = [
  ["15 min", 15 * MINUTE, 60],
  ["1 h", 60 * MINUTE, 60],
  ["6 h", 360 * MINUTE, 72],
  ["1 day", 1440 * MINUTE, 96],
  ["7 days", 7 * 1440 * MINUTE, 84],
];
const DEFAULT_BUCKETS = 60;

// "in 5 min", "12 s ago": when a time is, seen from now
export function relative(ms, now = Date.now()) {
  const d = ms - now;
  return d >= 0 ? `in ${duration(d)}` : `${duration(-d)} ago`;
}

// A message's properties as small "name=value" badges, as the peek view shows them.
function properties(props) {
  const entries = Object.entries(props || {});
  if (!entries.length) return h("span", { class: "muted" }, "–");
  return entries.map(([name, value]) => h("span", { class: "badge", dataset: { test: "property" } },
    `${name}=${value}`));
}

function spanLabel(ms) {
  return ms >= 3600e3 ? `${+(ms / 3600e3).toFixed(2)} h` : ms >= 60e3 ? `${+(ms / 60e3).toFixed(2)} min`
    : ms >= 1000 ? `${+(ms / 1000).toFixed(2)} s` : `${ms} ms`;
}

export async function render(root, params, ctx) {
  const { domain, tenant, namespace, topic, subscription } = params;
  const scheduledPath = (topicName, ...rest) =>
    `${topicPath(domain, tenant, namespace, topicName)}/subscription/${path(subscription)}/scheduled`
    + (rest.length ? `/${path(...rest)}` : "");
  // a window: [from, to) in ms, cut into `buckets`
  const view = { from: 0, to: 0, buckets: DEFAULT_BUCKETS, offset: 0 };

  const figures = h("div", { class: "figures", dataset: { test: "schedule-figures" } });
  const windowLabel = h("span", { class: "window-label muted", dataset: { test: "window" } });
  const chartBox = h("div", {});
  const listBox = h("div", { dataset: { test: "scheduled-list" } });
  const pager = h("div", { class: "toolbar" });
  const presetButtons = PRESETS.map(([label, span, buckets]) => h("button", {
    type: "button", dataset: { test: `preset-${label.replace(" ", "")}` },
    onclick: () => show(Date.now(), Date.now() + span, buckets),
  }, label));

  root.append(
    h("div", { class: "crumbs" },
      h("a", { href: ctx.href("tenants", tenant) }, tenant), " / ",
      h("a", { href: ctx.href("namespaces", tenant, namespace) }, namespace), " / ",
      h("a", { href: ctx.href("topics", domain, tenant, namespace, topic), dataset: { test: "topic-link" } }, topic)),
    h("h1", {}, "Scheduled messages of ", h("code", {}, subscription)),
    h("p", { class: "muted" },
      "Delayed messages waiting for their time on this subscription (Shared and Key_Shared "
      + "subscriptions hold them back until due). Times are UTC; click a bar to zoom into it."),
    h("div", { class: "toolbar" },
      ...presetButtons,
      h("button", { type: "button", dataset: { test: "earlier" }, onclick: () => pan(-1) }, "← Earlier"),
      h("button", { type: "button", dataset: { test: "later" }, onclick: () => pan(1) }, "Later →"),
      h("button", { type: "button", dataset: { test: "refresh" }, onclick: () => reload() }, "Refresh"),
      h("span", { class: "spacer" }), windowLabel),
    figures,
    h("div", { class: "card" }, chartBox),
    h("div", { class: "card" },
      h("div", { class: "toolbar" }, h("h2", {}, "Messages due in the window"), h("span", { class: "spacer" }), pager),
      listBox));

  function showFigures(hist, inWindow) {
    const figure = (key, label, value) => h("div", { class: "figure", dataset: { test: `figure-${key}`, value } },
      h("div", { class: "label" }, label), h("div", { class: "value" }, count(value)));
    clear(figures).append(
      figure("before", "Due before the window", hist.before),
      figure("inWindow", "Due in the window", inWindow),
      figure("after", "Due after the window", hist.after),
      figure("total", "Scheduled in all", hist.total));
  }

  function showHistogram(hist) {
    const bucketMs = hist.bucketMs;
    const zoom = (i) => {
      const start = hist.from + i * bucketMs;
      show(start, start + bucketMs, DEFAULT_BUCKETS);
    };
    clear(chartBox).append(histogram(hist.counts, { from: hist.from, bucketMs, onBar: zoom }));
    windowLabel.textContent = `${clock(hist.from, hist.to - hist.from)} – ${clock(hist.to, hist.to - hist.from)} UTC`
      + ` · ${spanLabel(hist.to - hist.from)} · buckets of ${spanLabel(bucketMs)}`;
  }

  function showList(page) {
    const now = Date.now();
    const rows = page.messages || [];
    const table = rows.length
      ? h("table", { class: "grid" },
        h("thead", {}, h("tr", {}, ["Message id", "Partition", "Key", "Properties", "Deliver at (UTC)", "Due", "Size", ""]
          .map((label) => h("th", {}, label)))),
        h("tbody", {}, rows.map((m) => h("tr", { dataset: { test: "scheduled-row", id: m.messageId, deliverAt: m.deliverAt } },
          h("td", { class: "mono" }, m.messageId),
          h("td", { class: "num" }, m.partition === undefined || m.partition < 0 ? "–" : m.partition),
          h("td", { class: "mono" }, m.key ?? "–"),
          h("td", { dataset: { test: "properties" } }, properties(m.properties)),
          h("td", { class: "mono" }, time(m.deliverAt)),
          h("td", { dataset: { test: "due" } }, relative(m.deliverAt, now)),
          h("td", { class: "num" }, bytes(m.size)),
          h("td", {},
            h("button", { type: "button", class: "small", dataset: { test: "reschedule" },
              onclick: () => reschedule(m) }, "Reschedule…"), " ",
            h("button", { type: "button", class: "small danger", dataset: { test: "cancel" },
              onclick: () => cancel(m) }, "Cancel"))))))
      : h("p", { class: "muted", dataset: { test: "no-scheduled" } }, "Nothing is due in this window.");
    clear(listBox).append(table);
    const first = rows.length ? page.offset + 1 : 0;
    clear(pager).append(
      h("span", { class: "muted", dataset: { test: "page-range" } },
        `${count(first)}–${count(page.offset + rows.length)} of ${count(page.inWindow)}`),
      h("button", { type: "button", class: "small", disabled: page.offset <= 0, dataset: { test: "prev-page" },
        onclick: () => { view.offset = Math.max(0, view.offset - PAGE); reload(); } }, "Previous"),
      h("button", { type: "button", class: "small", disabled: page.offset + rows.length >= page.inWindow,
        dataset: { test: "next-page" }, onclick: () => { view.offset += PAGE; reload(); } }, "Next"));
  }

  // The histogram and the list of the window, read again from the API.
  async function load() {
    const query = `from=${view.from}&to=${view.to}`;
    const [hist, page] = await Promise.all([
      get(`${scheduledPath(topic, "histogram")}?${query}&buckets=${view.buckets}`, { signal: ctx.signal }),
      get(`${scheduledPath(topic)}?${query}&offset=${view.offset}&limit=${PAGE}`, { signal: ctx.signal }),
    ]);
    if (ctx.signal.aborted) return;
    showFigures(hist, page.inWindow);
    showHistogram(hist);
    showList(page);
  }

  async function reload() {
    await act(load);
  }

  function show(from, to, buckets) {
    view.from = Math.floor(from);
    const span = Math.max(1, Math.ceil(to) - view.from);
    // never buckets narrower than a millisecond; the window a whole number of buckets, so
    // the list's window is the histogram's (which ends at its last bucket's end)
    view.buckets = Math.max(1, Math.min(buckets, span));
    view.to = view.from + view.buckets * Math.ceil(span / view.buckets);
    view.offset = 0;
    return reload();
  }

  function pan(direction) {
    const span = view.to - view.from;
    return show(view.from + direction * span, view.to + direction * span, view.buckets);
  }

  // A partitioned topic's messages are changed through their partition.
  function topicOf(message) {
    const partitioned = message.partition !== undefined && message.partition >= 0
      && !/-partition-\d+$/.test(topic);
    return partitioned ? `${topic}-partition-${message.partition}` : topic;
  }

  async function cancel(message) {
    if (!await confirmAction(`Cancel message ${message.messageId}?`,
      `It is acknowledged on ${subscription} and never delivered to it.`, "Cancel message", ctx.signal)) return;
    await act(() => del(scheduledPath(topicOf(message), `${message.ledgerId}:${message.entryId}`)),
      `Cancelled ${message.messageId}`);
    await reload();
  }

  async function reschedule(message) {
    const values = await dialog({
      signal: ctx.signal,
      title: `Reschedule ${message.messageId}`, confirm: "Reschedule",
      message: `Due ${time(message.deliverAt)} (${relative(message.deliverAt)}). Give a delay from now, `
        + "or a time (your browser's local time).",
      fields: [
        { name: "after", label: "In N seconds", type: "number", placeholder: "e.g. 60" },
        { name: "at", label: "Or at", type: "datetime-local", value: localInput(message.deliverAt) },
      ],
    });
    if (!values) return;
    let body;
    if (values.after !== "") {
      const seconds = Number(values.after);
      if (!(seconds >= 0)) { notify("Give a number of seconds of 0 or more", "error"); return; }
      body = { deliverAfterMs: Math.round(seconds * 1000) };
    } else {
      const at = new Date(values.at).getTime();
      if (Number.isNaN(at)) { notify("Give a delay or a time", "error"); return; }
      body = { deliverAt: Math.max(0, at) };
    }
    await act(() => post(scheduledPath(topicOf(message), `${message.ledgerId}:${message.entryId}`), body),
      `Rescheduled ${message.messageId}`);
    await reload();
  }

  // the first window is the hour from now; an error here is the page's (401 → login)
  const [, span, buckets] = PRESETS[1];
  view.from = Date.now();
  view.to = view.from + span; // 60 buckets of a minute
  view.buckets = buckets;
  await load();
}

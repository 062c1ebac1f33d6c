// A topic: its figures and a live chart of its rates (stats polled every 2 s), its
// partitions, producers, subscriptions with their consumers, the subscription operations
// (skip, clear, reset, expire, create, delete) and a look at the messages of a backlog.

import { del, get, path, post, put, topicPath } from "../api.js";
import { localInput, rateChart } from "../chart.js";
import { renderMessages } from "../messages.js";
import {
  act, bytes, clear, confirmAction, count, dialog, h, notify, rate, table,
} from "../ui.js";

const POLL_MS = 2000;
// sizes and throughputs are averages: whole bytes are enough
const size = (v) => bytes(v === null || v === undefined ? v : Math.round(Number(v)));
const WINDOW_MS = 5 * 60 * 1000;

// [field, label, formatter]: the topic's figures, as the stats answer names them
const FIGURES = [
  ["msgRateIn", "Rate in (msg/s)", rate],
  ["msgRateOut", "Rate out (msg/s)", rate],
  ["msgThroughputIn", "In (bytes/s)", size],
  ["msgThroughputOut", "Out (bytes/s)", size],
  ["msgInCounter", "Messages in", count],
  ["msgOutCounter", "Messages out", count],
  ["bytesInCounter", "Bytes in", bytes],
  ["storageSize", "Storage size", bytes],
  ["backlogSize", "Backlog size", bytes],
  ["averageMsgSize", "Average message size", size],
];

function figure(key, label, value, format) {
  return h("div", { class: "figure", dataset: { test: `figure-${key}`, value: value ?? "" } },
    h("div", { class: "label" }, label), h("div", { class: "value" }, format(value)));
}

function since(value) {
  return value ? String(value).replace("T", " ").replace(/\.\d+Z$/, "Z") : "–";
}

function producersTable(publishers) {
  return table([
    { label: "Name", value: (p) => p.producerName },
    { label: "Address", value: (p) => h("span", { class: "mono" }, p.address || "–") },
    { label: "Gateway", value: (p) => h("span", { class: "mono", dataset: { test: "gateway" } }, p.gateway || "–") },
    { label: "Rate in", class: "num", value: (p) => rate(p.msgRateIn) },
    { label: "Throughput in", class: "num", value: (p) => `${size(p.msgThroughputIn)}/s` },
    { label: "Access", value: (p) => p.accessMode || "–" },
    { label: "Client", value: (p) => p.clientVersion || "–" },
    { label: "Connected since", value: (p) => since(p.connectedSince) },
  ], publishers, { empty: "No producers connected.", test: "producers" });
}

function consumersTable(consumers) {
  return table([
    { label: "Consumer", value: (c) => c.consumerName },
    { label: "Address", value: (c) => h("span", { class: "mono" }, c.address || "–") },
    { label: "Gateway", value: (c) => h("span", { class: "mono", dataset: { test: "gateway" } }, c.gateway || "–") },
    { label: "Rate out", class: "num", value: (c) => rate(c.msgRateOut) },
    { label: "Throughput out", class: "num", value: (c) => `${size(c.msgThroughputOut)}/s` },
    { label: "Unacked", class: "num", value: (c) => count(c.unackedMessages) },
    { label: "Permits", class: "num", value: (c) => count(c.availablePermits) },
    { label: "Client", value: (c) => c.clientVersion || "–" },
    { label: "Connected since", value: (c) => since(c.connectedSince) },
  ], consumers, { empty: "No consumers connected.", test: "consumers" });
}

function subFigure(key, label, value, format = count) {
  return h("span", { class: "sub-figure", dataset: { test: `sub-${key}`, value: value ?? "" } },
    h("span", { class: "muted" }, label), " ", h("strong", {}, format(value)));
}

export async function render(root, params, ctx) {
  const { domain, tenant, namespace, topic } = params;
  const base = topicPath(domain, tenant, namespace, topic);
  const fullName = `${domain}://${tenant}/${namespace}/${topic}`;
  const subPath = (sub, ...rest) => `${base}/subscription/${path(sub, ...rest)}`;
  const { partitions = 0 } = await get(`${base}/partitions`, { signal: ctx.signal });
  const statsPath = partitions > 0 ? `${base}/partitioned-stats?perPartition=true` : `${base}/stats`;
  const history = [];

  const figures = h("div", { class: "figures", dataset: { test: "figures" } });
  const chartBox = h("div", { class: "chart-box" });
  const partitionsBox = h("div", {});
  const producersBox = h("div", {});
  const subsBox = h("div", { dataset: { test: "subscriptions" } });
  const peekCard = h("div", { class: "card peek", hidden: true, dataset: { test: "peek" } });
  const status = h("span", { class: "muted", dataset: { test: "status" } });

  root.append(
    h("div", { class: "crumbs" },
      h("a", { href: ctx.href("tenants") }, "Tenants"), " / ",
      h("a", { href: ctx.href("tenants", tenant) }, tenant), " / ",
      h("a", { href: ctx.href("namespaces", tenant, namespace) }, namespace)),
    h("h1", {}, topic, " ",
      h("span", { class: "badge" }, domain),
      partitions > 0 ? h("span", { class: "badge warn" }, `${partitions} partitions`) : null),
    h("div", { class: "toolbar" },
      h("code", {}, fullName),
      h("span", { class: "spacer" }),
      status,
      h("a", { class: "button", href: `#/clients?topic=${encodeURIComponent(fullName)}`,
        dataset: { test: "test-clients" } }, "Test clients")),
    figures,
    h("div", { class: "card" },
      h("div", { class: "toolbar" }, h("h2", {}, "Rates"), h("span", { class: "spacer" }),
        h("div", { class: "legend" }, h("span", { class: "in" }, "in"), h("span", { class: "out" }, "out"))),
      chartBox),
    partitionsBox,
    h("div", { class: "card" }, h("h2", {}, "Producers"), producersBox),
    h("div", { class: "card" },
      h("div", { class: "toolbar" }, h("h2", {}, "Subscriptions"), h("span", { class: "spacer" }),
        h("button", { type: "button", dataset: { test: "create-subscription" },
          onclick: () => createSubscription() }, "Create subscription")),
      subsBox),
    peekCard);

  function showFigures(stats) {
    clear(figures).append(
      ...FIGURES.map(([key, label, format]) => figure(key, label, stats[key], format)),
      figure("publishers", "Producers", (stats.publishers || []).length, count),
      figure("subscriptions", "Subscriptions", Object.keys(stats.subscriptions || {}).length, count));
  }

  function showChart(stats) {
    const now = Date.now();
    history.push({ t: now, in: Number(stats.msgRateIn) || 0, out: Number(stats.msgRateOut) || 0 });
    while (history.length && history[0].t < now - WINDOW_MS) history.shift();
    clear(chartBox).append(rateChart(history, { now, windowMs: WINDOW_MS }));
  }

  function showPartitions(stats) {
    if (!(partitions > 0)) return;
    const rows = Object.entries(stats.partitions || {}).map(([name, p]) => ({
      name: name.slice(name.lastIndexOf("/") + 1), ...p }));
    rows.sort((a, b) => a.name.localeCompare(b.name, "en", { numeric: true }));
    clear(partitionsBox).append(h("div", { class: "card" },
      h("h2", {}, "Partitions"),
      h("p", { class: "muted" }, "Peek and skip work on one partition: open it."),
      table([
        { label: "Partition", value: (p) => h("a", { href: ctx.href("topics", domain, tenant, namespace, p.name) }, p.name) },
        { label: "Rate in", class: "num", value: (p) => rate(p.msgRateIn) },
        { label: "Rate out", class: "num", value: (p) => rate(p.msgRateOut) },
        { label: "Storage", class: "num", value: (p) => bytes(p.storageSize) },
        { label: "Backlog size", class: "num", value: (p) => bytes(p.backlogSize) },
        { label: "Producers", class: "num", value: (p) => count((p.publishers || []).length) },
      ], rows, { empty: "No partition has stats yet.", test: "partitions" })));
  }

  function subscriptionBlock(name, sub) {
    const button = (label, test, fn, cls) => h("button", { type: "button", class: `small ${cls || ""}`,
      dataset: { test }, onclick: fn }, label);
    const onePartition = !(partitions > 0);
    return h("section", { class: "subscription", dataset: { test: "subscription", name } },
      h("div", { class: "toolbar" },
        h("h3", {}, name), h("span", { class: "badge" }, sub.type || "–"),
        sub.isDurable === false ? h("span", { class: "badge warn" }, "non-durable") : null,
        subFigure("msgBacklog", "backlog", sub.msgBacklog),
        subFigure("msgDelayed", "delayed", sub.msgDelayed),
        subFigure("unackedMessages", "unacked", sub.unackedMessages),
        subFigure("msgRateOut", "rate out", sub.msgRateOut, rate),
        subFigure("msgThroughputOut", "throughput out", sub.msgThroughputOut, (v) => `${size(v)}/s`),
        subFigure("msgRateRedeliver", "redeliver", sub.msgRateRedeliver, rate)),
      h("div", { class: "toolbar actions" },
        onePartition ? button("Peek", "peek", () => showPeek(name)) : null,
        onePartition ? button("Skip…", "skip", () => skip(name)) : null,
        button("Clear backlog", "clear-backlog", () => clearBacklog(name)),
        button("Reset cursor…", "reset-cursor", () => resetCursor(name)),
        button("Expire…", "expire", () => expire(name)),
        domain === "persistent"
          ? h("a", { class: "button small", dataset: { test: "scheduled-link" },
            href: ctx.href("schedule", domain, tenant, namespace, topic, name) }, "Scheduled messages")
          : null,
        h("span", { class: "spacer" }),
        button("Delete", "delete-subscription", () => deleteSubscription(name), "danger")),
      consumersTable(sub.consumers || []));
  }

  function showSubscriptions(stats) {
    const entries = Object.entries(stats.subscriptions || {}).sort(([a], [b]) => a.localeCompare(b));
    clear(subsBox).append(...(entries.length
      ? entries.map(([name, sub]) => subscriptionBlock(name, sub))
      : [h("p", { class: "muted" }, "No subscriptions.")]));
  }

  async function refresh() {
    const stats = await get(statsPath, { signal: ctx.signal });
    if (ctx.signal.aborted) return;
    showFigures(stats);
    showChart(stats);
    showPartitions(stats);
    clear(producersBox).append(producersTable(stats.publishers || []));
    showSubscriptions(stats);
    status.textContent = "";
  }

  // An operation, then the stats again so the page shows its effect at once.
  async function operate(fn, success) {
    const done = await act(async () => { await fn(); return true; }, success);
    if (done) await refresh().catch(() => {});
  }

  async function skip(sub) {
    const values = await dialog({ signal: ctx.signal, title: `Skip messages of ${sub}`, confirm: "Skip", danger: true,
      message: "The oldest entries of the backlog are acknowledged; consumers stay connected.",
      fields: [{ name: "count", label: "Entries to skip", type: "number", value: 1, required: true }] });
    if (!values) return;
    const n = Number.parseInt(values.count, 10);
    if (!(n > 0)) { notify("Give a number of entries above 0", "error"); return; }
    await operate(() => post(subPath(sub, "skip", n)), `Skipped ${n} of ${sub}`);
  }

  async function clearBacklog(sub) {
    if (!await confirmAction(`Clear the backlog of ${sub}?`,
      "Every message of the subscription is acknowledged, scheduled ones included.",
      "Clear backlog", ctx.signal)) return;
    await operate(() => post(subPath(sub, "skip_all")), `Cleared the backlog of ${sub}`);
  }

  async function resetCursor(sub) {
    const values = await dialog({ signal: ctx.signal, title: `Reset ${sub} to a time`, confirm: "Reset", danger: true,
      message: "The subscription restarts from the first message stored at or after this time "
        + "(your browser's local time); its consumers are disconnected and reconnect.",
      fields: [{ name: "time", label: "Time", type: "datetime-local",
        value: localInput(Date.now() - 3600e3), required: true }] });
    if (!values) return;
    const ms = new Date(values.time).getTime();
    if (Number.isNaN(ms)) { notify("Not a time", "error"); return; }
    await operate(() => post(subPath(sub, "resetcursor", ms)), `Reset ${sub}`);
  }

  async function expire(sub) {
    const values = await dialog({ signal: ctx.signal, title: `Expire messages of ${sub}`, confirm: "Expire", danger: true,
      message: "Messages published longer ago than this are acknowledged.",
      fields: [{ name: "seconds", label: "Older than (seconds)", type: "number", value: 3600, required: true }] });
    if (!values) return;
    const seconds = Number.parseInt(values.seconds, 10);
    if (!(seconds >= 0)) { notify("Give a number of seconds", "error"); return; }
    await operate(() => post(subPath(sub, "expireMessages", seconds)), `Expired messages of ${sub}`);
  }

  async function deleteSubscription(sub) {
    const values = await dialog({ signal: ctx.signal, title: `Delete subscription ${sub}?`, confirm: "Delete", danger: true,
      message: "Its cursor and backlog are gone for good.",
      fields: [{ name: "force", label: "Disconnect its consumers (force)", type: "checkbox" }] });
    if (!values) return;
    const query = values.force ? "?force=true" : "";
    await operate(() => del(subPath(sub) + query), `Deleted ${sub}`);
  }

  async function createSubscription() {
    const values = await dialog({ signal: ctx.signal, title: "Create a subscription", confirm: "Create",
      fields: [
        { name: "name", label: "Name", required: true },
        { name: "position", label: "Starts at", type: "select", options: ["latest", "earliest"], value: "latest" },
      ] });
    if (!values || !values.name.trim()) return;
    const name = values.name.trim();
    await operate(() => put(subPath(name), JSON.stringify(values.position),
      { headers: { "Content-Type": "application/json" } }), `Created ${name}`);
  }

  // The messages at the head of a subscription's backlog, fetched on demand (never polled:
  // what the user reads stays put).
  function showPeek(sub) {
    const countInput = h("input", { type: "number", min: 1, max: 100, value: 10,
      dataset: { test: "peek-count" }, class: "narrow" });
    const list = h("div", { dataset: { test: "peek-messages" } });
    async function load() {
      clear(list).append(h("p", { class: "muted" }, "Loading…"));
      const n = Math.max(1, Number.parseInt(countInput.value, 10) || 10);
      try {
        const answer = await get(`${subPath(sub, "peek")}?count=${n}`, { signal: ctx.signal });
        clear(list).append(renderMessages(answer.messages || [], { empty: "The backlog is empty." }));
      } catch (error) {
        clear(list).append(h("p", { class: "error-text" }, error.reason || error.message));
      }
    }
    peekCard.hidden = false;
    clear(peekCard).append(
      h("div", { class: "toolbar" },
        h("h2", {}, `Backlog of ${sub}`), h("span", { class: "spacer" }),
        h("span", { class: "muted" }, "first"), countInput,
        h("button", { type: "button", class: "primary", dataset: { test: "peek-load" }, onclick: load }, "Peek"),
        h("button", { type: "button", onclick: () => { peekCard.hidden = true; } }, "Close")),
      list);
    load();
    peekCard.scrollIntoView({ block: "nearest" });
  }

  await refresh();
  const timer = setInterval(() => {
    refresh().catch((error) => {
      if (!ctx.signal.aborted) status.textContent = `Stats not updated: ${error.reason || error.message}`;
    });
  }, POLL_MS);
  ctx.signal.addEventListener("abort", () => clearInterval(timer));
}

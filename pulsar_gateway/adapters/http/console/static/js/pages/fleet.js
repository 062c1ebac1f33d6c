// #/fleet: the gateways alive and the Redis they share, from GET /admin/v2/fleet, refreshed
// every 5 s. Figures are shown as the API gives them (formatted, never recomputed): each
// gateway reports its own, and the page adds nothing up.

import { get } from "../api.js";
import { bytes, clear, count, errorBlock, every, h, rate, table, time, toLogin } from "../ui.js";

const REFRESH_MS = 5000;

export async function render(root, params, ctx) {
  const title = h("h1", {}, "Fleet");
  const updated = h("span", { class: "muted", dataset: { test: "fleet-updated" } });
  const body = h("div", { dataset: { test: "fleet" } });
  root.append(h("div", { class: "toolbar" }, title, h("span", { class: "spacer" }), updated), body);

  // The first read is awaited: a 401 or 403 then reaches the shell (login form, or the
  // refusal in place of the page). Later reads that fail keep the page and say why.
  show(body, await get("/admin/v2/fleet", { signal: ctx.signal }));
  updated.textContent = `updated ${new Date().toLocaleTimeString()}`;
  let first = true;
  every(REFRESH_MS, ctx.signal, async () => {
    if (first) { first = false; return; }
    try {
      const fleet = await get("/admin/v2/fleet", { signal: ctx.signal });
      show(body, fleet);
      updated.textContent = `updated ${new Date().toLocaleTimeString()}`;
    } catch (error) {
      if (ctx.signal.aborted) return;
      if (error.unauthenticated) { toLogin(error); return; } // e.g. the token expired
      updated.textContent = "";
      clear(body).append(errorBlock(error));
    }
  });
}

function show(body, fleet) {
  const gateways = fleet.gateways || [];
  clear(body).append(
    h("p", {},
      "Cluster ", h("strong", { dataset: { test: "fleet-cluster" } }, fleet.cluster), ": ",
      h("span", { dataset: { test: "gateway-count" } },
        `${gateways.length} gateway${gateways.length === 1 ? "" : "s"} alive`)),
    h("div", { class: "card" }, h("h2", {}, "Gateways"), gatewayTable(gateways)),
    h("div", { class: "card" }, h("h2", {}, "Redis"), redisPart(fleet.redis)));
}

function gatewayTable(gateways) {
  const columns = [
    { label: "Gateway", value: (g) => h("span", {},
      h("strong", { class: "mono" }, g.gatewayId), h("br"),
      h("span", { class: "muted mono" }, g.brokerId)) },
    // behind a load balancer every gateway advertises the balancer's address: the host
    // name and process tell them apart (and worker processes of one host from each other)
    { label: "Host", value: (g) => h("span", { class: "mono", dataset: { test: "gateway-host" } },
      g.host || "–", h("br"), h("span", { class: "muted" }, g.pid ? `pid ${g.pid}` : "")) },
    { label: "URLs", value: (g) => h("span", { class: "mono" },
      g.serviceUrl, h("br"), g.brokerServiceUrl) },
    { label: "Started / reported", value: (g) => h("span", {}, time(g.started), h("br"),
      g.reportedAt == null ? h("span", { class: "muted" }, "not reported yet")
        : h("span", { class: "muted" }, time(g.reportedAt))) },
    figure("Connections", "connections", count),
    figure("Producers", "producers", count),
    figure("Consumers", "consumers", count),
    figure("Topics", "topics", count),
    pair("Msg/s", "msgRateIn", "msgRateOut", rate),
    pair("Bytes/s", "msgThroughputIn", "msgThroughputOut", bytes),
  ];
  const grid = table(columns, gateways, { empty: "No gateway has reported.", test: "gateways" });
  grid.classList.add("fleet-gateways");
  // one row per gateway, named for tests and for a user's find-in-page
  const rows = grid.querySelectorAll("tbody tr");
  rows.forEach((row, i) => {
    row.dataset.test = "gateway-row";
    row.dataset.gatewayId = gateways[i].gatewayId;
    row.dataset.brokerId = gateways[i].brokerId;
    row.dataset.host = gateways[i].host || "";
  });
  return grid;
}

// A numeric column whose cell carries the field's name, so a test reads each figure.
function figure(label, field, format) {
  return {
    label, class: "num",
    value: (g) => h("span", { dataset: { test: `gateway-${field}` } },
      g[field] == null ? "–" : format(g[field])),
  };
}

// An in and an out figure, one above the other (keeps the table within a screen's width).
function pair(label, inField, outField, format) {
  const shown = (gateway, field) => (gateway[field] == null ? "–" : format(gateway[field]));
  const line = (gateway, direction, field) => h("span", {},
    h("span", { class: "muted" }, `${direction} `),
    h("span", { dataset: { test: `gateway-${field}` } }, shown(gateway, field)));
  return {
    label, class: "num",
    value: (gateway) => h("span", {},
      line(gateway, "in", inField), h("br"), line(gateway, "out", outField)),
  };
}

function redisPart(redis) {
  if (!redis) return h("p", { class: "muted" }, "Not reported.");
  // a replica of a standalone Redis reports no figures (the gateway does not connect to it)
  const memory = (used, max) => (used == null ? "–" : [bytes(used), " of ",
    max ? bytes(max) : h("span", { class: "muted" }, "no limit")]);
  const nodes = redis.nodes || [];
  const grid = table([
    { label: "Node", value: (n) => h("span", { class: "mono" }, n.id) },
    { label: "Address", value: (n) => h("span", { class: "mono" }, n.address) },
    { label: "Role", value: (n) => h("span", { class: n.role === "master" ? "badge" : "badge warn" },
      n.role) },
    { label: "Master", value: (n) => h("span", { class: "mono" }, n.master || "–") },
    { label: "Slots", value: (n) => slots(n.slots) },
    { label: "Memory", class: "num", value: (n) => memory(n.usedMemory, n.maxMemory) },
    { label: "Clients", class: "num", value: (n) => count(n.connectedClients) },
    { label: "Link", value: (n) => n.linkState == null ? "–"
      : h("span", { class: n.linkState === "connected" ? "badge ok" : "badge bad" }, n.linkState) },
  ], nodes, { empty: "No nodes reported.", test: "redis-nodes" });
  grid.querySelectorAll("tbody tr").forEach((row, i) => {
    row.dataset.test = "redis-node-row";
    row.dataset.role = nodes[i].role;
  });
  return [
    h("div", { class: "figures" },
      tile("Mode", h("span", { dataset: { test: "redis-mode" } }, redis.mode)),
      tile("Version", h("span", { dataset: { test: "redis-version" } }, redis.version || "–")),
      tile("Used memory", h("span", { dataset: { test: "redis-used-memory" } }, bytes(redis.usedMemory))),
      tile("Max memory", h("span", { dataset: { test: "redis-max-memory" } },
        redis.maxMemory ? bytes(redis.maxMemory) : "no limit"))),
    grid,
  ];
}

function tile(label, value) {
  return h("div", { class: "figure" }, h("div", { class: "label" }, label),
    h("div", { class: "value" }, value));
}

// Cluster slots as Redis gives them: a list of [start, end] ranges, or a count, or a text.
function slots(value) {
  if (value == null || (Array.isArray(value) && !value.length)) return "–";
  if (!Array.isArray(value)) return String(value);
  return h("span", { class: "mono" },
    value.map((r) => (Array.isArray(r) ? (r[0] === r[1] ? `${r[0]}` : `${r[0]}-${r[1]}`) : String(r)))
      .join(", "));
}

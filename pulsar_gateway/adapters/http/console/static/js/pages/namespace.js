// #/namespaces/:tenant/:namespace: the namespace's topics, policies and permissions, one tab
// each (?tab=policies opens another than the first).
//
// The topic list stays usable with tens of thousands of topics: the four list calls are the
// only requests for it (no stats per topic), the filter runs over names in memory, and only
// the rows in view are in the DOM (a virtual list). A partitioned topic is one row, with its
// partition count read when its row comes into view.

import { del, get, path, post, put } from "../api.js";
import { act, bytes, count, dialog, duration, h } from "../ui.js";
import { crumbs, facts, integer, loadInto, names, notSet } from "./parts.js";

const DOMAINS = ["persistent", "non-persistent"];
const TABS = [["topics", "Topics"], ["policies", "Policies"], ["permissions", "Permissions"]];

export async function render(root, params, ctx) {
  const { tenant, namespace } = params;
  const ns = { tenant, namespace, base: `/admin/v2/namespaces/${path(tenant, namespace)}` };
  const bar = h("div", { class: "tabs", role: "tablist" });
  const panels = {};
  const built = new Set();
  root.append(
    crumbs(ctx, [tenant, ctx.href("tenants", tenant)], [namespace]),
    h("h1", {}, `Namespace ${tenant}/${namespace}`),
    bar);
  for (const [key] of TABS) {
    panels[key] = h("div", { class: "tab-panel", dataset: { test: `panel-${key}` }, hidden: true });
    root.append(panels[key]);
  }
  const builders = { topics: topicsTab, policies: policiesTab, permissions: permissionsTab };

  async function open(key) {
    for (const button of bar.children) button.classList.toggle("active", button.dataset.tab === key);
    for (const [name, panel] of Object.entries(panels)) panel.hidden = name !== key;
    // the tab is in the address (a link or a reload reopens it) without a new render
    const hash = `${ctx.href("namespaces", tenant, namespace)}${key === "topics" ? "" : `?tab=${key}`}`;
    if (location.hash !== hash) history.replaceState(null, "", hash);
    if (!built.has(key)) {
      built.add(key);
      await builders[key](panels[key], ns, ctx);
    }
  }
  for (const [key, label] of TABS) {
    bar.append(h("button", { type: "button", role: "tab", dataset: { tab: key, test: `tab-${key}` },
      onclick: () => open(key) }, label));
  }
  const wanted = ctx.query.get("tab");
  await open(TABS.some(([key]) => key === wanted) ? wanted : "topics");
}

// -- topics ---------------------------------------------------------------------------------

const ROW_HEIGHT = 34;
const OVERSCAN = 8;

async function topicsTab(panel, ns, ctx) {
  const topicBase = (domain) => `/admin/v2/${domain}/${path(ns.tenant, ns.namespace)}`;
  let all = [];
  const filter = h("input", { type: "search", placeholder: "Filter topics by name",
    dataset: { test: "topic-filter" }, "aria-label": "Filter topics" });
  const total = h("span", { class: "muted", dataset: { test: "topic-count" } });
  const warning = h("div");
  const list = virtualList((entry) => topicRow(entry));
  const body = h("div", {}, list.box);
  panel.append(
    h("div", { class: "toolbar" }, filter, total, h("span", { class: "spacer" }),
      h("button", { class: "primary", dataset: { test: "create-topic" }, onclick: create },
        "Create topic")),
    warning,
    h("div", { class: "topic-head vrow-grid" },
      h("span", {}, "Domain"), h("span", {}, "Topic"), h("span", {}, "Partitions"), h("span")),
    body);

  function apply() {
    const q = filter.value.trim().toLowerCase();
    const shown = q ? all.filter((e) => e.lower.includes(q)) : all;
    total.dataset.total = String(all.length);
    total.dataset.shown = String(shown.length);
    total.textContent = q ? `${count(shown.length)} of ${count(all.length)} topics`
      : `${count(all.length)} topic${all.length === 1 ? "" : "s"}`;
    list.set(shown, q ? "No topic matches the filter." : "No topics in this namespace yet.");
  }
  filter.addEventListener("input", apply);

  async function reload() {
    await loadInto(warning, async () => {
      const { entries, refused } = await listTopics(ns, topicBase, ctx.signal);
      all = entries;
      apply();
      return refused.map((e) => h("p", { class: "error-text", dataset: { test: "topic-list-refused" } },
        `Part of the list is missing: ${e.reason}`));
    }, ctx.signal);
  }

  function topicRow(entry) {
    const label = entry.partitioned
      ? (entry.partitions === undefined ? "partitioned" : `${count(entry.partitions)} partitions`)
      : "non-partitioned";
    if (entry.partitioned && entry.partitions === undefined && !entry.asked) {
      entry.asked = true;
      get(`${topicBase(entry.domain)}/${path(entry.name)}/partitions`, { signal: ctx.signal })
        .then((meta) => { entry.partitions = meta.partitions; list.paint(); })
        .catch(() => { /* the row keeps saying "partitioned" */ });
    }
    return h("div", { class: "vrow vrow-grid", dataset: { test: "topic-row", topic: entry.full } },
      h("span", {}, h("span", { class: entry.domain === "persistent" ? "badge" : "badge warn" },
        entry.domain)),
      h("a", { class: "mono topic-name", title: entry.full,
        href: ctx.href("topics", entry.domain, ns.tenant, ns.namespace, entry.name) }, entry.name),
      h("span", { dataset: { test: "topic-partitions" } }, label),
      h("span", { class: "num" }, h("button", { class: "small", dataset: { test: "delete-topic" },
        onclick: () => remove(entry) }, "Delete")));
  }

  async function create() {
    const values = await dialog({
      title: `Create a topic in ${ns.tenant}/${ns.namespace}`,
      fields: [
        { name: "topic", label: "Name", required: true, placeholder: "orders" },
        { name: "domain", label: "Domain", type: "select", options: DOMAINS, value: "persistent" },
        { name: "partitions", label: "Partitions (0: a non-partitioned topic)", type: "number",
          value: "0" },
      ],
      confirm: "Create",
    });
    if (!values) return;
    const name = values.topic.trim();
    await act(async () => {
      const partitions = integer(values.partitions || "0", "Partitions");
      const url = `${topicBase(values.domain)}/${path(name)}`;
      if (partitions > 0) await put(`${url}/partitions`, String(partitions));
      else await put(url);
      await reload();
    }, `Topic ${name} created`);
  }

  async function remove(entry) {
    const values = await dialog({
      title: `Delete topic ${entry.name}?`,
      message: `${entry.full}${entry.partitioned ? " and all its partitions" : ""}, with its `
        + "messages and subscriptions. A topic with connected producers or consumers is "
        + "refused unless forced.",
      fields: [{ name: "force", label: "Force (disconnect its clients)", type: "checkbox" }],
      confirm: "Delete", danger: true,
    });
    if (!values) return;
    const url = `${topicBase(entry.domain)}/${path(entry.name)}${entry.partitioned ? "/partitions" : ""}`;
    await act(async () => {
      await del(`${url}${values.force ? "?force=true" : ""}`);
      await reload();
    }, `Topic ${entry.name} deleted`);
  }

  await reload();
}

// The namespace's topics of both domains, a partitioned topic once (its partitions, which
// the plain list also names, left out). A domain whose list is refused is left out and
// said so; if every list is refused, that refusal is the tab's error.
async function listTopics(ns, topicBase, signal) {
  const calls = DOMAINS.flatMap((d) => [get(topicBase(d), { signal }),
    get(`${topicBase(d)}/partitioned`, { signal })]);
  const results = await Promise.allSettled(calls);
  const refused = results.filter((r) => r.status === "rejected").map((r) => r.reason);
  if (refused.length === results.length) throw refused[0];
  if (refused.some((e) => e.status === 401)) throw refused.find((e) => e.status === 401);
  const entries = [];
  DOMAINS.forEach((domain, i) => {
    const [plain, partitioned] = [results[2 * i], results[2 * i + 1]];
    const prefix = `${domain}://${ns.tenant}/${ns.namespace}/`;
    const local = (full) => (full.startsWith(prefix) ? full.slice(prefix.length) : full);
    const bases = new Set(partitioned.status === "fulfilled" ? partitioned.value.map(local) : []);
    for (const name of bases) entries.push(entry(domain, name, prefix, true));
    if (plain.status !== "fulfilled") return;
    for (const full of plain.value) {
      const name = local(full);
      const match = /^(.*)-partition-\d+$/.exec(name);
      if (match && bases.has(match[1])) continue;
      entries.push(entry(domain, name, prefix, false));
    }
  });
  entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : a.domain < b.domain ? -1 : 1));
  return { entries, refused };
}

function entry(domain, name, prefix, partitioned) {
  return { domain, name, full: prefix + name, lower: (prefix + name).toLowerCase(), partitioned };
}

// Rows of a fixed height in a scrolling box; only those in view (and a few around) exist.
function virtualList(renderRow) {
  const rows = h("div", { class: "spacer-rows" });
  const empty = h("p", { class: "muted vempty", hidden: true });
  const box = h("div", { class: "virtual topic-list", dataset: { test: "topic-list" } }, rows, empty);
  let items = [];
  let queued = false;

  function paint() {
    queued = false;
    const top = box.scrollTop;
    const height = box.clientHeight || 600;
    const first = Math.max(0, Math.floor(top / ROW_HEIGHT) - OVERSCAN);
    const last = Math.min(items.length, Math.ceil((top + height) / ROW_HEIGHT) + OVERSCAN);
    const fresh = [];
    for (let i = first; i < last; i += 1) {
      const row = renderRow(items[i]);
      row.style.top = `${i * ROW_HEIGHT}px`; // CSSOM, which the page's CSP allows
      row.style.height = `${ROW_HEIGHT}px`;
      fresh.push(row);
    }
    rows.replaceChildren(...fresh);
  }
  box.addEventListener("scroll", () => {
    if (!queued) { queued = true; requestAnimationFrame(paint); }
  });
  return {
    box,
    paint,
    set(next, emptyText) {
      items = next;
      rows.style.height = `${items.length * ROW_HEIGHT}px`;
      // as tall as its rows (room for the empty text when none), up to the CSS max-height
      box.style.height = `${(items.length || 2) * ROW_HEIGHT + 2}px`;
      empty.textContent = emptyText;
      empty.hidden = items.length > 0;
      if (box.scrollTop > items.length * ROW_HEIGHT) box.scrollTop = 0;
      paint();
    },
  };
}

// -- policies -------------------------------------------------------------------------------

const QUOTA_POLICIES = ["producer_request_hold", "producer_exception", "consumer_backlog_eviction"];
const QUOTA_TYPES = ["destination_storage", "message_age"];

function limit(n, unit, none = "no limit") {
  return n === -1 ? "infinite" : n == null ? "–" : n === 0 && none ? none : `${count(n)} ${unit}`;
}

// Each policy: how to read it, show it, edit it and unset it, by the admin API's own paths.
function policies(ns) {
  const at = (segment) => `${ns.base}/${segment}`;
  return [
    {
      key: "retention", title: "Retention",
      help: "How long and how much acknowledged data is kept (-1: no limit, 0: none).",
      read: () => get(at("retention")),
      show: (v) => facts([["Time", limit(v.retentionTimeInMinutes, "min", "")],
        ["Size", limit(v.retentionSizeInMB, "MB", "")]]),
      fields: (v) => [
        { name: "retentionTimeInMinutes", label: "Time in minutes (-1: infinite)", type: "number",
          value: v ? v.retentionTimeInMinutes : 0 },
        { name: "retentionSizeInMB", label: "Size in MB (-1: infinite)", type: "number",
          value: v ? v.retentionSizeInMB : 0 },
      ],
      save: (f) => post(at("retention"), {
        retentionTimeInMinutes: integer(f.retentionTimeInMinutes, "Time"),
        retentionSizeInMB: integer(f.retentionSizeInMB, "Size"),
      }),
      unset: () => del(at("retention")),
    },
    {
      key: "messageTTL", title: "Message TTL",
      help: "Unacknowledged messages older than this are acknowledged by the gateway.",
      read: () => get(at("messageTTL")),
      show: (v) => h("span", {}, `${count(v)} s`, v ? h("span", { class: "muted" }, ` (${duration(v * 1000)})`) : null),
      fields: (v) => [{ name: "seconds", label: "Seconds", type: "number", value: v ?? 3600 }],
      save: (f) => post(at("messageTTL"), integer(f.seconds, "Seconds")),
      unset: () => del(at("messageTTL")),
    },
    {
      key: "delayedDelivery", title: "Delayed delivery",
      help: "A fixed delay (PIP-437), when above 0, delays every message by that much, "
        + "whatever the producer asked.",
      // unset reads as the gateway's defaults; the namespace's Policies tell whether it is set
      read: async () => {
        const [value, all] = await Promise.all([get(at("delayedDelivery")),
          get(ns.base).catch(() => null)]);
        const isSet = !all || all.delayed_delivery_policies != null;
        return value == null ? null : { ...value, isSet };
      },
      show: (v) => [
        v.isSet ? null : h("p", { class: "muted", dataset: { test: "not-set" } },
          "not set: the gateway's defaults apply"),
        facts([
          ["Active", v.active ? "yes" : "no"],
          ["Tick time", `${count(v.tickTime)} ms`],
          ["Max delay", v.maxDeliveryDelayInMillis ? `${count(v.maxDeliveryDelayInMillis)} ms` : "no limit"],
          ["Fixed delay", v.fixedDeliveryDelayInMillis ? `${count(v.fixedDeliveryDelayInMillis)} ms` : "none"],
        ]),
      ],
      fields: (v) => [
        { name: "active", label: "Active", type: "checkbox", value: v ? v.active : true },
        { name: "tickTime", label: "Tick time (ms)", type: "number", value: v ? v.tickTime : 1000 },
        { name: "maxDeliveryDelayInMillis", label: "Max delivery delay (ms, 0: no limit)",
          type: "number", value: v ? v.maxDeliveryDelayInMillis : 0 },
        { name: "fixedDeliveryDelayInMillis", label: "Fixed delivery delay (ms, 0: none)",
          type: "number", value: v ? v.fixedDeliveryDelayInMillis : 0 },
      ],
      save: (f) => post(at("delayedDelivery"), {
        active: f.active,
        tickTime: integer(f.tickTime, "Tick time"),
        maxDeliveryDelayInMillis: integer(f.maxDeliveryDelayInMillis, "Max delivery delay"),
        fixedDeliveryDelayInMillis: integer(f.fixedDeliveryDelayInMillis, "Fixed delivery delay"),
      }),
      unset: () => del(at("delayedDelivery")),
    },
    {
      key: "deduplication", title: "Deduplication",
      help: "Messages a producer sends again (same producer name and sequence id) are dropped.",
      read: () => get(at("deduplication")),
      show: (v) => h("span", { class: v ? "badge ok" : "badge" }, v ? "enabled" : "disabled"),
      fields: (v) => [{ name: "enabled", label: "Deduplication", type: "select",
        options: ["enabled", "disabled"], value: v ? "enabled" : "disabled" }],
      save: (f) => post(at("deduplication"), f.enabled === "enabled"),
      unset: () => del(at("deduplication")),
    },
    {
      key: "backlogQuota", title: "Backlog quotas",
      help: "What happens when a subscription's backlog is too large (bytes) or too old "
        + "(seconds); -1: no limit. A size quota must stay below the retention size.",
      read: async () => {
        const map = await get(at("backlogQuotaMap"));
        return map && Object.keys(map).length ? map : null;
      },
      show: (map) => Object.entries(map).map(([type, q]) => h("div", { class: "quota",
        dataset: { test: "backlog-quota", type } },
        h("strong", {}, type), ": ",
        type === "message_age" ? limit(q.limitTime, "s") : (q.limitSize === -1 ? "infinite" : bytes(q.limitSize)),
        type === "message_age" ? null : (q.limitTime > 0 ? `, ${count(q.limitTime)} s` : null),
        ", ", h("span", { class: "mono" }, q.policy))),
      fields: (map) => {
        const q = (map && map.destination_storage) || {};
        return [
          { name: "type", label: "Quota type", type: "select", options: QUOTA_TYPES,
            value: "destination_storage" },
          { name: "limitSize", label: "Size limit in bytes (-1: none)", type: "number",
            value: q.limitSize ?? 1073741824 },
          { name: "limitTime", label: "Time limit in seconds (-1: none)", type: "number",
            value: q.limitTime ?? -1 },
          { name: "policy", label: "When exceeded", type: "select", options: QUOTA_POLICIES,
            value: q.policy || "producer_request_hold" },
        ];
      },
      save: (f) => post(`${at("backlogQuota")}?backlogQuotaType=${encodeURIComponent(f.type)}`, {
        limitSize: integer(f.limitSize, "Size limit"),
        limitTime: integer(f.limitTime, "Time limit"),
        policy: f.policy,
      }),
      // one DELETE per quota type that is set
      unset: async (map) => {
        for (const type of Object.keys(map || {})) {
          await del(`${at("backlogQuota")}?backlogQuotaType=${encodeURIComponent(type)}`);
        }
      },
    },
  ];
}

async function policiesTab(panel, ns, ctx) {
  const cards = policies(ns).map((policy) => policyCard(policy, ctx));
  panel.append(h("div", { class: "policy-grid" }, cards.map((c) => c.card)));
  await Promise.all(cards.map((c) => c.refresh()));
}

function policyCard(policy, ctx) {
  let current = null;
  const value = h("div", { class: "policy-value", dataset: { test: `policy-${policy.key}-value` } },
    h("span", { class: "muted" }, "Loading…"));
  const edit = h("button", { class: "small", dataset: { test: `edit-${policy.key}` },
    onclick: onEdit }, "Edit");
  const unset = h("button", { class: "small", dataset: { test: `unset-${policy.key}` },
    onclick: onUnset }, "Unset");
  const card = h("div", { class: "card policy", dataset: { test: `policy-${policy.key}` } },
    h("div", { class: "toolbar" }, h("h3", {}, policy.title), h("span", { class: "spacer" }),
      edit, unset),
    h("p", { class: "muted small" }, policy.help),
    value);

  // what the gateway holds now, read again after every change (never what was typed)
  async function refresh() {
    const ok = await loadInto(value, async () => {
      current = await policy.read();
      if (current === null || current === undefined) return notSet();
      return policy.show(current);
    }, ctx.signal);
    // a part the role may not read is one it may not change either
    edit.disabled = !ok;
    unset.disabled = !ok || current === null || current === undefined
      || (policy.key === "delayedDelivery" && !current.isSet);
  }

  async function onEdit() {
    const values = await dialog({ title: policy.title, message: policy.help,
      fields: policy.fields(current), confirm: "Save" });
    if (!values) return;
    const saved = await act(async () => { await policy.save(values); return true; },
      `${policy.title} saved`);
    if (saved) await refresh();
  }

  async function onUnset() {
    const values = await dialog({ title: `Unset ${policy.title.toLowerCase()}?`,
      message: "The namespace then follows the gateway's defaults.", confirm: "Unset", danger: true });
    if (!values) return;
    const done = await act(async () => { await policy.unset(current); return true; },
      `${policy.title} unset`);
    if (done) await refresh();
  }

  return { card, refresh };
}

// -- permissions ----------------------------------------------------------------------------

const ACTIONS = ["produce", "consume"];

async function permissionsTab(panel, ns, ctx) {
  const at = `${ns.base}/permissions`;
  const list = h("div", { dataset: { test: "permission-list" } }, h("span", { class: "muted" }, "Loading…"));
  panel.append(
    h("div", { class: "toolbar" },
      h("p", { class: "muted" }, "Roles allowed to produce or consume on every topic of the namespace."),
      h("span", { class: "spacer" }),
      h("button", { class: "primary", dataset: { test: "grant-permission" }, onclick: grant }, "Grant")),
    list);

  const reload = () => loadInto(list, async () => {
    const grants = await get(at, { signal: ctx.signal });
    const roles = Object.keys(grants || {}).sort();
    if (!roles.length) return h("p", { class: "muted", dataset: { test: "no-permissions" } }, "No grants.");
    return h("table", { class: "grid" },
      h("thead", {}, h("tr", {}, h("th", {}, "Role"), h("th", {}, "Actions"), h("th"))),
      h("tbody", {}, roles.map((role) => h("tr", { dataset: { test: "permission-row", role } },
        h("td", { class: "mono" }, role),
        h("td", { dataset: { test: "permission-actions" } },
          [...grants[role]].sort().map((a) => h("span", { class: "badge action" }, a))),
        h("td", { class: "num" }, h("button", { class: "small", dataset: { test: "revoke-permission" },
          onclick: () => revoke(role) }, "Revoke"))))));
  }, ctx.signal);

  async function grant() {
    const values = await dialog({
      title: `Grant on ${ns.tenant}/${ns.namespace}`,
      fields: [
        { name: "role", label: "Role", required: true, placeholder: "app" },
        ...ACTIONS.map((a) => ({ name: a, label: a, type: "checkbox", value: true })),
      ],
      confirm: "Grant",
    });
    if (!values) return;
    const [role] = names(values.role);
    const actions = ACTIONS.filter((a) => values[a]);
    const done = await act(async () => {
      if (!role) throw new Error("A role is required");
      await post(`${at}/${path(role)}`, actions);
      return true;
    }, `Granted ${actions.join(" and ") || "nothing"} to ${role}`);
    if (done) await reload();
  }

  async function revoke(role) {
    const values = await dialog({ title: `Revoke ${role}'s permissions?`,
      message: `${role} may then no longer produce or consume here (unless granted on a topic).`,
      confirm: "Revoke", danger: true });
    if (!values) return;
    const done = await act(async () => { await del(`${at}/${path(role)}`); return true; },
      `Revoked ${role}`);
    if (done) await reload();
  }

  await reload();
}

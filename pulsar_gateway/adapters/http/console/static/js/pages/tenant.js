// #/tenants/:tenant: the tenant's namespaces (create, delete) and its admin roles.
//
// The two parts load on their own: a tenant admin may list the namespaces but not read the
// TenantInfo (a superuser's), so a refusal of one shows in its part and the other stays.

import { del, get, path, post, put } from "../api.js";
import { act, dialog, h, table } from "../ui.js";
import { crumbs, loadInto, names } from "./parts.js";

export async function render(root, params, ctx) {
  const { tenant } = params;
  const base = `/admin/v2/namespaces/${path(tenant)}`;
  const info = h("div", { dataset: { test: "tenant-info" } }, h("p", { class: "muted" }, "Loading…"));
  const list = h("div", { dataset: { test: "namespace-list" } }, h("p", { class: "muted" }, "Loading…"));

  const reloadNamespaces = () => loadInto(list, async () => {
    const namespaces = await get(base, { signal: ctx.signal });
    return namespaceTable(tenant, namespaces, ctx, reloadNamespaces);
  }, ctx.signal);
  const reloadInfo = () => loadInto(info, async () => {
    const data = await get(`/admin/v2/tenants/${path(tenant)}`, { signal: ctx.signal });
    return infoPart(tenant, data, reloadInfo);
  }, ctx.signal);

  root.append(
    crumbs(ctx, [tenant]),
    h("div", { class: "toolbar" }, h("h1", {}, `Tenant ${tenant}`), h("span", { class: "spacer" }),
      h("button", { class: "primary", dataset: { test: "create-namespace" },
        onclick: () => create(tenant, reloadNamespaces) }, "Create namespace")),
    h("div", { class: "card" }, h("h2", {}, "Namespaces"), list),
    h("div", { class: "card" }, h("h2", {}, "Admin roles"), info));
  await Promise.all([reloadNamespaces(), reloadInfo()]);
}

function namespaceTable(tenant, namespaces, ctx, reload) {
  // the API answers "tenant/ns"; the page shows and links the namespace's own name
  const short = namespaces.map((n) => n.slice(n.indexOf("/") + 1)).sort();
  const grid = table([
    { label: "Namespace", value: (ns) => h("a", { href: ctx.href("namespaces", tenant, ns),
      dataset: { test: "namespace-link" } }, ns) },
    { label: "", class: "num", value: (ns) => h("button", { class: "small",
      dataset: { test: "delete-namespace" }, onclick: () => remove(tenant, ns, reload) }, "Delete") },
  ], short, { empty: "No namespaces yet.", test: "namespaces" });
  grid.querySelectorAll("tbody tr").forEach((row, i) => {
    row.dataset.test = "namespace-row";
    row.dataset.namespace = short[i];
  });
  return grid;
}

function infoPart(tenant, data, reload) {
  const roles = data.adminRoles || [];
  return [
    h("div", { class: "toolbar" },
      h("span", { dataset: { test: "admin-roles" } },
        roles.length ? roles.map((r) => h("span", { class: "badge role" }, r))
          : h("span", { class: "muted" }, "none (superusers only)")),
      h("span", { class: "spacer" }),
      h("button", { dataset: { test: "edit-admin-roles" },
        onclick: () => editRoles(tenant, data, reload) }, "Edit")),
    h("p", { class: "muted" }, "Allowed clusters: ", (data.allowedClusters || []).join(", ") || "–"),
  ];
}

async function editRoles(tenant, data, reload) {
  const values = await dialog({
    title: `Admin roles of ${tenant}`,
    message: "The roles that administer the tenant's namespaces and topics.",
    fields: [{ name: "adminRoles", label: "Roles (comma-separated)",
      value: (data.adminRoles || []).join(", ") }],
    confirm: "Save",
  });
  if (!values) return;
  await act(async () => {
    await post(`/admin/v2/tenants/${path(tenant)}`,
      { ...data, adminRoles: names(values.adminRoles) });
    await reload(); // what the gateway kept, not what was typed
  }, "Admin roles saved");
}

async function create(tenant, reload) {
  const values = await dialog({
    title: `Create a namespace in ${tenant}`,
    fields: [{ name: "namespace", label: "Name", required: true, placeholder: "orders" }],
    confirm: "Create",
  });
  if (!values) return;
  const ns = values.namespace.trim();
  await act(async () => {
    await put(`/admin/v2/namespaces/${path(tenant, ns)}`);
    await reload();
  }, `Namespace ${tenant}/${ns} created`);
}

async function remove(tenant, ns, reload) {
  const values = await dialog({
    title: `Delete namespace ${tenant}/${ns}?`,
    message: "A namespace that still has topics is refused, unless forced: forcing deletes "
      + "its topics, with their messages and subscriptions.",
    fields: [{ name: "force", label: "Force (delete its topics too)", type: "checkbox" }],
    confirm: "Delete", danger: true,
  });
  if (!values) return;
  await act(async () => {
    await del(`/admin/v2/namespaces/${path(tenant, ns)}${values.force ? "?force=true" : ""}`);
    await reload();
  }, `Namespace ${tenant}/${ns} deleted`);
}

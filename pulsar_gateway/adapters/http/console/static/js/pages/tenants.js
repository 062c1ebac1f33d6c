// #/tenants: every tenant, create one (allowed on this fleet's one cluster), delete one.

import { del, get, path, put } from "../api.js";
import { act, clear, dialog, h, table } from "../ui.js";
import { names } from "./parts.js";

export async function render(root, params, ctx) {
  const list = h("div", { dataset: { test: "tenant-list" } });
  root.append(
    h("div", { class: "toolbar" }, h("h1", {}, "Tenants"), h("span", { class: "spacer" }),
      h("button", { class: "primary", dataset: { test: "create-tenant" },
        onclick: () => create(ctx, reload) }, "Create tenant")),
    list);

  async function reload() {
    const tenants = await get("/admin/v2/tenants", { signal: ctx.signal });
    if (ctx.signal.aborted) return;
    clear(list).append(tenantTable(tenants, ctx, reload));
  }
  // awaited: a 401 or 403 here is the whole page's (the shell shows it)
  await reload();
}

function tenantTable(tenants, ctx, reload) {
  const sorted = [...tenants].sort();
  const grid = table([
    { label: "Tenant", value: (t) => h("a", { href: ctx.href("tenants", t),
      dataset: { test: "tenant-link" } }, t) },
    { label: "", class: "num", value: (t) => h("button", { class: "small",
      dataset: { test: "delete-tenant" }, onclick: () => remove(t, reload) }, "Delete") },
  ], sorted, { empty: "No tenants yet.", test: "tenants" });
  grid.querySelectorAll("tbody tr").forEach((row, i) => {
    row.dataset.test = "tenant-row";
    row.dataset.tenant = sorted[i];
  });
  return grid;
}

async function create(ctx, reload) {
  const values = await dialog({
    title: "Create tenant",
    fields: [
      { name: "tenant", label: "Name", required: true, placeholder: "acme" },
      { name: "adminRoles", label: "Admin roles (comma-separated, optional)", placeholder: "ops, sre" },
    ],
    confirm: "Create",
  });
  if (!values) return;
  const tenant = values.tenant.trim();
  await act(async () => {
    // a tenant must name the clusters it may use: this fleet is exactly one
    const clusters = await get("/admin/v2/clusters");
    await put(`/admin/v2/tenants/${path(tenant)}`,
      { adminRoles: names(values.adminRoles), allowedClusters: clusters.slice(0, 1) });
    await reload();
  }, `Tenant ${tenant} created`);
}

async function remove(tenant, reload) {
  const values = await dialog({
    title: `Delete tenant ${tenant}?`,
    message: "A tenant that still has namespaces is refused, unless forced: forcing deletes "
      + "its namespaces and their topics, with their messages.",
    fields: [{ name: "force", label: "Force (delete its namespaces and topics too)", type: "checkbox" }],
    confirm: "Delete", danger: true,
  });
  if (!values) return;
  await act(async () => {
    await del(`/admin/v2/tenants/${path(tenant)}${values.force ? "?force=true" : ""}`);
    await reload();
  }, `Tenant ${tenant} deleted`);
}

// Pieces shared by the fleet, tenant and namespace pages: breadcrumbs, parts of a page that
// load on their own (a 403 on one part is a message in that part, not a broken page), and
// the "not set" marker of an unset policy.

import { ApiError } from "../api.js";
import { clear, errorBlock, h, toLogin } from "../ui.js";

// "Tenants / acme / orders" above a page's title.
export function crumbs(ctx, ...items) {
  const parts = [h("a", { href: ctx.href("tenants") }, "Tenants")];
  for (const [label, hash] of items) {
    parts.push(" / ", hash ? h("a", { href: hash }, label) : h("span", {}, label));
  }
  return h("div", { class: "crumbs", dataset: { test: "crumbs" } }, parts);
}

// Fill `box` with what `load()` returns (a node or a list of nodes); an error becomes an
// inline block there. Returns whether it loaded. The box keeps its data-test so a test
// (or a user) sees which part refused.
export async function loadInto(box, load, signal) {
  try {
    const content = await load();
    if (signal && signal.aborted) return false;
    clear(box).append(...[content].flat().filter((n) => n !== null && n !== undefined));
    return true;
  } catch (error) {
    if (signal && signal.aborted) return false;
    if (error instanceof ApiError && error.unauthenticated) {
      toLogin(error);
      return false;
    }
    clear(box).append(errorBlock(error));
    if (!(error instanceof ApiError)) console.error(error);
    return false;
  }
}

export function notSet(text = "not set") {
  return h("span", { class: "muted not-set", dataset: { test: "not-set" } }, text);
}

// A read-only "label: value" list inside a policy card.
export function facts(pairs) {
  return h("dl", { class: "facts" },
    pairs.map(([label, value]) => [h("dt", {}, label), h("dd", {}, value)]));
}

// A form value as an integer; anything else throws, which act() shows as a notice.
export function integer(value, name) {
  const text = String(value).trim();
  if (!/^-?\d+$/.test(text)) throw new Error(`${name}: expected a whole number, got "${text}"`);
  return Number(text);
}

// Comma- or space-separated names (roles), without blanks.
export function names(text) {
  return String(text || "").split(/[\s,]+/).filter((s) => s !== "");
}

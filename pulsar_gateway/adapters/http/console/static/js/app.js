// The console's shell: hash routes to pages, the session (token), errors shown in place.
//
// A page is an ES module exporting `render(root, params, ctx)`: it fills `root` (an empty
// element) and may keep working (timers, WebSockets) until `ctx.signal` aborts, when the
// user goes elsewhere. `params` are the route's decoded path segments by name, `ctx.query`
// the hash's query (URLSearchParams). A page that throws gets its error shown in its place;
// a 401 sends the user to the login form.

import { ApiError, setToken, token } from "./api.js";
import { clear, errorBlock, h, toLogin } from "./ui.js";

const ROUTES = [
  ["fleet", "./pages/fleet.js", "fleet"],
  ["tenants", "./pages/tenants.js", "tenants"],
  ["tenants/:tenant", "./pages/tenant.js", "tenants"],
  ["namespaces/:tenant/:namespace", "./pages/namespace.js", "tenants"],
  ["topics/:domain/:tenant/:namespace/:topic", "./pages/topic.js", "tenants"],
  ["schedule/:domain/:tenant/:namespace/:topic/:subscription", "./pages/schedule.js", "tenants"],
  ["clients", "./pages/clients.js", "clients"],
  ["login", null, ""],
];

let current = null; // the AbortController of the page on screen

function match(hash) {
  const [pathPart, queryPart = ""] = hash.replace(/^#\/?/, "").split("?");
  const segments = pathPart.split("/").filter((s) => s !== "");
  for (const [pattern, module, section] of ROUTES) {
    const names = pattern.split("/");
    if (names.length !== segments.length) continue;
    const params = {};
    let ok = true;
    names.forEach((name, i) => {
      if (name.startsWith(":")) params[name.slice(1)] = decodeURIComponent(segments[i]);
      else if (name !== segments[i]) ok = false;
    });
    if (ok) return { pattern, module, section, params, query: new URLSearchParams(queryPart) };
  }
  return null;
}

export function href(...segments) {
  return "#/" + segments.map((s) => encodeURIComponent(String(s))).join("/");
}

export function navigate(hash) {
  if (location.hash === hash) route();
  else location.hash = hash;
}

function showSession() {
  const role = document.getElementById("session-role");
  const button = document.getElementById("session-button");
  if (token()) {
    role.textContent = "token set";
    button.textContent = "Log out";
  } else {
    role.textContent = "";
    button.textContent = "Log in";
  }
}

function loginPage(root, query) {
  const reason = query.get("reason");
  const next = query.get("next") || "#/fleet";
  const input = h("textarea", { name: "token", rows: 4, placeholder: "eyJhbGciOi…",
    dataset: { test: "token-input" }, autocomplete: "off" });
  const form = h("form", { class: "card login", dataset: { test: "login-form" } },
    h("h1", {}, "Log in"),
    reason ? h("p", { class: "error-text", dataset: { test: "login-reason" } }, reason) : null,
    h("p", { class: "muted" },
      "This gateway asks for authentication. Paste a token (JWT) issued for your role; "
      + "the console sends it with every request and keeps it only for this browser tab."),
    h("label", {}, h("span", {}, "Token"), input),
    h("div", { class: "buttons" },
      h("button", { type: "submit", class: "primary", dataset: { test: "login-submit" } }, "Log in")));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    setToken(input.value.trim().replace(/^Bearer\s+/i, ""));
    showSession();
    navigate(next);
  });
  root.append(form);
  input.focus();
}

async function route() {
  if (current) current.abort();
  const controller = new AbortController();
  current = controller;
  const view = document.getElementById("view");
  const found = location.hash ? match(location.hash) : null;
  if (!found) {
    location.replace("#/fleet");
    return;
  }
  for (const link of document.querySelectorAll("#nav a")) {
    link.classList.toggle("active", link.dataset.section === found.section);
  }
  clear(view);
  const root = h("div", { class: "page", dataset: { page: found.pattern.split("/")[0] } });
  view.append(root);
  if (!found.module) {
    loginPage(root, found.query);
    return;
  }
  try {
    const page = await import(found.module);
    if (controller.signal.aborted) return;
    await page.render(root, found.params, {
      signal: controller.signal, query: found.query, navigate, href,
    });
  } catch (error) {
    if (controller.signal.aborted) return;
    if (error instanceof ApiError && error.unauthenticated) {
      toLogin(error);
      return;
    }
    clear(root);
    root.append(errorBlock(error));
    if (!(error instanceof ApiError)) console.error(error);
  }
}

document.getElementById("session-button").addEventListener("click", () => {
  if (token()) {
    setToken("");
    showSession();
    navigate("#/fleet");
  } else {
    navigate(`#/login?next=${encodeURIComponent(location.hash || "#/fleet")}`);
  }
});

window.addEventListener("hashchange", route);
showSession();
route();

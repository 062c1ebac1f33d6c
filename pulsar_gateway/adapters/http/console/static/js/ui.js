// Small DOM helpers shared by the pages: an element builder, dialogs, notices, formatting.

import { token } from "./api.js";

// h("div", {class: "x", onclick: fn, dataset: {test: "y"}}, child, "text", [more])
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith("on") && typeof value === "function") {
      el.addEventListener(name.slice(2), value);
    } else if (name === "dataset") {
      Object.assign(el.dataset, value);
    } else if (name === "class") {
      el.className = value;
    } else if (name === "value") {
      el.value = value;
    } else if (value === true) {
      el.setAttribute(name, "");
    } else {
      el.setAttribute(name, String(value));
    }
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const child of children) {
    if (child === undefined || child === null || child === false) continue;
    if (Array.isArray(child)) append(el, child);
    else el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

export function clear(el) {
  while (el.firstChild) el.removeChild(el.firstChild);
  return el;
}

// A modal dialog; resolves with the form's values (an object) or null when cancelled.
// fields: [{name, label, value, type, options, placeholder, required}]; `signal` (a page's
// ctx.signal) cancels it when the user leaves the page.
export function dialog({ title, message, fields = [], confirm = "OK", danger = false, signal }) {
  return new Promise((resolve) => {
    const inputs = {};
    const form = h("form", { method: "dialog", class: "dialog-form" },
      h("h2", {}, title),
      message ? h("p", { class: "dialog-message" }, message) : null,
      fields.map((f) => {
        let input;
        if (f.type === "select") {
          input = h("select", { name: f.name, dataset: { test: `field-${f.name}` } },
            f.options.map((o) => h("option", { value: o, selected: o === f.value }, o)));
        } else if (f.type === "textarea") {
          input = h("textarea", { name: f.name, rows: 4, dataset: { test: `field-${f.name}` } });
          input.value = f.value ?? "";
        } else if (f.type === "checkbox") {
          input = h("input", { type: "checkbox", name: f.name, checked: !!f.value,
            dataset: { test: `field-${f.name}` } });
        } else {
          input = h("input", { name: f.name, type: f.type || "text", value: f.value ?? "",
            placeholder: f.placeholder, required: f.required, dataset: { test: `field-${f.name}` } });
        }
        inputs[f.name] = input;
        return h("label", {}, h("span", {}, f.label), input);
      }),
      h("div", { class: "dialog-buttons" },
        h("button", { type: "button", class: "secondary", dataset: { test: "dialog-cancel" },
          onclick: () => close(null) }, "Cancel"),
        h("button", { type: "submit", class: danger ? "danger" : "primary",
          dataset: { test: "dialog-confirm" } }, confirm)));
    const box = h("dialog", { class: "modal", dataset: { test: "dialog" } }, form);
    let done = false;
    function close(value) {
      if (done) return;
      done = true;
      box.close();
      box.remove();
      resolve(value);
    }
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      const values = {};
      for (const [name, input] of Object.entries(inputs)) {
        values[name] = input.type === "checkbox" ? input.checked : input.value;
      }
      close(values);
    });
    box.addEventListener("cancel", (event) => { event.preventDefault(); close(null); });
    if (signal) signal.addEventListener("abort", () => close(null), { once: true });
    document.body.append(box);
    box.showModal();
    const first = Object.values(inputs)[0];
    if (first) first.focus();
  });
}

// "Are you sure?" for what cannot be undone: resolves true or false.
export async function confirmAction(title, message, confirm = "Delete", signal = undefined) {
  return (await dialog({ title, message, confirm, danger: true, signal })) !== null;
}

// A notice at the top of the page that fades by itself.
export function notify(message, kind = "info") {
  const box = h("div", { class: `notice ${kind}`, role: kind === "error" ? "alert" : "status",
    dataset: { test: `notice-${kind}` } }, message);
  document.getElementById("notices").append(box);
  setTimeout(() => box.remove(), kind === "error" ? 10000 : 4000);
}

// What the admin API said, as a block on the page (never a blank page).
export function errorBlock(error) {
  const status = error && error.status;
  let title = "Something went wrong";
  if (status === 401) title = "Authentication required";
  else if (status === 403) title = "Not authorized";
  else if (status === 404) title = "Not found";
  else if (status) title = `The gateway answered ${status}`;
  return h("div", { class: "error-block", role: "alert", dataset: { test: "error" } },
    h("strong", {}, title), h("p", {}, error && (error.reason || error.message) || String(error)));
}

// To the login form, saying why and where to come back: for a 401, whether thrown by a
// page's render() (the shell) or met by a part of a page that loads later.
export function toLogin(error) {
  // several parts refused at once: the first one's redirect wins (the others would make
  // the login form its own "next")
  if (location.hash.startsWith("#/login")) return;
  const next = encodeURIComponent(location.hash);
  const reason = encodeURIComponent(
    token() ? `The gateway refused the token: ${error.reason}` : error.reason);
  location.replace(`#/login?next=${next}&reason=${reason}`);
}

// Run an action from a button: errors become notices, success a notice too.
export async function act(fn, success) {
  try {
    const result = await fn();
    if (success) notify(success, "ok");
    return result;
  } catch (error) {
    notify(error.reason || error.message || String(error), "error");
    return undefined;
  }
}

const UNITS = ["B", "KiB", "MiB", "GiB", "TiB"];
export function bytes(n) {
  if (n === null || n === undefined) return "–";
  let value = Number(n);
  let unit = 0;
  while (Math.abs(value) >= 1024 && unit < UNITS.length - 1) { value /= 1024; unit += 1; }
  // a rate of bytes per second is fractional: whole bytes below a KiB
  return `${unit ? value.toFixed(1) : Math.round(value)} ${UNITS[unit]}`;
}

export function rate(n) {
  if (n === null || n === undefined) return "–";
  const value = Number(n);
  return value >= 100 ? value.toFixed(0) : value.toFixed(value >= 10 ? 1 : 2);
}

export function count(n) {
  return n === null || n === undefined ? "–" : Number(n).toLocaleString("en-US");
}

export function time(ms) {
  if (!ms) return "–";
  const d = new Date(Number(ms));
  return isNaN(d) ? String(ms) : d.toISOString().replace("T", " ").replace(/\.\d+Z$/, "Z");
}

export function duration(ms) {
  const s = Math.round(Number(ms) / 1000);
  if (Math.abs(s) < 120) return `${s} s`;
  if (Math.abs(s) < 7200) return `${Math.round(s / 60)} min`;
  if (Math.abs(s) < 172800) return `${(s / 3600).toFixed(1)} h`;
  return `${(s / 86400).toFixed(1)} d`;
}

// A table from rows: columns [{label, value: row => node|string, class}]
export function table(columns, rows, { empty = "None", test } = {}) {
  if (!rows.length) return h("p", { class: "muted", dataset: test ? { test } : undefined }, empty);
  return h("table", { class: "grid", dataset: test ? { test } : undefined },
    h("thead", {}, h("tr", {}, columns.map((c) => h("th", { class: c.class }, c.label)))),
    h("tbody", {}, rows.map((row) => h("tr", {},
      columns.map((c) => h("td", { class: c.class }, c.value(row)))))));
}

// Repeat `fn` every `ms` until `signal` aborts (the page was left); first run now.
export function every(ms, signal, fn) {
  let timer = null;
  const tick = async () => {
    if (signal.aborted) return;
    try { await fn(); } catch (_) { /* the page shows its own errors */ }
    if (!signal.aborted) timer = setTimeout(tick, ms);
  };
  signal.addEventListener("abort", () => clearTimeout(timer));
  return tick();
}

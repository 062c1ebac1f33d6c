// Messages as the console shows them (a backlog's peek, a test consumer's deliveries): ids,
// key, properties, times, and the payload as text, JSON or hex, whichever the user picks.

import { bytes, h, time } from "./ui.js";

const HEX_LIMIT = 64 * 1024; // a hex dump longer than this is cut: it is for looking at

export function fromBase64(text) {
  const raw = atob(text || "");
  const out = new Uint8Array(raw.length);
  for (let i = 0; i < raw.length; i += 1) out[i] = raw.charCodeAt(i);
  return out;
}

export function toBase64(textValue) {
  const data = new TextEncoder().encode(textValue);
  let raw = "";
  for (const byte of data) raw += String.fromCharCode(byte);
  return btoa(raw);
}

export function decodeText(data) {
  return new TextDecoder("utf-8").decode(data);
}

// Readable as text: UTF-8 without control characters other than tab and line breaks.
function isText(data) {
  try {
    const text = new TextDecoder("utf-8", { fatal: true }).decode(data);
    return !/[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f]/.test(text);
  } catch (_) {
    return false;
  }
}

// The payload pretty-printed, or null when it is not JSON.
function asJson(data) {
  const text = decodeText(data).trim();
  if (!text || !"{[\"".includes(text[0])) return null; // a bare number or word is just text
  try {
    return JSON.stringify(JSON.parse(text), null, 2);
  } catch (_) {
    return null;
  }
}

function asHex(data) {
  const lines = [];
  const shown = data.subarray(0, HEX_LIMIT);
  for (let offset = 0; offset < shown.length; offset += 16) {
    const row = shown.subarray(offset, offset + 16);
    const hex = [...row].map((b) => b.toString(16).padStart(2, "0")).join(" ");
    const ascii = [...row].map((b) => (b >= 32 && b < 127 ? String.fromCharCode(b) : ".")).join("");
    lines.push(`${offset.toString(16).padStart(8, "0")}  ${hex.padEnd(47)}  ${ascii}`);
  }
  if (data.length > shown.length) lines.push(`… ${data.length - shown.length} more bytes`);
  return lines.join("\n");
}

// A time the API gives as ms since epoch or as ISO-8601 text.
function when(value) {
  if (value === undefined || value === null || value === 0 || value === "") return null;
  return typeof value === "number" ? time(value) : String(value);
}

// The payload with Text / JSON / Hex buttons; starts on JSON when it parses, else text when
// it is UTF-8, else hex.
export function payloadView(base64) {
  const data = fromBase64(base64);
  const json = asJson(data);
  const views = {
    text: () => decodeText(data),
    json: () => json,
    hex: () => asHex(data),
  };
  const pre = h("pre", { class: "payload", dataset: { test: "payload" } });
  const buttons = {};
  function show(kind) {
    pre.textContent = views[kind]();
    pre.dataset.view = kind;
    for (const [name, button] of Object.entries(buttons)) button.classList.toggle("active", name === kind);
  }
  for (const [kind, label] of [["text", "Text"], ["json", "JSON"], ["hex", "Hex"]]) {
    buttons[kind] = h("button", { type: "button", class: "small", disabled: kind === "json" && json === null,
      dataset: { test: `view-${kind}` }, onclick: () => show(kind) }, label);
  }
  show(json !== null ? "json" : isText(data) ? "text" : "hex");
  return h("div", { class: "payload-view" },
    h("div", { class: "segmented" }, Object.values(buttons)), pre);
}

function property(name, value) {
  return h("span", { class: "prop", dataset: { test: "property" } },
    h("span", { class: "prop-name" }, name), "=", h("span", {}, value));
}

// One message: [label, value] facts that are present, its properties, its payload.
export function messageCard(message, extra = []) {
  const facts = [
    ["Message id", message.messageId],
    ["Key", message.key],
    ["Publish time", when(message.publishTime)],
    ["Event time", when(message.eventTime)],
    ["Producer", message.producerName],
    ["Sequence id", message.sequenceId],
    ["Size", message.size === undefined ? null : bytes(message.size)],
    ...extra,
  ].filter(([, value]) => value !== undefined && value !== null && value !== "");
  const props = Object.entries(message.properties || {});
  return h("article", { class: "message", dataset: { test: "message", id: message.messageId || "" } },
    h("dl", { class: "facts" }, facts.map(([label, value]) => [
      h("dt", {}, label),
      h("dd", { class: "mono", dataset: { test: `fact-${label.toLowerCase().replace(/[^a-z0-9]+/g, "-")}` } }, String(value)),
    ])),
    props.length ? h("div", { class: "props", dataset: { test: "properties" } },
      props.map(([name, value]) => property(name, value))) : null,
    // an entry the gateway relayed as sent but cannot read as messages: shown whole
    message.error ? h("p", { class: "error-text", dataset: { test: "message-error" } },
      message.error) : null,
    payloadView(message.payload));
}

// The messages of a peek: each with its position and ids.
export function renderMessages(messages, { empty = "No messages." } = {}) {
  if (!messages.length) return h("p", { class: "muted", dataset: { test: "no-messages" } }, empty);
  return h("div", { class: "messages" }, messages.map((m) => messageCard(m, [
    ["Position", m.position],
    ["Ledger:entry", m.ledgerId === undefined ? null : `${m.ledgerId}:${m.entryId}`],
    ["Batch index", m.batchIndex === undefined || m.batchIndex < 0 ? null : m.batchIndex],
  ])));
}

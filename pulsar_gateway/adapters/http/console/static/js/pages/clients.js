// Test clients: a producer and a consumer over the gateway's WebSocket API (Pulsar's), to
// send a message by hand, delayed or not, and watch what a subscription receives.

import { get, path, wsUrl } from "../api.js";
import { messageCard, toBase64 } from "../messages.js";
import { clear, h, time } from "../ui.js";

const KEEP = 200; // received messages and send results kept on screen

// "persistent://t/ns/topic", "t/ns/topic" or "topic" (in public/default), as Pulsar reads them.
export function parseTopic(text) {
  const name = text.trim();
  const full = /^(persistent|non-persistent):\/\/([^/]+)\/([^/]+)\/(.+)$/.exec(name);
  if (full) return { domain: full[1], tenant: full[2], namespace: full[3], topic: full[4] };
  const parts = name.split("/");
  if (parts.length === 3 && parts.every(Boolean)) {
    return { domain: "persistent", tenant: parts[0], namespace: parts[1], topic: parts[2] };
  }
  if (parts.length === 1 && name) return { domain: "persistent", tenant: "public", namespace: "default", topic: name };
  throw new Error(`Not a topic name: ${JSON.stringify(name)} (persistent://tenant/namespace/topic)`);
}

const topicSegments = (t) => path(t.domain, t.tenant, t.namespace, t.topic);

// Why a WebSocket was refused: the browser shows only close code 1006 for a refused upgrade,
// so ask the REST lookup of the same topic, which the same authentication and authorization
// answer with its status and reason.
async function refusal(t) {
  try {
    await get(`/lookup/v2/topic/${topicSegments(t)}`);
    return "The gateway closed the connection (code 1006); the topic's lookup succeeds, so the "
      + "WebSocket request itself was refused (a name taken, a bad parameter, a quota?).";
  } catch (error) {
    return `Refused: ${error.status ? `${error.status} ` : ""}${error.reason || error.message}`;
  }
}

function field(label, input) {
  return h("label", {}, h("span", {}, label), input);
}

function statusBadge() {
  const el = h("span", { class: "badge", dataset: { test: "state" } }, "disconnected");
  el.set = (text, kind = "") => { el.textContent = text; el.className = `badge ${kind}`; };
  return el;
}

function prepend(list, entry) {
  list.prepend(entry);
  while (list.children.length > KEEP) list.lastElementChild.remove();
}

// Open a WebSocket; resolves when open, rejects with the refusal's reason.
function connect(url, t, onClose) {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url);
    let opened = false;
    ws.addEventListener("open", () => { opened = true; resolve(ws); });
    ws.addEventListener("close", async (event) => {
      if (opened) { onClose(event); return; }
      reject(new Error(event.code === 1006 ? await refusal(t) : `Closed: ${event.code} ${event.reason}`));
    });
  });
}

function producerCard(ctx, initialTopic) {
  const topicInput = h("input", { value: initialTopic, placeholder: "persistent://public/default/my-topic",
    dataset: { test: "producer-topic" } });
  const keyInput = h("input", { placeholder: "optional", dataset: { test: "producer-key" } });
  const propsInput = h("textarea", { rows: 2, dataset: { test: "producer-properties" } });
  propsInput.value = "{}";
  const payloadInput = h("textarea", { rows: 4, dataset: { test: "producer-payload" } });
  payloadInput.value = '{"hello": "world"}';
  const delayInput = h("input", { type: "number", min: 0, placeholder: "0: now", dataset: { test: "producer-delay" } });
  const state = statusBadge();
  const log = h("div", { class: "log", dataset: { test: "send-log" } });
  let ws = null;
  let wsTopic = null;
  let sent = 0;
  const pending = new Map(); // context → log entry waiting for its ack

  function close() {
    if (ws) ws.close(1000);
    ws = null;
    wsTopic = null;
    state.set("disconnected");
  }

  function onAck(event) {
    let ack;
    try { ack = JSON.parse(event.data); } catch (_) { return; }
    const entry = pending.get(ack.context);
    if (!entry) return;
    pending.delete(ack.context);
    const ok = ack.result === "ok";
    entry.dataset.result = ok ? "ok" : "error";
    entry.dataset.messageId = ack.messageId || "";
    entry.append(ok ? h("span", {}, " → ok, message id ", h("code", {}, ack.messageId))
      : h("span", { class: "error-text" }, ` → ${ack.result}: ${ack.errorMsg || ""}`));
  }

  async function producer(t) {
    const name = `${t.domain}://${t.tenant}/${t.namespace}/${t.topic}`;
    if (ws && ws.readyState === WebSocket.OPEN && wsTopic === name) return ws;
    close();
    state.set("connecting…");
    const socket = await connect(wsUrl(`/ws/v2/producer/${topicSegments(t)}`), t, (event) => {
      if (socket !== ws) return;
      ws = null;
      state.set(`closed (${event.code})`, "bad");
      for (const entry of pending.values()) entry.append(h("span", { class: "error-text" }, " → no answer: closed"));
      pending.clear();
    });
    socket.addEventListener("message", onAck);
    ws = socket;
    wsTopic = name;
    state.set(`connected to ${name}`, "ok");
    return socket;
  }

  async function send(event) {
    event.preventDefault();
    sent += 1;
    const context = String(sent);
    const entry = h("div", { class: "entry", dataset: { test: "send-result", context } }, `#${context} ${time(Date.now())}`);
    prepend(log, entry);
    try {
      const t = parseTopic(topicInput.value);
      const properties = JSON.parse(propsInput.value.trim() || "{}");
      if (typeof properties !== "object" || Array.isArray(properties) || properties === null) {
        throw new Error("Properties must be a JSON object of strings");
      }
      const frame = { payload: toBase64(payloadInput.value), properties, context };
      if (keyInput.value) frame.key = keyInput.value;
      const delay = delayInput.value === "" ? 0 : Number(delayInput.value);
      if (!(delay >= 0)) throw new Error("The delay is a number of milliseconds");
      if (delay > 0) frame.deliverAfterMs = Math.round(delay);
      const socket = await producer(t);
      pending.set(context, entry);
      socket.send(JSON.stringify(frame));
    } catch (error) {
      entry.dataset.result = "error";
      entry.append(h("span", { class: "error-text" }, ` → ${error.message}`));
      if (!ws) state.set("disconnected", "bad");
    }
  }

  ctx.signal.addEventListener("abort", close);
  return h("form", { class: "card", dataset: { test: "producer" }, onsubmit: send },
    h("div", { class: "toolbar" }, h("h2", {}, "Producer"), h("span", { class: "spacer" }), state),
    field("Topic", topicInput),
    h("div", { class: "inline-fields" }, field("Key", keyInput), field("Deliver after (ms)", delayInput)),
    field("Properties (JSON object)", propsInput),
    field("Payload (text)", payloadInput),
    h("div", { class: "buttons" },
      h("button", { type: "button", onclick: close, dataset: { test: "producer-disconnect" } }, "Disconnect"),
      h("button", { type: "submit", class: "primary", dataset: { test: "send" } }, "Send")),
    h("h3", {}, "Answers"), log);
}

function consumerCard(ctx, initialTopic) {
  const topicInput = h("input", { value: initialTopic, placeholder: "persistent://public/default/my-topic",
    dataset: { test: "consumer-topic" } });
  const subInput = h("input", { value: "console", dataset: { test: "consumer-subscription" } });
  const typeInput = h("select", { dataset: { test: "consumer-type" } },
    ["Exclusive", "Shared", "Failover", "Key_Shared"].map((v) => h("option", { value: v, selected: v === "Shared" }, v)));
  const positionInput = h("select", { dataset: { test: "consumer-position" } },
    ["Latest", "Earliest"].map((v) => h("option", { value: v }, v)));
  const state = statusBadge();
  const received = h("div", { class: "log messages", dataset: { test: "received" } });
  const connectButton = h("button", { type: "submit", class: "primary", dataset: { test: "connect" } }, "Connect");
  const disconnectButton = h("button", { type: "button", disabled: true, dataset: { test: "disconnect" },
    onclick: () => close() }, "Disconnect");
  let ws = null;

  function close() {
    if (ws) ws.close(1000);
    ws = null;
    connectButton.disabled = false;
    disconnectButton.disabled = true;
    state.set("disconnected");
  }

  // Each message is shown, then acknowledged: the test consumer does not hold a backlog.
  function onMessage(socket, event) {
    let message;
    try { message = JSON.parse(event.data); } catch (_) { return; }
    if (!message.messageId || message.payload === undefined) return; // an answer to a command
    prepend(received, messageCard(message, [["Redelivery count", message.redeliveryCount]]));
    socket.send(JSON.stringify({ messageId: message.messageId }));
  }

  async function open(event) {
    event.preventDefault();
    close();
    connectButton.disabled = true;
    state.set("connecting…");
    try {
      const t = parseTopic(topicInput.value);
      const sub = subInput.value.trim();
      if (!sub) throw new Error("Name a subscription");
      const query = new URLSearchParams({ subscriptionType: typeInput.value,
        subscriptionInitialPosition: positionInput.value });
      const socket = await connect(wsUrl(`/ws/v2/consumer/${topicSegments(t)}/${path(sub)}?${query}`), t, (e) => {
        if (socket !== ws) return;
        ws = null;
        connectButton.disabled = false;
        disconnectButton.disabled = true;
        state.set(`closed (${e.code}${e.reason ? `: ${e.reason}` : ""})`, "bad");
      });
      socket.addEventListener("message", (e) => onMessage(socket, e));
      ws = socket;
      disconnectButton.disabled = false;
      state.set(`subscribed to ${sub} (${typeInput.value})`, "ok");
    } catch (error) {
      connectButton.disabled = false;
      state.set("refused", "bad");
      prepend(received, h("div", { class: "entry error-text", dataset: { test: "consumer-error" } }, error.message));
    }
  }

  ctx.signal.addEventListener("abort", close);
  return h("form", { class: "card", dataset: { test: "consumer" }, onsubmit: open },
    h("div", { class: "toolbar" }, h("h2", {}, "Consumer"), h("span", { class: "spacer" }), state),
    field("Topic", topicInput),
    h("div", { class: "inline-fields" }, field("Subscription", subInput), field("Type", typeInput)),
    field("Initial position (a new subscription)", positionInput),
    h("div", { class: "buttons" },
      h("button", { type: "button", onclick: () => clear(received) }, "Clear"),
      disconnectButton, connectButton),
    h("h3", {}, "Received (acknowledged)"), received);
}

export async function render(root, params, ctx) {
  const initial = ctx.query.get("topic") || "";
  root.append(
    h("h1", {}, "Test clients"),
    h("p", { class: "muted" },
      "A producer and a consumer over the gateway's WebSocket API, with your token. "
      + "A delay sends a delayed message: it waits on Shared and Key_Shared subscriptions."),
    h("div", { class: "clients" }, producerCard(ctx, initial), consumerCard(ctx, initial)));
}

// The gateway's admin REST API and WebSocket API, as the console calls them: same origin,
// the user's token (if any) on every request. Errors carry the status and the admin API's
// JSON "reason" (Pulsar's error body).

const TOKEN_KEY = "pulsar-gateway-console.token";

export class ApiError extends Error {
  constructor(status, reason, path) {
    super(reason || `HTTP ${status}`);
    this.status = status;
    this.reason = reason || `HTTP ${status}`;
    this.path = path;
  }
  get unauthenticated() { return this.status === 401; }
  get forbidden() { return this.status === 403; }
}

export function token() {
  return sessionStorage.getItem(TOKEN_KEY) || "";
}

export function setToken(value) {
  if (value) sessionStorage.setItem(TOKEN_KEY, value);
  else sessionStorage.removeItem(TOKEN_KEY);
}

async function reasonOf(response) {
  const text = await response.text();
  try {
    const body = JSON.parse(text);
    if (body && typeof body.reason === "string") return body.reason;
    if (body && typeof body.message === "string") return body.message;
  } catch (_) { /* not JSON: the text itself */ }
  return text.slice(0, 300) || response.statusText;
}

// One request. `body` is sent as JSON unless it is a string (sent as is) or undefined;
// `raw: true` returns the Response (peek's binary payload). JSON answers are parsed, a
// 204 gives null, anything else its text.
export async function request(method, path, { body, raw = false, headers = {}, signal } = {}) {
  const init = { method, headers: { ...headers }, signal };
  const bearer = token();
  if (bearer) init.headers.Authorization = `Bearer ${bearer}`;
  if (body !== undefined) {
    if (typeof body === "string") {
      init.body = body;
    } else {
      init.body = JSON.stringify(body);
      init.headers["Content-Type"] = "application/json";
    }
  }
  const response = await fetch(path, init);
  if (!response.ok) throw new ApiError(response.status, await reasonOf(response), path);
  if (raw) return response;
  if (response.status === 204) return null;
  const type = response.headers.get("Content-Type") || "";
  if (type.includes("json")) return response.json();
  const text = await response.text();
  return text;
}

export const get = (path, options) => request("GET", path, options);
export const post = (path, body, options) => request("POST", path, { ...options, body });
export const put = (path, body, options) => request("PUT", path, { ...options, body });
export const del = (path, options) => request("DELETE", path, options);

// Path segments are percent-encoded one by one (names may hold characters a URL reserves).
export function path(...segments) {
  return segments.map((s) => encodeURIComponent(String(s))).join("/");
}

// A WebSocket API URL on this origin; a browser cannot set headers on a WebSocket, so the
// token goes as the `token` query parameter (Pulsar's WebSocketHttpServletRequestWrapper).
export function wsUrl(pathAndQuery) {
  const scheme = location.protocol === "https:" ? "wss" : "ws";
  const url = new URL(`${scheme}://${location.host}${pathAndQuery}`);
  const bearer = token();
  if (bearer) url.searchParams.set("token", bearer);
  return url.toString();
}

// The admin path of a topic: /admin/v2/{domain}/{tenant}/{namespace}/{topic}
export function topicPath(domain, tenant, namespace, topic) {
  return `/admin/v2/${path(domain, tenant, namespace, topic)}`;
}

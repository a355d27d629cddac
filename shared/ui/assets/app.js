// The durachat memory browser. Everything it shows comes from the JSON
// API of the server that served it, with the token kept in this tab's
// session storage (none is needed by a local server without tokens).
"use strict";

const TOKEN_KEY = "durachat.token";
const POLL_BUSY_MS = 1000; // while builds are pending
const POLL_IDLE_MS = 3000;
const REF = /\[image ([0-9a-f]{16})\]/g;

const main = document.getElementById("main");
const note = document.getElementById("note");
const tokenForm = document.getElementById("token-form");
const tokenInput = document.getElementById("token-input");
const tokenToggle = document.getElementById("token-toggle");

// page counts renders: a fetch or a poll of an earlier page stops when the
// page changes.
let page = 0;
let blobURLs = [];

// ---------------------------------------------------------------- helpers

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") e.className = v;
    else if (k === "text") e.textContent = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

function showNote(text, isError) {
  note.textContent = text;
  note.classList.toggle("error", !!isError);
  note.hidden = !text;
}

function chatPath(chat) {
  return "/v1/chats/" + encodeURIComponent(chat);
}

// APIError is an answer other than 2xx: its status and the API's error
// code and message.
class APIError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

async function api(path, options) {
  const headers = { "Accept": "application/json" };
  const token = sessionStorage.getItem(TOKEN_KEY);
  if (token) headers["Authorization"] = "Bearer " + token;
  const init = Object.assign({ headers }, options || {});
  if (init.body !== undefined) {
    headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(init.body);
  }
  let res;
  try {
    res = await fetch(path, init);
  } catch (e) {
    throw new APIError(0, "network", "the server did not answer: " + e.message);
  }
  let body = null;
  const type = res.headers.get("Content-Type") || "";
  if (type.startsWith("application/json")) {
    try { body = await res.json(); } catch (e) { body = null; }
  }
  if (!res.ok) {
    const err = (body && (body.error || body)) || {};
    if (res.status === 401) askToken("The server refused the request: " + (err.message || "a token is needed") + ".");
    throw new APIError(res.status, err.code || "", err.message || res.statusText || "HTTP " + res.status);
  }
  return body;
}

// image fetches a stored image with the token and answers a URL the page
// can show; the URLs are released when the page changes.
async function imageURL(chat, name) {
  const headers = {};
  const token = sessionStorage.getItem(TOKEN_KEY);
  if (token) headers["Authorization"] = "Bearer " + token;
  const res = await fetch(chatPath(chat) + "/images/" + name, { headers });
  if (!res.ok) throw new APIError(res.status, "", "image " + name + ": HTTP " + res.status);
  const url = URL.createObjectURL(await res.blob());
  blobURLs.push(url);
  return url;
}

function thumb(src, name) {
  return el("img", { class: "thumb", src, alt: "image " + name, loading: "lazy", "data-name": name });
}

// thumbsFor shows the images text names, each fetched with the token.
function thumbsFor(chat, text, known) {
  const names = [];
  for (const m of String(text || "").matchAll(REF)) if (!names.includes(m[1])) names.push(m[1]);
  for (const n of known || []) if (!names.includes(n)) names.push(n);
  if (names.length === 0) return null;
  const box = el("div", { class: "thumbs" });
  for (const name of names) {
    const holder = el("span", { class: "muted", text: "image " + name });
    box.append(holder);
    imageURL(chat, name).then(
      (url) => holder.replaceWith(thumb(url, name)),
      () => { holder.textContent = "image " + name + " (not available)"; });
  }
  return box;
}

function when(iso) {
  if (!iso) return "";
  const d = new Date(iso);
  return isNaN(d) ? iso : d.toLocaleString();
}

function failures(n, refusals) {
  return n + (n === 1 ? " failure" : " failures") + (refusals ? ", " + refusals + (refusals === 1 ? " refusal" : " refusals") : "");
}

function failure(where, e) {
  if (e instanceof APIError && e.status === 401) return; // the token form says it
  showNote(where + ": " + e.message, true);
}

// ------------------------------------------------------------------ token

function askToken(why) {
  document.getElementById("token-why").textContent = why ||
    "This server needs a token. It is kept in this tab only (session storage) and sent as a bearer token to the API.";
  tokenForm.hidden = false;
  tokenToggle.setAttribute("aria-expanded", "true");
  tokenInput.focus();
}

tokenToggle.addEventListener("click", () => {
  if (tokenForm.hidden) askToken();
  else { tokenForm.hidden = true; tokenToggle.setAttribute("aria-expanded", "false"); }
});

tokenForm.addEventListener("submit", (ev) => {
  ev.preventDefault();
  const t = tokenInput.value.trim();
  if (!t) return;
  sessionStorage.setItem(TOKEN_KEY, t);
  tokenInput.value = "";
  tokenForm.hidden = true;
  tokenToggle.setAttribute("aria-expanded", "false");
  route();
});

document.getElementById("token-forget").addEventListener("click", () => {
  sessionStorage.removeItem(TOKEN_KEY);
  tokenInput.value = "";
  showNote("The token is forgotten.");
});

// ---------------------------------------------------------------- routing

function route() {
  page++;
  for (const u of blobURLs) URL.revokeObjectURL(u);
  blobURLs = [];
  showNote("");
  main.replaceChildren();
  const m = location.hash.match(/^#\/chat\/(.+)$/);
  if (m) chatPage(decodeURIComponent(m[1]));
  else listPage();
}

window.addEventListener("hashchange", () => { route(); main.focus(); });

// ------------------------------------------------------------- chat list

function openForm() {
  const input = el("input", { id: "open-chat", name: "chat", required: true, pattern: "[A-Za-z0-9._\\-]{1,128}",
    autocomplete: "off", spellcheck: "false" });
  return el("form", {
    class: "open", onsubmit: (ev) => {
      ev.preventDefault();
      if (input.value) location.hash = "#/chat/" + encodeURIComponent(input.value);
    },
  }, el("label", { for: "open-chat", text: "Chat id" }), input, el("button", { type: "submit", text: "Open" }));
}

function listPage() {
  const mine = page;
  document.title = "Chats · durachat memory";
  const body = el("tbody");
  const table = el("table", { class: "chats" },
    el("caption", { class: "muted", text: "Chats, with their message counts and memory builds" }),
    el("thead", {}, el("tr", {}, ["Chat", "Messages", "Last activity", "Summaries built", "Retrying", "Stalled"].map((h) => el("th", { scope: "col", text: h })))),
    body);
  const more = el("button", { type: "button", hidden: true, text: "More chats" });
  const status = el("p", { class: "muted", role: "status", text: "Loading chats…" });
  main.append(el("h1", { text: "Chats" }), openForm(), el("section", { class: "panel", "aria-labelledby": "chats-h" },
    el("h2", { id: "chats-h", text: "All chats" }), status, table, more));
  let after = "";
  async function load() {
    let res;
    try {
      res = await api("/v1/chats?limit=50" + (after ? "&after=" + encodeURIComponent(after) : ""));
    } catch (e) {
      if (mine !== page) return;
      table.hidden = true;
      if (e.status === 404 || e.status === 405) {
        status.textContent = "This server does not list chats: its API has no GET /v1/chats. Open a chat by its id above.";
        return;
      }
      status.textContent = "";
      failure("Listing chats", e);
      return;
    }
    if (mine !== page) return;
    for (const c of res.chats || []) {
      const m = c.memory || {};
      body.append(el("tr", {},
        el("td", { "data-label": "Chat" }, el("a", { href: "#/chat/" + encodeURIComponent(c.chat), text: c.chat })),
        el("td", { "data-label": "Messages", text: c.messages }),
        el("td", { "data-label": "Last activity" }, el("time", { datetime: c.lastActivity, text: when(c.lastActivity) })),
        el("td", { "data-label": "Summaries built", text: (m.built ?? 0) + " of " + (m.nodes ?? 0) }),
        el("td", { "data-label": "Retrying", text: m.retrying ?? 0 }),
        el("td", { "data-label": "Stalled" }, m.stalled ? el("span", { class: "badge s-stalled", text: "stalled" }) : "no")));
    }
    status.textContent = body.children.length === 0 ? "No chats yet." : body.children.length + " chats shown.";
    after = res.next || "";
    more.hidden = !after;
  }
  more.addEventListener("click", load);
  load();
}

// ------------------------------------------------------------- one chat

function parseLines(text) {
  const out = [];
  for (const raw of String(text || "").split("\n")) {
    const m = raw.match(/^(\d+)\+(\d+)\|(.*)$/);
    if (m) out.push({ start: Number(m[1]), count: Number(m[2]), line: m[3] });
  }
  return out;
}

function lineButton(chat, start, count, text, zoom) {
  const label = start + "+" + count;
  return el("button", {
    type: "button", class: "line", "data-node": label, "aria-label": "Zoom into " + label + ": " + text.slice(0, 120),
    onclick: () => zoom(start, count, true),
  }, el("span", { class: "label", text: label }), " ", text);
}

function chatPage(chat) {
  const mine = page;
  document.title = chat + " · durachat memory";
  const zoomSec = el("section", { class: "panel zoom", id: "zoom", "aria-labelledby": "zoom-h", hidden: true });
  const progress = el("section", { class: "panel", id: "progress", "aria-labelledby": "progress-h" });
  const viewSec = el("section", { class: "panel", id: "view", "aria-labelledby": "view-h" });
  const treeSec = el("section", { class: "panel", id: "tree", "aria-labelledby": "tree-h" });
  const msgSec = el("section", { class: "panel", id: "messages", "aria-labelledby": "messages-h" });
  main.append(
    el("p", {}, el("a", { href: "#/", text: "← All chats" })),
    el("h1", {}, "Chat ", el("code", { text: chat })),
    progress, zoomSec,
    el("div", { class: "grid" }, viewSec, treeSec),
    msgSec);

  // Zoom: a trail of opened blocks, each a click on a line.
  let trail = [];
  async function zoom(start, count, fresh) {
    if (fresh) trail = trail.filter((z) => z.count > count && start >= z.start && start < z.start + z.count);
    trail.push({ start, count });
    zoomSec.hidden = false;
    const label = start + "+" + count;
    zoomSec.replaceChildren(el("h2", { id: "zoom-h", tabindex: "-1", text: "Zoom " + label }), el("p", { class: "muted", text: "Opening…" }));
    zoomSec.querySelector("h2").focus();
    let res;
    try {
      res = await api(chatPath(chat) + "/tools/zoom", { method: "POST", body: { id: start, n: count } });
    } catch (e) {
      if (mine === page) failure("Zoom " + label, e);
      return;
    }
    if (mine !== page) return;
    const crumbs = el("nav", { class: "crumbs", "aria-label": "Zoom trail" }, trail.map((z, k) =>
      el("button", { type: "button", "aria-current": k === trail.length - 1 ? "true" : null, text: z.start + "+" + z.count,
        onclick: () => { trail = trail.slice(0, k); zoom(z.start, z.count, false); } })));
    const body = [];
    const blocks = res.content || [];
    const text = blocks.filter((b) => b.type === "text").map((b) => b.text).join("\n");
    if (count > 1 && !res.isError) {
      const list = el("ul", { class: "lines" });
      for (const l of parseLines(text)) list.append(el("li", {}, lineButton(chat, l.start, l.count, l.line, zoom), thumbsFor(chat, l.line)));
      body.push(list);
    } else {
      body.push(el("pre", { class: res.isError ? "err" : null, text }));
      const imgs = blocks.filter((b) => b.type === "image" && b.data);
      if (imgs.length) body.push(el("div", { class: "thumbs" }, imgs.map((b) => thumb("data:" + b.mimeType + ";base64," + b.data, b.name || "attached"))));
    }
    zoomSec.replaceChildren(el("h2", { id: "zoom-h", tabindex: "-1", text: "Zoom " + label }), crumbs, ...body,
      el("button", { type: "button", text: "Close zoom", onclick: () => { zoomSec.hidden = true; trail = []; } }));
    zoomSec.querySelector("h2").focus();
  }

  // Build progress, polled: fast while builds are pending.
  let seen = "";
  async function poll() {
    if (mine !== page) return;
    let s;
    try {
      s = await api(chatPath(chat) + "/status");
    } catch (e) {
      if (mine !== page) return;
      failure("Reading the build status", e);
      if (!(e instanceof APIError && e.status === 401)) setTimeout(poll, POLL_IDLE_MS);
      return;
    }
    if (mine !== page) return;
    renderProgress(s);
    const busy = s.unbuilt > 0 || s.inFlight > 0;
    const sig = [s.entries, s.built, s.inFlight, s.retrying, s.failedBuilds, s.lastError].join("|");
    if (sig !== seen) {
      // Something was logged, built or failed: the view and the tree changed.
      seen = sig;
      loadView();
      loadTree(treeLevel, treeFrom);
    }
    setTimeout(poll, busy ? POLL_BUSY_MS : POLL_IDLE_MS);
  }

  function renderProgress(s) {
    const pct = s.nodes > 0 ? Math.round((100 * s.built) / s.nodes) : 100;
    const counts = [
      ["Entries", s.entries], ["Built", s.built + " of " + s.nodes], ["Building", s.inFlight],
      ["Retrying", s.retrying], ["Mechanical", s.mechanicalCount], ["Model calls", s.modelCalls],
      ["Kept word for word", s.verbatim], ["View lines", s.view ? s.view.lines : 0],
    ];
    const parts = [
      el("h2", { id: "progress-h", text: "Build progress" }),
      el("label", { for: "build-progress", text: "Summaries built: " + pct + "%" }),
      el("progress", { id: "build-progress", max: Math.max(s.nodes, 1), value: s.nodes > 0 ? s.built : 1 }),
      el("dl", { class: "counts" }, counts.map(([k, v]) => el("div", {}, el("dt", { text: k }), el("dd", { text: v ?? 0 })))),
    ];
    if (s.stalled) parts.push(el("p", {}, el("span", { class: "badge s-stalled", text: "stalled" }), " nothing is building and a node waits on a retry."));
    if (s.lastError) parts.push(el("p", { class: "err", text: "Last error" + (s.lastErrorAt ? " (" + when(s.lastErrorAt) + ")" : "") + ": " + s.lastError }));
    if (s.retries && s.retries.length) {
      parts.push(el("h3", { text: "Waiting to retry" }), el("ul", { class: "lines" }, s.retries.map((r) => el("li", {},
        el("span", { class: "label", text: r.node }),
        el("span", { text: failures(r.failures, r.refusals) + "; next try " + when(r.next) }),
        el("span", { class: "err", text: r.error })))));
    }
    progress.replaceChildren(...parts);
  }

  async function loadView() {
    let v;
    try {
      v = await api(chatPath(chat) + "/view");
    } catch (e) {
      if (mine === page) failure("Reading the view", e);
      return;
    }
    if (mine !== page) return;
    const list = el("ul", { class: "lines" });
    for (const l of parseLines(v.view)) list.append(el("li", {}, lineButton(chat, l.start, l.count, l.line, zoom), thumbsFor(chat, l.line)));
    viewSec.replaceChildren(
      el("h2", { id: "view-h", text: "View, as the model sees it" }),
      el("p", { class: "muted", text: v.lines + " lines, " + v.bytes + " bytes. Click a line to zoom into it." }),
      list);
  }

  let treeLevel = -1;
  let treeFrom = 0;
  async function loadTree(level, from) {
    let t;
    const q = (level >= 0 ? "level=" + level + "&" : "") + "from=" + (from || 0) + "&limit=64";
    try {
      t = await api(chatPath(chat) + "/tree?" + q);
    } catch (e) {
      if (mine === page) failure("Reading the tree", e);
      return;
    }
    if (mine !== page) return;
    treeLevel = level;
    treeFrom = from || 0;
    const levels = el("div", { class: "levels", role: "group", "aria-label": "Tree levels" }, t.levels.slice().reverse().map((l) =>
      el("button", { type: "button", "aria-pressed": String(l.level === t.level), onclick: () => loadTree(l.level),
        text: "Level " + l.level + " (" + l.built + "/" + l.nodes + ")" })));
    const list = el("ul", { class: "lines", id: "tree-nodes" });
    for (const n of t.nodes) {
      const text = n.line || (n.status === "building" ? "(building…)" : "(not summarized yet)");
      const li = el("li", { "data-status": n.status },
        el("span", { class: "badge s-" + n.status, text: n.status }),
        lineButton(chat, n.start, n.count, text, zoom));
      if (n.failures || n.error) {
        li.append(el("span", { class: "err", text: failures(n.failures, n.refusals) +
          (n.next ? "; next try " + when(n.next) : "") + (n.error ? ". Last error: " + n.error : "") }));
      }
      const th = thumbsFor(chat, n.line, n.images);
      if (th) li.append(th);
      list.append(li);
    }
    const nav = el("p", {});
    if (from > 0) nav.append(el("button", { type: "button", text: "Earlier nodes", onclick: () => loadTree(t.level, Math.max(0, from - 64)) }), " ");
    if (t.next !== undefined && t.next !== null) nav.append(el("button", { type: "button", text: "Later nodes", onclick: () => loadTree(t.level, t.next) }));
    treeSec.replaceChildren(
      el("h2", { id: "tree-h", text: "Summary tree" }),
      el("p", { class: "muted", text: t.entries + " entries. Level 0 has one leaf per entry; each level above merges two nodes below." }),
      levels, list, nav);
  }

  let msgAfter = "";
  const msgList = el("ol", { class: "messages" });
  const msgMore = el("button", { type: "button", hidden: true, text: "Later messages" });
  const msgStatus = el("p", { class: "muted", role: "status", text: "Loading messages…" });
  msgSec.append(el("h2", { id: "messages-h", text: "Messages" }), msgStatus, msgList, msgMore);
  async function loadMessages() {
    let res;
    try {
      res = await api(chatPath(chat) + "/messages?images=links&limit=20" + (msgAfter ? "&after=" + encodeURIComponent(msgAfter) : ""));
    } catch (e) {
      if (mine !== page) return;
      if (e.status === 404 || e.status === 405) {
        msgStatus.textContent = "This server does not serve the message log: its API has no GET " + chatPath(chat) + "/messages. The view and the tree show what the memory holds.";
        return;
      }
      msgStatus.textContent = "";
      failure("Reading the messages", e);
      return;
    }
    if (mine !== page) return;
    for (const m of res.messages || []) msgList.append(messageItem(chat, m));
    msgStatus.textContent = msgList.children.length === 0 ? "No messages logged." : "";
    msgAfter = res.next || "";
    msgMore.hidden = !msgAfter;
  }
  msgMore.addEventListener("click", loadMessages);

  poll();
  loadMessages();
}

function messageItem(chat, m) {
  if (m.erased) return el("li", { "data-seq": m.seq, class: "erased" }, el("span", { class: "role", text: "#" + m.seq }),
    el("div", { class: "text muted", text: "(erased " + when(m.erased) + ")" }));
  const msg = m.message || {};
  const li = el("li", { "data-seq": m.seq }, el("span", { class: "role", text: "#" + m.seq + " " + (msg.role || "?") + (msg.toolName ? " (" + msg.toolName + ")" : "") }));
  li.append(eraseControl(chat, m.seq, li));
  const content = typeof msg.content === "string" ? [{ type: "text", text: msg.content }] : (msg.content || []);
  const imgs = el("div", { class: "thumbs" });
  for (const b of content) {
    if (b.url) {
      const name = b.name || (b.text && b.text.replace(REF, "$1")) || "image";
      imgs.append(el("a", { href: b.url, target: "_blank", rel: "noopener", "aria-label": "open image " + name + " in a new tab" }, thumb(b.url, name)));
      continue;
    }
    if (b.type === "text") li.append(el("div", { class: "text", text: b.text }));
    else if (b.type === "toolCall") li.append(el("div", { class: "text muted", text: "calls " + b.name + " " + JSON.stringify(b.arguments || {}) }));
    else if (b.type === "thinking") li.append(el("div", { class: "text muted", text: "(thinking) " + (b.thinking || "") }));
  }
  if (imgs.children.length) li.append(imgs);
  return li;
}

// eraseControl is a message's erase button: it asks first, then erases
// the message (POST .../erase) and shows its tombstone in its place.
function eraseControl(chat, seq, li) {
  const box = el("span", { class: "erase" });
  const ask = el("button", { type: "button", class: "erase-ask", "aria-label": "erase message #" + seq, text: "Erase…" });
  ask.addEventListener("click", () => {
    const yes = el("button", { type: "button", class: "erase-confirm", text: "Erase for good" });
    const no = el("button", { type: "button", class: "erase-cancel", text: "Cancel" });
    const question = el("span", { role: "alertdialog", "aria-label": "confirm the erasure",
      text: "Erase message #" + seq + " for good? Its words and the summaries built from them cannot be brought back. " });
    question.append(yes, " ", no);
    box.replaceChildren(question);
    no.addEventListener("click", () => box.replaceChildren(ask));
    yes.addEventListener("click", async () => {
      yes.disabled = true;
      try {
        const rec = await api(chatPath(chat) + "/erase", { method: "POST", body: { seqs: [seq] } });
        li.replaceWith(messageItem(chat, { seq, erased: rec.started }));
        showNote("Message #" + seq + " erased (erasure " + rec.erasure + ").", false);
      } catch (e) {
        yes.disabled = false;
        failure("Erasing message #" + seq, e);
      }
    });
    yes.focus();
  });
  box.append(ask);
  return box;
}

route();

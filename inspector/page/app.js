// @ts-check
import { drawStatechart, edgeLabel, highlight } from "./statechart.js";
import { renderCapabilities, renderRequests } from "./panels.js";

/**
 * The inspector page: one WebSocket to the server (reconnecting after a restart of either
 * side), a view of the runtime it pushes (actor tree, capabilities, requests, log), and two
 * things it can ask for: an answer to a request (live) or a position in the log (replay).
 */

const $ = (/** @type {string} */ id) => /** @type {HTMLElement} */ (document.getElementById(id));
/**
 * The page lives under /<token>/: every request and socket is relative to it, so each carries the token (no cookie, no
 * query).
 */
const base = new URL("./", location.href);

const state = {
  /** @type {any} */ hello: null,
  /** @type {any} */ view: null,
  /** @type {any[]} */ log: [],
  /** @type {string | null} */ selected: null,
  /** @type {string | null} */ drawnMachine: null,
  /** The runtime's refusal of the last answer to a request, by requestId. */
  /** @type {Map<string, string>} */ respondErrors: new Map(),
  /** Requests answered from this page and not yet settled, by requestId. */
  /** @type {Set<string>} */ inFlight: new Set(),
  /** Which request each respond command answers: command id -> requestId. */
  /** @type {Map<string, string>} */ commands: new Map(),
  fit: true,
};
/** @type {WebSocket | null} */
let socket = null;
let retryMs = 250;
let nextCommandId = 1;

function connect() {
  const url = new URL("ws", base);
  url.protocol = "ws:";
  const ws = new WebSocket(url);
  socket = ws;
  ws.onopen = () => {
    retryMs = 250;
  };
  ws.onmessage = (m) => onMessage(JSON.parse(m.data));
  ws.onclose = async () => {
    if (socket !== ws) return;
    socket = null;
    // A restarted server has a new token unless one was fixed: say so instead of retrying blindly.
    const probe = await fetch(base, { cache: "no-store" }).catch(() => null);
    if (probe?.status === 401) {
      setConnection("refused", "token refused: open the URL the inspector printed");
      return;
    }
    setConnection("disconnected", "inspector server unreachable: reconnecting…");
    setTimeout(connect, retryMs);
    retryMs = Math.min(retryMs * 2, 4000);
  };
}

/** @param {Record<string, unknown>} command */
function send(command) {
  if (socket?.readyState === WebSocket.OPEN) socket.send(JSON.stringify(command));
}

/** @param {string} s @param {string} text */
function setConnection(s, text) {
  const c = $("connection");
  c.dataset.state = s;
  c.textContent = text;
}

/** @param {any} m */
function onMessage(m) {
  switch (m.kind) {
    case "hello":
      state.hello = m;
      $("mode").textContent = m.mode === "replay" ? "replay (read-only)" : "live";
      $("redaction").textContent = m.showText
        ? "text shown (credentials masked)"
        : "text hidden (--show-text to see it)";
      $("replay").hidden = m.mode !== "replay";
      if (m.mode === "replay") setConnection("replay", "recorded log");
      else
        setConnection(
          m.connected ? "connected" : "disconnected",
          m.connected ? "runtime connected" : "waiting for the runtime…",
        );
      state.drawnMachine = null;
      break;
    case "log":
      if (m.reset) state.log = [];
      state.log.push(...m.records);
      renderFilters();
      renderTimeline();
      break;
    case "view":
      state.view = m;
      render();
      break;
    case "respond.result": {
      const requestId = state.commands.get(m.id);
      if (requestId === undefined) break;
      state.commands.delete(m.id);
      state.inFlight.delete(requestId);
      if (m.ok) state.respondErrors.delete(requestId);
      else state.respondErrors.set(requestId, m.error ?? "refused");
      renderRequestsPanel();
      break;
    }
  }
}

function render() {
  renderTree();
  renderChart();
  renderRequestsPanel();
  renderCapabilities($("capabilities"), state.view.capabilities, state.hello?.catalog);
  renderReplay();
  renderTimeline();
}

// ---- actor tree -------------------------------------------------------------------------

/** @param {any} node @returns {HTMLLIElement} */
function treeItem(node) {
  const li = document.createElement("li");
  const row = document.createElement("div");
  row.className = `actor${state.selected === node.id ? " selected" : ""}`;
  Object.assign(row.dataset, {
    testid: "actor",
    actorId: node.id,
    kind: node.kind,
    state: node.state ?? "",
    status: node.status,
  });
  const kind = document.createElement("span");
  kind.className = "kind";
  kind.textContent = node.kind;
  const label = document.createElement("span");
  label.className = "label";
  label.textContent = node.label;
  label.title = node.id;
  row.append(kind, label);
  if (node.state !== null || node.status) {
    const badge = document.createElement("span");
    const done = ["completed", "resolved", "done", "stopped", "closed"].includes(node.state ?? node.status);
    badge.className = `state${node.machine ? " live" : ""}${done ? " done" : ""}`;
    badge.dataset.testid = "actor-state";
    badge.textContent = node.state ?? node.status;
    row.append(badge);
  }
  row.addEventListener("click", () => {
    state.selected = node.id;
    render();
  });
  li.append(row);
  if (node.children.length) {
    const ul = document.createElement("ul");
    ul.append(...node.children.map(treeItem));
    li.append(ul);
  }
  return li;
}

function renderTree() {
  $("tree").replaceChildren(...(state.view?.tree ?? []).map(treeItem));
}

/** @param {any[]} nodes @param {string} id @returns {any} */
function findNode(nodes, id) {
  for (const n of nodes) {
    if (n.id === id) return n;
    const found = findNode(n.children, id);
    if (found) return found;
  }
  return null;
}

// ---- statechart -------------------------------------------------------------------------

function renderChart() {
  const node = state.selected ? findNode(state.view?.tree ?? [], state.selected) : null;
  const chart = $("chart");
  const graph = node?.machine ? state.hello?.catalog?.machines?.[node.machine] : null;
  $("chart-title").textContent = node
    ? `${node.machine ?? node.kind}: ${node.id}${node.state ? ` — ${node.state}` : ""}`
    : "";
  chart.dataset.actorId = node?.id ?? "";
  chart.dataset.currentState = node?.state ?? "";
  if (!graph) {
    state.drawnMachine = null;
    const hint = node
      ? "No machine for this entry (attempts and targets are records, not actors)."
      : "Select an actor to see its machine.";
    chart.innerHTML = `<p class="hint">${hint}</p>`;
    $("chart-details").replaceChildren();
    return;
  }
  const key = `${node.machine}`;
  if (state.drawnMachine === key) highlight(chart, node.state);
  else {
    state.drawnMachine = key;
    drawStatechart(chart, node.machine, graph, node.state, state.fit).then(
      () => highlight(chart, chart.dataset.currentState ?? null),
      (/** @type {unknown} */ e) => (chart.textContent = `layout failed: ${String(e)}`),
    );
  }
  renderTransitions(graph, node.state);
}

/** The transitions out of the current state and its ancestors, with the capability each guard reads. */
function renderTransitions(/** @type {any} */ graph, /** @type {string | null} */ current) {
  const active = new Set(
    (current ?? "").split(",").flatMap((p) => p.split(".").map((_, i, a) => a.slice(0, i + 1).join("."))),
  );
  active.add("");
  const depth = (/** @type {string} */ p) => (p === "" ? 0 : p.split(".").length);
  const rows = graph.transitions
    .filter((/** @type {any} */ t) => active.has(t.source))
    .sort((/** @type {any} */ a, /** @type {any} */ b) => depth(b.source) - depth(a.source));
  const table = document.createElement("table");
  table.dataset.testid = "transitions";
  table.innerHTML = "<thead><tr><th>from</th><th>on</th><th>to</th><th>guard reads</th></tr></thead>";
  const body = document.createElement("tbody");
  for (const t of rows) {
    const tr = document.createElement("tr");
    for (const [text, cls] of [
      [t.source || "(any)", "mono"],
      [edgeLabel(t), "mono"],
      [t.target ?? "(stays)", "mono"],
      [t.reads.join(", "), "reads"],
    ]) {
      const td = document.createElement("td");
      td.className = cls;
      td.textContent = text;
      tr.append(td);
    }
    body.append(tr);
  }
  table.append(body);
  const caption = document.createElement("p");
  caption.className = "hint";
  caption.textContent = "Transitions available now (dashed arrows are guarded):";
  $("chart-details").replaceChildren(caption, table);
}

// ---- requests ---------------------------------------------------------------------------

function renderRequestsPanel() {
  renderRequests($("requests"), state.view?.requests ?? [], state.log, {
    replay: state.hello?.mode === "replay",
    errors: state.respondErrors,
    inFlight: state.inFlight,
    respond: (/** @type {string} */ requestId, /** @type {any} */ response) => {
      const id = `r${nextCommandId++}`;
      state.respondErrors.delete(requestId);
      state.inFlight.add(requestId);
      state.commands.set(id, requestId);
      send({ kind: "respond", id, command: { requestId, response } });
      renderRequestsPanel();
      return id;
    },
  });
}

// ---- timeline ---------------------------------------------------------------------------

const MAX_ROWS = 500;

function renderFilters() {
  const threads = new Set(),
    runs = new Set();
  for (const r of state.log) {
    if (r.event.threadId) threads.add(r.event.threadId);
    if (r.event.runId) runs.add(r.event.runId);
  }
  for (const [id, values] of /** @type {const} */ ([
    ["filter-thread", threads],
    ["filter-run", runs],
  ])) {
    const select = /** @type {HTMLSelectElement} */ ($(id));
    const have = new Set([...select.options].map((o) => o.value));
    for (const v of values) if (!have.has(v)) select.append(new Option(v, v));
  }
}

/** @param {any} e */
function detailOf(e) {
  const { type: _t, threadId: _th, runId: _r, ...rest } = e;
  return JSON.stringify(rest);
}

function renderTimeline() {
  const thread = /** @type {HTMLSelectElement} */ ($("filter-thread")).value;
  const run = /** @type {HTMLSelectElement} */ ($("filter-run")).value;
  const upTo = state.hello?.mode === "replay" ? (state.view?.position.seq ?? 0) : Infinity;
  const rows = state.log.filter(
    (r) => r.seq <= upTo && (!thread || r.event.threadId === thread) && (!run || r.event.runId === run),
  );
  const shown = rows.slice(-MAX_ROWS).reverse();
  $("timeline-count").textContent =
    `${rows.length} event${rows.length === 1 ? "" : "s"}${rows.length > MAX_ROWS ? ` (latest ${MAX_ROWS} shown)` : ""}`;
  const body = /** @type {HTMLElement} */ ($("timeline").querySelector("tbody"));
  body.replaceChildren(
    ...shown.map((r) => {
      const tr = document.createElement("tr");
      Object.assign(tr.dataset, {
        testid: "event",
        seq: String(r.seq),
        type: r.event.type,
        threadId: r.event.threadId ?? "",
        runId: r.event.runId ?? "",
      });
      if (r.event.type === "policy.applied") tr.className = "policy";
      const cells = [
        String(r.seq),
        r.at.slice(11, 23),
        r.event.type,
        r.event.threadId ?? "",
        r.event.runId ?? "",
        detailOf(r.event),
      ];
      cells.forEach((text, i) => {
        const td = document.createElement("td");
        td.className = i === 5 ? "detail mono" : "mono";
        td.textContent = text;
        if (i === 5) td.title = text;
        tr.append(td);
      });
      return tr;
    }),
  );
}

$("filter-thread").addEventListener("change", renderTimeline);
$("chart-zoom").addEventListener("click", () => {
  state.fit = !state.fit;
  $("chart-zoom").textContent = state.fit ? "actual size" : "fit";
  state.drawnMachine = null;
  if (state.view) renderChart();
});
$("filter-run").addEventListener("change", renderTimeline);

// ---- replay -----------------------------------------------------------------------------

function renderReplay() {
  if (state.hello?.mode !== "replay" || !state.view) return;
  const slider = /** @type {HTMLInputElement} */ ($("replay-slider"));
  const { seq, head } = state.view.position;
  slider.max = String(head);
  slider.value = String(seq);
  const at = state.log.find((r) => r.seq === seq);
  $("replay-position").textContent = `seq ${seq} / ${head}${at ? ` · ${at.event.type}` : ""}`;
  $("replay-position").dataset.seq = String(seq);
}

const seek = (/** @type {number} */ seq) => send({ kind: "seek", seq });
const position = () => state.view?.position ?? { seq: 0, head: 0 };
$("replay-slider").addEventListener("input", (e) => seek(Number(/** @type {HTMLInputElement} */ (e.target).value)));
$("replay-back").addEventListener("click", () => seek(position().seq - 1));
$("replay-forward").addEventListener("click", () => seek(position().seq + 1));
$("replay-start").addEventListener("click", () => seek(0));
$("replay-end").addEventListener("click", () => seek(position().head));

connect();

// @ts-check
/**
 * Draws a machine graph (from the server's catalog) with ELK's layered layout: states as
 * boxes (compound states contain their children), transitions with a target as arrows
 * labelled "EVENT [guard]". Transitions without a target are listed under the chart.
 * Layouts are cached per machine; highlighting the current state does not re-layout.
 */

const SVG = "http://www.w3.org/2000/svg";
const CHAR_W = 6.4;
/** @type {Map<string, Promise<any>>} */
const layouts = new Map();

/** @param {string} tag @param {Record<string, string | number>} attrs */
function el(tag, attrs = {}, text = "") {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
  if (text) node.textContent = text;
  return node;
}

const nodeId = (/** @type {string} */ path) => `s:${path}`;
export const edgeLabel = (/** @type {{event: string, guard: string | null}} */ t) =>
  t.guard ? `${t.event} [${t.guard}]` : t.event;

/** @param {any} graph */
function toElk(graph) {
  /** @type {Map<string, any>} */
  const nodes = new Map();
  const root = {
    id: "root",
    layoutOptions: {
      "elk.algorithm": "layered",
      "elk.direction": "RIGHT",
      "elk.hierarchyHandling": "INCLUDE_CHILDREN",
      "elk.json.edgeCoords": "ROOT",
      "elk.json.shapeCoords": "ROOT",
      "elk.layered.spacing.nodeNodeBetweenLayers": "48",
      "elk.spacing.nodeNode": "26",
      "elk.spacing.edgeLabel": "4",
      "elk.edgeLabels.placement": "CENTER",
    },
    children: /** @type {any[]} */ ([]),
    edges: /** @type {any[]} */ ([]),
  };
  for (const s of graph.states) {
    if (s.parent === null) continue;
    const hasChildren = graph.states.some((/** @type {any} */ c) => c.parent === s.path);
    const node = hasChildren
      ? { id: nodeId(s.path), children: [], layoutOptions: { "elk.padding": "[top=26,left=12,bottom=12,right=12]" } }
      : { id: nodeId(s.path), width: Math.max(70, s.key.length * CHAR_W + 24), height: 30 };
    nodes.set(s.path, node);
    const parent = s.parent === "" ? root : nodes.get(s.parent);
    (parent?.children ?? root.children).push(node);
  }
  // One arrow per (source, target), labelled with one line per transition it stands for.
  /** @type {Map<string, number[]>} */
  const pairs = new Map();
  graph.transitions.forEach((/** @type {any} */ t, /** @type {number} */ i) => {
    if (t.target === null || t.source === "" || !nodes.has(t.source) || !nodes.has(t.target)) return;
    const key = `${t.source}->${t.target}`;
    pairs.set(key, [...(pairs.get(key) ?? []), i]);
  });
  for (const indexes of pairs.values()) {
    const first = graph.transitions[indexes[0]];
    const lines = indexes.map((i) => edgeLabel(graph.transitions[i]));
    const width = Math.max(...lines.map((l) => l.length)) * CHAR_W + 4;
    root.edges.push({
      id: `e${indexes.join("_")}`,
      sources: [nodeId(first.source)],
      targets: [nodeId(first.target)],
      labels: [{ text: lines.join("\n"), width, height: 13 * lines.length }],
    });
  }
  return root;
}

/** @param {string} machine @param {any} graph */
function layoutOf(machine, graph) {
  let layout = layouts.get(machine);
  if (!layout) {
    // @ts-ignore ELK is a global from /vendor/elk.bundled.js
    const elk = new ELK();
    layout = elk.layout(toElk(graph));
    layouts.set(machine, /** @type {Promise<any>} */ (layout));
  }
  return /** @type {Promise<any>} */ (layout);
}

/**
 * Renders `graph` into `container` (replacing what was there) and marks `state`.
 * @param {HTMLElement} container @param {string} machine @param {any} graph @param {string | null} state
 * @param {boolean} [fit] scale down to the container's width (else actual size, scrolled)
 */
export async function drawStatechart(container, machine, graph, state, fit = true) {
  const laid = await layoutOf(machine, graph);
  // Fit the panel's width as far as labels stay legible (then scroll); hover a label for what its guard reads.
  const scale = fit ? Math.max(0.6, Math.min(1, (container.clientWidth - 4) / (laid.width + 8))) : 1;
  const svg = el("svg", {
    width: Math.round((laid.width + 8) * scale),
    height: Math.round((laid.height + 8) * scale),
    viewBox: `-4 -4 ${laid.width + 8} ${laid.height + 8}`,
    role: "img",
    "aria-label": `statechart of ${machine}`,
  });
  svg.dataset.machine = machine;
  const defs = el("defs");
  const marker = el("marker", {
    id: "arrow",
    viewBox: "0 0 10 10",
    refX: 9,
    refY: 5,
    markerWidth: 7,
    markerHeight: 7,
    orient: "auto-start-reverse",
  });
  marker.append(el("path", { d: "M 0 0 L 10 5 L 0 10 z", fill: "#57606a" }));
  defs.append(marker);
  svg.append(defs);
  const byPath = new Map(graph.states.map((/** @type {any} */ s) => [nodeId(s.path), s]));
  const drawNode = (/** @type {any} */ n) => {
    const s = byPath.get(n.id);
    const g = el("g", {
      class:
        `state ${n.children?.length ? "compound" : "atomic"} ` +
        `${s?.initial ? "initial" : ""} ${s?.type === "final" ? "final" : ""}`,
    });
    g.dataset.statePath = s?.path ?? "";
    g.append(el("rect", { x: n.x, y: n.y, width: n.width, height: n.height }));
    const label = n.children?.length
      ? { x: n.x + 8, y: n.y + 16 }
      : { x: n.x + n.width / 2, y: n.y + n.height / 2 + 4 };
    g.append(
      el(
        "text",
        { x: label.x, y: label.y, class: "state-label", "text-anchor": n.children?.length ? "start" : "middle" },
        s?.key ?? n.id,
      ),
    );
    svg.append(g);
    for (const c of n.children ?? []) drawNode(c);
  };
  for (const n of laid.children ?? []) drawNode(n);
  for (const e of laid.edges ?? []) {
    const transitions = e.id
      .slice(1)
      .split("_")
      .map((/** @type {string} */ i) => graph.transitions[Number(i)]);
    const g = el("g", { class: `edge ${transitions.every((/** @type {any} */ t) => t.guard) ? "guarded" : ""}` });
    for (const sec of e.sections ?? []) {
      const pts = [sec.startPoint, ...(sec.bendPoints ?? []), sec.endPoint];
      g.append(el("path", { d: pts.map((p, i) => `${i ? "L" : "M"} ${p.x} ${p.y}`).join(" ") }));
    }
    for (const l of e.labels ?? []) {
      transitions.forEach((/** @type {any} */ t, /** @type {number} */ i) => {
        const text = el("text", { x: l.x, y: l.y + 10 + 13 * i });
        text.append(el("tspan", {}, t.event));
        if (t.guard) text.append(el("tspan", { class: "guard" }, ` [${t.guard}]`));
        text.append(el("title", {}, t.reads.length ? `${edgeLabel(t)}\nreads ${t.reads.join(", ")}` : edgeLabel(t)));
        g.append(text);
      });
    }
    svg.append(g);
  }
  container.replaceChildren(svg);
  delete container.dataset.highlighted;
  highlight(container, state);
}

/**
 * Marks the current state (and its ancestors, more lightly). @param {HTMLElement} container @param {string | null}
 * state
 */
export function highlight(container, state) {
  const current = new Set((state ?? "").split(",").filter(Boolean));
  const active = new Set(
    [...current].flatMap((p) => p.split(".").map((_, i, parts) => parts.slice(0, i + 1).join("."))),
  );
  for (const g of container.querySelectorAll("g.state")) {
    const path = /** @type {HTMLElement} */ (/** @type {unknown} */ (g)).dataset.statePath ?? "";
    g.classList.toggle("current", current.has(path));
    g.classList.toggle("active", active.has(path) && !current.has(path));
    g.setAttribute("data-current", String(current.has(path)));
  }
  // Bring a newly current state into view (once per change, so a reader's own scrolling stays).
  if (container.dataset.highlighted === (state ?? "")) return;
  container.dataset.highlighted = state ?? "";
  const target = container.querySelector("g.state.current");
  if (!target) return;
  const r = target.getBoundingClientRect();
  const c = container.getBoundingClientRect();
  container.scrollLeft += r.left - c.left - (c.width - r.width) / 2;
  container.scrollTop += r.top - c.top - (c.height - r.height) / 2;
}

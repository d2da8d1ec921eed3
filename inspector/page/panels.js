// @ts-check
/** The side panels: requests answerable from the page, and capability records with the degradations that fired. */

/** @param {string} tag @param {string} [cls] @param {string} [text] */
function h(tag, cls = "", text = "") {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text) node.textContent = text;
  return node;
}

const DECISIONS = [
  ["accept", "Approve"],
  ["accept_for_session", "Approve for session"],
  ["decline", "Decline"],
];
let lastRequestsKey = "";
/**
 * What is typed in answer boxes, by requestId and question id, kept across redraws (an answer refused keeps its text).
 */
/** @type {Map<string, string>} */
const typed = new Map();

/**
 * @param {HTMLElement} container
 * @param {any[]} requests
 * @param {any[]} log
 * @param {{ replay: boolean, errors: Map<string, string>, inFlight: Set<string>, respond: (requestId: string, response:
 * any) => string }} options
 */
export function renderRequests(container, requests, log, options) {
  const open = requests.filter((r) => r.state !== "resolved");
  const key = JSON.stringify([
    open.map((r) => [r.requestId, r.state]),
    [...options.errors],
    [...options.inFlight],
    options.replay,
  ]);
  if (key === lastRequestsKey) return; // keeps what is typed in an answer box
  lastRequestsKey = key;
  if (open.length === 0) {
    container.replaceChildren(h("li", "hint", "None."));
    return;
  }
  container.replaceChildren(
    ...open.map((r) => {
      const li = h("li");
      Object.assign(li.dataset, { testid: "request", requestId: r.requestId, state: r.state, runId: r.runId });
      const title = h("div");
      title.append(h("strong", "", `${r.kind}`), h("span", "badge", r.state));
      li.append(title, h("div", "mono", r.summary), h("div", "hint", `${r.requestId} · run ${r.runId}`));
      const error = options.errors.get(r.requestId);
      if (r.state === "respondable" && !options.replay) {
        const buttons = h("div");
        const answer = (/** @type {any} */ response) => void options.respond(r.requestId, response);
        const busy = options.inFlight.has(r.requestId);
        if (r.kind === "user_input") {
          const opened = log.find((x) => x.event.type === "request.opened" && x.event.requestId === r.requestId);
          const questions = opened?.event.payload?.questions ?? [];
          /** @type {Map<string, HTMLInputElement>} */
          const inputs = new Map();
          for (const q of questions) {
            const input = /** @type {HTMLInputElement} */ (h("input"));
            input.dataset.testid = "answer";
            // While text is hidden the id is a placeholder (‹question 1›): Claude's ids are the question text.
            input.placeholder = `answer to ${q.id}`;
            const typedKey = JSON.stringify([r.requestId, q.id]);
            input.value = typed.get(typedKey) ?? "";
            input.addEventListener("input", () => typed.set(typedKey, input.value));
            inputs.set(q.id, input);
            buttons.append(input);
          }
          const submit = h("button", "", "Answer");
          submit.dataset.testid = "submit-answers";
          submit.disabled = busy;
          submit.addEventListener("click", () =>
            answer({ kind: "answers", answers: Object.fromEntries([...inputs].map(([id, i]) => [id, i.value])) }),
          );
          buttons.append(submit);
        } else {
          for (const [decision, label] of DECISIONS) {
            const b = h("button", "", label);
            b.dataset.testid =
              decision === "accept" ? "approve" : decision === "decline" ? "decline" : "approve-session";
            b.disabled = busy;
            b.addEventListener("click", () => answer({ kind: "decision", decision }));
            buttons.append(b);
          }
        }
        li.append(buttons);
        if (error) {
          const div = h("div", "error", error);
          div.dataset.testid = "respond-error";
          li.append(div);
        }
      } else if (r.state === "expired" || r.state === "cancelled") {
        li.append(
          h(
            "div",
            "hint",
            `${r.state === "expired" ? "Expired" : "Cancelled"}: the runtime says it can no longer be answered.`,
          ),
        );
      } else if (options.replay) {
        li.append(h("div", "hint", "Recorded: replay answers nothing."));
      }
      return li;
    }),
  );
}

/** @param {string} path @param {any} record */
const valueAt = (path, record) =>
  path.split(".").reduce((v, k) => (v && typeof v === "object" ? v[k] : undefined), record);

/** @param {any} record @param {Set<string>} highlighted */
function capabilityRecord(record, highlighted) {
  const box = h("div");
  for (const [group, fields] of Object.entries(record ?? {})) {
    if (!fields || typeof fields !== "object") {
      box.append(h("div", "caps-group mono", `${group}: ${JSON.stringify(fields)}`));
      continue;
    }
    const line = h("div", "caps-group mono");
    line.append(h("strong", "", `${group}: `));
    for (const [name, value] of Object.entries(fields)) {
      const span = h(
        "span",
        `${value === true ? "on" : value === false ? "off" : ""} ${highlighted.has(`${group}.${name}`) ? "read" : ""}`,
        `${name} ${value === true ? "✓" : value === false ? "✗" : JSON.stringify(value)}`,
      );
      span.dataset.capability = `${group}.${name}`;
      line.append(span, document.createTextNode("  "));
    }
    box.append(line);
  }
  return box;
}

/** @param {HTMLElement} container @param {any} caps @param {any} catalog */
export function renderCapabilities(container, caps, catalog) {
  if (!caps) return;
  const parts = [];
  const fired = caps.degradations ?? [];
  const title = h("h3", "", fired.length ? `Degradations that fired (${fired.length})` : "No degradation has fired");
  title.dataset.testid = "degradation-count";
  parts.push(title);
  for (const d of fired) {
    const div = h("div", "degradation");
    Object.assign(div.dataset, {
      testid: "degradation",
      policy: d.policy,
      outcome: d.outcome,
      capability: d.capability,
    });
    const head = h("div");
    head.append(
      h("span", "policy", d.policy),
      document.createTextNode(` — ${d.outcome} — reads `),
      h("span", "mono reads", d.capability),
    );
    div.append(head);
    if (d.meaning) div.append(h("div", "", d.meaning));
    div.append(
      h(
        "div",
        "hint",
        `#${d.seq}${d.runId ? ` · run ${d.runId}` : ""}` +
          `${d.threadId ? ` · thread ${d.threadId}` : ""}${d.detail ? ` · ${d.detail}` : ""}`,
      ),
    );
    parts.push(div);
  }
  const read = new Set(fired.map((/** @type {any} */ d) => d.capability));
  for (const s of caps.sessions ?? []) {
    const details = /** @type {HTMLDetailsElement} */ (h("details", "caps"));
    details.dataset.testid = "session-capabilities";
    details.dataset.sessionId = s.sessionId;
    details.open = false;
    details.append(
      h(
        "summary",
        "",
        `session ${s.sessionId} · ${s.providerTarget} · ${s.status} · record v${s.capabilities?.version ?? "?"}`,
      ),
    );
    details.append(capabilityRecord(s.capabilities, read));
    for (const name of read) {
      const value = valueAt(/** @type {string} */ (name), s.capabilities);
      if (value !== undefined)
        details.append(h("div", "hint", `${name} = ${JSON.stringify(value)} (read by the degradations above)`));
    }
    parts.push(details);
  }
  if (!caps.sessions?.length) {
    for (const [target, record] of Object.entries(caps.targets ?? {})) {
      const details = /** @type {HTMLDetailsElement} */ (h("details", "caps"));
      details.append(h("summary", "", `${target} (declared; no session yet)`), capabilityRecord(record, read));
      parts.push(details);
    }
  }
  if (catalog && !fired.length)
    parts.push(
      h(
        "p",
        "hint",
        `${Object.keys(catalog.degradations).length} degradations are known; ` +
          "each would appear here when its transition fires.",
      ),
    );
  container.replaceChildren(...parts);
}

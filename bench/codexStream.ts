import { readFileSync } from "node:fs";

/**
 * A long Codex turn made of real frames: the recorded `text-turn` transcript's frames, with
 * only ids changed. Used by the bench's Codex host (codexStreamHost.ts, which writes them) and
 * by codexReplay.ts (which parses the same lines raw), so both see exactly the same bytes.
 *
 * The recording has two turns, each: response, status/turn started, the user message item,
 * one agent message item (started, deltas, completed), token usage, rate limits, idle, turn
 * completed. A streamed turn is the first recorded turn with its agent message item replaced
 * by `copies` agent message items, taken in turn from both recorded turns, each with a fresh
 * item id; the turn id (and the user message's item id) is fresh per turn.
 */

export type Frame = Record<string, unknown>;
export interface Recorded {
  d: "in" | "out";
  f: Frame;
}

export const CODEX_FIXTURE = new URL("../test/replay/fixtures/codex/text-turn.jsonl", import.meta.url).pathname;

// Placeholders that JSON keeps as they are (no escapes) and no recorded frame contains.
const TURN = "@@TURN@@";
const ITEM = "@@ITEM@@";
const USER_ITEM = "@@USER@@";

export function readRecording(file: string, root: string): Recorded[] {
  // The path goes into JSON strings: escape it as JSON would.
  const text = readFileSync(file, "utf8").replaceAll("<root>", JSON.stringify(root).slice(1, -1));
  return text
    .split("\n")
    .filter((line) => line.trim() !== "")
    .map((line) => JSON.parse(line) as Recorded);
}

/** The "in" frames the recording answers each "out" frame with, in order. */
export function answersOf(recording: readonly Recorded[]): Array<{ out: Frame; answers: Frame[] }> {
  const blocks: Array<{ out: Frame; answers: Frame[] }> = [];
  const leading: Frame[] = []; // frames the server sent before the client spoke go out with the first answer
  for (const r of recording) {
    if (r.d === "out") blocks.push({ out: r.f, answers: blocks.length === 0 ? leading : [] });
    else if (blocks.length === 0) leading.push(r.f);
    else blocks.at(-1)!.answers.push(r.f);
  }
  return blocks;
}

type Params = { item?: { id?: string; type?: string }; itemId?: string; turn?: { id?: string } };
const paramsOf = (f: Frame) => (f.params ?? {}) as Params;
const itemIdOf = (f: Frame) => paramsOf(f).item?.id ?? paramsOf(f).itemId;

export interface TurnTemplate {
  /** The turn/start response (its id is the request's) and the frames before the agent message items. */
  head: string[];
  /** One template per recorded agent message item: its frames, started to completed. */
  items: string[][];
  /** Token usage, rate limits, idle, turn completed. */
  tail: string[];
  /** The agent message text of each item template, in order (what its deltas add up to). */
  itemTexts: string[];
}

export function turnTemplate(recording: readonly Recorded[]): TurnTemplate {
  const turns = answersOf(recording).filter((b) => b.out.method === "turn/start");
  if (turns.length === 0) throw new Error("the recording has no turn");
  const turnIdOf = (answers: Frame[]) => ((answers[0]!.result as Params).turn?.id ?? "") as string;
  const template = (f: Frame, turnId: string, itemIds: Map<string, string>) => {
    let line = JSON.stringify(f).replaceAll(turnId, TURN);
    for (const [id, placeholder] of itemIds) line = line.replaceAll(JSON.stringify(id), JSON.stringify(placeholder));
    return line;
  };
  const agentItems = (answers: Frame[]) =>
    answers.filter((f) => f.method === "item/started" && paramsOf(f).item?.type === "agentMessage").map(itemIdOf);
  const userItem = (answers: Frame[]) =>
    answers.find((f) => f.method === "item/started" && paramsOf(f).item?.type === "userMessage");

  const first = turns[0]!.answers;
  const firstTurnId = turnIdOf(first);
  const firstUser = userItem(first);
  const ids = new Map<string, string>(firstUser ? [[itemIdOf(firstUser)!, USER_ITEM]] : []);
  const firstAgent = new Set(agentItems(first));
  const firstAgentAt = first.findIndex((f) => firstAgent.has(itemIdOf(f)));
  const lastAgentAt = first.findLastIndex((f) => firstAgent.has(itemIdOf(f)));
  // The turn's completion lists its items: it names the first streamed item.
  for (const id of firstAgent) ids.set(id!, `${ITEM}0`);
  const head = first.slice(0, firstAgentAt).map((f) => template(f, firstTurnId, ids));
  const tail = first.slice(lastAgentAt + 1).map((f) => template(f, firstTurnId, ids));

  const items: string[][] = [];
  const itemTexts: string[] = [];
  for (const { answers } of turns) {
    const turnId = turnIdOf(answers);
    for (const id of agentItems(answers)) {
      const frames = answers.filter((f) => itemIdOf(f) === id);
      items.push(frames.map((f) => template(f, turnId, new Map([[id!, ITEM]]))));
      itemTexts.push(frames.map((f) => (f.method === "item/agentMessage/delta" ? deltaOf(f) : "")).join(""));
    }
  }
  return { head, items, tail, itemTexts };
}

const deltaOf = (f: Frame): string => String((f.params as { delta?: unknown }).delta ?? "");

/** A turn id of the recorded shape (a UUID), fresh for each turn index. */
const freshTurnId = (turn: number) => `01a22c20-beef-7000-8000-${turn.toString(16).padStart(12, "0")}`;

/**
 * The lines of one streamed turn, after its response; `answerId` is the id of the client's turn/start. Each agent
 * message streams its recorded deltas `repeats` times over (a long message, as Codex streams one: a delta every token
 * or so), and its completion carries the text they add up to.
 */
export function turnLines(t: TurnTemplate, turn: number, copies: number, answerId: unknown, repeats = 1): string[] {
  const turnId = freshTurnId(turn);
  const fill = (line: string, item: string) =>
    line.replaceAll(TURN, turnId).replaceAll(USER_ITEM, `user_t${turn}`).replaceAll(ITEM, item);
  const lines = t.head.map((line) => fill(line, `msg_t${turn}_`));
  lines[0] = JSON.stringify({ ...(JSON.parse(lines[0]!) as Frame), id: answerId }); // the response
  for (let copy = 0; copy < copies; copy++) {
    const item = t.items[copy % t.items.length]!.map((line) => fill(line, `msg_t${turn}_${copy}`));
    const deltas = item.filter(isDelta);
    lines.push(item[0]!);
    for (let r = 0; r < repeats; r++) lines.push(...deltas);
    const completed = JSON.parse(item.at(-1)!) as { params: { item: { text: string } } };
    completed.params.item.text = t.itemTexts[copy % t.itemTexts.length]!.repeat(repeats);
    lines.push(JSON.stringify(completed));
  }
  for (const line of t.tail) lines.push(fill(line, `msg_t${turn}_`));
  return lines;
}

const isDelta = (line: string) => line.includes('"method":"item/agentMessage/delta"');

/** The agent message text a streamed turn carries in its deltas. */
export function turnContent(t: TurnTemplate, copies: number, repeats = 1): string {
  let text = "";
  for (let copy = 0; copy < copies; copy++) text += t.itemTexts[copy % t.itemTexts.length]!.repeat(repeats);
  return text;
}

/** A minimal SSE client over global fetch, so the tests read the simulator the way a provider SDK would. */

export interface ParsedEvent {
  event: string;
  data: Record<string, unknown>;
}

export function parseSse(text: string): ParsedEvent[] {
  const events: ParsedEvent[] = [];
  for (const block of text.split("\n\n")) {
    if (block.trim() === "") continue;
    let event = "message";
    const data: string[] = [];
    for (const line of block.split("\n")) {
      if (line.startsWith("event: ")) event = line.slice("event: ".length);
      else if (line.startsWith("data: ")) data.push(line.slice("data: ".length));
    }
    events.push({ event, data: JSON.parse(data.join("\n")) as Record<string, unknown> });
  }
  return events;
}

export function post(
  url: string,
  body: unknown,
  init: { headers?: Record<string, string>; signal?: AbortSignal } = {},
): Promise<Response> {
  return fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json", ...init.headers },
    body: JSON.stringify(body),
    ...(init.signal ? { signal: init.signal } : {}),
  });
}

export async function postSse(
  url: string,
  body: unknown,
  headers: Record<string, string> = {},
): Promise<ParsedEvent[]> {
  const res = await post(url, body, { headers });
  if (res.headers.get("content-type") !== "text/event-stream")
    throw new Error(`not a stream: ${res.status} ${await res.text()}`);
  return parseSse(await res.text());
}

/** Reads a streaming body until `marker` has arrived; returns the reader (to read on) and the text so far. */
export async function readUntil(
  res: Response,
  marker: string,
): Promise<{ reader: ReadableStreamDefaultReader<Uint8Array>; text: string }> {
  if (!res.body) throw new Error("no body");
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  let text = "";
  while (!text.includes(marker)) {
    const { done, value } = await reader.read();
    if (done) throw new Error(`stream ended before ${marker}: ${text}`);
    text += decoder.decode(value, { stream: true });
  }
  return { reader, text };
}

export async function readRest(reader: ReadableStreamDefaultReader<Uint8Array>): Promise<string> {
  const decoder = new TextDecoder();
  let text = "";
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return text + decoder.decode();
    text += decoder.decode(value, { stream: true });
  }
}

export const types = (events: ParsedEvent[]): string[] => events.map((e) => e.event);

/** The concatenated `delta` fields of the events of one type (Responses style). */
export function deltas(events: ParsedEvent[], type: string, field = "delta"): string {
  return events
    .filter((e) => e.event === type)
    .map((e) => e.data[field] as string)
    .join("");
}

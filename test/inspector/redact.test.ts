import { describe, expect, it } from "vitest";
import { redact } from "../../src/domain/redact.js";
import { maskCredentials, redactValue } from "../../inspector/server/redact.js";

const SAMPLES = [
  "Authorization: Bearer abcdefghijklmnop.qrstu",
  "curl -u user:hunter2@example.com https://user:pa55word@host/x",
  "OPENAI key sk-proj0123456789abcdefgh and pk-0123456789abcd",
  'config {"api_key": "abcd1234efgh", "token"="zzzzzzzz"} password: s3cr3t!',
  "nothing secret here, just text",
];

describe("inspector redaction", () => {
  it("masks credentials exactly as the runtime does (the inspector keeps its own copy of the patterns)", () => {
    for (const sample of SAMPLES) expect(maskCredentials(sample)).toBe(redact(sample));
  });

  it("hides text fields at any depth unless shown, and masks credentials either way", () => {
    const event = { type: "request.opened", payload: { kind: "user_input", questions: [{ id: "q1", question: "Which token? sk-abcdefghijklmnop1234" }] }, text: "prompt", count: 3, flag: true, none: null };
    expect(redactValue(event, false)).toEqual({
      type: "request.opened",
      payload: { kind: "user_input", questions: [{ id: "q1", question: "‹hidden: 36 chars›" }] },
      text: "‹hidden: 6 chars›",
      count: 3,
      flag: true,
      none: null,
    });
    expect(redactValue(event, true)).toMatchObject({ payload: { questions: [{ question: "Which token? sk-[redacted]" }] }, text: "prompt" });
  });
});

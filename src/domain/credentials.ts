/**
 * The one table of credential shapes. It serves the log (every provider text the log stores,
 * src/domain/providerText.ts; `redact`, src/domain/redact.ts), the host frame rings
 * (src/adapters/kit/ring.ts) and the inspector (inspector/server/redact.ts, whose tsconfig
 * compiles this file and src/domain/maskedStreams.ts beside it). It imports nothing, so the
 * inspector's build pulls in nothing else of src/.
 *
 * Rules the patterns keep, so that masking pieces of a stream stays safe (see
 * src/domain/maskedStreams.ts; a pattern that masks from inside a word of letters, as a JWT's
 * or an AWS key id's does, must be named in its TOKEN_START):
 * - a mask keeps what names the credential (`ghp_`, `Authorization: `, `DB_PASSWORD=`) and
 *   replaces the value with `[redacted]`, and never matches its own output;
 * - no pattern crosses a line end except a private key block, which masks to the end of the
 *   text when its END line has not come (yet);
 * - a value is one whitespace-free run, except after a header name (to the end of the line), a
 *   quote (to the closing quote) or a private key's BEGIN line;
 * - name runs are bounded, so no pattern backtracks without end on a long run of key-like text.
 */

export const REDACTED = "[redacted]";

// The kinds of credential name: one with secret or password anywhere in it, one ending in a token
// or key word, and a short ending (key, pass, pwd, auth, sig), alone or after a separator.
const SECRET_NAME = String.raw`[A-Za-z0-9_.-]{0,64}?(?:secret|passw(?:or)?d)[A-Za-z0-9_.-]{0,64}`;
const KEY_WORDS = "token|credentials?|api_?key|apikey|accesskey|secretkey|privatekey|accountkey|signingkey|masterkey";
const KEY_NAME = String.raw`[A-Za-z0-9_.-]{0,64}?(?:${KEY_WORDS})`;
const SHORT_NAME = String.raw`(?:[A-Za-z0-9_.-]{0,64}[_.-])?(?:key|pass|pwd|auth|sig)`;
/** A variable, field, header or flag name that says its value is a credential. */
const NAME = String.raw`(?<![A-Za-z0-9_.-])(?:${SECRET_NAME}|${KEY_NAME}|${SHORT_NAME})`;
/** Between a name and its value: an optional (escaped) closing quote, `:` or `=`. */
const ASSIGN = String.raw`\\?["']?[ \t]*[:=][ \t]*`;

/** [pattern, replacement], applied in order. */
export const CREDENTIAL_PATTERNS: ReadonlyArray<readonly [RegExp, string]> = [
  // Private keys (PEM, OpenSSH, PGP): the whole body, to the END line or the end of the text
  // (a block already masked is left alone: its END line is gone).
  [
    new RegExp(
      String.raw`(-----BEGIN[ A-Z0-9]*PRIVATE KEY[ A-Z0-9]*-----)(?!\[redacted\])[\s\S]*?` +
        String.raw`(?:-----END[ A-Z0-9]*PRIVATE KEY[ A-Z0-9]*-----|$)`,
      "g",
    ),
    `$1${REDACTED}`,
  ],
  // Headers whose whole value is a credential: the rest of the line.
  [
    /((?<![A-Za-z0-9-])(?:proxy-)?(?:authorization|set-cookie|cookie)\\?["']?[ \t]*[:=][ \t]*)(?=\S)[^\r\n]+/gi,
    `$1${REDACTED}`,
  ],
  // A bearer or basic credential outside a header: not a word of prose (it has a digit or a sign in it).
  // (The spaces before it are kept as they are: a stream has given them out already.)
  [/\b(Bearer|Basic)([ \t]+)(?=[A-Za-z]*[0-9._~+/=-])[A-Za-z0-9._~+/=-]{8,}/gi, `$1$2${REDACTED}`],
  // A password in a URL (scheme://user:password@host).
  [/(\/\/[^/\s:@]+:)[^@\s/]+@/g, `$1${REDACTED}@`],
  // Vendor tokens recognisable on their own.
  [/\b(gh[pousr]_)[A-Za-z0-9]{30,}/g, `$1${REDACTED}`],
  [/\b(github_pat_)[A-Za-z0-9_]{22,}/g, `$1${REDACTED}`],
  [/\b(AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|APKA|ABIA|ACCA)[A-Z0-9]{16}\b/g, `$1${REDACTED}`],
  [/\b([rsp]k_(?:live|test)_)[A-Za-z0-9]{12,}/g, `$1${REDACTED}`],
  [/\b(whsec_)[A-Za-z0-9]{16,}/g, `$1${REDACTED}`],
  [/\b(xox[abposre]-)[A-Za-z0-9-]{10,}/g, `$1${REDACTED}`],
  [/(hooks\.slack\.com\/services\/)[A-Za-z0-9/_-]+/g, `$1${REDACTED}`],
  [/\beyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*/g, REDACTED],
  [/\b(AIza)[0-9A-Za-z_-]{35}/g, `$1${REDACTED}`],
  [/\b(npm_)[A-Za-z0-9]{36}/g, `$1${REDACTED}`],
  [/\b(glpat-)[A-Za-z0-9_-]{20,}/g, `$1${REDACTED}`],
  [/\b(hf_)[A-Za-z0-9]{30,}/g, `$1${REDACTED}`],
  [/\b(sk|pk|rk|ak)-[A-Za-z0-9_-]{12,}/g, `$1-${REDACTED}`],
  // Command-line flags: `--token X`, `--api-key "X"` (`--password=X` is a name = value below).
  [
    new RegExp(
      String.raw`((?<![A-Za-z0-9-])--?[A-Za-z0-9-]{0,32}?(?:token|passw(?:or)?d|secret|api-?key|auth|credentials?)` +
        String.raw`[ \t]+\\?["']?)(?![-\\])[^\s"'\\]+`,
      "gi",
    ),
    `$1${REDACTED}`,
  ],
  // `curl -u user:password`.
  [/((?<![A-Za-z0-9-])(?:-u|--user|--proxy-user)[ \t]+\\?["']?[^\s:"'\\]+:)[^\s"'\\]+/g, `$1${REDACTED}`],
  // name = value, name: value, "name": "value": quoted values to their closing quote.
  [new RegExp(String.raw`(${NAME}${ASSIGN}\\?")(?:[^"\\\r\n]|\\.)+`, "gi"), `$1${REDACTED}`],
  [new RegExp(String.raw`(${NAME}${ASSIGN}')[^'\r\n]+`, "gi"), `$1${REDACTED}`],
  // (Not a name assigned to in its turn: `credentials: db_password = x` masks x.)
  [new RegExp(String.raw`(${NAME}${ASSIGN})(?![\s"'\[])(?!${NAME}${ASSIGN})[^\s"'&,;]{4,}`, "gi"), `$1${REDACTED}`],
];

/**
 * Something every match of a pattern above holds (case aside): a text without any of these holds no credential the
 * table masks, and is returned as it is after one scan instead of one per pattern. Most texts are such (prose, most
 * output; every streamed delta is masked with what came before it), so this keeps masking cheap. A pattern added above
 * must match only text holding one of them.
 */
const HOLDS = new RegExp(
  [
    "-----BEGIN|cookie|bearer|basic|@|gh[pousr]_|github_pat_|A(?:KIA|SIA|GPA|IDA|ROA|NPA|NVA|PKA|BIA|CCA)",
    String.raw`k_(?:live|test)_|whsec_|xox[abposre]-|hooks\.slack|eyJ|AIza|npm_|glpat-|hf_|[prsa]k-`,
    "token|pass|secret|key|credential|pwd|auth|sig|-u",
  ].join("|"),
  "i",
);

/** Whether `text` may hold a credential the table masks: if not, `maskCredentials` returns it as it is. */
export function mayHoldCredential(text: string): boolean {
  return HOLDS.test(text);
}

/** The text with every credential the table recognises masked. */
export function maskCredentials(text: string): string {
  if (!HOLDS.test(text)) return text;
  return CREDENTIAL_PATTERNS.reduce((out, [pattern, replacement]) => out.replace(pattern, replacement), text);
}

const KEY_BEGIN = /-----BEGIN[ A-Z0-9]*PRIVATE KEY[ A-Z0-9]*-----/g;
const KEY_END = /-----END[ A-Z0-9]*PRIVATE KEY[ A-Z0-9]*-----/g;

/**
 * Whether raw `text` opens a private key block it does not close: what follows it (the next
 * line of a stream read line by line) is still the key.
 */
export function opensKeyBlock(text: string): boolean {
  if (!text.includes("-----BEGIN")) return false; // every BEGIN line has it: most texts are done here
  const begins = [...text.matchAll(KEY_BEGIN)];
  const last = begins.at(-1);
  return last !== undefined && keyBlockEnd(text.slice(last.index + last[0].length)) < 0;
}

/** Where the first END line of a private key block in `text` ends, or -1: the key goes on until there. */
export function keyBlockEnd(text: string): number {
  KEY_END.lastIndex = 0;
  const end = KEY_END.exec(text);
  return end ? end.index + end[0].length : -1;
}

/**
 * The environment a host process starts with. Never the embedder's whole environment: that
 * holds the app's cloud keys, tokens and passwords, which a host would hand on to its agent,
 * the agent's tools and every crash report. A host gets the variables programs need to run
 * (the allowlist below), the names its adapter inherits on purpose (a provider's own home
 * directory variable), and exactly what its adapter sets (the adapter's fixed settings and the
 * embedder's `env` option, which win over what is inherited).
 */

/**
 * Inherited from the embedder when set, and nothing else:
 * - PATH: Codex, Claude Code and the agent's tools (git, shells, compilers) are found on it;
 * - HOME, USER, LOGNAME: where a provider keeps its login and configuration, and who runs the
 *   agent's tools (git and ssh read them); an adapter's `home` option replaces HOME;
 * - SHELL, TERM: the shell Claude's and Codex's command tools run, and how tools format output;
 * - LANG, LANGUAGE, LC_* (by prefix), TZ: text encoding and time of what the tools print;
 * - TMPDIR (TEMP, TMP on Windows): where Node, Codex and the tools write temporary files
 *   (per user on macOS);
 * - HTTP(S)_PROXY, ALL_PROXY, NO_PROXY (either case): a provider behind a proxy reaches its API
 *   only through it (a password in a proxy URL is masked wherever it is printed);
 * - NODE_EXTRA_CA_CERTS, SSL_CERT_FILE, SSL_CERT_DIR: the certificates a network that
 *   inspects TLS requires (Node reads the first, Codex the others);
 * - Windows' own: SYSTEMROOT, WINDIR, COMSPEC, PATHEXT, USERPROFILE, APPDATA, LOCALAPPDATA,
 *   PROGRAMDATA, HOMEDRIVE, HOMEPATH (Node does not run without SYSTEMROOT).
 *
 * Not inherited, on purpose: NODE_OPTIONS (an embedder's loaders and debugger flags would run
 * in every host and in Claude; a host written in TypeScript gets its loader as arguments), and
 * every credential: a provider's API key (OPENAI_API_KEY, ANTHROPIC_API_KEY...) reaches its
 * host only through the adapter's `env` option.
 */
export const HOST_ENV_ALLOWLIST: readonly string[] = [
  "PATH",
  "HOME",
  "USER",
  "LOGNAME",
  "SHELL",
  "TERM",
  "LANG",
  "LANGUAGE",
  "TZ",
  "TMPDIR",
  "TEMP",
  "TMP",
  "HTTP_PROXY",
  "HTTPS_PROXY",
  "ALL_PROXY",
  "NO_PROXY",
  "http_proxy",
  "https_proxy",
  "all_proxy",
  "no_proxy",
  "NODE_EXTRA_CA_CERTS",
  "SSL_CERT_FILE",
  "SSL_CERT_DIR",
  "SYSTEMROOT",
  "WINDIR",
  "COMSPEC",
  "PATHEXT",
  "USERPROFILE",
  "APPDATA",
  "LOCALAPPDATA",
  "PROGRAMDATA",
  "HOMEDRIVE",
  "HOMEPATH",
];

/** Inherited by prefix: the locale categories. */
const ALLOWED_PREFIXES = ["LC_"];

/** Windows spells variable names in any case (`Path`, `SystemRoot`) and reads them in any case. */
const sameName = process.platform === "win32" ? (name: string) => name.toUpperCase() : (name: string) => name;

/**
 * The environment for a host: the allowlisted variables of `from` (the embedder's environment),
 * plus the names in `inherit`, then `set` on top (an undefined value removes a name).
 */
export function hostEnvironment(
  set: Readonly<Record<string, string | undefined>> = {},
  inherit: readonly string[] = [],
  from: NodeJS.ProcessEnv = process.env,
): Record<string, string> {
  const allowed = new Set([...HOST_ENV_ALLOWLIST, ...inherit].map(sameName));
  const env: Record<string, string> = {};
  for (const [name, value] of Object.entries(from)) {
    if (value === undefined) continue;
    if (allowed.has(sameName(name)) || ALLOWED_PREFIXES.some((prefix) => name.startsWith(prefix))) env[name] = value;
  }
  for (const [name, value] of Object.entries(set)) {
    if (value === undefined) delete env[name];
    else env[name] = value;
  }
  return env;
}

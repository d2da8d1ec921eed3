/**
 * Credential shapes as they turn up in what hosts and agents print: environment dumps, JSON
 * frames, command lines, HTTP headers, config files, prose. Every value is fake but has the
 * real format. `secret` is the part that must never reach the log, a frame-ring dump or the
 * inspector's page; a vendor prefix a mask keeps (`ghp_`, `sk-`, `AKIA`) is not part of it.
 * Every `secret` is distinct and at least 12 characters, so a test can also look for pieces.
 */
export interface CredentialShape {
  name: string;
  text: string;
  secret: string;
}

const shape = (name: string, secret: string, text: (secret: string) => string): CredentialShape => ({
  name,
  secret,
  text: text(secret),
});

export const CREDENTIAL_CORPUS: readonly CredentialShape[] = [
  // Environment variables, in the forms a dump, a shell or a JSON frame prints them.
  shape("AWS secret key, env line", "wJalrXUtnFEMIK7MDENGbPxRfiCYq9Ex4mpL3ekY", (s) => `AWS_SECRET_ACCESS_KEY=${s}`),
  shape("AWS session token, export", "IQoJb3JpZ2luX2VjEJr7ZmFrZXNlc3Npb24", (s) => `export AWS_SESSION_TOKEN=${s}`),
  shape(
    "AWS secret key, JSON env of an RPC frame",
    "Zx8fakeAwsSecretFromJsonFrame0042abcd",
    (s) =>
      `{"jsonrpc":"2.0","id":1,"method":"init",` +
      `"params":{"env":{"PATH":"/usr/bin","AWS_SECRET_ACCESS_KEY":"${s}","LANG":"C.UTF-8"}}}`,
  ),
  shape("OpenAI key, env line", "proj-Fk29dLqP0vX7tR3mN8bC1zYw", (s) => `OPENAI_API_KEY=sk-${s}`),
  shape(
    "GitHub token, env line (the _ before TOKEN)",
    "ghp_Hk7RqW2mZp9TfX4cLv8NbJ3sYd6GtE1uAo5I",
    (s) => `GITHUB_TOKEN=${s}`,
  ),
  shape("database password, env line", "c0rrect-h0rse-battery", (s) => `DB_PASSWORD=${s}`),
  shape(
    "postgres password without separator",
    "pg-Passw0rd-4-prod-db",
    (s) => `PGPASSWORD=${s} psql -h db.internal app`,
  ),
  shape(
    "Rails secret key base, declare -x",
    "9f2c0a7be14d88e2fa31c05d7790b1aa",
    (s) => `declare -x SECRET_KEY_BASE="${s}"`,
  ),
  shape(
    "Slack bot token, YAML",
    "1234567890-0987654321-FakeSlackTokenBody",
    (s) => `slack:\n  bot_token: xoxb-${s}\n  channel: ops`,
  ),
  // Bare vendor tokens in prose or output.
  shape("GitHub classic token, bare", "R8vT2kLm9QzX4wYp7NcB1sDf6GhJ3aEo5iUu", (s) => `use ghp_${s} to clone`),
  shape("GitHub OAuth token, bare", "Q3wE5rT7yU9iO1pA3sD5fG7hJ9kL1zX3cV5b", (s) => `token is gho_${s}`),
  shape(
    "GitHub fine-grained token",
    "11ABCDEFG0aBcDeFgHiJkL_mNoPqRsTuVwXyZ0123456789abcdefghijklmnopqrstuv",
    (s) => `remote: github_pat_${s}`,
  ),
  shape("AWS access key id, bare", "FAKE7TESTK3YID01", (s) => `aws configure set aws_access_key_id AKIA${s}`),
  shape("AWS temporary access key id, bare", "FAKE7TEMPK3YID02", (s) => `credentials: ASIA${s} (expires soon)`),
  shape("Stripe live secret key", "51HfakeStripeLiveKeyBody0000abcd", (s) => `Stripe::CardError for key sk_live_${s}`),
  shape(
    "Stripe restricted test key",
    "51HfakeStripeRestrictedKey1111xyz",
    (s) => `charge with rk_test_${s} then retry`,
  ),
  shape(
    "Slack user token, bare",
    "2222222222-3333333333-FakeUserTokenValue",
    (s) => `curl -H 'x: y' https://slack.com/api/auth.test?t=xoxp-${s}`,
  ),
  shape(
    "Slack webhook URL",
    "T00000000/B00000000/FakeWebhookSecretXXXXXXXX",
    (s) => `posting to https://hooks.slack.com/services/${s}`,
  ),
  shape(
    "JWT",
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9." +
      "eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkZha2UifQ." +
      "fakeSignatureSflKxwRJSMeKKF2QT4",
    (s) => `id_token ${s} accepted`,
  ),
  shape(
    "Google API key",
    "SyDfakeGoogleApiKeyBody0123456789ab",
    (s) => `https://maps.googleapis.com/maps/api/geocode/json?address=x&k=AIza${s}`,
  ),
  shape(
    "Anthropic key, bare",
    "ant-api03-FakeAnthropicKeyBody_0123456789abcdef",
    (s) => `Using key sk-${s} for the request`,
  ),
  shape("npm token", "FakeNpmTokenBody0123456789abcdefghijk", (s) => `//registry.npmjs.org/:_authToken=npm_${s}`),
  shape(
    "GitLab personal token",
    "FakeGitLabTokenBody1234",
    (s) => `git clone https://oauth2:glpat-${s}@gitlab.com/g/p.git`,
  ),
  shape("Hugging Face token", "FakeHuggingFaceTokenBodyAbcdefghij", (s) => `HF says: invalid token hf_${s}`),
  // Private keys.
  shape(
    "RSA private key, PEM",
    "MIIEowIBAAKCAQEAfakeRsaKeyBodyLine1\nfakeRsaKeyBodyLine2abcdefghijklmnop",
    (s) => `key file:\n-----BEGIN RSA PRIVATE KEY-----\n${s}\n-----END RSA PRIVATE KEY-----\ndone`,
  ),
  shape("OpenSSH private key, PEM inside a JSON string", "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUfakeOpenSshBody", (s) =>
    JSON.stringify({ output: `-----BEGIN OPENSSH PRIVATE KEY-----\n${s}\n-----END OPENSSH PRIVATE KEY-----\n` }),
  ),
  shape(
    "EC private key cut off before its end",
    "MHcCAQEEIFakeEcKeyBodyThatNeverEnds0123",
    (s) => `-----BEGIN EC PRIVATE KEY-----\n${s}`,
  ),
  // Command lines.
  shape("--token flag", "tok-cli-Fake-0123456789", (s) => `deploy --token ${s} --region eu-west-1`),
  shape("--password= flag", "P4ssFromCliFlag-xyz", (s) => `mysqldump --password=${s} app`),
  shape("--api-key flag", "cli-apikey-FakeValue-42", (s) => `tool --api-key "${s}"`),
  shape("curl -u user:password", "curlUserPassw0rd-77", (s) => `curl -u deploy:${s} https://ci.example.com/api`),
  // HTTP.
  shape("Authorization: Bearer", "fakeBearerTokenValue.abc123-XYZ", (s) => `Authorization: Bearer ${s}`),
  shape(
    "Authorization: Basic",
    "dXNlcjpmYWtlLWJhc2ljLXBhc3N3b3Jk",
    (s) => `GET / HTTP/1.1\r\nAuthorization: Basic ${s}\r\nAccept: */*`,
  ),
  shape("Cookie header", "sessionid=FakeSessionCookie0123; csrftoken=FakeCsrfTok3n", (s) => `Cookie: ${s}`),
  shape("Set-Cookie header", "sid=FakeSetCookieValue987654", (s) => `set-cookie: ${s}; Path=/; HttpOnly`),
  shape(
    "x-api-key header in JSON",
    "FakeHeaderApiKey-0123456789",
    (s) => `{"headers":{"x-api-key":"${s}","accept":"application/json"}}`,
  ),
  shape("password in a URL", "S3cr3tUrlPassw0rd", (s) => `DATABASE_URL_IS postgres://admin:${s}@db.internal:5432/app`),
  shape(
    "client_secret in a query string",
    "FakeOauthClientSecret123",
    (s) => `https://auth.example.com/token?client_id=app&client_secret=${s}&grant_type=x`,
  ),
  shape(
    "Azure connection string",
    "Fk9zQb64AzureVal0123xyzw==",
    (s) => `DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=${s};EndpointSuffix=core.windows.net`,
  ),
  shape("password in quoted JSON with spaces", "my very secret phrase", (s) => `{"user":"ann","password":"${s}"}`),
  // Spaces between what names a credential and its value: a stream must not forget the name at a word's start.
  shape("password with spaces around =", "Eq5pacedDbValue77", (s) => `db_password   =   ${s} # prod`),
  shape("header with a space before its colon", "HdrSpaceValue0123abcd", (s) => `Authorization :  Token ${s}`),
  shape("bearer token in prose", "Pr0seBearerToken-98765", (s) => `then send Bearer  ${s} along`),
  shape("curl --user with spaces", "curlUsrSpacedXyz-55", (s) => `curl  --user   admin:${s} https://x.example`),
];

/**
 * Text that must come through every consumer unchanged: it has credential words in it, or the
 * length and alphabet of a key, but is not one. Commit hashes and digests are not secrets
 * (transcripts are full of them); paths, ids and numbers that merely sit next to a key word
 * neither.
 */
export const NOT_SECRETS: readonly string[] = [
  "Refactor the tokenizer so every token is counted once, then run the tests.",
  "The secret to fast builds is caching; the password prompt appears once.",
  "Set OPENAI_API_KEY in your shell before you start.",
  "commit 4e708c8a1b2c3d4e5f60718293a4b5c6d7e8f901 fixed the flaky test",
  "image sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08 pulled",
  "/home/ann/projects/tiller/src/domain/redact.ts:12:3 error TS2304",
  "run_3f2b9c1e-8a7d-4e6f-9b0a-1c2d3e4f5a6b finished in 1234 ms",
  "https://github.com/openai/codex/pull/4242#discussion_r1234567890",
  "MAX_TOKENS=4096 and TOKEN_LIMIT_WARNING=off",
  "a risk-assessment-document-draft and the task-management-system",
  "The primary key is (thread_id, seq); the monkey ate a banana.",
  "Bearer bonds are out of fashion.",
  "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQC7fakePublicKey ann@laptop",
  "-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIUfakeCertificateBody\n-----END CERTIFICATE-----",
];

/** What an embedder passes on purpose through an adapter's `env`: it reaches the host, never the disk. */
export const PASSED_KEY = "sk-ant-api03-PassedOnPurposeFakeKey0123456789";

/** An embedder's environment full of credentials: none of these values may reach a host or the disk. */
export const EMBEDDER_SECRETS: Readonly<Record<string, string>> = {
  AWS_SECRET_ACCESS_KEY: "wJalrXUtnFEMIK7MDENGbPxRfiCYembedderKEY",
  AWS_ACCESS_KEY_ID: "AKIAEMBEDDERFAKE0007",
  GITHUB_TOKEN: "ghp_EmbedderFakeGithubToken0123456789ab",
  OPENAI_API_KEY: "sk-proj-EmbedderFakeOpenAiKey0123456789",
  DB_PASSWORD: "embedder-db-passw0rd-42",
  STRIPE_SECRET_KEY: "sk_live_EmbedderFakeStripeKey0123",
  SLACK_BOT_TOKEN: "xoxb-1111111111-2222222222-EmbedderFakeSlack",
};

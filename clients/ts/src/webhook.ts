import { createHmac, timingSafeEqual } from "node:crypto";

/**
 * A webhook delivery's body: one event of the API's event feed, the same
 * object `GET /api/v1/events` lists.
 */
export interface WebhookEvent<T = Record<string, unknown>> {
  /** The event id, `evt_…`; also the `webhook-id` header, the same on every attempt. */
  id: string;
  /** e.g. "lead.created", "contact.updated", "lead.deleted", "webhook.test". */
  type: string;
  /** RFC 3339 UTC. */
  createdAt: string;
  /** Opaque; pass it to `GET /api/v1/events?cursor=` to read every later event. */
  cursor: string;
  data: {
    /** The record as GET answers it, after the change. */
    object: T;
    /** Updates only: the members the change touched, lowerCamelCase. */
    changedFields?: string[];
  };
}

/** The headers of a request: a fetch `Headers`, or a plain object such as Node's `req.headers`. */
export type WebhookHeaders =
  | Headers
  | Record<string, string | readonly string[] | undefined>;

export interface VerifyWebhookOptions {
  /** How far `webhook-timestamp` may be from now, either way; default 300 (5 min). */
  toleranceSeconds?: number;
  /** The time to check against; default now. Tests pass a fixed one. */
  now?: Date | number;
}

/** Why a delivery was refused: the `code` of a WebhookVerificationError. */
export type WebhookVerificationCode =
  | "missing_header"
  | "invalid_timestamp"
  | "timestamp_too_old"
  | "timestamp_too_new"
  | "no_matching_signature";

/**
 * WebhookVerificationError is thrown by verifyWebhook for a request that is
 * not a genuine, recent delivery. Answer it with a 4xx (400 or 401): the
 * delivery is not retried as a success, and nothing in the request should
 * be trusted.
 */
export class WebhookVerificationError extends Error {
  readonly code: WebhookVerificationCode;
  constructor(code: WebhookVerificationCode, message: string) {
    super(message);
    this.name = "WebhookVerificationError";
    this.code = code;
  }
}

const secretPrefix = "whsec_";

function secretKey(secret: string): Buffer {
  const b64 = secret.startsWith(secretPrefix) ? secret.slice(secretPrefix.length) : "";
  const key = Buffer.from(b64, "base64");
  // Node's decoder skips what is not base64: the round trip refuses it.
  if (b64 === "" || key.toString("base64") !== b64 || key.length < 24 || key.length > 64) {
    throw new TypeError("verifyWebhook: the secret must be whsec_ followed by the standard base64 of 24 to 64 bytes");
  }
  return key;
}

function header(headers: WebhookHeaders, name: string): string {
  if (typeof (headers as Headers).get === "function") {
    return (headers as Headers).get(name) ?? "";
  }
  const rec = headers as Record<string, string | readonly string[] | undefined>;
  for (const [k, v] of Object.entries(rec)) {
    if (k.toLowerCase() !== name || v === undefined) continue;
    return typeof v === "string" ? v : v.join(" ");
  }
  return "";
}

/**
 * verifyWebhook checks that a request is a delivery from the Partner
 * Workspace API (Standard Webhooks, https://www.standardwebhooks.com/) and
 * returns its event.
 *
 * - `secret` is the endpoint's `whsec_…` secret; pass several (an array)
 *   while you switch to a rotated one. A malformed secret is a TypeError.
 * - `headers` must hold `webhook-id`, `webhook-timestamp` and
 *   `webhook-signature` (names in any case).
 * - `body` must be the exact bytes received, before any JSON parsing: a
 *   re-serialised body does not verify. With Express use
 *   `express.raw({ type: "application/json" })` and pass `req.body`.
 *
 * It throws a WebhookVerificationError when a header is missing, the
 * timestamp is more than `toleranceSeconds` (300) from now either way, or
 * no `v1` signature matches (other versions are ignored); the comparison is
 * constant-time. Otherwise it returns the parsed body. The same event may
 * arrive more than once (at-least-once delivery): skip an `id` you already
 * handled.
 */
export function verifyWebhook<T = Record<string, unknown>>(
  secret: string | readonly string[],
  headers: WebhookHeaders,
  body: string | Uint8Array,
  options: VerifyWebhookOptions = {},
): WebhookEvent<T> {
  const keys = (typeof secret === "string" ? [secret] : secret).map(secretKey);
  const id = header(headers, "webhook-id");
  const timestamp = header(headers, "webhook-timestamp");
  const signatures = header(headers, "webhook-signature");
  if (!id || !timestamp || !signatures) {
    throw new WebhookVerificationError(
      "missing_header",
      "webhook-id, webhook-timestamp and webhook-signature are required",
    );
  }
  if (!/^\d{1,15}$/.test(timestamp)) {
    throw new WebhookVerificationError("invalid_timestamp", "webhook-timestamp is not Unix seconds");
  }
  const sent = Number(timestamp);
  const nowMs = options.now === undefined ? Date.now() : Number(options.now);
  const now = Math.floor(nowMs / 1000);
  const tolerance = options.toleranceSeconds ?? 300;
  if (sent < now - tolerance) {
    throw new WebhookVerificationError("timestamp_too_old", "webhook-timestamp is too old");
  }
  if (sent > now + tolerance) {
    throw new WebhookVerificationError("timestamp_too_new", "webhook-timestamp is too far in the future");
  }
  const bytes = typeof body === "string" ? Buffer.from(body, "utf8") : Buffer.from(body.buffer, body.byteOffset, body.byteLength);
  const expected = keys.map((key) =>
    createHmac("sha256", key).update(`${id}.${timestamp}.`).update(bytes).digest(),
  );
  for (const sig of signatures.split(" ")) {
    const comma = sig.indexOf(",");
    if (comma < 0 || sig.slice(0, comma) !== "v1") continue;
    const got = Buffer.from(sig.slice(comma + 1), "base64");
    for (const want of expected) {
      if (got.length === want.length && timingSafeEqual(got, want)) {
        return JSON.parse(bytes.toString("utf8")) as WebhookEvent<T>;
      }
    }
  }
  throw new WebhookVerificationError("no_matching_signature", "no webhook-signature matches the secret");
}

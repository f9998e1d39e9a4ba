import { Code, ConnectError } from "@connectrpc/connect";
import type { Interceptor } from "@connectrpc/connect";

import { ErrorInfoSchema, RetryInfoSchema } from "./gen/google/rpc/error_details_pb.js";
import { TokenService } from "./gen/partner/token/v1/token_pb.js";

/** Options of {@link clientCredentials}. */
export interface ClientCredentialsOptions {
  /** The API's base URL, e.g. "https://partner-api.example.com". */
  baseUrl: string;
  /** The API client's id ("cli_…"). */
  clientId: string;
  /** The API client's secret. Keep it on a trusted backend. */
  clientSecret: string;
  /** Space-delimited scopes to ask for; omitted: every scope of the client. */
  scope?: string;
  /** The fetch to reach the token endpoint with (default: the global fetch). */
  fetch?: typeof globalThis.fetch;
  /** Renew this many seconds before the token expires (default 60; at most half the token's lifetime). */
  expiryMarginSeconds?: number;
  /**
   * How often a unary call refused with 429 (ResourceExhausted, reason
   * "rate_limited") or 503 (Unavailable) is sent again (default 3; 0
   * turns retries off).
   */
  maxRetries?: number;
  /**
   * The longest wait before a retry, in seconds (default 30). When the
   * server asks for a longer one (Retry-After, RetryInfo), the error is
   * thrown at once, with the server's wait in its details.
   */
  maxRetryDelaySeconds?: number;
}

interface Cached {
  token: string;
  expiresAt: number;
}

/**
 * clientCredentials returns a Connect interceptor that authenticates every
 * call with an access token from the OAuth 2.0 client credentials grant
 * (POST {baseUrl}/api/oauth/token, HTTP Basic, RFC 6749 §4.4).
 *
 * The token is fetched on first use, shared by concurrent calls, cached
 * until shortly before it expires, and fetched again when a call answers
 * Unauthenticated (the token was revoked, or the client's secret was
 * rotated): the call is then retried once with the new token. Calls to
 * the TokenService itself pass through untouched.
 *
 * A unary call refused because the client's rate limit is exhausted (429,
 * ResourceExhausted with ErrorInfo reason "rate_limited") or because the
 * server is unavailable (503, Unavailable) is sent again, up to
 * maxRetries (3) times, after the wait the server asked for: the
 * google.rpc.RetryInfo detail, else the Retry-After header or trailer
 * (seconds or an HTTP date), else 0.5, 1, 2 s. A wait longer than
 * maxRetryDelaySeconds (30) is not waited for: the error is thrown. The
 * call's signal (its timeout, or an abort) ends a wait early with the
 * call's error. Streaming calls are never retried.
 */
export function clientCredentials(options: ClientCredentialsOptions): Interceptor {
  const doFetch = options.fetch ?? globalThis.fetch;
  const margin = (options.expiryMarginSeconds ?? 60) * 1000;
  // Under the base URL as the transports join it, so a path prefix (an
  // API behind a gateway at https://gw.example.com/partner) is kept.
  const tokenUrl = `${options.baseUrl.replace(/\/+$/, "")}/api/oauth/token`;
  let cached: Cached | undefined;
  let pending: Promise<Cached> | undefined;

  async function fetchToken(): Promise<Cached> {
    const body = new URLSearchParams({ grant_type: "client_credentials" });
    if (options.scope) {
      body.set("scope", options.scope);
    }
    // RFC 6749 §2.3.1: id and secret are form-urlencoded inside Basic.
    const basic = Buffer.from(
      `${encodeURIComponent(options.clientId)}:${encodeURIComponent(options.clientSecret)}`,
    ).toString("base64");
    const res = await doFetch(tokenUrl, {
      method: "POST",
      headers: {
        Authorization: `Basic ${basic}`,
        "Content-Type": "application/x-www-form-urlencoded",
        Accept: "application/json",
      },
      body: body.toString(),
    });
    const json = (await res.json().catch(() => ({}))) as Record<string, unknown>;
    if (!res.ok || typeof json.access_token !== "string") {
      const code = res.status === 401 ? Code.Unauthenticated : res.status === 429 ? Code.ResourceExhausted : res.status >= 500 ? Code.Unavailable : Code.InvalidArgument;
      // Retry-After travels along, so a 503 of the token endpoint is
      // retried like one of an RPC. (Its 429 refuses failed client
      // authentications: not retried, as it carries no "rate_limited"
      // ErrorInfo.)
      const metadata = new Headers();
      const retryAfter = res.headers.get("Retry-After");
      if (retryAfter !== null) {
        metadata.set("Retry-After", retryAfter);
      }
      throw new ConnectError(`token endpoint answered ${res.status}: ${String(json.error ?? "")} ${String(json.error_description ?? "")}`.trim(), code, metadata);
    }
    const lifetime = (typeof json.expires_in === "number" ? json.expires_in : 3600) * 1000;
    // A token that lives less than twice the margin is renewed halfway
    // through its life: with the whole margin it would count as expired
    // on arrival, and every call would fetch a new one.
    return { token: json.access_token, expiresAt: Date.now() + lifetime - Math.min(margin, lifetime / 2) };
  }

  async function token(stale?: string): Promise<string> {
    if (cached && cached.token !== stale && Date.now() < cached.expiresAt) {
      return cached.token;
    }
    if (!pending) {
      pending = fetchToken().finally(() => {
        pending = undefined;
      });
    }
    cached = await pending;
    return cached.token;
  }

  const maxRetries = options.maxRetries ?? 3;
  const maxDelay = (options.maxRetryDelaySeconds ?? 30) * 1000;

  return (next) => async (req) => {
    if (req.service.typeName === TokenService.typeName) {
      return next(req);
    }
    if (req.stream) {
      req.header.set("Authorization", `Bearer ${await token()}`);
      return next(req);
    }
    let stale: string | undefined;
    let refreshed = false;
    for (let retries = 0; ; retries++) {
      let sent: string | undefined;
      try {
        sent = await token(stale);
        req.header.set("Authorization", `Bearer ${sent}`);
        return await next(req);
      } catch (err) {
        const ce = ConnectError.from(err);
        if (ce.code === Code.Unauthenticated && sent !== undefined && !refreshed) {
          // The token was refused: get a new one and send the call
          // again, once, without counting it as a retry.
          refreshed = true;
          stale = sent;
          retries--;
          continue;
        }
        const wait = retries < maxRetries ? retryDelay(ce, retries) : undefined;
        if (wait === undefined || wait > maxDelay) {
          throw err;
        }
        await sleep(wait, req.signal);
      }
    }
  };
}

/**
 * retryDelay is how long to wait, in milliseconds, before sending again a
 * call that failed with err, the retry-th time (from 0); undefined when
 * err is not worth a retry.
 */
export function retryDelay(err: ConnectError, retry: number): number | undefined {
  const rateLimited =
    err.code === Code.ResourceExhausted && err.findDetails(ErrorInfoSchema).some((info) => info.reason === "rate_limited");
  if (!rateLimited && err.code !== Code.Unavailable) {
    return undefined;
  }
  const info = err.findDetails(RetryInfoSchema)[0];
  if (info?.retryDelay) {
    return Math.max(0, Number(info.retryDelay.seconds) * 1000 + Math.ceil(info.retryDelay.nanos / 1e6));
  }
  const header = err.metadata.get("Retry-After")?.trim();
  if (header) {
    if (/^\d+$/.test(header)) {
      return Number(header) * 1000;
    }
    const date = Date.parse(header);
    if (!Number.isNaN(date)) {
      return Math.max(0, date - Date.now());
    }
  }
  return 500 * 2 ** retry;
}

// sleep waits ms milliseconds, or until signal aborts: then it throws the
// call's error (its deadline, or its cancellation).
function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    let timer: ReturnType<typeof setTimeout> | undefined;
    const abort = () => {
      clearTimeout(timer);
      reject(ConnectError.from(signal.reason));
    };
    if (signal.aborted) {
      abort();
      return;
    }
    timer = setTimeout(() => {
      signal.removeEventListener("abort", abort);
      resolve();
    }, ms);
    signal.addEventListener("abort", abort, { once: true });
  });
}

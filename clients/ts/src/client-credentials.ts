import { Code, ConnectError } from "@connectrpc/connect";
import type { Interceptor } from "@connectrpc/connect";

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
      throw new ConnectError(`token endpoint answered ${res.status}: ${String(json.error ?? "")} ${String(json.error_description ?? "")}`.trim(), code);
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

  return (next) => async (req) => {
    if (req.service.typeName === TokenService.typeName) {
      return next(req);
    }
    const first = await token();
    req.header.set("Authorization", `Bearer ${first}`);
    try {
      return await next(req);
    } catch (err) {
      if (req.stream || ConnectError.from(err).code !== Code.Unauthenticated) {
        throw err;
      }
      req.header.set("Authorization", `Bearer ${await token(first)}`);
      return await next(req);
    }
  };
}

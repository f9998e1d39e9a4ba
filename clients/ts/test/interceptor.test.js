// clientCredentials on its own, against an in-memory router transport and
// a fake token endpoint: where it asks for tokens, that concurrent calls
// share one request, that an Unauthenticated answer gets a new token and
// one retry, and which errors are retried after how long (test/client.test.js
// retries a real 429 and a proxy's 503s).
import { test } from "node:test";
import assert from "node:assert/strict";

import { Code, ConnectError, createClient, createRouterTransport } from "@connectrpc/connect";

import { IdentityService, clientCredentials } from "../dist/index.js";

// fakeTokens answers token requests with svat_1, svat_2, … and records them.
function fakeTokens() {
  const calls = [];
  const fetch = async (url, init) => {
    calls.push({ url: String(url), init });
    return new Response(JSON.stringify({ access_token: `svat_${calls.length}`, token_type: "Bearer", expires_in: 3600 }), {
      status: 200,
      headers: { "Content-Type": "application/json" },
    });
  };
  return { calls, fetch };
}

// identity serves GetMe to the tokens in valid, answering Unauthenticated
// to any other, behind the interceptor auth.
function identity(valid, auth) {
  return createRouterTransport(({ service }) => {
    service(IdentityService, {
      getMe(_req, ctx) {
        const token = (ctx.requestHeader.get("Authorization") ?? "").replace(/^Bearer /, "");
        if (!valid.has(token)) {
          throw new ConnectError("invalid_token", Code.Unauthenticated);
        }
        return { scopes: [token] };
      },
    });
  }, { transport: { interceptors: [auth] } });
}

test("the token endpoint is under the base URL, path prefix included", async () => {
  for (const [baseUrl, want] of [
    ["https://api.example.com", "https://api.example.com/api/oauth/token"],
    ["https://api.example.com/", "https://api.example.com/api/oauth/token"],
    ["https://gw.example.com/partner", "https://gw.example.com/partner/api/oauth/token"],
    ["https://gw.example.com/partner/", "https://gw.example.com/partner/api/oauth/token"],
  ]) {
    const tokens = fakeTokens();
    const auth = clientCredentials({ baseUrl, clientId: "cli_a", clientSecret: "s", fetch: tokens.fetch });
    const me = await createClient(IdentityService, identity(new Set(["svat_1"]), auth)).getMe({});
    assert.deepEqual(me.scopes, ["svat_1"]);
    assert.equal(tokens.calls[0].url, want, baseUrl);
    assert.equal(tokens.calls[0].init.method, "POST");
    assert.match(tokens.calls[0].init.headers.Authorization, /^Basic /);
    assert.equal(tokens.calls[0].init.body, "grant_type=client_credentials");
  }
});

test("concurrent calls share one token; an Unauthenticated answer gets a new one and one retry", async () => {
  const tokens = fakeTokens();
  const valid = new Set(["svat_1"]);
  const auth = clientCredentials({ baseUrl: "https://api.example.com", clientId: "cli_a", clientSecret: "s", scope: "contacts:read", fetch: tokens.fetch });
  const client = createClient(IdentityService, identity(valid, auth));
  const answers = await Promise.all([client.getMe({}), client.getMe({}), client.getMe({})]);
  assert.deepEqual(answers.map((a) => a.scopes[0]), ["svat_1", "svat_1", "svat_1"]);
  assert.equal(tokens.calls.length, 1);
  assert.equal(tokens.calls[0].init.body, "grant_type=client_credentials&scope=contacts%3Aread");

  // svat_1 is revoked: the next call is refused once, then retried with svat_2.
  valid.delete("svat_1");
  valid.add("svat_2");
  assert.equal((await client.getMe({})).scopes[0], "svat_2");
  assert.equal(tokens.calls.length, 2);

  // A new token that is refused too is the caller's error: no loop.
  valid.clear();
  await assert.rejects(client.getMe({}), (err) => ConnectError.from(err).code === Code.Unauthenticated);
  assert.equal(tokens.calls.length, 3);
});

test("a token is used until shortly before it expires, then a new one is fetched", async (t) => {
  t.mock.timers.enable({ apis: ["Date"], now: 1_000_000 });
  const tokens = fakeTokens();
  const auth = clientCredentials({ baseUrl: "https://api.example.com", clientId: "cli_a", clientSecret: "s", fetch: tokens.fetch });
  const client = createClient(IdentityService, identity(new Set(["svat_1", "svat_2"]), auth));
  assert.equal((await client.getMe({})).scopes[0], "svat_1");
  // expires_in is 3600 s and the margin 60 s: at 3539 s the token is kept.
  t.mock.timers.tick(3539_000);
  assert.equal((await client.getMe({})).scopes[0], "svat_1");
  assert.equal(tokens.calls.length, 1);
  // At 3541 s it is within the margin: a new one, without a refused call.
  t.mock.timers.tick(2_000);
  assert.equal((await client.getMe({})).scopes[0], "svat_2");
  assert.equal(tokens.calls.length, 2);
});

test("a token that lives less than the margin is still reused while it is valid", async (t) => {
  t.mock.timers.enable({ apis: ["Date"], now: 1_000_000 });
  const calls = [];
  const fetch = async () => {
    calls.push(1);
    return new Response(JSON.stringify({ access_token: `svat_${calls.length}`, token_type: "Bearer", expires_in: 30 }), {
      status: 200,
      headers: { "Content-Type": "application/json" },
    });
  };
  const auth = clientCredentials({ baseUrl: "https://api.example.com", clientId: "cli_a", clientSecret: "s", fetch });
  const client = createClient(IdentityService, identity(new Set(["svat_1", "svat_2"]), auth));
  assert.equal((await client.getMe({})).scopes[0], "svat_1");
  t.mock.timers.tick(5_000);
  assert.equal((await client.getMe({})).scopes[0], "svat_1");
  assert.equal(calls.length, 1, "a 30 s token was fetched again after 5 s");
  t.mock.timers.tick(30_000);
  assert.equal((await client.getMe({})).scopes[0], "svat_2");
});

test("retryDelay: what is retried, and after how long", async () => {
  const { retryDelay } = await import("../dist/client-credentials.js");
  const { errdetails } = await import("../dist/index.js");
  const rateLimited = [{ desc: errdetails.ErrorInfoSchema, value: { reason: "rate_limited", domain: "partner-api" } }];
  const h = (v) => new Headers({ "Retry-After": v });

  // 503 without a hint: 0.5, 1, 2 s.
  assert.deepEqual([0, 1, 2].map((n) => retryDelay(new ConnectError("down", Code.Unavailable), n)), [500, 1000, 2000]);
  // Retry-After in seconds or as an HTTP date.
  assert.equal(retryDelay(new ConnectError("down", Code.Unavailable, h("3")), 0), 3000);
  const at = retryDelay(new ConnectError("down", Code.Unavailable, h(new Date(Date.now() + 10_000).toUTCString())), 0);
  assert.ok(at > 8000 && at <= 10_000, `${at}`);
  // RetryInfo wins over Retry-After.
  const retryInfo = { desc: errdetails.RetryInfoSchema, value: { retryDelay: { seconds: 2n, nanos: 500_000_000 } } };
  assert.equal(retryDelay(new ConnectError("slow down", Code.ResourceExhausted, h("9"), [...rateLimited, retryInfo]), 0), 2500);
  assert.equal(retryDelay(new ConnectError("slow down", Code.ResourceExhausted, h("1"), rateLimited), 0), 1000);
  // Not retried: a 429 that is not the rate limit, and anything else.
  const tooLarge = [{ desc: errdetails.ErrorInfoSchema, value: { reason: "payload_too_large" } }];
  assert.equal(retryDelay(new ConnectError("too large", Code.ResourceExhausted, h("1"), tooLarge), 0), undefined);
  assert.equal(retryDelay(new ConnectError("bad", Code.InvalidArgument), 0), undefined);
  assert.equal(retryDelay(new ConnectError("boom", Code.Internal, h("1")), 0), undefined);
});

// flaky serves GetMe behind auth, answering the errors of plan in turn
// (one per call) and then a success; it counts the calls.
function flaky(plan, auth) {
  const seen = { calls: 0, tokens: [] };
  const transport = createRouterTransport(({ service }) => {
    service(IdentityService, {
      getMe(_req, ctx) {
        seen.tokens.push(ctx.requestHeader.get("Authorization"));
        const err = plan[seen.calls++];
        if (err) {
          throw err();
        }
        return { scopes: ["ok"] };
      },
    });
  }, { transport: { interceptors: [auth] } });
  return { seen, client: createClient(IdentityService, transport) };
}

test("a 401 refresh is not a retry; 503s are retried 3 times; maxRetries 0 turns retries off", async () => {
  const unavailable = () => new ConnectError("down", Code.Unavailable, new Headers({ "Retry-After": "0" }));
  const unauthenticated = () => new ConnectError("invalid_token", Code.Unauthenticated);

  let tokens = fakeTokens();
  let { seen, client } = flaky([unauthenticated, unavailable, unavailable, unavailable], clientCredentials({ baseUrl: "https://api.example.com", clientId: "cli_a", clientSecret: "s", fetch: tokens.fetch }));
  assert.deepEqual((await client.getMe({})).scopes, ["ok"]);
  assert.equal(seen.calls, 5, "the refreshed call, then 3 retries");
  assert.deepEqual(seen.tokens, ["Bearer svat_1", "Bearer svat_2", "Bearer svat_2", "Bearer svat_2", "Bearer svat_2"]);

  tokens = fakeTokens();
  ({ seen, client } = flaky([unavailable, unavailable, unavailable, unavailable, unavailable], clientCredentials({ baseUrl: "https://api.example.com", clientId: "cli_a", clientSecret: "s", fetch: tokens.fetch })));
  await assert.rejects(client.getMe({}), (err) => ConnectError.from(err).code === Code.Unavailable);
  assert.equal(seen.calls, 4);

  tokens = fakeTokens();
  ({ seen, client } = flaky([unavailable], clientCredentials({ baseUrl: "https://api.example.com", clientId: "cli_a", clientSecret: "s", fetch: tokens.fetch, maxRetries: 0 })));
  await assert.rejects(client.getMe({}), (err) => ConnectError.from(err).code === Code.Unavailable);
  assert.equal(seen.calls, 1);
});

test("a 503 of the token endpoint is retried after its Retry-After", async () => {
  let tokenCalls = 0;
  const fetch = async () => {
    if (tokenCalls++ === 0) {
      return new Response(JSON.stringify({ error: "unavailable" }), { status: 503, headers: { "Retry-After": "0", "Content-Type": "application/json" } });
    }
    return new Response(JSON.stringify({ access_token: "svat_1", token_type: "Bearer", expires_in: 3600 }), { status: 200 });
  };
  const { seen, client } = flaky([], clientCredentials({ baseUrl: "https://api.example.com", clientId: "cli_a", clientSecret: "s", fetch }));
  assert.deepEqual((await client.getMe({})).scopes, ["ok"]);
  assert.equal(tokenCalls, 2);
  assert.deepEqual(seen.tokens, ["Bearer svat_1"]);
});

// clientCredentials on its own, against an in-memory router transport and
// a fake token endpoint: where it asks for tokens, that concurrent calls
// share one request, and that an Unauthenticated answer gets a new token
// and one retry.
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

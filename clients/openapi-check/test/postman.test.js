// Postman imports the document (docs/api.md "Postman": Import → Link →
// $BASE_URL/openapi.json; issue 24, item 10): openapi-to-postmanv2, the
// converter Postman's importer runs, makes a collection of it without an
// error, with one request per operation, named by its summary, and
// the authentication the document states: the oauth2 client-credentials
// grant with every scope on the data operations, HTTP Basic on the token
// and revocation endpoints. The converter keeps the document's relative
// server ("/") and token URL, so the reader sets the collection's
// baseUrl to $BASE_URL. It pre-fills the token request's scope with every
// scope of the document, which a client lacking one of them is refused
// (invalid_scope): docs/api.md tells the reader to clear it (an empty
// scope gets every scope of the client), and TestAPIDocExamples runs both
// token requests there.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import Converter from "openapi-to-postmanv2";

const docPath = resolve(process.env.OPENAPI_DOC ?? "../../gen/openapi/openapi.json");
const data = readFileSync(docPath, "utf8");
const doc = JSON.parse(data);

test("Postman's converter makes a collection of every operation, with the document's authentication", async () => {
  const res = await new Promise((ok, fail) => Converter.convert({ type: "string", data }, {}, (err, r) => (err ? fail(err) : ok(r))));
  assert.equal(res.result, true, `conversion failed: ${res.reason}`);
  const collection = res.output[0].data;

  const requests = [];
  const walk = (items) => {
    for (const i of items) {
      if (i.request) requests.push(i);
      if (i.item) walk(i.item);
    }
  };
  walk(collection.item);
  const operations = [];
  for (const ops of Object.values(doc.paths)) {
    for (const [method, op] of Object.entries(ops)) {
      if (["get", "post", "put", "patch", "delete"].includes(method)) operations.push({ method: method.toUpperCase(), op });
    }
  }
  assert.equal(requests.length, operations.length, "one request per operation");
  assert.deepEqual(requests.map((r) => r.name).sort(), operations.map((o) => o.op.summary ?? o.op.operationId).sort());

  const scopes = Object.keys(doc.components.securitySchemes.oauth2.flows.clientCredentials.scopes).sort();
  for (const r of requests) {
    const auth = r.request.auth;
    const path = "/" + r.request.url.path.join("/");
    if (path.startsWith("/api/oauth/")) {
      assert.equal(auth?.type, "basic", `${r.name}: HTTP Basic client authentication`);
      continue;
    }
    assert.equal(auth?.type, "oauth2", `${r.name}: oauth2`);
    const params = Object.fromEntries(auth.oauth2.map((p) => [p.key, p.value]));
    assert.equal(params.grant_type, "client_credentials", `${r.name}: the client-credentials grant`);
    assert.equal(params.accessTokenUrl, "/api/oauth/token", `${r.name}: the token endpoint`);
    assert.deepEqual(params.scope.split(" ").sort(), scopes, `${r.name}: every scope`);
    assert.deepEqual(r.request.url.host, ["{{baseUrl}}"], `${r.name}: under the baseUrl variable`);
  }
  assert.deepEqual(collection.variable.find((v) => v.key === "baseUrl")?.value, doc.servers[0].url);
});

// Checks a workspace's own OpenAPI document (GET /openapi.json with a
// bearer token), served by a real server (PARTNERAPI_BIN) whose workspace
// has custom fields, with the tools a partner would use on it:
//   - Redocly CLI's recommended rules find no error and no warning;
//   - openapi-typescript's types of it compile under `tsc --strict` with
//     workspace/fields.ts, which writes and reads typed customFields and
//     whose `@ts-expect-error` lines (a string for a number field, an
//     option that is not one, an unknown key, a required field left out)
//     must be errors; against the public document's types they are not,
//     so the same program does not compile there;
//   - the compiled program, run against that server, sends a lead with
//     typed values, reads it back, filters on them and clears one.
// The fields are defined with SQL through the server's database
// (../ts/test/server.js, psql), so the check needs no definitions API.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { startServer } from "../../ts/test/server.js";

const publicDoc = resolve(process.env.OPENAPI_DOC ?? "../../gen/openapi/openapi.json");
const env = { ...process.env, REDOCLY_TELEMETRY: "off", REDOCLY_SUPPRESS_UPDATE_NOTICE: "true", NO_COLOR: "1" };
const workspaceDoc = resolve("workspace/gen/workspace.json");
const types = "workspace/gen/openapi.d.ts";

function run(bin, ...args) {
  const r = spawnSync(`node_modules/.bin/${bin}`, args, { env, encoding: "utf8" });
  if (r.error) throw r.error;
  return r;
}

// compile writes openapi-typescript's types of doc and compiles
// workspace/ against them under tsc --strict.
function compile(doc) {
  const gen = run("openapi-typescript", doc, "--output", types);
  assert.equal(gen.status, 0, `openapi-typescript:\n${gen.stdout}\n${gen.stderr}`);
  return run("tsc", "-p", "tsconfig.workspace.json");
}

test("a workspace's own document: lint clean, typed fields under tsc --strict, and a typed program against the server", async (t) => {
  const server = await startServer();
  t.after(server.stop);
  const name = "Typed Fields Co";
  const creds = server.client(name);
  server.defineField(name, "lead", "budget", "number", { required: true, label: "Budget" });
  server.defineField(name, "lead", "interest", "select", { options: ["crm", "erp"], label: "Interest" });
  server.defineField(name, "lead", "topics", "multiselect", { options: ["price", "demo", "trial"], label: "Topics" });
  server.defineField(name, "lead", "call_at", "datetime", { label: "Call at" });
  server.defineField(name, "contact", "born", "date", { label: "Born" });
  server.defineField(name, "contact", "site", "url", { label: "Site" });
  server.defineField(name, "contact", "vip", "boolean", { label: "VIP" });

  const form = new URLSearchParams({ grant_type: "client_credentials", client_id: creds.clientId, client_secret: creds.clientSecret });
  const tokenRes = await fetch(`${server.publicURL}/api/oauth/token`, { method: "POST", body: form });
  assert.equal(tokenRes.status, 200);
  const { access_token: token } = await tokenRes.json();
  const res = await fetch(`${server.publicURL}/openapi.json`, { headers: { Authorization: `Bearer ${token}` } });
  assert.equal(res.status, 200);
  assert.equal(res.headers.get("cache-control"), "private, no-cache");
  assert.equal(res.headers.get("vary"), "Authorization");
  const body = await res.text();
  const doc = JSON.parse(body);
  const budget = doc.components.schemas["partner.lead.v1.LeadInput"].properties.customFields;
  assert.deepEqual(budget.required, ["budget"]);
  assert.deepEqual(doc.components.schemas["partner.lead.v1.Lead"].properties.customFields.properties.interest, {
    type: "string",
    enum: ["crm", "erp"],
    title: "Interest",
  });
  mkdirSync("workspace/gen", { recursive: true });
  writeFileSync(workspaceDoc, body);

  await t.test("Redocly CLI lint (recommended rules): no error, no warning", () => {
    const r = run("redocly", "lint", workspaceDoc, "--extends", "recommended", "--format", "json");
    let report;
    try {
      report = JSON.parse(r.stdout);
    } catch {
      assert.fail(`redocly lint exited ${r.status} without a JSON report:\n${r.stdout}\n${r.stderr}`);
    }
    const problems = report.problems.map((p) => `${p.severity} ${p.ruleId}: ${p.message} (${p.location?.[0]?.pointer ?? ""})`);
    assert.deepEqual(problems, [], `redocly lint ${workspaceDoc}`);
    assert.deepEqual(report.totals, { errors: 0, warnings: 0, ignored: 0 });
    assert.equal(r.status, 0);
  });

  await t.test("the deliberate type errors are not errors against the public document", () => {
    const tsc = compile(publicDoc);
    assert.notEqual(tsc.status, 0, "workspace/fields.ts compiled against the public document's types");
    assert.match(tsc.stdout, /TS2578: Unused '@ts-expect-error' directive/, tsc.stdout);
  });

  let compiled = false;
  await t.test("the workspace's types compile under tsc --strict with workspace/fields.ts, its type errors errors", () => {
    rmSync("dist-workspace", { recursive: true, force: true });
    const tsc = compile(workspaceDoc);
    assert.equal(tsc.status, 0, `tsc --strict:\n${tsc.stdout}\n${tsc.stderr}`);
    compiled = true;
  });

  await t.test("the compiled program writes, reads, filters and clears typed values on the server", async () => {
    assert.ok(compiled, "the program did not compile");
    const fields = await import(pathToFileURL(resolve("dist-workspace/fields.js")).href);
    const api = fields.client(server.publicURL, token);
    const sent = await fields.sendLead(api, "typed@example.com", 25000);
    assert.deepEqual(sent, { budget: 25000, interest: "crm", topics: ["price", "demo"] });
    await fields.sendLead(api, "small@example.com", 500);
    const found = await fields.findLeads(api, 1000);
    assert.deepEqual(
      found.map((l) => l.budget),
      [25000],
    );
    assert.deepEqual(await fields.readLead(api, found[0].id), sent);
    assert.deepEqual(await fields.clearInterest(api, found[0].id), { budget: 25000, topics: ["price", "demo"] });
  });

  // Nothing of the workspace leaks into the public document.
  assert.ok(!readFileSync(publicDoc, "utf8").includes("Typed Fields"));
});

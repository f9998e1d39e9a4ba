// Checks the OpenAPI document (gen/openapi/openapi.json, or OPENAPI_DOC)
// with the tools a partner would use on it:
//   - Redocly CLI's recommended rules find no error and no warning;
//   - openapi-typescript's types of it compile under `tsc --strict` with
//     src/paging.ts, an openapi-fetch program that pages a list the
//     natural way (`cursor = data.pagination.nextCursor`);
//   - that program, run against a real server (PARTNERAPI_BIN, started as
//     clients/ts's tests start it), sees every contact exactly once, and
//     every contact.created event of the events feed, read the same way.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { startServer } from "../../ts/test/server.js";

const doc = resolve(process.env.OPENAPI_DOC ?? "../../gen/openapi/openapi.json");
const env = { ...process.env, REDOCLY_TELEMETRY: "off", REDOCLY_SUPPRESS_UPDATE_NOTICE: "true", NO_COLOR: "1" };

function run(bin, ...args) {
  const r = spawnSync(`node_modules/.bin/${bin}`, args, { env, encoding: "utf8" });
  if (r.error) throw r.error;
  return r;
}

test("Redocly CLI lint (recommended rules): no error, no warning", () => {
  const r = run("redocly", "lint", doc, "--extends", "recommended", "--format", "json");
  let report;
  try {
    report = JSON.parse(r.stdout);
  } catch {
    assert.fail(`redocly lint exited ${r.status} without a JSON report:\n${r.stdout}\n${r.stderr}`);
  }
  const problems = report.problems.map((p) => `${p.severity} ${p.ruleId}: ${p.message} (${p.location?.[0]?.pointer ?? ""})`);
  assert.deepEqual(problems, [], `redocly lint ${doc}`);
  assert.deepEqual(report.totals, { errors: 0, warnings: 0, ignored: 0 });
  assert.equal(r.status, 0);
});

let compiled = false;

test("openapi-typescript types and an openapi-fetch paging loop compile under tsc --strict", () => {
  const gen = run("openapi-typescript", doc, "--output", "src/gen/openapi.d.ts");
  assert.equal(gen.status, 0, `openapi-typescript:\n${gen.stdout}\n${gen.stderr}`);
  const tsc = run("tsc", "-p", "tsconfig.json");
  assert.equal(tsc.status, 0, `tsc --strict:\n${tsc.stdout}\n${tsc.stderr}`);
  compiled = true;
});

test("the compiled program pages through every contact of a real server", async (t) => {
  if (!compiled) {
    assert.fail("the program did not compile");
  }
  const paging = await import(pathToFileURL(resolve("dist/paging.js")).href);
  const server = await startServer();
  t.after(server.stop);
  const creds = server.client("OpenAPI Check Co");
  const token = await paging.token(server.publicURL, creds.clientId, creds.clientSecret);
  const api = paging.client(server.publicURL, token);

  const created = [];
  for (const name of ["Ada", "Grace", "Katherine", "Mary", "Hedy"]) {
    created.push(await paging.createContact(api, `${name.toLowerCase()}@example.com`, name));
  }
  // limit 2 over 5 contacts: three pages, the last without nextCursor.
  const { contacts, pages } = await paging.allContacts(api, 2);
  assert.equal(pages, 3);
  assert.deepEqual(contacts.map((c) => c.id).sort(), created.map((c) => c.id).sort());
  for (const c of contacts) {
    assert.ok(!Object.values(c).includes(null), `a contact with a null member: ${JSON.stringify(c)}`);
  }

  assert.deepEqual(await paging.createLead(api, created[0].id), ["new", "contacted"]);

  // The events feed, with the same loop: every contact.created event
  // once, each page but the last with a nextCursor, the last with a
  // syncCursor. An event is in the feed once its transaction is past the
  // feed's watermark: read again until all five are (30 s at most).
  const deadline = Date.now() + 30_000;
  let feed;
  for (;;) {
    feed = await paging.allEvents(api, 2);
    const createdEvents = feed.events.filter((e) => e.type === "contact.created");
    if (createdEvents.length >= 5 || Date.now() > deadline) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  const createdIds = feed.events.filter((e) => e.type === "contact.created").map((e) => e.data.object?.id ?? e.data.id);
  assert.deepEqual([...createdIds].sort(), created.map((c) => c.id).sort(), `contact.created events: ${JSON.stringify(feed.events)}`);
  assert.equal(new Set(feed.events.map((e) => e.id)).size, feed.events.length, "no event twice");
  assert.ok(feed.pages >= Math.ceil(feed.events.length / 2) && feed.pages >= 3, `${feed.pages} pages of 2 for ${feed.events.length} events`);
  assert.notEqual(feed.syncCursor, "", "the last page has a syncCursor");
});

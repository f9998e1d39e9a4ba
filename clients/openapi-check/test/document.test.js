// What the document says, beyond what the linter and the compiler see
// (issue 24, item 4): it names a server; no answer admits null (the
// server leaves an unset member out, it never sends null), so typed
// clients need no null checks; the members the server sets are readOnly
// in answers and requests and are not members of a merge patch. And the
// lint of openapi.test.js can fail: Redocly's recommended rules report
// an unused component and empty servers, in a copy of the document that
// has them.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";

const docPath = resolve(process.env.OPENAPI_DOC ?? "../../gen/openapi/openapi.json");
const doc = JSON.parse(readFileSync(docPath, "utf8"));
const schemas = doc.components.schemas;
const env = { ...process.env, REDOCLY_TELEMETRY: "off", REDOCLY_SUPPRESS_UPDATE_NOTICE: "true", NO_COLOR: "1" };

// resolve follows a local $ref.
function resolveRef(ref) {
  return ref
    .replace(/^#\//, "")
    .split("/")
    .map((t) => t.replaceAll("~1", "/").replaceAll("~0", "~"))
    .reduce((cur, t) => cur?.[t], doc);
}

// nulls lists where the schema v, and every schema it refers to, admits
// null: nullable, a type list with "null", or {type: "null"}.
function nulls(v, where, seen = new Set(), out = []) {
  if (Array.isArray(v)) {
    v.forEach((x, i) => nulls(x, `${where}/${i}`, seen, out));
    return out;
  }
  if (v === null || typeof v !== "object") return out;
  if (typeof v.$ref === "string" && !seen.has(v.$ref)) {
    seen.add(v.$ref);
    nulls(resolveRef(v.$ref), v.$ref, seen, out);
  }
  if (v.nullable === true || v.type === "null" || (Array.isArray(v.type) && v.type.includes("null"))) out.push(where);
  if (Array.isArray(v.enum) && v.enum.includes(null)) out.push(`${where} (enum)`);
  for (const [k, x] of Object.entries(v)) {
    if (k !== "$ref") nulls(x, `${where}/${k}`, seen, out);
  }
  return out;
}

test("the document names a server", () => {
  assert.ok(Array.isArray(doc.servers) && doc.servers.length > 0, "servers");
  for (const s of doc.servers) assert.equal(typeof s.url, "string");
});

test("no answer admits null", () => {
  const found = [];
  for (const [path, ops] of Object.entries(doc.paths)) {
    for (const [method, op] of Object.entries(ops)) {
      for (const [status, res] of Object.entries(op?.responses ?? {})) {
        nulls(res, `${method.toUpperCase()} ${path} ${status}`, new Set(), found);
      }
    }
  }
  assert.deepEqual(found, [], "answer schemas that admit null, which the server never sends");
  // And the members every answer carries are required: a lead's status
  // is a plain enum, never absent.
  const lead = schemas["partner.lead.v1.Lead"];
  for (const m of ["id", "contactId", "status", "createdAt", "updatedAt"]) {
    assert.ok(lead.required?.includes(m), `Lead.${m} is required`);
  }
  assert.equal(lead.properties.status.type, "string");
  assert.ok(lead.properties.status.enum.length > 0 && !lead.properties.status.enum.includes(null));
});

test("the members the server sets are readOnly, in answers and requests, and no patch has them", () => {
  const serverSet = {
    "partner.contact.v1.Contact": ["id", "createdAt", "updatedAt"],
    "partner.lead.v1.Lead": ["id", "createdAt", "updatedAt"],
    "partner.webhook.v1.WebhookEndpoint": ["id", "createdAt", "updatedAt", "secret", "disabledReason"],
  };
  for (const [name, members] of Object.entries(serverSet)) {
    for (const variant of [name, `${name}Input`]) {
      const s = schemas[variant];
      assert.ok(s, `${variant} exists`);
      for (const m of members) {
        assert.equal(s.properties[m]?.readOnly, true, `${variant}.${m} is readOnly`);
      }
    }
    const patch = schemas[`${name}Patch`];
    assert.ok(patch, `${name}Patch exists`);
    for (const m of members) {
      assert.equal(patch.properties[m], undefined, `${name}Patch has no ${m}`);
    }
  }
  // Any other schema with an id and timestamps that requests also carry
  // (it has an Input copy) marks them too.
  for (const [name, s] of Object.entries(schemas)) {
    if (!schemas[`${name}Input`]) continue;
    for (const m of ["id", "createdAt", "updatedAt"]) {
      if (s.properties?.[m]) assert.equal(s.properties[m].readOnly, true, `${name}.${m} is readOnly`);
    }
  }
});

// lint runs Redocly's recommended rules on a copy of the document changed
// by edit and returns the rule ids it reports.
function lint(edit) {
  const dir = mkdtempSync(join(tmpdir(), "openapi-check-"));
  try {
    const copy = structuredClone(doc);
    edit(copy);
    const file = join(dir, "openapi.json");
    writeFileSync(file, JSON.stringify(copy));
    const r = spawnSync("node_modules/.bin/redocly", ["lint", file, "--extends", "recommended", "--format", "json"], { env, encoding: "utf8" });
    if (r.error) throw r.error;
    return JSON.parse(r.stdout).problems.map((p) => p.ruleId);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

test("the lint would report an unused component and empty servers", () => {
  const rules = lint((d) => {
    d.components.schemas["partner.contact.v1.Unused"] = { type: "object", properties: { x: { type: "string" } } };
    delete d.servers;
  });
  assert.ok(rules.includes("no-unused-components"), `rules reported: ${rules}`);
  assert.ok(rules.includes("no-empty-servers"), `rules reported: ${rules}`);
});

// customFields against the real server (server.js), over Connect and
// gRPC: custom field values written with toValues on a create (the
// lead's and its inline contact's), read back with fromValues from the
// answer and from a get, one value cleared with null under the mask path
// custom_fields.<key>, and the server's refusal of a value of the wrong
// type naming the field. The workspace's fields are defined with SQL
// (server.js defineField). And toValues refuses what no field type holds;
// the README's example is examples/custom-fields.ts (type-checked by the
// build).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport } from "@connectrpc/connect-node";

import { ContactService, LeadService, clientCredentials, customFields, errorDetails } from "../dist/index.js";
import { startServer } from "./server.js";

const pkgDir = resolve(dirname(fileURLToPath(import.meta.url)), "..");
let srv;
let creds;

before(async () => {
  srv = await startServer();
  creds = srv.client("Custom Values Co");
  srv.defineField("Custom Values Co", "lead", "budget", "number");
  srv.defineField("Custom Values Co", "lead", "interest", "select", { options: ["crm", "erp"] });
  srv.defineField("Custom Values Co", "lead", "topics", "multiselect", { options: ["price", "demo", "trial"] });
  srv.defineField("Custom Values Co", "lead", "call_at", "datetime");
  srv.defineField("Custom Values Co", "contact", "vip", "boolean");
  srv.defineField("Custom Values Co", "contact", "born", "date");
});

after(async () => {
  await srv?.stop();
});

test("toValues makes google.protobuf.Value messages, fromValues reads them back", () => {
  const map = customFields.toValues({ budget: 25000, interest: "crm", topics: ["demo"], vip: false, gone: null, skipped: undefined });
  assert.deepEqual(Object.keys(map).sort(), ["budget", "gone", "interest", "topics", "vip"]);
  assert.deepEqual(map.budget.kind, { case: "numberValue", value: 25000 });
  assert.deepEqual(map.interest.kind, { case: "stringValue", value: "crm" });
  assert.equal(map.vip.kind.case, "boolValue");
  assert.equal(map.topics.kind.case, "listValue");
  assert.equal(map.gone.kind.case, "nullValue");
  // null is "no value": fromValues leaves it out.
  assert.deepEqual(customFields.fromValues(map), { budget: 25000, interest: "crm", topics: ["demo"], vip: false });
  assert.deepEqual(customFields.fromValues(undefined), {});
  for (const [bad, message] of [
    [{ budget: Number.NaN }, /customFields\.budget: a number must be finite/],
    [{ budget: Infinity }, /customFields\.budget/],
    [{ where: { city: "Lyon" } }, /customFields\.where: object is not a custom field value/],
    [{ topics: ["demo", 1] }, /customFields\.topics: a multiselect value is an array of option values/],
  ]) {
    assert.throws(() => customFields.toValues(bad), (err) => err instanceof TypeError && message.test(err.message));
  }
});

test("the README's custom fields example is examples/custom-fields.ts", () => {
  const readme = readFileSync(join(pkgDir, "README.md"), "utf8");
  const m = readme.slice(readme.indexOf("\n## Custom fields\n")).match(/```ts\n([\s\S]*?)```/);
  assert.ok(m, "the README has a custom fields example");
  assert.equal(m[1], readFileSync(join(pkgDir, "examples/custom-fields.ts"), "utf8"));
});

const transports = {
  connect: (interceptors) => createConnectTransport({ baseUrl: srv.publicURL, httpVersion: "1.1", interceptors }),
  grpc: (interceptors) => createGrpcTransport({ baseUrl: srv.publicURL, interceptors }),
};

for (const [name, makeTransport] of Object.entries(transports)) {
  test(`custom values written and read with customFields over ${name}`, async () => {
    const auth = clientCredentials({ baseUrl: srv.publicURL, clientId: creds.clientId, clientSecret: creds.clientSecret });
    const transport = makeTransport([auth]);
    const leads = createClient(LeadService, transport);
    const contacts = createClient(ContactService, transport);

    const { lead } = await leads.createLead({
      lead: {
        contact: { email: `${name}-values@example.com`, customFields: customFields.toValues({ vip: true, born: "1990-04-01" }) },
        customFields: customFields.toValues({
          budget: 25000.5,
          interest: "crm",
          topics: ["trial", "price"],
          call_at: "2026-05-01T09:30:00+02:00",
        }),
      },
    });
    // As answered: multiselect in the options' order, datetimes in UTC.
    const want = { budget: 25000.5, interest: "crm", topics: ["price", "trial"], call_at: "2026-05-01T07:30:00Z" };
    assert.deepEqual(customFields.fromValues(lead.customFields), want);
    const got = await leads.getLead({ id: lead.id });
    assert.deepEqual(customFields.fromValues(got.lead.customFields), want);
    const contact = await contacts.getContact({ id: lead.contactId });
    assert.deepEqual(customFields.fromValues(contact.contact.customFields), { vip: true, born: "1990-04-01" });

    // null under custom_fields.<key> clears that key alone.
    const updated = await leads.updateLead({
      id: lead.id,
      lead: { customFields: customFields.toValues({ interest: null }) },
      updateMask: { paths: ["custom_fields.interest"] },
    });
    const { interest, ...rest } = want;
    assert.equal(interest, "crm");
    assert.deepEqual(customFields.fromValues(updated.lead.customFields), rest);

    // A value of the wrong type: the field named as sent.
    await assert.rejects(
      leads.createLead({ lead: { contactId: lead.contactId, customFields: customFields.toValues({ budget: "25000" }) } }),
      (err) => {
        const ce = ConnectError.from(err);
        assert.equal(ce.code, Code.InvalidArgument);
        assert.deepEqual(
          errorDetails(ce).fieldViolations.map((v) => v.field),
          ["customFields.budget"],
        );
        return true;
      },
    );
  });
}

// The package against the real server: `partnerapi serve` (the binary
// from PARTNERAPI_BIN, default ../../bin/partnerapi, on an embedded
// PostgreSQL or TEST_DATABASE_URL), a client made with its CLI, and, over
// both the Connect and the gRPC transport: a token through the
// clientCredentials interceptor, /me, a contact list, a lead, one
// contact read and updated through a field mask with If-Match, a batch of
// leads with a failed item, a validation error's details, and a new token
// after a revocation.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn, execFileSync } from "node:child_process";
import { mkdtempSync, rmSync, chmodSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { createInterface } from "node:readline";

import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport } from "@connectrpc/connect-node";

import {
  ContactService,
  IdentityService,
  LeadService,
  TokenService,
  clientCredentials,
  errorDetails,
} from "../dist/index.js";

const bin = resolve(process.env.PARTNERAPI_BIN ?? "../../bin/partnerapi");
let server;
let dataDir;
let publicURL;
let adminURL;
let client;

before(async () => {
  dataDir = mkdtempSync(join(tmpdir(), "partnerapi-ts-"));
  chmodSync(dataDir, 0o755);
  const env = {
    ...process.env,
    PARTNER_HTTP_ADDR: "127.0.0.1:0",
    PARTNER_ADMIN_ADDR: "127.0.0.1:0",
    PARTNER_DATA_DIR: dataDir,
    PARTNER_ADMIN_TOKEN: "",
    DATABASE_URL: process.env.TEST_DATABASE_URL ?? "",
  };
  server = spawn(bin, ["serve"], { env, stdio: ["ignore", "ignore", "pipe"] });
  const lines = createInterface({ input: server.stderr });
  const log = [];
  const serving = new Promise((resolveServing, reject) => {
    const timer = setTimeout(() => reject(new Error("serve did not start within 60s:\n" + log.join("\n"))), 60_000);
    server.on("exit", (code) => reject(new Error(`serve exited with ${code}:\n${log.join("\n")}`)));
    lines.on("line", (line) => {
      log.push(line);
      let entry;
      try {
        entry = JSON.parse(line);
      } catch {
        return;
      }
      if (entry.msg === "serving") {
        clearTimeout(timer);
        resolveServing(entry);
      }
    });
  });
  const entry = await serving;
  publicURL = `http://${entry.public}`;
  adminURL = `http://${entry.admin}`;
  const cli = (...args) =>
    JSON.parse(execFileSync(bin, args, { env: { ...process.env, PARTNER_ADMIN_URL: adminURL, PARTNER_ADMIN_TOKEN: "" } }).toString());
  const ws = cli("workspace", "create", "--name", "TypeScript Co");
  const member = cli("member", "add", "--workspace", ws.id, "--email", "ts@example.com", "--settings-access");
  client = cli("client", "create", "--workspace", ws.id, "--member", member.id, "--name", "ts client",
    "--scopes", "contacts:read contacts:write leads:read leads:write");
});

after(async () => {
  if (server && server.exitCode === null) {
    const exited = new Promise((r) => server.once("exit", r));
    server.kill("SIGTERM");
    await exited;
  }
  if (dataDir) {
    rmSync(dataDir, { recursive: true, force: true });
  }
});

const transports = {
  connect: (interceptors) => createConnectTransport({ baseUrl: publicURL, httpVersion: "1.1", interceptors }),
  grpc: (interceptors) => createGrpcTransport({ baseUrl: publicURL, interceptors }),
};

for (const [name, makeTransport] of Object.entries(transports)) {
  test(`the client over ${name}`, async () => {
    let tokenRequests = 0;
    const countingFetch = (url, init) => {
      tokenRequests++;
      return fetch(url, init);
    };
    let lastAuthorization = "";
    const spy = (next) => async (req) => {
      const res = await next(req);
      lastAuthorization = req.header.get("Authorization") ?? "";
      return res;
    };
    const auth = clientCredentials({ baseUrl: publicURL, clientId: client.clientId, clientSecret: client.clientSecret, fetch: countingFetch });
    const transport = makeTransport([spy, auth]);

    const identity = createClient(IdentityService, transport);
    const me = await identity.getMe({});
    assert.equal(me.workspace?.name, "TypeScript Co");
    assert.equal(me.app?.clientId, client.clientId);
    assert.deepEqual(me.scopes, ["contacts:read", "contacts:write", "leads:read", "leads:write"]);
    assert.equal(tokenRequests, 1);

    const leads = createClient(LeadService, transport);
    const lead = await leads.createLead({ lead: { contact: { email: `${name}@example.com`, firstName: "Ada" }, source: "web_form" } });
    assert.match(lead.lead?.id ?? "", /^lea_/);
    assert.match(lead.lead?.contactId ?? "", /^con_/);

    const contacts = createClient(ContactService, transport);
    const page = await contacts.listContacts({ limit: 10 });
    assert.ok(page.contacts.some((c) => c.email === `${name}@example.com`), "the lead's contact is listed");
    assert.equal(tokenRequests, 1, "the token is cached");

    // One record, an update through a field mask, and a batch with a
    // failed item.
    const made = page.contacts.find((c) => c.email === `${name}@example.com`);
    let etag = "";
    const got = await contacts.getContact({ id: made.id }, { onHeader: (h) => (etag = h.get("ETag") ?? "") });
    assert.equal(got.contact?.firstName, "Ada");
    assert.match(etag, /^".+"$/, "GetContact carries an ETag");
    const updated = await contacts.updateContact(
      { id: made.id, contact: { jobTitle: "Analyst" }, updateMask: { paths: ["job_title", "first_name"] } },
      { headers: { "If-Match": etag } },
    );
    assert.equal(updated.contact?.jobTitle, "Analyst");
    assert.equal(updated.contact?.firstName, undefined, "a masked field left unset is cleared");
    await assert.rejects(
      contacts.updateContact({ id: made.id, contact: { jobTitle: "Late" } }, { headers: { "If-Match": etag } }),
      (err) => ConnectError.from(err).code === Code.FailedPrecondition,
    );
    const batch = await leads.batchCreateLeads({ leads: [{ contactId: made.id, title: "Batched" }, { contactId: "con_nope" }] });
    assert.equal(batch.results.length, 2);
    assert.equal(batch.results[0].result.case, "lead");
    assert.equal(batch.results[0].result.value.title, "Batched");
    assert.equal(batch.results[1].result.case, "error");
    assert.equal(batch.results[1].result.value.status, 422);
    assert.equal(batch.results[1].result.value.errors[0]?.field, "contactId");

    // A validation error and its details.
    await assert.rejects(contacts.createContact({ contact: { email: "not-an-email" } }), (err) => {
      const ce = ConnectError.from(err);
      assert.equal(ce.code, Code.InvalidArgument);
      const details = errorDetails(ce);
      assert.equal(details.reason, "validation_failed");
      assert.equal(details.info?.domain, "partner-api");
      assert.equal(details.fieldViolations[0]?.field, "email");
      assert.ok(details.fieldViolations[0]?.reason);
      return true;
    });

    // After a revocation the next call answers Unauthenticated; the
    // interceptor gets a new token and retries once.
    const revoked = lastAuthorization.replace(/^Bearer /, "");
    assert.match(revoked, /^svat_/);
    const tokens = createClient(TokenService, createConnectTransport({ baseUrl: publicURL, httpVersion: "1.1" }));
    await tokens.revokeToken({ token: revoked }, {
      headers: { Authorization: "Basic " + Buffer.from(`${client.clientId}:${client.clientSecret}`).toString("base64") },
    });
    const again = await identity.getMe({});
    assert.equal(again.app?.clientId, client.clientId);
    assert.equal(tokenRequests, 2, "a new token after the 401");
    assert.notEqual(lastAuthorization, `Bearer ${revoked}`);
  });
}

test("bad credentials are Unauthenticated", async () => {
  const transport = createConnectTransport({
    baseUrl: publicURL,
    httpVersion: "1.1",
    interceptors: [clientCredentials({ baseUrl: publicURL, clientId: client.clientId, clientSecret: "wrong" })],
  });
  await assert.rejects(createClient(IdentityService, transport).getMe({}), (err) => {
    assert.equal(ConnectError.from(err).code, Code.Unauthenticated);
    assert.match(ConnectError.from(err).message, /invalid_client/);
    return true;
  });
});

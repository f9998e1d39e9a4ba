// The package against the real server: `partnerapi serve` (see
// server.js), a client made with its CLI, and, over both the Connect and
// the gRPC transport: a token through the clientCredentials interceptor,
// /me, a contact list, a lead, one contact read and updated through a
// field mask with If-Match, a batch of leads with a failed item, a
// validation error's details, and a new token after a revocation; then
// pages over more than one page of contacts and leads, and the retries of
// a real 429 (a client with a read rate of 1 per second) and of 503s from
// a local proxy; and over Connect, the event feed (EventService) and a
// webhook endpoint (WebhookService) whose delivery, received on this
// machine, verifyWebhook checks.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { createServer, request as httpRequest } from "node:http";

import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport } from "@connectrpc/connect-node";

import {
  ContactService,
  EventService,
  IdentityService,
  LeadService,
  TokenService,
  WebhookService,
  clientCredentials,
  errorDetails,
  pages,
  verifyWebhook,
} from "../dist/index.js";
import { startServer } from "./server.js";

let srv;
let publicURL;
let client;

before(async () => {
  // Webhook deliveries may reach the test's receiver on 127.0.0.1.
  srv = await startServer({ PARTNER_WEBHOOK_ALLOWED_NETWORKS: "127.0.0.0/8" });
  publicURL = srv.publicURL;
  client = srv.client("TypeScript Co");
});

after(async () => {
  await srv?.stop();
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

test("the event feed and a webhook endpoint over connect, its delivery verified with verifyWebhook", async (t) => {
  // A receiver on this machine: every delivery, its headers and raw body.
  const deliveries = [];
  let delivered;
  const arrived = new Promise((resolve) => (delivered = resolve));
  const receiver = createServer((req, res) => {
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", () => {
      deliveries.push({ headers: req.headers, body: Buffer.concat(chunks) });
      res.writeHead(204).end();
      delivered();
    });
  });
  await new Promise((resolve) => receiver.listen(0, "127.0.0.1", resolve));
  t.after(() => receiver.close());

  // No leads:read: lead events are not this client's to read.
  const c = srv.client("Events Co", "--scopes", "contacts:read contacts:write webhooks:read webhooks:write");
  const transport = transports.connect([clientCredentials({ baseUrl: publicURL, clientId: c.clientId, clientSecret: c.clientSecret })]);
  const webhooks = createClient(WebhookService, transport);
  const events = createClient(EventService, transport);

  const { endpoint } = await webhooks.createWebhookEndpoint({
    endpoint: { url: `http://127.0.0.1:${receiver.address().port}/hooks`, eventTypes: ["contact.created"], description: "TypeScript test" },
  });
  assert.match(endpoint?.id ?? "", /^whe_/);
  assert.match(endpoint?.secret ?? "", /^whsec_/, "create answers the secret, once");
  assert.equal(endpoint?.status, "enabled");
  const listed = await webhooks.listWebhookEndpoints({});
  assert.deepEqual(listed.webhookEndpoints.map((e) => [e.id, e.url, e.eventTypes, e.secret]), [[endpoint.id, endpoint.url, ["contact.created"], undefined]]);
  const got = await webhooks.getWebhookEndpoint({ id: endpoint.id });
  assert.equal(got.endpoint?.description, "TypeScript test");
  await assert.rejects(webhooks.createWebhookEndpoint({ endpoint: { url: "https://hooks.example.com/lead", eventTypes: ["lead.created"] } }), (err) => {
    assert.equal(ConnectError.from(err).code, Code.InvalidArgument, "an event type the client's scopes cannot read");
    return true;
  });

  const contacts = createClient(ContactService, transport);
  const made = (await contacts.createContact({ contact: { email: "eve@example.com", firstName: "Eve" } })).contact;

  // The feed: the contact's event, its data the contact as GET answers it.
  const page = await events.listEvents({ types: "contact.created" });
  assert.equal(page.events.length, 1);
  const [event] = page.events;
  assert.match(event.id, /^evt_/);
  assert.equal(event.type, "contact.created");
  assert.equal(event.data?.object?.id, made.id);
  assert.equal(event.data?.object?.email, "eve@example.com");
  assert.ok(page.pagination?.syncCursor, "the last page carries syncCursor");
  const all = [];
  for await (const e of pages(events.listEvents, { limit: 1 })) all.push(e.id);
  assert.deepEqual(all, [event.id], "pages walks the feed");
  const after = await events.listEvents({ cursor: page.pagination.syncCursor });
  assert.deepEqual(after.events, [], "nothing after the sync cursor");
  await assert.rejects(events.listEvents({ types: "lead.created" }), (err) => {
    assert.equal(ConnectError.from(err).code, Code.PermissionDenied, "lead events need leads:read");
    return true;
  });

  // The delivery of that event, checked as the README says.
  await Promise.race([arrived, new Promise((_, reject) => setTimeout(() => reject(new Error("no delivery within 20s")), 20_000))]);
  const { headers, body } = deliveries[0];
  const verified = verifyWebhook(endpoint.secret, headers, body);
  assert.equal(verified.id, event.id, "the webhook-id is the event's id");
  assert.equal(verified.type, "contact.created");
  assert.equal(verified.data.object.id, made.id);
  assert.throws(() => verifyWebhook(endpoint.secret, headers, Buffer.concat([body, Buffer.from(" ")])), { code: "no_matching_signature" });

  await webhooks.deleteWebhookEndpoint({ id: endpoint.id });
  assert.deepEqual((await webhooks.listWebhookEndpoints({})).webhookEndpoints, []);
});

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

for (const [name, makeTransport] of Object.entries(transports)) {
  test(`pages yields every item of every page once over ${name}`, async () => {
    const c = srv.client(`Pages ${name}`);
    const calls = [];
    const spy = (next) => async (req) => {
      calls.push(req.method.name);
      return next(req);
    };
    const transport = makeTransport([clientCredentials({ baseUrl: publicURL, clientId: c.clientId, clientSecret: c.clientSecret }), spy]);
    const contacts = createClient(ContactService, transport);
    const made = [];
    for (let i = 0; i < 5; i++) {
      made.push((await contacts.createContact({ contact: { email: `page${i}@example.com` } })).contact.id);
    }
    const count = (method) => calls.filter((m) => m === method).length;

    const seen = [];
    for await (const contact of pages(contacts.listContacts, { limit: 2, sort: "createdAt" })) {
      seen.push(contact.id);
    }
    assert.deepEqual([...seen].sort(), [...made].sort(), "every contact, once");
    assert.equal(count("ListContacts"), 3, "pages of 2, 2 and 1");

    // The same function over another list RPC, with a filter sent on
    // every page.
    const leads = createClient(LeadService, transport);
    const leadIds = [];
    for (const contactId of made) {
      leadIds.push((await leads.createLead({ lead: { contactId, title: "Paged", source: "web_form" } })).lead.id);
    }
    await leads.createLead({ lead: { contactId: made[0], title: "Referred", source: "referral" } });
    const webForm = [];
    for await (const lead of pages(leads.listLeads, { limit: 2, source: "web_form" })) {
      webForm.push(lead.id);
    }
    assert.deepEqual([...webForm].sort(), [...leadIds].sort(), "the filter holds on every page");
    assert.equal(count("ListLeads"), 3);
    const all = [];
    for await (const lead of pages(leads.listLeads, { limit: 4 })) {
      all.push(lead.id);
    }
    assert.equal(all.length, 6);
    assert.equal(new Set(all).size, 6, "no lead twice");

    // Leaving the loop asks for no further page.
    const before = count("ListContacts");
    for await (const contact of pages(contacts.listContacts, { limit: 2 })) {
      assert.ok(contact.id);
      break;
    }
    assert.equal(count("ListContacts") - before, 1);
  });

  test(`a 429 is retried after the wait the server asks for over ${name}`, async () => {
    // A read rate of 1 per second, burst 2: the third of three calls at
    // once is refused with 429 and Retry-After.
    const c = srv.client(`Slow ${name}`, "--read-rate", "1");
    const attempts = new Map();
    const spy = (next) => async (req) => {
      const attempt = { start: performance.now() };
      if (!attempts.has(req)) attempts.set(req, []);
      attempts.get(req).push(attempt);
      try {
        return await next(req);
      } catch (err) {
        const ce = ConnectError.from(err);
        Object.assign(attempt, { end: performance.now(), code: ce.code, wait: errorDetails(ce).retryAfterSeconds, header: ce.metadata.get("Retry-After") });
        throw err;
      }
    };
    const transport = makeTransport([clientCredentials({ baseUrl: publicURL, clientId: c.clientId, clientSecret: c.clientSecret }), spy]);
    const identity = createClient(IdentityService, transport);
    const answers = await Promise.all([identity.getMe({}), identity.getMe({}), identity.getMe({})]);
    for (const me of answers) {
      assert.equal(me.app?.clientId, c.clientId);
    }
    const refused = [...attempts.values()].filter((list) => list.length > 1);
    assert.ok(refused.length >= 1, "a call was refused and retried");
    for (const list of refused) {
      assert.ok(list.length <= 4, "at most 3 retries");
      for (let i = 0; i < list.length - 1; i++) {
        const failed = list[i];
        assert.equal(failed.code, Code.ResourceExhausted);
        assert.ok(failed.wait >= 1, `RetryInfo says wait ${failed.wait}`);
        if (name === "connect") {
          assert.equal(failed.header, String(failed.wait), "Retry-After agrees");
        }
        const waited = list[i + 1].start - failed.end;
        assert.ok(waited >= failed.wait * 1000 - 2, `waited ${waited} ms, asked for ${failed.wait} s`);
      }
    }
  });
}

// proxy forwards to the server, except RPCs while plan() returns a
// Retry-After value: those it answers 503 with it, as a gateway in front
// of the API does during maintenance.
async function proxy(upstream) {
  const p = { rpcs: 0, plan: () => undefined };
  const server = createServer((req, res) => {
    if (req.url.startsWith("/partner.")) {
      const retryAfter = p.plan(p.rpcs++);
      if (retryAfter !== undefined) {
        req.resume();
        res.writeHead(503, { "Content-Type": "text/plain", "Retry-After": retryAfter });
        res.end("down for maintenance");
        return;
      }
    }
    const out = httpRequest(new URL(req.url, upstream), { method: req.method, headers: req.headers }, (answer) => {
      res.writeHead(answer.statusCode, answer.headers);
      answer.pipe(res);
    });
    out.on("error", (err) => res.destroy(err));
    req.pipe(out);
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  p.url = `http://127.0.0.1:${server.address().port}`;
  p.close = () => new Promise((r) => server.close(r));
  return p;
}

test("a 503 is retried after its Retry-After, 3 times at most, and a long or late wait is not waited for", async () => {
  const c = srv.client("Proxied");
  const p = await proxy(publicURL);
  try {
    const transport = createConnectTransport({
      baseUrl: p.url,
      httpVersion: "1.1",
      interceptors: [clientCredentials({ baseUrl: p.url, clientId: c.clientId, clientSecret: c.clientSecret })],
    });
    const identity = createClient(IdentityService, transport);

    // Once 503 with Retry-After: 1, then through: the call succeeds a
    // second later.
    p.rpcs = 0;
    p.plan = (n) => (n === 0 ? "1" : undefined);
    let start = performance.now();
    assert.equal((await identity.getMe({})).app?.clientId, c.clientId);
    assert.equal(p.rpcs, 2);
    assert.ok(performance.now() - start >= 1000, "waited the second");

    // Always 503: the first try and 3 retries, then the error.
    p.rpcs = 0;
    p.plan = () => "0";
    await assert.rejects(identity.getMe({}), (err) => ConnectError.from(err).code === Code.Unavailable);
    assert.equal(p.rpcs, 4, "1 call and 3 retries");

    // A wait beyond maxRetryDelaySeconds (30) is the caller's: no retry.
    p.rpcs = 0;
    p.plan = () => "120";
    start = performance.now();
    await assert.rejects(identity.getMe({}), (err) => ConnectError.from(err).code === Code.Unavailable);
    assert.equal(p.rpcs, 1);
    assert.ok(performance.now() - start < 1000);

    // The call's timeout ends the wait.
    p.rpcs = 0;
    p.plan = () => "5";
    start = performance.now();
    await assert.rejects(identity.getMe({}, { timeoutMs: 300 }), (err) => ConnectError.from(err).code === Code.DeadlineExceeded);
    assert.equal(p.rpcs, 1);
    assert.ok(performance.now() - start < 2000, "not the whole 5 s");
  } finally {
    await p.close();
  }
});

import { createClient, ConnectError, Code } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport } from "@connectrpc/connect-node";
import {
  ContactService,
  IdentityService,
  LeadService,
  clientCredentials,
  errorDetails,
  pages,
} from "@svat/partnerapi-client";

const baseUrl = process.env.BASE_URL ?? "http://localhost:8080";
const auth = clientCredentials({
  baseUrl,
  clientId: process.env.CLIENT_ID!,
  clientSecret: process.env.CLIENT_SECRET!, // server-side only
  // scope: "contacts:read contacts:write", // optional: default every scope of the client
});
// Connect over HTTP/1.1, or gRPC, always HTTP/2 (cleartext h2c on
// http://, TLS on https://): the same clients work on both.
const transport =
  process.env.TRANSPORT === "grpc"
    ? createGrpcTransport({ baseUrl, interceptors: [auth] })
    : createConnectTransport({ baseUrl, httpVersion: "1.1", interceptors: [auth] });

const me = await createClient(IdentityService, transport).getMe({});
console.log("workspace", me.workspace?.name, me.scopes.join(" "));

// The RPC takes the request message: {lead: {...}}, where REST takes the
// lead itself. An inline contact with a known email is that contact.
const { lead } = await createClient(LeadService, transport).createLead({
  lead: { contact: { email: "grace@example.com", firstName: "Grace" }, source: "web_form" },
});
console.log("lead", lead?.id, lead?.contactId);

// Every contact, 50 a page: pages follows pagination.nextCursor.
const contacts = createClient(ContactService, transport);
let count = 0;
for await (const c of pages(contacts.listContacts, { limit: 50, sort: "createdAt" })) {
  count++;
  if (c.email === "grace@example.com") console.log("contact", c.id, c.firstName);
}
console.log("contacts", count);

try {
  await contacts.createContact({ contact: { email: "not-an-email" } });
} catch (err) {
  const ce = ConnectError.from(err);
  if (ce.code !== Code.InvalidArgument) throw err;
  const { reason, fieldViolations } = errorDetails(ce); // ErrorInfo and BadRequest
  for (const v of fieldViolations) console.log(reason, v.field, v.reason); // validation_failed email invalid_format
}

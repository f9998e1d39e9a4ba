// The example of README.md and docs/api.md: type-checked by `npm run
// build` (tsconfig.examples.json), while test/client.test.js makes the same
// calls against a real server over Connect and gRPC.
import { createClient, ConnectError, Code } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport } from "@connectrpc/connect-node";

import { ContactService, IdentityService, LeadService, clientCredentials, errorDetails } from "../src/index.js";

export async function quickstart(baseUrl: string, clientId: string, clientSecret: string, grpc = false): Promise<void> {
  // The secret stays on this trusted backend; the interceptor gets, caches
  // and renews the token.
  const interceptors = [clientCredentials({ baseUrl, clientId, clientSecret })];
  const transport = grpc
    ? createGrpcTransport({ baseUrl, interceptors })
    : createConnectTransport({ baseUrl, httpVersion: "1.1", interceptors });

  const me = await createClient(IdentityService, transport).getMe({});
  console.log(me.workspace?.name, me.scopes.join(" "));

  const contacts = createClient(ContactService, transport);
  const page = await contacts.listContacts({ limit: 10 });
  for (const c of page.contacts) {
    console.log(c.id, c.email);
  }

  // The RPC takes the request message: {lead: {...}}, where REST takes the
  // lead itself.
  const lead = await createClient(LeadService, transport).createLead({
    lead: { contact: { email: "grace@example.com" }, source: "web_form" },
  });
  console.log(lead.lead?.id, lead.lead?.contactId);

  try {
    await contacts.createContact({ contact: { email: "not-an-email" } });
  } catch (err) {
    const ce = ConnectError.from(err);
    if (ce.code !== Code.InvalidArgument) {
      throw err;
    }
    // google.rpc.ErrorInfo and google.rpc.BadRequest.
    const { reason, info, fieldViolations } = errorDetails(ce);
    console.log(reason, info?.domain); // validation_failed partner-api
    for (const v of fieldViolations) {
      console.log(v.field, v.reason, v.description); // email invalid_format …
    }
  }
}

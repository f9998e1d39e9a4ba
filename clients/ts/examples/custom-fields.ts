import { createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { LeadService, clientCredentials, customFields } from "@svat/partnerapi-client";

const baseUrl = process.env.BASE_URL ?? "http://localhost:8080";
const auth = clientCredentials({ baseUrl, clientId: process.env.CLIENT_ID!, clientSecret: process.env.CLIENT_SECRET! });
const transport = createConnectTransport({ baseUrl, httpVersion: "1.1", interceptors: [auth] });

// The workspace's lead fields (GET /api/v1/custom-fields?object=lead):
// budget (number), interest (select: crm, erp), topics (multiselect).
type LeadFields = { budget: number; interest: "crm" | "erp"; topics: ("price" | "demo" | "trial")[] };

const leads = createClient(LeadService, transport);
const { lead } = await leads.createLead({
  lead: {
    contact: { email: "ines@example.com" },
    customFields: customFields.toValues<LeadFields>({ budget: 25000, interest: "crm", topics: ["demo", "price"] }),
  },
});
const values = customFields.fromValues<LeadFields>(lead?.customFields);
console.log("lead", lead?.id, values.budget, values.interest, values.topics); // 25000 crm [ 'price', 'demo' ]

// Clear one value: null, under the mask path custom_fields.<key>.
const updated = await leads.updateLead({
  id: lead!.id,
  lead: { customFields: customFields.toValues<LeadFields>({ interest: null }) },
  updateMask: { paths: ["custom_fields.interest"] },
});
console.log("values", customFields.fromValues<LeadFields>(updated.lead?.customFields)); // { budget: 25000, topics: [ 'price', 'demo' ] }

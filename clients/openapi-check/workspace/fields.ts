// The program a partner writes against its workspace's own OpenAPI
// document (GET /openapi.json with a bearer token), where the lead
// fields budget (number, required), interest (select: crm, erp) and
// topics (multiselect: price, demo, trial) are typed: send a lead with
// them, read it back, filter the list on them. It must compile under
// `tsc --strict` against openapi-typescript's types of that document,
// and the deliberate errors below must be errors: each
// `@ts-expect-error` fails the compile if its line compiles, as it does
// against the public document, where customFields is an object of any
// JSON values (test/workspace.test.js compiles both).
import createClient from "openapi-fetch";
import type { components, paths } from "./gen/openapi.js";

export type Lead = components["schemas"]["partner.lead.v1.Lead"];
export type LeadFields = NonNullable<Lead["customFields"]>;
export type LeadInput = components["schemas"]["partner.lead.v1.LeadInput"];
export type Client = ReturnType<typeof createClient<paths>>;

export function client(baseUrl: string, accessToken: string): Client {
  return createClient<paths>({ baseUrl, headers: { Authorization: `Bearer ${accessToken}` } });
}

// sendLead creates a lead with an inline contact and typed values, and
// returns them as the server answered.
export async function sendLead(api: Client, email: string, budget: number): Promise<LeadFields> {
  const { data, error } = await api.POST("/api/v1/leads", {
    body: { contact: { email }, source: "web_form", customFields: { budget, interest: "crm", topics: ["demo", "price"] } },
  });
  if (error) throw new Error(`create lead: ${error.code}: ${error.detail}`);
  const fields: LeadFields = data.customFields ?? {};
  const answered: number | undefined = fields.budget;
  const interest: "crm" | "erp" | undefined = fields.interest;
  const topics: ("price" | "demo" | "trial")[] | undefined = fields.topics;
  if (answered !== budget || interest !== "crm" || topics?.length !== 2) throw new Error(`create lead: ${JSON.stringify(data)}`);
  return fields;
}

// readLead reads a lead back and returns its values.
export async function readLead(api: Client, id: string): Promise<LeadFields> {
  const { data, error } = await api.GET("/api/v1/leads/{id}", { params: { path: { id } } });
  if (error) throw new Error(`get lead: ${error.code}: ${error.detail}`);
  return data.customFields ?? {};
}

// findLeads lists the leads interested in crm with a budget of at least
// min, through the typed filter parameters.
export async function findLeads(api: Client, min: number): Promise<{ id: string; budget: number | undefined }[]> {
  const { data, error } = await api.GET("/api/v1/leads", {
    params: { query: { "customFields.interest": "crm", "customFields.budget.gte": min, limit: 100 } },
  });
  if (error) throw new Error(`list leads: ${error.code}: ${error.detail}`);
  return data.leads.map((l) => ({ id: l.id, budget: l.customFields?.budget }));
}

// clearInterest clears one value with a merge patch; null is "clear".
export async function clearInterest(api: Client, id: string): Promise<LeadFields> {
  const { data, error } = await api.PATCH("/api/v1/leads/{id}", {
    params: { path: { id } },
    body: { customFields: { interest: null } },
  });
  if (error) throw new Error(`update lead: ${error.code}: ${error.detail}`);
  return data.customFields ?? {};
}

// typeErrors is never called: each statement is a mistake the
// workspace's types must refuse. (openapi-fetch infers a call's options,
// so TypeScript's excess-member check does not reach a body literal
// there: a body typed as the input schema, as here, gets it.)
export function typeErrors(api: Client): LeadInput[] {
  // @ts-expect-error budget is a number field: a string is refused.
  const wrongType: LeadInput = { contactId: "con_x", customFields: { budget: "25000" } };
  // @ts-expect-error interest is a select of crm and erp.
  const notAnOption: LeadInput = { contactId: "con_x", customFields: { budget: 1, interest: "other" } };
  // @ts-expect-error colour is not a field of this workspace.
  const unknownKey: LeadInput = { contactId: "con_x", customFields: { budget: 1, colour: "red" } };
  // @ts-expect-error budget is required on a create.
  const missing: LeadInput = { contactId: "con_x", customFields: { interest: "crm" } };
  // @ts-expect-error topics holds option values.
  const notOptions: LeadInput = { contactId: "con_x", customFields: { budget: 1, topics: ["gold"] } };
  // @ts-expect-error a filter on budget takes a number.
  void api.GET("/api/v1/leads", { params: { query: { "customFields.budget": "lots" } } });
  return [wrongType, notAnOption, unknownKey, missing, notOptions];
}

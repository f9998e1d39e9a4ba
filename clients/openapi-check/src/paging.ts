// The program a TypeScript team writes against gen/openapi/openapi.json
// with openapi-typescript and openapi-fetch: get a token, create records,
// and page through a list the natural way. It must compile under
// `tsc --strict` (the test compiles it against the types generated from
// the document) and, run against a real server, see every record.
import createClient from "openapi-fetch";
import type { components, paths } from "./gen/openapi.js";

export type Contact = components["schemas"]["partner.contact.v1.Contact"];
export type Lead = components["schemas"]["partner.lead.v1.Lead"];
export type Event = components["schemas"]["partner.event.v1.Event"];
export type Client = ReturnType<typeof createClient<paths>>;

// token gets an access token with the client credentials in a JSON body.
export async function token(baseUrl: string, clientId: string, clientSecret: string): Promise<string> {
  const api = createClient<paths>({ baseUrl });
  const { data, error } = await api.POST("/api/oauth/token", {
    body: { grant_type: "client_credentials", client_id: clientId, client_secret: clientSecret },
  });
  if (error) throw new Error(`token: ${error.error}: ${error.error_description ?? ""}`);
  const expiresIn: number = data.expires_in;
  if (data.token_type !== "Bearer" || expiresIn <= 0) throw new Error(`token: ${JSON.stringify(data)}`);
  return data.access_token;
}

export function client(baseUrl: string, accessToken: string): Client {
  return createClient<paths>({ baseUrl, headers: { Authorization: `Bearer ${accessToken}` } });
}

// createContact creates a contact and returns it as the server answered.
export async function createContact(api: Client, email: string, firstName: string): Promise<Contact> {
  const { data, error } = await api.POST("/api/v1/contacts", { body: { email, firstName } });
  if (error) throw new Error(`create contact: ${error.code}: ${error.detail}`);
  const id: string = data.id;
  const createdAt: string = data.createdAt;
  if (!id.startsWith("con_") || createdAt === "") throw new Error(`create contact: ${JSON.stringify(data)}`);
  return data;
}

// allContacts pages through every contact, limit at a time: the loop of
// the docs, with nextCursor absent (undefined) on the last page.
export async function allContacts(api: Client, limit: number): Promise<{ contacts: Contact[]; pages: number }> {
  const contacts: Contact[] = [];
  let pages = 0;
  let cursor: string | undefined;
  do {
    const { data, error } = await api.GET("/api/v1/contacts", { params: { query: { cursor, limit } } });
    if (error) throw new Error(`list contacts: ${error.code}: ${error.detail}`);
    contacts.push(...data.contacts);
    pages++;
    cursor = data.pagination.nextCursor;
  } while (cursor);
  return { contacts, pages };
}

// allEvents reads the events feed to its present end, limit at a time,
// with the same loop: the events and the pagination are in every answer,
// nextCursor is absent on the last page, where syncCursor is.
export async function allEvents(api: Client, limit: number): Promise<{ events: Event[]; pages: number; syncCursor: string }> {
  const events: Event[] = [];
  let pages = 0;
  let cursor: string | undefined;
  let syncCursor = "";
  do {
    const { data, error } = await api.GET("/api/v1/events", { params: { query: { cursor, limit } } });
    if (error) throw new Error(`list events: ${error.code}: ${error.detail}`);
    for (const e of data.events) {
      const id: string = e.id;
      const type: string = e.type;
      if (!id.startsWith("evt_") || type === "" || e.cursor === "" || e.createdAt === "") throw new Error(`event: ${JSON.stringify(e)}`);
      events.push(e);
    }
    pages++;
    cursor = data.pagination.nextCursor;
    syncCursor = data.pagination.syncCursor ?? syncCursor;
  } while (cursor);
  return { events, pages, syncCursor };
}

// LeadStatus is the status a lead always carries in an answer.
export type LeadStatus = "new" | "contacted" | "qualified" | "unqualified" | "converted";

// createLead creates a lead about a contact, then moves its status with a
// merge patch; both answers carry the status as one of its values.
export async function createLead(api: Client, contactId: string): Promise<LeadStatus[]> {
  const created = await api.POST("/api/v1/leads", { body: { contactId, source: "web_form" } });
  if (created.error) throw new Error(`create lead: ${created.error.code}: ${created.error.detail}`);
  const first: LeadStatus = created.data.status;
  const title: string = created.data.title;
  const updated = await api.PATCH("/api/v1/leads/{id}", {
    params: { path: { id: created.data.id } },
    body: { status: "contacted", campaign: null },
  });
  if (updated.error) throw new Error(`update lead: ${updated.error.code}: ${updated.error.detail}`);
  const second: LeadStatus = updated.data.status;
  if (title === "") throw new Error("a lead without a title");
  return [first, second];
}

import { createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { EventService, WebhookService, clientCredentials, pages } from "@svat/partnerapi-client";

const baseUrl = process.env.BASE_URL ?? "http://localhost:8080";
const auth = clientCredentials({ baseUrl, clientId: process.env.CLIENT_ID!, clientSecret: process.env.CLIENT_SECRET! });
const transport = createConnectTransport({ baseUrl, httpVersion: "1.1", interceptors: [auth] });

// The contact events after the cursor stored last time ("" : from the
// oldest kept), oldest first; keep the last one's cursor for next time.
const events = createClient(EventService, transport);
let cursor = process.env.EVENTS_CURSOR ?? "";
for await (const e of pages(events.listEvents, { cursor, types: "contact.created,contact.updated", limit: 100 })) {
  console.log(e.type, e.id, JSON.stringify(e.data?.object));
  cursor = e.cursor;
}
console.log("cursor", cursor);

// Or have them delivered: an endpoint's secret is answered by create
// (and rotateWebhookEndpointSecret) only; verifyWebhook needs it.
const webhooks = createClient(WebhookService, transport);
const { endpoint } = await webhooks.createWebhookEndpoint({
  endpoint: { url: "https://example.com/webhooks", eventTypes: ["contact.created", "contact.updated"] },
});
console.log("endpoint", endpoint?.id, endpoint?.secret?.slice(0, 6));
const { webhookEndpoints } = await webhooks.listWebhookEndpoints({});
console.log("endpoints", webhookEndpoints.length);

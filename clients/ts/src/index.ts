// The TypeScript client of the Partner Workspace API: the generated
// Connect services (use them with createClient and a transport from
// @connectrpc/connect-node: Connect or gRPC), the clientCredentials
// interceptor (tokens, and retries of 429 and 503), pages (every item of
// a list RPC), a decoder for error details, and customFields (custom
// field values to and from google.protobuf.Value).
//
// The admin service is not part of this package.

export { TokenService } from "./gen/partner/token/v1/token_pb.js";
export { IdentityService } from "./gen/partner/identity/v1/identity_pb.js";
export { ContactService } from "./gen/partner/contact/v1/contact_pb.js";
export { LeadService } from "./gen/partner/lead/v1/lead_pb.js";
export { EventService } from "./gen/partner/event/v1/event_pb.js";
export { WebhookService } from "./gen/partner/webhook/v1/webhook_pb.js";
export { CustomFieldService } from "./gen/partner/customfield/v1/customfield_pb.js";

// Messages, one namespace per package (their names overlap: Pagination).
export * as tokenv1 from "./gen/partner/token/v1/token_pb.js";
export * as identityv1 from "./gen/partner/identity/v1/identity_pb.js";
export * as contactv1 from "./gen/partner/contact/v1/contact_pb.js";
export * as leadv1 from "./gen/partner/lead/v1/lead_pb.js";
export * as eventv1 from "./gen/partner/event/v1/event_pb.js";
export * as webhookv1 from "./gen/partner/webhook/v1/webhook_pb.js";
export * as customfieldv1 from "./gen/partner/customfield/v1/customfield_pb.js";
export * as errdetails from "./gen/google/rpc/error_details_pb.js";

export { clientCredentials, type ClientCredentialsOptions } from "./client-credentials.js";
export { errorDetails, type ApiErrorDetails } from "./errors.js";
export { pages, type ListMethod, type PageItem } from "./pages.js";
export { verifyWebhook, WebhookVerificationError, type WebhookEvent, type WebhookHeaders, type VerifyWebhookOptions, type WebhookVerificationCode } from "./webhook.js";
export {
  customFields,
  type CustomFieldValue,
  type CustomFieldValues,
  type CustomFieldInput,
  type CustomFieldValueMap,
} from "./custom-fields.js";

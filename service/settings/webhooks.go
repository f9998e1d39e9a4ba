package settings

import "context"

// WebhookEndpoint is one webhook endpoint of an API client, as the page
// lists it.
type WebhookEndpoint struct {
	// ID names the endpoint in the "Disable" form.
	ID string
	// URL is where events are delivered.
	URL string
	// Status is "enabled" or "disabled", as the source says.
	Status string
	// Disabled is true once the endpoint was disabled; its "Disable"
	// button is not shown then.
	Disabled bool
}

// Webhooks is the page's source of webhook endpoints, per API client.
// The page shows a "Webhook endpoints" section for each client only when
// the server has one (Config.Webhooks); the webhooks service implements
// it with the same service code as its RPCs, audited with the signed-in
// member as the actor. The ids are opaque ids ("wks_…", "mem_…",
// "cli_…").
type Webhooks interface {
	// ListEndpoints lists the client's endpoints.
	ListEndpoints(ctx context.Context, workspaceID, memberID, clientID string) ([]WebhookEndpoint, error)
	// DisableEndpoint disables one endpoint of the client.
	DisableEndpoint(ctx context.Context, workspaceID, memberID, clientID, endpointID string) error
}

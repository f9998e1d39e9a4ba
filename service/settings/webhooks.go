package settings

import "context"

// WebhookEndpoint is one webhook endpoint of an API client, as the page
// lists it.
type WebhookEndpoint struct {
	// ID names the endpoint in the "Disable" and "Enable" forms.
	ID string
	// URL is where events are delivered.
	URL string
	// Status is "enabled" or "disabled", with the disabled reason in
	// parentheses ("disabled (failing)"), as the source says.
	Status string
	// Disabled is true once the endpoint was disabled; its "Disable"
	// button is not shown then.
	Disabled bool
	// CanEnable: disabled for a reason a member may undo (an
	// administrator's, the engine's: admin.CanEnableWebhook); its row
	// shows "Enable".
	CanEnable bool
	// Health is how its deliveries fare; nil: the source has none.
	Health *EndpointHealth
}

// EndpointHealth is an endpoint's health as its row shows it: texts
// ready for the page, and the 24-hour chart.
type EndpointHealth struct {
	// LastSuccess and FailingSince are times as the page writes them
	// ("2026-05-01 14:03 UTC"), with their RFC 3339 form for <time>;
	// empty: none (never succeeded; not failing).
	LastSuccess, LastSuccessISO   string
	FailingSince, FailingSinceISO string
	// Pending is the count of pending deliveries ("1,204", or "more than
	// 100,000").
	Pending string
	// Chart is the last 24 hours of attempts.
	Chart Chart
}

// Webhooks is the page's source of webhook endpoints, per API client.
// The page shows a "Webhook endpoints" section for each client only when
// the server has one (Config.Webhooks); the webhooks service implements
// it with the same service code as its RPCs, audited with the signed-in
// member as the actor. The ids are opaque ids ("wks_…", "mem_…",
// "cli_…").
type Webhooks interface {
	// ListEndpoints lists the client's endpoints, with their health.
	ListEndpoints(ctx context.Context, workspaceID, memberID, clientID string) ([]WebhookEndpoint, error)
	// DisableEndpoint disables one endpoint of the client.
	DisableEndpoint(ctx context.Context, workspaceID, memberID, clientID, endpointID string) error
	// EnableEndpoint enables again one endpoint of the client that an
	// administrator or the delivery engine disabled.
	EnableEndpoint(ctx context.Context, workspaceID, memberID, clientID, endpointID string) error
}

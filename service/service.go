// Package service names the public proto services. Their handlers live in the
// subpackages, one per service; the server mounts exactly these on the
// public listener, and the OpenAPI document (cmd/openapigen) describes
// exactly these, so the two cannot disagree.
package service

import (
	"fmt"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/svat/partnerapi/gen/partner/contact/v1/contactv1connect"
	"github.com/svat/partnerapi/gen/partner/customfield/v1/customfieldv1connect"
	"github.com/svat/partnerapi/gen/partner/event/v1/eventv1connect"
	"github.com/svat/partnerapi/gen/partner/identity/v1/identityv1connect"
	"github.com/svat/partnerapi/gen/partner/lead/v1/leadv1connect"
	"github.com/svat/partnerapi/gen/partner/token/v1/tokenv1connect"
	"github.com/svat/partnerapi/gen/partner/webhook/v1/webhookv1connect"
)

// PublicServices are the services of the public listener, found by their
// generated names so that a file gaining a service cannot shift them. The
// admin service is not among them: it runs on the admin listener only.
var PublicServices = []protoreflect.ServiceDescriptor{
	serviceDescriptor(tokenv1connect.TokenServiceName),
	serviceDescriptor(identityv1connect.IdentityServiceName),
	serviceDescriptor(contactv1connect.ContactServiceName),
	serviceDescriptor(leadv1connect.LeadServiceName),
	serviceDescriptor(eventv1connect.EventServiceName),
	serviceDescriptor(webhookv1connect.WebhookServiceName),
	serviceDescriptor(customfieldv1connect.CustomFieldServiceName),
}

// serviceDescriptor looks a generated service up in the registry its
// package registered it in.
func serviceDescriptor(name string) protoreflect.ServiceDescriptor {
	d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(name))
	if err != nil {
		panic(fmt.Sprintf("find service %s: %v", name, err))
	}
	return d.(protoreflect.ServiceDescriptor)
}

// Command example calls the Partner Workspace API with this module only:
// GetMe over Connect, then a contact created and every contact listed
// over gRPC, on HTTP/2 without TLS (h2c), as against `make run`. It reads
// BASE_URL, CLIENT_ID and CLIENT_SECRET, and prints one JSON line per
// answer.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log"
	"net/http"
	"os"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	partnerapi "github.com/svat/partnerapi/clients/go"
	contactv1 "github.com/svat/partnerapi/clients/go/gen/partner/contact/v1"
	"github.com/svat/partnerapi/clients/go/gen/partner/contact/v1/contactv1connect"
	identityv1 "github.com/svat/partnerapi/clients/go/gen/partner/identity/v1"
	"github.com/svat/partnerapi/clients/go/gen/partner/identity/v1/identityv1connect"
)

func main() {
	ctx := context.Background()
	base := os.Getenv("BASE_URL")
	auth := connect.WithInterceptors(partnerapi.ClientCredentials(partnerapi.Options{
		BaseURL: base, ClientID: os.Getenv("CLIENT_ID"), ClientSecret: os.Getenv("CLIENT_SECRET"),
	}))

	// Connect over HTTP/1.1 or HTTP/2: any http.Client.
	identity := identityv1connect.NewIdentityServiceClient(http.DefaultClient, base, auth)
	me, err := identity.GetMe(ctx, connect.NewRequest(&identityv1.GetMeRequest{}))
	if err != nil {
		log.Fatalf("GetMe: %v", err)
	}
	fmt.Println(line(me.Msg))

	// gRPC needs HTTP/2. Against an https URL any http.Client does; against
	// http:// (make run), allow HTTP/2 without TLS (h2c).
	h2c := &http.Transport{Protocols: new(http.Protocols)}
	h2c.Protocols.SetUnencryptedHTTP2(true)
	contacts := contactv1connect.NewContactServiceClient(&http.Client{Transport: h2c}, base, auth, connect.WithGRPC())

	key := make([]byte, 8)
	_, _ = rand.Read(key)
	create := connect.NewRequest(&contactv1.CreateContactRequest{Contact: &contactv1.Contact{
		Email: ptr("go-" + hex.EncodeToString(key) + "@example.com"), FirstName: ptr("Gopher"),
	}})
	create.Header().Set("Idempotency-Key", hex.EncodeToString(key)) // a retried create is stored once
	created, err := contacts.CreateContact(ctx, create)
	if err != nil {
		log.Fatalf("CreateContact: %v", err)
	}
	fmt.Println(line(created.Msg))

	n := 0
	for c, err := range partnerapi.Pages[*contactv1.Contact](ctx, contacts.ListContacts, &contactv1.ListContactsRequest{Limit: ptr[int32](2)}) {
		if err != nil {
			log.Fatalf("ListContacts: %v", err)
		}
		_ = c
		n++
	}
	fmt.Printf("{\"contacts\": %d}\n", n)
}

func ptr[T any](v T) *T { return &v }

// line is m as one line of JSON.
func line(m proto.Message) string {
	b, err := protojson.Marshal(m)
	if err != nil {
		log.Fatal(err)
	}
	return string(b)
}

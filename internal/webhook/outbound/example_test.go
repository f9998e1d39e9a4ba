package outbound_test

import (
	"context"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/svat/partnerapi/internal/webhook/outbound"
	"github.com/svat/partnerapi/internal/webhook/signature"
)

// One delivery attempt as the delivery engine makes it: sign the exact
// body, post it, and read the outcome.
func ExampleClient_Post() {
	secret := signature.MustParseSecret(signature.NewSecret())
	receiver := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if err := signature.Verify([]signature.Secret{secret}, signature.HeadersFrom(r.Header), body, time.Now(), 0); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer receiver.Close()

	// Production: outbound.New(outbound.Config{Timeout: …, AllowedNetworks: …}).
	// The test receiver listens on 127.0.0.1 with its own certificate.
	allowed, _ := outbound.ParseNetworks("127.0.0.0/8")
	roots := x509.NewCertPool()
	roots.AddCert(receiver.Certificate())
	client := outbound.New(outbound.Config{AllowedNetworks: allowed, RootCAs: roots})

	body := []byte(`{"id":"evt_1","type":"webhook.test","createdAt":"2026-11-26T03:00:00Z","cursor":"c","data":{"object":{}}}`)
	h := http.Header{}
	signature.SignedHeaders([]signature.Secret{secret}, "evt_1", time.Now(), body).Set(h)
	res := client.Post(context.Background(), receiver.URL+"/webhooks", h, body)
	fmt.Println(res.ResponseStatus, res.Succeeded(), res.Error == "")
	// Output: 204 true true
}

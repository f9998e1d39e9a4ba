package webhook_test

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/svat/partnerapi/db/dbtest"
	"github.com/svat/partnerapi/internal/records/opaqueid"
	"github.com/svat/partnerapi/internal/security/sealed"
	"github.com/svat/partnerapi/internal/webhook/signature"
	"github.com/svat/partnerapi/service/servertest"
	"github.com/svat/partnerapi/service/webhook/secrets"
)

// atRest is what the database holds of an endpoint's secrets.
type atRest struct {
	secret, previous             string // the text columns
	sealedSecret, sealedPrevious []byte
}

func readAtRest(t *testing.T, h *servertest.Harness, id string) atRest {
	t.Helper()
	var r atRest
	var prev *string
	if err := dbtest.Raw(t, h.DB).QueryRow(context.Background(),
		`SELECT secret, previous_secret, secret_sealed, previous_secret_sealed FROM webhook_endpoints WHERE id = $1`,
		uid(t, opaqueid.Webhook, id)).Scan(&r.secret, &prev, &r.sealedSecret, &r.sealedPrevious); err != nil {
		t.Fatal(err)
	}
	if prev != nil {
		r.previous = *prev
	}
	return r
}

// open opens a sealed secret of the endpoint id of workspace ws with keys.
func open(t *testing.T, keys *sealed.Keyring, ws, id string, v []byte) string {
	t.Helper()
	s, err := secrets.Box{Keys: keys}.Open(uid(t, opaqueid.Workspace, ws), uid(t, opaqueid.Webhook, id), v, nil)
	if err != nil {
		t.Fatalf("open the sealed secret: %v", err)
	}
	return s
}

// storedAnswers are the stored idempotent answers of the workspace.
func storedAnswers(t *testing.T, h *servertest.Harness, ws string) [][]byte {
	t.Helper()
	rows, err := dbtest.Raw(t, h.DB).Query(context.Background(),
		`SELECT response FROM idempotency_keys WHERE workspace_id = $1`, uid(t, opaqueid.Workspace, ws))
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out [][]byte
	for rows.Next() {
		var b []byte
		if err := rows.Scan(&b); err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

// verifies reports whether a delivery verifies under secret alone.
func verifies(d delivered, secret string) bool {
	return signature.Verify([]signature.Secret{signature.MustParseSecret(secret)}, d.headers, d.body, time.Now(), time.Minute) == nil
}

// TestSecretsAreSealedAtRest (issue 34, finding 9): a database migrated
// with no endpoint keeps no plaintext copy; the secret is sealed under the
// server's key, bound to its endpoint, and no stored idempotent answer
// holds it. A replay answers the secret while it is the endpoint's, and
// 409 idempotency_secret_retired once it was rotated away.
func TestSecretsAreSealedAtRest(t *testing.T) {
	t.Parallel()
	rcv := newReceiver(t)
	h := servertest.New(t, servertest.Options{Config: rcv.config})
	c := newClient(h, "Hooks Sealed", allScopes...)
	body := `{"url":"` + rcv.srv.URL + `/in","eventTypes":["lead.created"]}`
	status, _, b := h.Do(http.MethodPost, path, c.token, jsonCT, body, "Idempotency-Key", "create-1")
	if status != http.StatusCreated {
		t.Fatalf("create: %d %s", status, b)
	}
	id, first := servertest.ID(t, b), servertest.Decode(t, b)["secret"].(string)

	r := readAtRest(t, h, id)
	if r.secret != "" || r.previous != "" {
		t.Errorf("the text columns hold %q and %q; want nothing in the clear", r.secret, r.previous)
	}
	if bytes.Contains(r.sealedSecret, []byte(first)) || open(t, servertest.SecretKeys, c.ws, id, r.sealedSecret) != first {
		t.Fatal("the sealed column does not open to the answered secret")
	}
	// Bound to its row: another endpoint's additional data does not open it.
	other, _ := create(t, h, c.token, `{"url":"`+hookURL+`","eventTypes":["lead.created"]}`)
	if _, err := (secrets.Box{Keys: servertest.SecretKeys}).Open(uid(t, opaqueid.Workspace, c.ws), uid(t, opaqueid.Webhook, other), r.sealedSecret, nil); err == nil {
		t.Error("a sealed secret opened as another endpoint's")
	}
	for _, a := range storedAnswers(t, h, c.ws) {
		if bytes.Contains(a, []byte("whsec_")) || bytes.Contains(a, []byte(first)) {
			t.Fatalf("a stored idempotent answer holds a secret: %q", a)
		}
	}

	// The test delivery signs with the sealed secret.
	mustStatus(t, h, http.MethodPost, path+"/"+id+"/test", c.token, `{}`, http.StatusOK)
	if !verifies(rcv.last(t), first) {
		t.Fatal("the test delivery does not verify under the secret")
	}

	// So does a delivery of an event (the engine's claim).
	rcv.mu.Lock()
	before := len(rcv.got)
	rcv.mu.Unlock()
	if status, _, b := h.Do(http.MethodPost, "/api/v1/leads", c.token, jsonCT, `{"title":"Sealed lead","contact":{"email":"sealed@lead.example"}}`); status != http.StatusCreated {
		t.Fatalf("create a lead: %d %s", status, b)
	}
	// generous: a loaded CI machine
	if !dbtest.Until(30*time.Second, func() bool {
		rcv.mu.Lock()
		defer rcv.mu.Unlock()
		return len(rcv.got) > before
	}) {
		t.Fatal("the lead.created delivery did not arrive")
	}
	if d := rcv.last(t); !bytes.Contains(d.body, []byte(`"lead.created"`)) || !verifies(d, first) {
		t.Fatalf("the event delivery does not verify under the secret: %s", d.body)
	}

	// A replay before any rotation answers the same secret.
	status, hdr, b := h.Do(http.MethodPost, path, c.token, jsonCT, body, "Idempotency-Key", "create-1")
	if status != http.StatusCreated || hdr.Get("Idempotent-Replayed") != "true" || servertest.Decode(t, b)["secret"] != first {
		t.Fatalf("replay: %d %v %s", status, hdr, b)
	}

	// A rotation under a key: its replay answers the new secret while it
	// is current; the create's replay is refused (the secret is retired).
	rotate := path + "/" + id + "/rotate-secret"
	status, _, b = h.Do(http.MethodPost, rotate, c.token, jsonCT, `{"expireCurrentInSeconds":3600}`, "Idempotency-Key", "rotate-1")
	if status != http.StatusOK {
		t.Fatalf("rotate: %d %s", status, b)
	}
	fresh := servertest.Decode(t, b)["secret"].(string)
	r = readAtRest(t, h, id)
	if r.secret != "" || r.previous != "" || open(t, servertest.SecretKeys, c.ws, id, r.sealedSecret) != fresh ||
		open(t, servertest.SecretKeys, c.ws, id, r.sealedPrevious) != first {
		t.Fatalf("after the rotation the columns hold %q, %q; sealed current and previous must be the new and the old secret", r.secret, r.previous)
	}
	mustStatus(t, h, http.MethodPost, path+"/"+id+"/test", c.token, `{}`, http.StatusOK)
	if d := rcv.last(t); !verifies(d, first) || !verifies(d, fresh) {
		t.Fatal("during the overlap a delivery does not carry both signatures")
	}
	status, _, b = h.Do(http.MethodPost, rotate, c.token, jsonCT, `{"expireCurrentInSeconds":3600}`, "Idempotency-Key", "rotate-1")
	if status != http.StatusOK || servertest.Decode(t, b)["secret"] != fresh {
		t.Fatalf("rotate replay: %d %s", status, b)
	}
	status, _, b = h.Do(http.MethodPost, path, c.token, jsonCT, body, "Idempotency-Key", "create-1")
	wantProblem(t, "create replay after a rotation", status, b, http.StatusConflict, "idempotency_secret_retired", "")
	if p := servertest.Decode(t, b); p["existingId"] != id {
		t.Errorf("the refusal names %v, want the endpoint %s", p["existingId"], id)
	}
	if strings.Contains(string(b), first) || strings.Contains(string(b), fresh) {
		t.Fatalf("the refusal shows a secret: %s", b)
	}
	mustStatus(t, h, http.MethodPost, rotate, c.token, `{"expireCurrentInSeconds":0}`, http.StatusOK)
	status, _, b = h.Do(http.MethodPost, rotate, c.token, jsonCT, `{"expireCurrentInSeconds":3600}`, "Idempotency-Key", "rotate-1")
	wantProblem(t, "rotate replay after another rotation", status, b, http.StatusConflict, "idempotency_secret_retired", "")
	for _, a := range storedAnswers(t, h, c.ws) {
		if bytes.Contains(a, []byte("whsec_")) {
			t.Fatalf("a stored idempotent answer holds a secret: %q", a)
		}
	}
}

// TestPlaintextCopiesForThePreviousRelease: while a rolling upgrade from
// 1.1.0 may still run one of its replicas (webhook_secrets keeps
// plaintext copies), the text columns hold the secret too; a rotation as
// 1.1.0 makes it (the text columns only) is what deliveries sign with
// until the sweep seals it; `migrate --seal-webhook-secrets` (SealOnly and
// the sweep) empties every copy, and deliveries still verify. A rotated
// PARTNER_SECRET_KEY: the sweep seals everything again under the new
// first key, after which the old key can go.
func TestPlaintextCopiesForThePreviousRelease(t *testing.T) {
	t.Parallel()
	rcv := newReceiver(t)
	h := servertest.New(t, servertest.Options{Config: rcv.config})
	ctx := context.Background()
	raw := dbtest.Raw(t, h.DB)
	if _, err := raw.Exec(ctx, `UPDATE webhook_secrets SET plaintext_kept = true`); err != nil {
		t.Fatal(err)
	}
	c := newClient(h, "Hooks Compat", allScopes...)
	id, created := create(t, h, c.token, `{"url":"`+rcv.srv.URL+`/in","eventTypes":["lead.created"]}`)
	first := created["secret"].(string)
	if r := readAtRest(t, h, id); r.secret != first || open(t, servertest.SecretKeys, c.ws, id, r.sealedSecret) != first {
		t.Fatalf("with copies kept the text column holds %q; want the secret, and the sealed one too", r.secret)
	}

	// 1.1.0's rotation (its query, as it runs): the sealed column would
	// hold the retired secret; the trigger empties it.
	fresh := signature.NewSecret()
	if _, err := raw.Exec(ctx, `UPDATE webhook_endpoints SET previous_secret = secret, previous_expires_at = now() + interval '1 hour',
		secret = $2, updated_at = now() WHERE id = $1`, uid(t, opaqueid.Webhook, id), fresh); err != nil {
		t.Fatal(err)
	}
	if r := readAtRest(t, h, id); r.sealedSecret != nil || r.sealedPrevious != nil {
		t.Fatal("a rotation of the text columns left sealed secrets that are no longer the endpoint's")
	}
	deliveredUnder := func(what string, want ...string) {
		t.Helper()
		mustStatus(t, h, http.MethodPost, path+"/"+id+"/test", c.token, `{}`, http.StatusOK)
		d := rcv.last(t)
		for _, s := range want {
			if !verifies(d, s) {
				t.Fatalf("%s: the delivery does not verify under one of the secrets", what)
			}
		}
	}
	deliveredUnder("after 1.1.0's rotation", first, fresh)

	// The sweep seals them; the copies stay while kept.
	box := secrets.Box{Keys: servertest.SecretKeys}
	if n, unopened, err := secrets.Sweep(ctx, h.DB, box); err != nil || n < 1 || unopened != 0 {
		t.Fatalf("sweep: %d sealed, %d unopened, %v", n, unopened, err)
	}
	r := readAtRest(t, h, id)
	if r.secret != fresh || open(t, servertest.SecretKeys, c.ws, id, r.sealedSecret) != fresh ||
		open(t, servertest.SecretKeys, c.ws, id, r.sealedPrevious) != first {
		t.Fatal("the sweep did not seal 1.1.0's rotation")
	}

	// The operator's contract step: no copy is kept, none is left.
	if _, err := raw.Exec(ctx, `UPDATE webhook_secrets SET plaintext_kept = false`); err != nil {
		t.Fatal(err)
	}
	if _, _, err := secrets.Sweep(ctx, h.DB, box); err != nil {
		t.Fatal(err)
	}
	if r := readAtRest(t, h, id); r.secret != "" || r.previous != "" {
		t.Fatalf("copies left after sealing only: %q %q", r.secret, r.previous)
	}
	deliveredUnder("sealed only", first, fresh)
	if n, _, _ := secrets.Sweep(ctx, h.DB, box); n != 0 {
		t.Errorf("a sweep with nothing to do sealed %d", n)
	}

	// Key rotation: a new key first, the old after it.
	next := sealed.NewKey()
	both, err := sealed.Parse(next + "," + "dGVzdCBrZXkgb2YgdGhlIHBhcnRuZXJhcGkgdGVzdHM=")
	if err != nil {
		t.Fatal(err)
	}
	if n, unopened, err := secrets.Sweep(ctx, h.DB, secrets.Box{Keys: both}); err != nil || n < 1 || unopened != 0 {
		t.Fatalf("sweep under a new key: %d sealed, %d unopened, %v", n, unopened, err)
	}
	newOnly, _ := sealed.Parse(next)
	r = readAtRest(t, h, id)
	if open(t, newOnly, c.ws, id, r.sealedSecret) != fresh || open(t, newOnly, c.ws, id, r.sealedPrevious) != first {
		t.Fatal("after the sweep the new key alone does not open the secrets")
	}
}

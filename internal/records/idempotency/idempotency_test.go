package idempotency_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/svat/partnerapi/db"
	"github.com/svat/partnerapi/db/dbtest"
	"github.com/svat/partnerapi/internal/contract/apierror"
	"github.com/svat/partnerapi/internal/records/idempotency"
)

func TestMain(m *testing.M) { os.Exit(dbtest.MainLeakChecked(m)) }

var (
	workspace = uuid.MustParse("0d3c3f5e-0000-4000-8000-000000000001")
	client    = uuid.MustParse("0d3c3f5e-0000-4000-8000-000000000002")
)

const path = "/api/v1/contacts/batch"

func header(keys ...string) http.Header {
	h := http.Header{}
	for _, k := range keys {
		h.Add(idempotency.Header, k)
	}
	return h
}

func mustKey(t *testing.T, key string, req proto.Message) idempotency.Key {
	t.Helper()
	k, err := idempotency.NewKey(workspace, client, path, header(key), req)
	if err != nil {
		t.Fatalf("NewKey(%q): %v", key, err)
	}
	return k
}

// code is the API code of err, or "" when it is not an API error.
func code(err error) string {
	var e *apierror.Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// TestNewKeyRefusesWhatCannotNameOneRequest: no header is the zero Key;
// a repeated, empty, too long or non-printable key is a 400 naming the
// header; a good key binds the request.
func TestNewKeyRefusesWhatCannotNameOneRequest(t *testing.T) {
	req := wrapperspb.String("body")
	k, err := idempotency.NewKey(workspace, client, path, http.Header{}, req)
	if err != nil {
		t.Fatal(err)
	}
	if key, hash, lock, fresh := k.Args(); key != nil || hash != nil || lock != nil || fresh != nil {
		t.Errorf("no header: Args = %v %v %v %v, want all nil", key, hash, lock, fresh)
	}
	for name, h := range map[string]http.Header{
		"two lines":     header("a", "b"),
		"empty":         header(""),
		"256 bytes":     header(strings.Repeat("k", idempotency.MaxKeyLen+1)),
		"a control":     header("a\tb"),
		"not ASCII":     header("clé"),
		"DEL character": header("a\x7fb"),
	} {
		_, err := idempotency.NewKey(workspace, client, path, h, req)
		var e *apierror.Error
		if !errors.As(err, &e) || e.Code != apierror.CodeMalformedRequest || apierror.HTTPStatus(e.Code) != 400 ||
			len(e.Fields) != 1 || e.Fields[0].Field != idempotency.Header {
			t.Errorf("%s: %v, want a 400 naming %s", name, err, idempotency.Header)
		}
	}
	before := time.Now()
	k = mustKey(t, strings.Repeat("k", idempotency.MaxKeyLen), req)
	key, hash, lock, fresh := k.Args()
	if key == nil || len(*key) != idempotency.MaxKeyLen || len(hash) != 32 || lock == nil || fresh == nil {
		t.Fatalf("Args = %v %x %v %v", key, hash, lock, fresh)
	}
	if age := before.Sub(*fresh); age < idempotency.TTL-time.Second || age > idempotency.TTL+time.Second {
		t.Errorf("fresh since %v before now, want the TTL %v", age, idempotency.TTL)
	}
}

// TestKeyHashBindsTheBodyAndVary: the same key over equal messages hashes
// alike; another body or another Vary part does not; the lock id depends
// on the key, not on the body; Vary leaves the zero Key zero.
func TestKeyHashBindsTheBodyAndVary(t *testing.T) {
	hashOf := func(k idempotency.Key) []byte { _, h, _, _ := k.Args(); return h }
	lockOf := func(k idempotency.Key) int64 { _, _, l, _ := k.Args(); return *l }
	a, again := mustKey(t, "k1", wrapperspb.String("x")), mustKey(t, "k1", wrapperspb.String("x"))
	other := mustKey(t, "k1", wrapperspb.String("y"))
	if !bytes.Equal(hashOf(a), hashOf(again)) {
		t.Error("one body hashes two ways")
	}
	if bytes.Equal(hashOf(a), hashOf(other)) {
		t.Error("two bodies hash alike")
	}
	if lockOf(a) != lockOf(other) {
		t.Error("the lock id of one key depends on the body")
	}
	if lockOf(a) == lockOf(mustKey(t, "k2", wrapperspb.String("x"))) {
		t.Error("two keys share a lock id")
	}
	if v1, v2 := a.Vary("scope-a"), a.Vary("scope-b"); bytes.Equal(hashOf(v1), hashOf(v2)) || bytes.Equal(hashOf(v1), hashOf(a)) {
		t.Error("Vary does not change the hash")
	}
	if !bytes.Equal(hashOf(a.Vary("p")), hashOf(again.Vary("p"))) {
		t.Error("one Vary part hashes two ways")
	}
	if key, _, _, _ := (idempotency.Key{}).Vary("p").Args(); key != nil {
		t.Error("Vary made the zero Key a key")
	}
}

// TestInTxReplaysTheStoredAnswer: the first run stores its answer with
// its records; the same key and body replay it without running fn; the
// same key with another body is a 422 that runs nothing.
func TestInTxReplaysTheStoredAnswer(t *testing.T) {
	d := dbtest.New(t)
	ctx := context.Background()
	runs := 0
	fn := func(answer string) func(*wrapperspb.StringValue) func(db.DBTX) error {
		return func(resp *wrapperspb.StringValue) func(db.DBTX) error {
			return func(db.DBTX) error { runs++; resp.Value = answer; return nil }
		}
	}
	var first wrapperspb.StringValue
	replayed, err := idempotency.InTx(ctx, d, mustKey(t, "k", wrapperspb.String("req")), &first, fn("first answer")(&first))
	if err != nil || replayed || runs != 1 || first.Value != "first answer" {
		t.Fatalf("first: replayed %v, %v, %d runs, %q", replayed, err, runs, first.Value)
	}
	var second wrapperspb.StringValue
	replayed, err = idempotency.InTx(ctx, d, mustKey(t, "k", wrapperspb.String("req")), &second, fn("second answer")(&second))
	if err != nil || !replayed || runs != 1 || second.Value != "first answer" {
		t.Fatalf("retry: replayed %v, %v, %d runs, %q, want the first answer replayed", replayed, err, runs, second.Value)
	}
	var third wrapperspb.StringValue
	_, err = idempotency.InTx(ctx, d, mustKey(t, "k", wrapperspb.String("another req")), &third, fn("third")(&third))
	if code(err) != apierror.CodeIdempotencyMismatch || runs != 1 {
		t.Fatalf("another body: %v after %d runs, want %s and no run", err, runs, apierror.CodeIdempotencyMismatch)
	}
	// Without a key nothing is stored or replayed.
	for i := range 2 {
		var resp wrapperspb.StringValue
		if replayed, err := idempotency.InTx(ctx, d, idempotency.Key{}, &resp, fn("unkeyed")(&resp)); err != nil || replayed {
			t.Fatalf("unkeyed %d: replayed %v, %v", i, replayed, err)
		}
	}
	if runs != 3 {
		t.Errorf("%d runs, want 3", runs)
	}
}

// TestInTxFailureIsNotStored: a run that fails stores nothing, so a
// corrected retry with the same key runs.
func TestInTxFailureIsNotStored(t *testing.T) {
	d := dbtest.New(t)
	ctx := context.Background()
	k := mustKey(t, "k", wrapperspb.String("req"))
	refused := errors.New("refused")
	var resp wrapperspb.StringValue
	if _, err := idempotency.InTx(ctx, d, k, &resp, func(db.DBTX) error { resp.Value = "partial"; return refused }); !errors.Is(err, refused) {
		t.Fatalf("failing run: %v, want its error", err)
	}
	ran := false
	resp.Reset()
	replayed, err := idempotency.InTx(ctx, d, k, &resp, func(db.DBTX) error { ran = true; resp.Value = "ok"; return nil })
	if err != nil || replayed || !ran || resp.Value != "ok" {
		t.Fatalf("retry after a failure: replayed %v, ran %v, %v, %q", replayed, ran, err, resp.Value)
	}
}

// TestInTxInFlightIsA409: while a run holds its key, another request with
// the key is refused at once (409), not made to wait.
func TestInTxInFlightIsA409(t *testing.T) {
	d := dbtest.New(t)
	ctx := context.Background()
	k := mustKey(t, "k", wrapperspb.String("req"))
	inside, release := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		var resp wrapperspb.StringValue
		_, err := idempotency.InTx(ctx, d, k, &resp, func(db.DBTX) error { close(inside); <-release; return nil })
		done <- err
	}()
	<-inside
	// Bounded, so that a claim that waited for the first fails the test
	// instead of hanging it.
	bounded, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var resp wrapperspb.StringValue
	_, err := idempotency.InTx(bounded, d, k, &resp, func(db.DBTX) error { return errors.New("ran while the first was in flight") })
	close(release)
	if code(err) != apierror.CodeIdempotencyInFlight || apierror.HTTPStatus(code(err)) != 409 {
		t.Errorf("second request in flight: %v, want %s (409)", err, apierror.CodeIdempotencyInFlight)
	}
	if err := <-done; err != nil {
		t.Fatalf("first request: %v", err)
	}
}

// TestRefusalMapsOnlyKeyErrors: the database's two key refusals become
// 409 and 422; anything else is not a refusal.
func TestRefusalMapsOnlyKeyErrors(t *testing.T) {
	for err, want := range map[error]string{
		fmt.Errorf("claim: %w", db.ErrKeyInFlight): apierror.CodeIdempotencyInFlight,
		fmt.Errorf("claim: %w", db.ErrKeyReused):   apierror.CodeIdempotencyMismatch,
	} {
		if got := code(idempotency.Refusal(err)); got != want {
			t.Errorf("Refusal(%v) = %q, want %q", err, got, want)
		}
	}
	for _, err := range []error{nil, errors.New("other"), db.ErrUnavailable} {
		if r := idempotency.Refusal(err); r != nil {
			t.Errorf("Refusal(%v) = %v, want nil", err, r)
		}
	}
}

// TestSweepDeletesOnlyExpiredKeys: Sweep removes keys older than the TTL
// (and its hour of slack) and keeps younger ones, which still replay.
func TestSweepDeletesOnlyExpiredKeys(t *testing.T) {
	d := dbtest.New(t)
	ctx := context.Background()
	for _, key := range []string{"old", "young"} {
		var resp wrapperspb.StringValue
		if _, err := idempotency.InTx(ctx, d, mustKey(t, key, wrapperspb.String(key)), &resp, func(db.DBTX) error { resp.Value = key; return nil }); err != nil {
			t.Fatal(err)
		}
	}
	raw := dbtest.Raw(t, d)
	if _, err := raw.Exec(ctx, "UPDATE idempotency_keys SET created_at = now() - make_interval(hours => $1) WHERE key = 'old'",
		int((idempotency.TTL + 2*time.Hour).Hours())); err != nil {
		t.Fatal(err)
	}
	n, err := idempotency.Sweep(ctx, d)
	if err != nil || n != 1 {
		t.Fatalf("Sweep = %d, %v, want 1 key deleted", n, err)
	}
	var left []string
	rows, err := raw.Query(ctx, "SELECT key FROM idempotency_keys ORDER BY key")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			t.Fatal(err)
		}
		left = append(left, k)
	}
	if rows.Err() != nil || len(left) != 1 || left[0] != "young" {
		t.Fatalf("keys left: %v (%v), want [young]", left, rows.Err())
	}
	var resp wrapperspb.StringValue
	replayed, err := idempotency.InTx(ctx, d, mustKey(t, "young", wrapperspb.String("young")), &resp, func(db.DBTX) error { return errors.New("ran") })
	if err != nil || !replayed || resp.Value != "young" {
		t.Errorf("the young key after a sweep: replayed %v, %v, %q", replayed, err, resp.Value)
	}
}

package requestid

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestMiddleware(t *testing.T) {
	t.Parallel()
	var seen string
	h := Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { seen = FromContext(r.Context()) }))
	ids := map[string]bool{}
	for range 100 {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/", nil))
		id := w.Header().Get(Header)
		if id == "" || id != seen || ids[id] || len(id) > 64 {
			t.Fatalf("id %q (context %q) empty, repeated or inconsistent", id, seen)
		}
		ids[id] = true
	}
	for in, keep := range map[string]bool{"abc-123_X.y": true, "has space": false, "": false, string(make([]byte, 65)): false} {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.Header.Set(Header, in)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if got := w.Header().Get(Header); (got == in) != keep {
			t.Errorf("caller id %q: response id %q, keep = %v", in, got, keep)
		}
	}
}

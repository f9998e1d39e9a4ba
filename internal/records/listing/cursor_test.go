package listing

import (
	"testing"
	"time"

	"github.com/google/uuid"
)

func TestRoundTripAndBinding(t *testing.T) {
	t.Parallel()
	c := NewCursors([]byte("0123456789abcdef0123456789abcdef"))
	b := Binding{Workspace: uuid.New(), Resource: "contacts", Sort: "-createdAt", Filters: "email=a@b.co"}
	pos := Position{Key: time.Date(2026, 11, 22, 6, 0, 0, 123456000, time.UTC).UnixMicro(), ID: uuid.New()}
	s := c.Encode(b, pos)
	got, err := c.Decode(b, s)
	if err != nil || got != pos {
		t.Fatalf("Decode = %+v, %v; want %+v", got, err, pos)
	}
	for name, other := range map[string]Binding{
		"workspace": {Workspace: uuid.New(), Resource: b.Resource, Sort: b.Sort, Filters: b.Filters},
		"resource":  {Workspace: b.Workspace, Resource: "leads", Sort: b.Sort, Filters: b.Filters},
		"sort":      {Workspace: b.Workspace, Resource: b.Resource, Sort: "createdAt", Filters: b.Filters},
		"filters":   {Workspace: b.Workspace, Resource: b.Resource, Sort: b.Sort, Filters: ""},
		"key kind":  {Workspace: b.Workspace, Resource: b.Resource, Sort: b.Sort, Filters: b.Filters, Key: "xid"},
	} {
		if _, err := c.Decode(other, s); err != ErrInvalidCursor {
			t.Errorf("cursor accepted with another %s", name)
		}
	}
	if _, err := NewCursors([]byte("another key, another replica set")).Decode(b, s); err != ErrInvalidCursor {
		t.Error("cursor accepted under another key")
	}
	for i := range s {
		for _, ch := range []byte{'A', 'z', '-'} {
			if s[i] == ch {
				continue
			}
			bad := s[:i] + string(ch) + s[i+1:]
			if _, err := c.Decode(b, bad); err == nil {
				t.Fatalf("tampered cursor %q (position %d) accepted", bad, i)
			}
		}
	}
	for _, bad := range []string{"", "abc", s + "A", s[1:]} {
		if _, err := c.Decode(b, bad); err == nil {
			t.Errorf("Decode(%q) accepted", bad)
		}
	}
}

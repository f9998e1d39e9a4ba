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

// TestCursorWithoutOriginIsAsBefore: a cursor made before cursors carried
// where they were read (this one by the code of that time) still decodes,
// and a position without an origin is still made byte for byte the same,
// since partners hold such cursors.
func TestCursorWithoutOriginIsAsBefore(t *testing.T) {
	t.Parallel()
	c := NewCursors([]byte("0123456789abcdef0123456789abcdef"))
	b := Binding{Workspace: uuid.MustParse("6f1c2a7e-0d4b-4c1e-9a51-3b0d9e2f7a11"), Resource: "contacts",
		Sort: "updatedAt", Filters: "email=a%40b.co", Key: "xid"}
	const old = "AQAAAAAAAeJAC36fPFotTmGMTy2aGzxOX_MkDzFFPovVKtSsSiDgaBo"
	pos := Position{Key: 123456, ID: uuid.MustParse("0b7e9f3c-5a2d-4e61-8c4f-2d9a1b3c4e5f")}
	got, err := c.Decode(b, old)
	if err != nil || got != pos || got.Origin.Known() {
		t.Fatalf("Decode(old cursor) = %+v, %v; want %+v", got, err, pos)
	}
	if s := c.Encode(b, pos); s != old {
		t.Errorf("Encode without origin = %q; want %q", s, old)
	}
}

// TestCursorWithOrigin: a position read at a known place in the history
// round-trips with it, the place is covered by the MAC like the rest, and
// a cursor cannot shed it to pass as one from before.
func TestCursorWithOrigin(t *testing.T) {
	t.Parallel()
	c := NewCursors([]byte("0123456789abcdef0123456789abcdef"))
	b := Binding{Workspace: uuid.New(), Resource: "events", Key: "xid"}
	pos := Position{Key: 987654321, ID: uuid.New(), Origin: Origin{Timeline: 3, WAL: 0x1_2345_6789}}
	s := c.Encode(b, pos)
	got, err := c.Decode(b, s)
	if err != nil || got != pos {
		t.Fatalf("Decode = %+v, %v; want %+v", got, err, pos)
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
	// Cut to the length of a cursor without an origin, it is refused: its
	// version says it has one, and its MAC covers it.
	plain := c.Encode(b, Position{Key: pos.Key, ID: pos.ID})
	if len(plain) >= len(s) {
		t.Fatalf("a cursor without origin (%d chars) is not shorter than one with (%d)", len(plain), len(s))
	}
	if _, err := c.Decode(b, s[:len(plain)]); err == nil {
		t.Error("a cursor cut to the length of one without origin was accepted")
	}
	if _, err := c.Decode(Binding{Workspace: uuid.New(), Resource: "events", Key: "xid"}, s); err != ErrInvalidCursor {
		t.Error("cursor accepted in another workspace")
	}
}

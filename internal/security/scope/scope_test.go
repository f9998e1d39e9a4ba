package scope

import (
	"reflect"
	"testing"
)

func TestParse(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in      string
		want    Set
		unknown string
	}{
		{"", 0, ""},
		{"contacts:read", ContactsRead, ""},
		{"leads:read contacts:read", ContactsRead | LeadsRead, ""},
		{"leads:read  leads:read", LeadsRead, ""},
		{"contacts:read admin", 0, "admin"},
		{"CONTACTS:READ", 0, "CONTACTS:READ"},
	} {
		got, unknown := Parse(tc.in)
		if got != tc.want || unknown != tc.unknown {
			t.Errorf("Parse(%q) = %v, %q; want %v, %q", tc.in, got, unknown, tc.want, tc.unknown)
		}
	}
}

func TestNamesCanonicalOrder(t *testing.T) {
	t.Parallel()
	s, _ := Parse("apps:read leads:write contacts:read")
	if got, want := s.Names(), []string{"contacts:read", "leads:write", "apps:read"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("Names = %v, want %v", got, want)
	}
	if got := s.String(); got != "contacts:read leads:write apps:read" {
		t.Fatalf("String = %q", got)
	}
	if !All.Has(s) || s.Has(All) {
		t.Fatal("Has is wrong")
	}
}

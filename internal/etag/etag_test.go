package etag

import (
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/svat/partnerapi/internal/apierror"
)

func TestOfChangesWithEveryWrite(t *testing.T) {
	t.Parallel()
	id, at := uuid.New(), time.Date(2026, 11, 23, 9, 0, 0, 123456000, time.UTC)
	tag := Of(id, 1000, at)
	if tag != Of(id, 1000, at) || len(tag) != 18 || tag[0] != '"' || tag[len(tag)-1] != '"' {
		t.Fatalf("Of = %s, want a stable strong tag", tag)
	}
	for name, other := range map[string]string{
		"another record":      Of(uuid.New(), 1000, at),
		"another transaction": Of(id, 1001, at),
		"another updatedAt":   Of(id, 1000, at.Add(time.Microsecond)),
	} {
		if other == tag {
			t.Errorf("%s has the same tag", name)
		}
	}
}

func TestCheck(t *testing.T) {
	t.Parallel()
	cur := `"abc"`
	for ifMatch, ok := range map[string]bool{
		"": true, "*": true, ` * `: true, `"abc"`: true, `"x", "abc"`: true, `"x","abc"`: true,
		`"x"`: false, `W/"abc"`: false, `abc`: false, `"abc`: false,
	} {
		err := check(ifMatch, cur)
		var e *apierror.Error
		switch {
		case ok && err != nil:
			t.Errorf("If-Match %q refused: %v", ifMatch, err)
		case !ok && (!errors.As(err, &e) || e.Code != apierror.CodePreconditionFailed):
			t.Errorf("If-Match %q: %v, want precondition_failed", ifMatch, err)
		}
	}
}

// TestCheckFieldLines: If-Match sent on several lines is one list.
func TestCheckFieldLines(t *testing.T) {
	t.Parallel()
	cur := `"abc"`
	for _, lines := range [][]string{nil, {`"x"`, `"abc"`}, {`"abc"`, `"x"`}, {`"x", "y"`, ` "abc"`}} {
		if err := Check(lines, cur); err != nil {
			t.Errorf("If-Match lines %q refused: %v", lines, err)
		}
	}
	for _, lines := range [][]string{{`"x"`, `"y"`}, {`"x"`, `W/"abc"`}} {
		if err := Check(lines, cur); err == nil {
			t.Errorf("If-Match lines %q accepted", lines)
		}
	}
}

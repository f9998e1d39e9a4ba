package etag

import (
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/svat/partnerapi/internal/contract/apierror"
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
		"*": true, ` * `: true, `"abc"`: true, `"x", "abc"`: true, `"x","abc"`: true,
		`"x"`: false, `W/"abc"`: false, "": false, " , ": false,
	} {
		err := Check([]string{ifMatch}, cur)
		var e *apierror.Error
		switch {
		case ok && err != nil:
			t.Errorf("If-Match %q refused: %v", ifMatch, err)
		case !ok && (!errors.As(err, &e) || e.Code != apierror.CodePreconditionFailed):
			t.Errorf("If-Match %q: %v, want precondition_failed", ifMatch, err)
		}
	}
}

// TestCheckRefusesWhatIsNotAnEntityTag: an unquoted or broken tag is a
// 400 naming the header, not a 412 saying the record changed.
func TestCheckRefusesWhatIsNotAnEntityTag(t *testing.T) {
	t.Parallel()
	for _, ifMatch := range []string{`abc`, `"abc`, `abc"`, `"a"bc"`, `"abc", x`, `W/abc`, "\"a\tb\""} {
		err := Check([]string{ifMatch}, `"abc"`)
		var e *apierror.Error
		if !errors.As(err, &e) || e.Code != apierror.CodeMalformedRequest || len(e.Fields) != 1 || e.Fields[0].Field != IfMatch {
			t.Errorf("If-Match %q: %v, want malformed_request naming If-Match", ifMatch, err)
		}
	}
}

func TestNotModified(t *testing.T) {
	t.Parallel()
	cur := `"abc"`
	for lines, want := range map[string]bool{
		`"abc"`: true, `W/"abc"`: true, `"x", "abc"`: true, "*": true, `"x"`: false, "": false,
	} {
		got, err := NotModified([]string{lines}, cur)
		if err != nil || got != want {
			t.Errorf("If-None-Match %q: %v %v, want %v", lines, got, err, want)
		}
	}
	if got, err := NotModified(nil, cur); got || err != nil {
		t.Errorf("no If-None-Match: %v %v", got, err)
	}
	var e *apierror.Error
	if _, err := NotModified([]string{"abc"}, cur); !errors.As(err, &e) || e.Fields[0].Field != IfNoneMatch {
		t.Errorf("unquoted If-None-Match: %v, want malformed naming the header", err)
	}
}

// TestCheckFieldLines: no If-Match passes; several field lines are one
// list, so a stale tag on one line and the current on another pass, and
// an empty line beside a stale tag is no way around the precondition.
func TestCheckFieldLines(t *testing.T) {
	t.Parallel()
	cur := `"abc"`
	if err := Check(nil, cur); err != nil {
		t.Errorf("no If-Match: %v", err)
	}
	for lines, ok := range map[[2]string]bool{
		{`"x"`, `"abc"`}: true, {`"abc"`, `"x"`}: true, {"", `"x"`}: false, {`"x"`, ""}: false, {"", ""}: false, {"", "*"}: true,
	} {
		if err := Check(lines[:], cur); (err == nil) != ok {
			t.Errorf("If-Match lines %q: %v", lines, err)
		}
	}
}

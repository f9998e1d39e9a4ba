package outbound

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// MaxRetryAfter caps what a receiver's Retry-After can ask for, so that a
// huge value neither overflows a Duration nor parks an endpoint for ever;
// the delivery engine may cap it further.
const MaxRetryAfter = 7 * 24 * time.Hour

// ParseRetryAfter reads a Retry-After value (RFC 9110 §10.2.3): delay
// seconds, or an HTTP date taken relative to now. It returns 0 for an empty,
// malformed or past value.
func ParseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if v[0] >= '0' && v[0] <= '9' {
		secs, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			if ne, ok := err.(*strconv.NumError); ok && ne.Err == strconv.ErrRange {
				return MaxRetryAfter
			}
			return 0
		}
		if secs >= uint64(MaxRetryAfter/time.Second) {
			return MaxRetryAfter
		}
		return time.Duration(secs) * time.Second
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0
	}
	d := t.Sub(now)
	switch {
	case d <= 0:
		return 0
	case d > MaxRetryAfter:
		return MaxRetryAfter
	}
	return d
}

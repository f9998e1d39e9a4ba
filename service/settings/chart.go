package settings

import (
	"fmt"
	"strconv"
	"time"

	"github.com/svat/partnerapi/service/admin"
)

// Chart is an endpoint's succeeded and failed attempts per hour over the
// last 24 hours, drawn as inline SVG by the template: one stacked bar an
// hour, succeeded below failed, scaled to the busiest hour. No script
// and no style attribute (the page's CSP has neither): the bars are rect
// elements whose geometry is attributes and whose colours come from
// style.css by class. Summary is the text a reader sees beside it (and
// the SVG's description), so the chart says nothing the text does not.
type Chart struct {
	// Width and Height are the viewBox's.
	Width, Height int
	Bars          []Bar
	// Summary reads "24 h: 120 succeeded, 3 failed".
	Summary string
	// Detail names the hours with failures, or says there were none,
	// for the SVG's <desc>.
	Detail string
}

// Bar is one hour of the chart: its succeeded part (OKY, OKHeight) and
// failed part (FailY, FailHeight) at X; Label says the hour in words
// (the rect's <title>).
type Bar struct {
	X, Width             int
	OKY, OKHeight        int
	FailY, FailHeight    int
	Label                string
	Succeeded, Failed    int64
	HasAttempts, HasFail bool
}

// chart geometry: 24 bars of 8 units with 2 between, 40 high.
const (
	barWidth    = 8
	barGap      = 2
	chartHeight = 40
	minPart     = 4
)

// newChart draws the hours.
func newChart(hours [admin.HealthHours]admin.HourAttempts) Chart {
	c := Chart{Width: len(hours) * (barWidth + barGap), Height: chartHeight}
	var most, ok, failed int64
	failedHours := 0
	for _, h := range hours {
		most = max(most, h.Succeeded+h.Failed)
		ok += h.Succeeded
		failed += h.Failed
		if h.Failed > 0 {
			failedHours++
		}
	}
	for i, h := range hours {
		b := Bar{X: i*(barWidth+barGap) + barGap/2, Width: barWidth, Succeeded: h.Succeeded, Failed: h.Failed,
			HasAttempts: h.Succeeded+h.Failed > 0, HasFail: h.Failed > 0}
		if most > 0 {
			total := h.Succeeded + h.Failed
			height := scale(total, most)
			b.FailHeight = scale(h.Failed, most)
			// A part that is there stays visible however small.
			if h.Failed > 0 {
				b.FailHeight = max(b.FailHeight, minPart)
			}
			b.OKHeight = max(height-b.FailHeight, 0)
			if h.Succeeded > 0 {
				b.OKHeight = max(b.OKHeight, minPart)
			}
			if b.OKHeight+b.FailHeight > chartHeight {
				b.OKHeight = chartHeight - b.FailHeight
			}
			b.OKY = chartHeight - b.OKHeight
			b.FailY = b.OKY - b.FailHeight
		}
		start := h.Start.UTC()
		b.Label = fmt.Sprintf("%s–%s UTC: %s succeeded, %s failed", start.Format("15:04"), start.Add(time.Hour).Format("15:04"),
			thousands(h.Succeeded), thousands(h.Failed))
		c.Bars = append(c.Bars, b)
	}
	c.Summary = fmt.Sprintf("24 h: %s succeeded, %s failed", thousands(ok), thousands(failed))
	switch {
	case ok+failed == 0:
		c.Detail = "No attempts in the last 24 hours."
	case failed == 0:
		c.Detail = "No failed attempts in the last 24 hours."
	default:
		c.Detail = fmt.Sprintf("Failed attempts in %d of the last 24 hours.", failedHours)
	}
	return c
}

// scale is n of most as a bar height, rounded.
func scale(n, most int64) int {
	return int((n*chartHeight + most/2) / most)
}

// thousands writes n with comma separators ("12,345").
func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	if n < 0 {
		return "-" + thousands(-n)
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// toHealth turns the admin service's health into the row's texts.
func toHealth(h *admin.EndpointHealth) *EndpointHealth {
	out := &EndpointHealth{Pending: thousands(h.Pending), Chart: newChart(h.Hours)}
	if h.PendingMore {
		out.Pending = "more than " + thousands(admin.MaxPendingCounted)
	}
	if h.LastSuccess != nil {
		out.LastSuccess, out.LastSuccessISO = when(*h.LastSuccess), h.LastSuccess.UTC().Format(time.RFC3339)
	}
	if h.FailingSince != nil {
		out.FailingSince, out.FailingSinceISO = when(*h.FailingSince), h.FailingSince.UTC().Format(time.RFC3339)
	}
	return out
}

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"text/tabwriter"
)

// kinds are the rows of the summary: every kind of request of the load,
// the webhook deliveries received, and the checks' own list walks.
var kinds = []string{
	"token", "contact", "contact-patch", "contact-delete",
	"lead", "lead-grouped", "lead-batch", "lead-replay", "lead-patch", "lead-delete",
	"list-contacts", "list-leads", "sync", "events", "webhook", "list-all",
}

// report prints the summary (phase × kind: served / not), each check, and
// the ERROR lines of the replicas' logs; it returns whether anything
// failed.
func (u *upgrade) report(checks []check) (failed bool) {
	var phases []string
	for _, s := range u.steps() {
		phases = append(phases, s.name)
	}
	phases = append(phases, "checks")

	fmt.Println("\nrequests served as they should be / not (by the phase they started in):")
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(w, "kind\t")
	for _, p := range phases {
		fmt.Fprintf(w, "%s\t", p)
	}
	fmt.Fprintln(w, "total\t")
	for _, k := range kinds {
		fmt.Fprintf(w, "%s\t", k)
		var sum tally
		for _, p := range phases {
			t := u.st.count(p, k)
			sum.ok += t.ok
			sum.bad += t.bad
			fmt.Fprintf(w, "%s\t", cell(t))
		}
		fmt.Fprintf(w, "%s\t\n", cell(sum))
	}
	_ = w.Flush()

	fmt.Println()
	for _, c := range checks {
		verdict := "ok  "
		if len(c.problems) > 0 {
			verdict, failed = "FAIL", true
		}
		fmt.Printf("%s %-9s %s\n", verdict, c.name, c.summary)
		for i, p := range c.problems {
			if i == 30 {
				fmt.Printf("       … %d more\n", len(c.problems)-i)
				break
			}
			fmt.Println("      ", p)
		}
		if len(c.examples) > 0 {
			fmt.Println("       the first of each way:")
		}
		for _, e := range c.examples {
			fmt.Println("        ", e)
		}
	}
	u.printErrorLines()
	return failed
}

// cell is "ok" or "ok/not", "-" for none.
func cell(t tally) string {
	switch {
	case t.ok == 0 && t.bad == 0:
		return "-"
	case t.bad == 0:
		return fmt.Sprint(t.ok)
	}
	return fmt.Sprintf("%d/%d", t.ok, t.bad)
}

// printErrorLines shows the first ERROR lines of each replica's log: a
// 500 is logged there with its cause.
func (u *upgrade) printErrorLines() {
	logs, _ := filepath.Glob(filepath.Join(u.dir, "*.log"))
	for _, l := range logs {
		lines := errorLines(l)
		if len(lines) == 0 {
			continue
		}
		fmt.Printf("\n%s: %d ERROR lines; the first:\n", filepath.Base(l), len(lines))
		for i, line := range lines {
			if i == 5 {
				break
			}
			if len(line) > 600 {
				line = line[:600] + "…"
			}
			fmt.Println("   ", line)
		}
	}
}

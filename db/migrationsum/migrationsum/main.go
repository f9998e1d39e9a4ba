// Command migrationsum writes and checks db/migrations.sum, the checksum
// of every migration (see package [migrationsum] for why):
//
//	go run ./db/migrationsum/migrationsum write   # make migrations-sum
//	go run ./db/migrationsum/migrationsum check   # make check-migrations
//
// write adds new migrations and re-hashes uncommitted ones, and refuses to
// change or drop an entry that a commit holds. check fails when a file
// differs from the sum file, or the sum file from its committed history.
// Run from the repository root (the default paths are relative to it).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"

	"github.com/svat/partnerapi/db/migrationsum"
)

func main() {
	dir := flag.String("dir", "db/migrations", "the migrations directory")
	sum := flag.String("sum", "db/migrations.sum", "the sum file")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: migrationsum [-dir D] [-sum F] write|check\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 1 {
		flag.Usage()
		os.Exit(2)
	}
	var err error
	switch flag.Arg(0) {
	case "write":
		err = write(*dir, *sum)
	case "check":
		err = check(*dir, *sum)
	default:
		flag.Usage()
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "migrationsum:", err)
		os.Exit(1)
	}
}

// write refuses before writing anything: a sum file that rewrote history
// would fail `make check-migrations` anyway, later and further from the
// edit.
func write(dir, sum string) error {
	actual, err := migrationsum.Compute(os.DirFS(dir))
	if err != nil {
		return err
	}
	problems, note, err := migrationsum.CheckHistory(context.Background(), sum, actual)
	if err != nil {
		return err
	}
	if note != "" {
		fmt.Fprintln(os.Stderr, "migrationsum:", note)
	}
	if len(problems) > 0 {
		report(problems)
		return fmt.Errorf("%s not written: it would rewrite committed entries", sum)
	}
	if err := os.WriteFile(sum, actual.Format(), 0o644); err != nil {
		return err
	}
	fmt.Printf("%s: %d migrations, total %s\n", sum, len(actual), actual.Total())
	return nil
}

func check(dir, sum string) error {
	actual, err := migrationsum.Compute(os.DirFS(dir))
	if err != nil {
		return err
	}
	file, err := os.ReadFile(sum)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%s is missing: run `make migrations-sum` and commit it", sum)
	} else if err != nil {
		return err
	}
	problems := migrationsum.Check(file, actual)
	listed, _, perr := migrationsum.Parse(file)
	if perr == nil {
		// The file's own entries against history: an edited migration
		// with a regenerated sum passes Check but not this.
		hist, note, err := migrationsum.CheckHistory(context.Background(), sum, listed)
		if err != nil {
			return err
		}
		if note != "" {
			fmt.Fprintln(os.Stderr, "migrationsum:", note)
		}
		problems = append(problems, hist...)
	}
	if len(problems) > 0 {
		report(problems)
		return fmt.Errorf("%d problems with %s", len(problems), sum)
	}
	return nil
}

func report(problems []string) {
	for _, p := range problems {
		fmt.Fprintln(os.Stderr, "  -", p)
	}
}

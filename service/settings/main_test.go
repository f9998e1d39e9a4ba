package settings_test

import (
	"os"
	"testing"

	"github.com/svat/partnerapi/db/dbtest"
)

// TestMain runs the package's tests on its own PostgreSQL and fails the
// run if a test leaves a goroutine behind.
func TestMain(m *testing.M) { os.Exit(dbtest.MainLeakChecked(m)) }

package server_test

import (
	"os"
	"testing"

	"github.com/svat/partnerapi/db/dbtest"
)

func TestMain(m *testing.M) { os.Exit(dbtest.MainLeakChecked(m)) }

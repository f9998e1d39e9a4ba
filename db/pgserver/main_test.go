package pgserver_test

import (
	"testing"

	"go.uber.org/goleak"
)

// Each server has a goroutine that waits for its process: none may
// outlive Stop.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

package e2e

import (
	"os"
	"testing"

	"github.com/dovetail-sh/dovetail/tests/testenv"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

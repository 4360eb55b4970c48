package bench

import (
	"flag"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/dovetail-sh/dovetail/tests/testenv"
)

// goTestDefaultTimeout is what `go test` passes as -test.timeout when given none.
const goTestDefaultTimeout = 10 * time.Minute

// suiteTimeout bounds a run of benchmarks given go test's default timeout: the
// performance suite takes about half an hour on two cores, and `go test -bench
// BenchmarkPerfSuite ./tests/bench/` should run it rather than panic at 10 minutes.
// Each scenario has deadlines of its own, so a hung one still fails.
const suiteTimeout = 3 * time.Hour

func TestMain(m *testing.M) {
	flag.Parse()
	if bench := flag.Lookup("test.bench"); bench != nil && bench.Value.String() != "" {
		if timeout := flag.Lookup("test.timeout"); timeout != nil && timeout.Value.String() == goTestDefaultTimeout.String() {
			if err := timeout.Value.Set(suiteTimeout.String()); err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(2)
			}
			fmt.Fprintf(os.Stderr, "benchmarks with go test's default timeout: the timeout is %s (pass -timeout to set another)\n", suiteTimeout)
		}
	}
	os.Exit(testenv.Main(m))
}

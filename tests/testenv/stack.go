package testenv

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/dovetail-sh/dovetail/tests/localstack"
)

// Stack is the whole local cluster (see localstack) for one test.
type Stack struct {
	*localstack.Stack
}

// StartStack starts the stack on loopback and stops it when the test ends, printing
// the tail of every process's output if the test failed.
func StartStack(t testing.TB) *Stack {
	t.Helper()
	return startStack(t, localstack.Options{})
}

// StartStackWithoutCRDs is StartStack on a cluster Dovetail was never installed in.
func StartStackWithoutCRDs(t testing.TB) *Stack {
	t.Helper()
	return startStack(t, localstack.Options{WithoutCRDs: true})
}

// StartStackWithDaemonSets is StartStack with the DaemonSet controller running, so
// that DaemonSets have pods.
func StartStackWithDaemonSets(t testing.TB) *Stack {
	t.Helper()
	return startStack(t, localstack.Options{DaemonSets: true})
}

// StartStackWithStockKwokStages is StartStack with kwok running the stages kwokctl
// ships, which race a Node's registration as the tests' trimmed stages do not.
func StartStackWithStockKwokStages(t testing.TB) *Stack {
	t.Helper()
	return startStack(t, localstack.Options{StockKwokStages: true})
}

// StartStackWithDefaultSpread is StartStack with kube-scheduler's
// localstack.DefaultSpreadScheduler profile applying these default constraints.
func StartStackWithDefaultSpread(t testing.TB, defaults []corev1.TopologySpreadConstraint) *Stack {
	t.Helper()
	return startStack(t, localstack.Options{DefaultSpread: defaults})
}

func startStack(t testing.TB, opts localstack.Options) *Stack {
	t.Helper()
	opts.BinDir, opts.Dir = BinDir(t), t.TempDir()
	s, err := localstack.Start(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, p := range s.Processes() {
				t.Logf("last output of %s:\n%s", p.Name, p.Tail(3000))
			}
		}
		if err := s.Stop(); err != nil {
			t.Logf("stopping the stack: %v", err)
		}
	})
	return &Stack{Stack: s}
}

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/dovetail-sh/dovetail/tests/localstack"
	"github.com/dovetail-sh/dovetail/tests/testenv"
)

// TestInProcessControllerLogsEveryLoop: a test's controller logs to its own file,
// the manager's reconcilers and its background loops alike, however many
// controllers the package ran before it. Loops started by the manager get their
// context from it, not from Run's, and logged nowhere once the global logger was
// taken.
func TestInProcessControllerLogsEveryLoop(t *testing.T) {
	stack := startClusterOn(t, testenv.StartStack)
	c := stack.Client
	ctx := context.Background()
	must(t, c.Create(ctx, consolidatingPool("default", "1s")))
	must(t, c.Create(ctx, localstack.Deployment("logged", 1, "500m", "256Mi")))
	allRunning(t, c, "logged", 1, 60*time.Second)
	// An empty node: the disruption pass proposes removing it.
	scale(t, c, "logged", 0)
	lines := map[string]string{
		"the provisioner's loop":     `"logger":"provisioner","msg":"solved"`,
		"a reconciler":               `"msg":"launched nodeclaim"`,
		"the operator's start":       `"logger":"operator","msg":"starting"`,
		"the disruption pass's loop": `"logger":"disruption","msg":"proposing disruption`,
	}
	eventually(t, 30*time.Second, "every kind of line in the controller's own log", func() error {
		raw, err := os.ReadFile(testenv.ControllerLog(stack.Dir))
		if err != nil {
			return err
		}
		for what, line := range lines {
			if !bytes.Contains(raw, []byte(line)) {
				return fmt.Errorf("no line of %s (%s) in %d bytes", what, line, len(raw))
			}
		}
		return nil
	})
}

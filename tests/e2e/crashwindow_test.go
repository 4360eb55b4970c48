package e2e

import (
	"bytes"
	"context"
	"fmt"
	"math/rand"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	dtaws "github.com/dovetail-sh/dovetail/controller/cloudprovider/aws"
	"github.com/dovetail-sh/dovetail/controller/state"
	"github.com/dovetail-sh/dovetail/tests/testenv"
)

// The windows a crash test aims its kills at.
const (
	launchWindow = "between CreateFleet and the claim's status write"
	taintWindow  = "between the disrupted taint and the disruption's record"
	drainWindow  = "mid-drain"
)

var crashWindowKinds = []string{launchWindow, taintWindow, drainWindow}

// crashWindows kills the controller process from inside the proxies in front of
// EC2 and the API server: when a write the armed window starts with has been
// applied, and before the controller receives the answer.
type crashWindows struct {
	t    *testing.T
	c    client.Client
	ec2  *ec2.Client
	proc *testenv.ControllerProcess

	mu     sync.Mutex
	armed  string
	hits   chan windowHit
	landed map[string]int
}

// windowHit is a kill a proxy made: the window and the object it was about.
type windowHit struct {
	window, object string
}

func watchCrashWindows(t *testing.T, pc *processCluster) *crashWindows {
	w := &crashWindows{t: t, c: pc.client, ec2: pc.clients.EC2, proc: pc.procs[0], hits: make(chan windowHit, 1), landed: map[string]int{}}
	pc.ec2Calls.AfterResponse(func(call testenv.EC2Call) {
		if call.Action == "CreateFleet" && w.take(launchWindow) {
			w.kill(windowHit{launchWindow, call.Tags["instance"][dtaws.TagNodeClaim]})
		}
	})
	pc.kube.AfterResponse(func(r testenv.KubeRequest) {
		if r.Status >= http.StatusMultipleChoices {
			return
		}
		switch {
		case r.Method == http.MethodPatch && strings.HasPrefix(r.Path, "/api/v1/nodes/") && bytes.Contains(r.Body, []byte(v1.DisruptedNoScheduleTaint.Key)) && w.take(taintWindow):
			w.kill(windowHit{taintWindow, strings.TrimPrefix(r.Path, "/api/v1/nodes/")})
		case r.Method == http.MethodPost && strings.HasSuffix(r.Path, "/eviction") && w.take(drainWindow):
			// /api/v1/namespaces/NS/pods/NAME/eviction: the pod's node is read
			// before the kill, while the eviction has not let it go yet.
			parts := strings.Split(r.Path, "/")
			pod := &corev1.Pod{}
			node := ""
			if len(parts) == 8 && w.c.Get(context.Background(), client.ObjectKey{Namespace: parts[4], Name: parts[6]}, pod) == nil {
				node = pod.Spec.NodeName
			}
			w.kill(windowHit{drainWindow, node})
		}
	})
	t.Cleanup(func() {
		pc.ec2Calls.AfterResponse(nil)
		pc.kube.AfterResponse(nil)
	})
	return w
}

func (w *crashWindows) take(window string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.armed != window {
		return false
	}
	w.armed = ""
	return true
}

func (w *crashWindows) kill(hit windowHit) {
	w.proc.Kill()
	w.hits <- hit
}

// killIn arms the window and waits for a proxy to kill the controller in it; if
// the window does not come within timeout, the controller is killed anyway. It
// says where the kill landed, judged by the state the kill left.
func (w *crashWindows) killIn(window string, timeout time.Duration) string {
	w.mu.Lock()
	w.armed = window
	w.mu.Unlock()
	var hit windowHit
	select {
	case hit = <-w.hits:
	case <-time.After(timeout):
		if w.take(window) {
			w.proc.Kill()
			return fmt.Sprintf("killed after %s: the window %s did not come", timeout, window)
		}
		// A proxy took the window as the time ran out: its kill is on its way.
		hit = <-w.hits
	}
	if hit.window != window {
		w.t.Fatalf("a kill in the window %s came while %s was armed", hit.window, window)
	}
	if why := w.verify(hit); why != "" {
		return fmt.Sprintf("killed on entering the window %s, but it had closed: %s", window, why)
	}
	w.landed[window]++
	return fmt.Sprintf("killed %s (%s)", window, hit.object)
}

// verify says why the state the kill left is not inside the window ("" if it is).
func (w *crashWindows) verify(hit windowHit) string {
	ctx := context.Background()
	switch hit.window {
	case launchWindow:
		nc := &v1.NodeClaim{}
		if err := w.c.Get(ctx, client.ObjectKey{Name: hit.object}, nc); err != nil {
			return fmt.Sprintf("nodeclaim %q: %v", hit.object, err)
		}
		if nc.Status.ProviderID != "" {
			return fmt.Sprintf("nodeclaim %s already records its instance %s", nc.Name, nc.Status.ProviderID)
		}
		out, err := w.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{
			{Name: aws.String("tag:" + dtaws.TagNodeClaim), Values: []string{nc.Name}}}})
		if err != nil {
			return fmt.Sprintf("describing nodeclaim %s's instances: %v", nc.Name, err)
		}
		if len(out.Reservations) == 0 {
			return fmt.Sprintf("the CreateFleet launched no instance for nodeclaim %s", nc.Name)
		}
	case taintWindow:
		node := &corev1.Node{}
		if err := w.c.Get(ctx, client.ObjectKey{Name: hit.object}, node); err != nil {
			return fmt.Sprintf("node %q: %v", hit.object, err)
		}
		nc := w.claimOn(hit.object)
		switch {
		case !state.HasTaint(node, v1.DisruptedNoScheduleTaint):
			return "the node is not tainted"
		case nc == nil:
			return "no nodeclaim for the node"
		case nc.DeletionTimestamp != nil:
			return fmt.Sprintf("nodeclaim %s is already deleting", nc.Name)
		case nc.Annotations[state.DisruptionAnnotationKey] != "":
			return fmt.Sprintf("nodeclaim %s already records its disruption", nc.Name)
		}
	case drainWindow:
		// The evicted pod may be gone already (no grace period); then any claim
		// still being deleted is a drain the kill interrupted.
		if hit.object == "" {
			if w.deletingClaim() == "" {
				return "no nodeclaim is being deleted"
			}
			return ""
		}
		nc := w.claimOn(hit.object)
		if nc == nil || nc.DeletionTimestamp == nil {
			return fmt.Sprintf("the evicted pod's node %q has no nodeclaim being deleted", hit.object)
		}
	}
	return ""
}

func (w *crashWindows) claimOn(node string) *v1.NodeClaim {
	var claims v1.NodeClaimList
	if node == "" || w.c.List(context.Background(), &claims) != nil {
		return nil
	}
	for i := range claims.Items {
		if claims.Items[i].Status.NodeName == node {
			return &claims.Items[i]
		}
	}
	return nil
}

// deletingClaim names a nodeclaim being deleted, or is "".
func (w *crashWindows) deletingClaim() string {
	var claims v1.NodeClaimList
	if w.c.List(context.Background(), &claims) != nil {
		return ""
	}
	for _, nc := range claims.Items {
		if nc.DeletionTimestamp != nil {
			return nc.Name
		}
	}
	return ""
}

func (w *crashWindows) String() string {
	var parts []string
	for _, kind := range crashWindowKinds {
		parts = append(parts, fmt.Sprintf("%d %s", w.landed[kind], kind))
	}
	return "kills landed " + strings.Join(parts, ", ")
}

// randomInstance is the instance ID of a random launched claim, or "".
func randomInstance(t *testing.T, c client.Client, rng *rand.Rand) string {
	t.Helper()
	var claims v1.NodeClaimList
	must(t, c.List(context.Background(), &claims))
	var ids []string
	for _, nc := range claims.Items {
		if id := nc.Status.ProviderID; id != "" && nc.DeletionTimestamp == nil {
			ids = append(ids, id[strings.LastIndex(id, "/")+1:])
		}
	}
	if len(ids) == 0 {
		return ""
	}
	return ids[rng.Intn(len(ids))]
}

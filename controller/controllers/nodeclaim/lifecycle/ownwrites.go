package lifecycle

import (
	"context"
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
)

// ownWrites remembers, per claim, the resourceVersions this process's own writes
// replaced. The cache lags those writes, and every write's watch event brings a
// Reconcile: one that read a replaced version would act on a claim that is no longer
// so, and its locked status write would fail with a conflict and be retried until
// the cache caught up. In a scale-out of 300 claims those retries were most of the
// API server's work on claims (1,200 conflicts beside 720 status writes), and they
// delayed every launch and registration queued behind them.
type ownWrites struct {
	replaced sync.Map // types.UID -> sets.Set[string]
}

// outdated reports whether nc is a version this process has since written over. The
// watch event of that write brings the claim back, so the Reconcile can end here.
// Reading any other version means the cache caught up: what was remembered goes.
// One claim is reconciled by one worker at a time, so its set is never shared.
func (w *ownWrites) outdated(nc *v1.NodeClaim) bool {
	v, ok := w.replaced.Load(nc.UID)
	if !ok {
		return false
	}
	if v.(sets.Set[string]).Has(nc.ResourceVersion) {
		return true
	}
	w.replaced.Delete(nc.UID)
	return false
}

// wrote records that a write replaced version from. A write that changed nothing
// keeps the version, which then is the current one and must not be remembered.
func (w *ownWrites) wrote(uid types.UID, from, to string) {
	if from == "" || from == to {
		return
	}
	v, _ := w.replaced.LoadOrStore(uid, sets.New[string]())
	v.(sets.Set[string]).Insert(from)
}

func (w *ownWrites) forget(uid types.UID) { w.replaced.Delete(uid) }

// patchClaim writes the claim (its status when status is set) and remembers the version
// it replaced.
func (c *Controller) patchClaim(ctx context.Context, nc *v1.NodeClaim, patch client.Patch, status bool) error {
	from := nc.ResourceVersion
	var err error
	if status {
		err = c.kube.Status().Patch(ctx, nc, patch)
	} else {
		err = c.kube.Patch(ctx, nc, patch)
	}
	if err == nil {
		c.writes.wrote(nc.UID, from, nc.ResourceVersion)
	}
	return err
}

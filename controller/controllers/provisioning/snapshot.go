package provisioning

import (
	"context"
	"maps"

	"github.com/dovetail-sh/dovetail/controller/engineinput"
	"github.com/dovetail-sh/dovetail/controller/scheduling"
	"github.com/dovetail-sh/dovetail/controller/state"
)

// snapshot reads the cluster: pending pods, nodes with their pods, in-flight
// NodeClaims (with the pods already nominated to them, so a launch in progress is
// not planned twice), ready NodePools and their instance types, and daemonsets. It
// reads without copying the cache, since it runs every few hundred milliseconds in a
// burst and copies of every pod were most of the controller's memory: nothing here
// or in the engine writes to what it reads.
func (p *Provisioner) snapshot(ctx context.Context) (*engineinput.Snapshot, error) {
	view, err := p.cluster.Read(ctx, state.ReadOnly)
	if err != nil {
		return nil, err
	}
	return p.snapshotOf(ctx, view, p.cloud.GetInstanceTypes)
}

// snapshotOf builds the snapshot with the provisioner's nominations, then keeps
// the provisioner's books: nominations that expired or no longer fit are
// forgotten, nodes reporting more than their instance are flagged.
func (p *Provisioner) snapshotOf(ctx context.Context, view *state.View, typesOf engineinput.TypesOf) (*engineinput.Snapshot, error) {
	p.mu.Lock()
	nominations := maps.Clone(p.nominations)
	now := p.clock.Now()
	p.mu.Unlock()
	s, notes := engineinput.Build(ctx, view, typesOf, nominations, now)
	p.mu.Lock()
	// A pod nominated again since the copy keeps its new nomination.
	for _, uid := range notes.Expired {
		if p.nominations[uid] == nominations[uid] {
			delete(p.nominations, uid)
		}
	}
	for _, pod := range notes.Void {
		if p.nominations[pod.UID] == nominations[pod.UID] {
			delete(p.nominations, pod.UID)
		}
	}
	p.mu.Unlock()
	for _, o := range notes.Oversized {
		p.flagOversized(o.Node, o.Claim, o.Over)
	}
	p.forgetOversized(view.Nodes)
	// The snapshot's nodes are its own: holding the bookings on them changes
	// nothing the view shares.
	p.bookings.Hold(s.Engine(p.costs, nil))
	return s, nil
}

// SnapshotOf is the view as the engine sees it. Objects in it come from the view:
// read only.
func (p *Provisioner) SnapshotOf(ctx context.Context, view *state.View) (*scheduling.Snapshot, error) {
	s, err := p.snapshotOf(ctx, view, p.cloud.GetInstanceTypes)
	if err != nil {
		return nil, err
	}
	return s.Engine(p.costs, p.commitments.Ledger()), nil
}

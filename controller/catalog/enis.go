package catalog

// ENILimitedPods is how many pods a node whose default network card gives the
// VPC CNI enis interfaces holds without prefix delegation: an address of each but
// its primary per pod, plus two host-network pods; none without an interface.
func ENILimitedPods(enis, ipv4PerInterface int64) int64 {
	if enis <= 0 {
		return 0
	}
	return enis*(ipv4PerInterface-1) + 2
}

// WithReservedENIs is the entry with reserved ENIs kept from pods, as the
// controller's --reserved-enis keeps them: its pods were counted from all of the
// default card's interfaces (ENILimitedPods), so the interfaces are that count
// undone. An entry whose pods are not interface-limited is left as it is. A
// catalog's pods are before reserved ENIs (the embedded one's are); the
// controller's own list (aws.CloudProvider.Offered) has them taken off already,
// so a prediction from it plans with ReservedENIs 0.
func (e Entry) WithReservedENIs(reserved int) Entry {
	perInterface := e.IPv4PerInterface - 1
	if reserved <= 0 || perInterface <= 0 || e.Pods < 2 || (e.Pods-2)%perInterface != 0 {
		return e
	}
	e.Pods = ENILimitedPods((e.Pods-2)/perInterface-int64(reserved), e.IPv4PerInterface)
	return e
}

// WithReservedENIs is the catalog with each entry's pods as WithReservedENIs
// leaves them.
func (f *File) WithReservedENIs(reserved int) *File {
	if reserved <= 0 {
		return f
	}
	out := *f
	out.InstanceTypes = make([]Entry, len(f.InstanceTypes))
	for i, e := range f.InstanceTypes {
		out.InstanceTypes[i] = e.WithReservedENIs(reserved)
	}
	return &out
}

package catalog

import "testing"

// Reserved ENIs come off the interfaces pods were counted from: an m5.large (3
// interfaces of 10 addresses, 29 pods) holds 20 with one reserved and none with
// all three; a type whose pods no interface count gives keeps them.
func TestWithReservedENIs(t *testing.T) {
	m5 := Entry{Name: "m5.large", Pods: 29, IPv4PerInterface: 10}
	for reserved, want := range map[int]int64{0: 29, 1: 20, 2: 11, 3: 0, 4: 0} {
		if got := m5.WithReservedENIs(reserved).Pods; got != want {
			t.Errorf("m5.large with %d reserved: %d pods, want %d", reserved, got, want)
		}
	}
	unknown := Entry{Name: "x1.large", Pods: 110}
	if got := unknown.WithReservedENIs(1).Pods; got != 110 {
		t.Errorf("a type of unknown interfaces: %d pods, want its 110", got)
	}
	f := &File{InstanceTypes: []Entry{m5, unknown}}
	lowered := f.WithReservedENIs(1)
	if lowered.InstanceTypes[0].Pods != 20 || f.InstanceTypes[0].Pods != 29 {
		t.Errorf("the catalog with one reserved: %+v; the original %+v", lowered.InstanceTypes, f.InstanceTypes)
	}
}

package pricing

import "testing"

func TestOnDemand(t *testing.T) {
	if p, known, exact := OnDemand("us-east-1", "m5.large"); !known || !exact || p != 0.096 {
		t.Errorf("m5.large in us-east-1 = %v (known %v, exact %v), want 0.096 from the table", p, known, exact)
	}
	if p, known, exact := OnDemand("eu-west-1", "m5.large"); !known || exact || p != 0.096 {
		t.Errorf("m5.large in eu-west-1 should fall back to us-east-1's 0.096, got %v (known %v, exact %v)", p, known, exact)
	}
	if _, known, _ := OnDemand("us-east-1", "z99.huge"); known {
		t.Error("an unknown type must not get a price")
	}
}

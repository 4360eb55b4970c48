package v1

import (
	"encoding/json"
	"fmt"
	"time"
)

// Never is the value of a NillableDuration that never elapses.
const Never = "Never"

// NillableDuration is a duration that may be "Never" (Duration nil). Karpenter stores
// expireAfter and consolidateAfter this way, so the JSON form is a plain string.
type NillableDuration struct {
	Duration *time.Duration `json:"-"`
}

// MustParseNillableDuration parses "Never" or a Go duration and panics on bad input;
// for defaults and tests.
func MustParseNillableDuration(s string) NillableDuration {
	d, err := ParseNillableDuration(s)
	if err != nil {
		panic(err)
	}
	return d
}

// ParseNillableDuration parses "Never" or a Go duration string.
func ParseNillableDuration(s string) (NillableDuration, error) {
	if s == Never {
		return NillableDuration{}, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return NillableDuration{}, fmt.Errorf("parsing duration %q, want a duration such as 30s, 10m or 720h, or %q: %w", s, Never, err)
	}
	return NillableDuration{Duration: &d}, nil
}

func (d NillableDuration) String() string {
	if d.Duration == nil {
		return Never
	}
	return d.Duration.String()
}

func (d *NillableDuration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("decoding duration, %w", err)
	}
	parsed, err := ParseNillableDuration(s)
	if err != nil {
		return err
	}
	*d = parsed
	return nil
}

func (d NillableDuration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

// ToUnstructured lets the unstructured converter (server-side apply, dynamic clients)
// see the string form instead of an empty struct.
func (d NillableDuration) ToUnstructured() interface{} { return d.String() }

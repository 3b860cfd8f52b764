package reconcile

import (
	"encoding/json"
)

// holdsRendered reports whether live, an object's field as the API server
// returns it (unstructured), holds everything rendered sets: every key of
// a rendered map with the same value, every list element for element.
// Keys only live has are the API server's defaults (a port's protocol, a
// CRD's defaulted fields) and do not count as a difference.
func holdsRendered(live, rendered any) bool {
	switch want := rendered.(type) {
	case map[string]any:
		have, ok := live.(map[string]any)
		if !ok {
			return len(want) == 0 && live == nil
		}
		for k, v := range want {
			if !holdsRendered(have[k], v) {
				return false
			}
		}
		return true
	case []any:
		have, ok := live.([]any)
		if !ok || len(have) != len(want) {
			return len(want) == 0 && live == nil
		}
		for i := range want {
			if !holdsRendered(have[i], want[i]) {
				return false
			}
		}
		return true
	case nil:
		return true
	}
	// Scalars compare as JSON, so int64 from the API server equals a
	// rendered int32.
	a, errA := json.Marshal(live)
	b, errB := json.Marshal(rendered)
	return errA == nil && errB == nil && string(a) == string(b)
}

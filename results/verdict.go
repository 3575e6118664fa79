package results

import (
	"encoding/json"
	"fmt"
)

// Verdict is a checker's answer on a history: Linearizable,
// NotLinearizable, or Unknown (the check timed out, the backend issues no
// tokens to check, ...; the case says why beside it). In JSON it is true,
// false or "unknown"; the empty Verdict (not checked) is null.
type Verdict string

// The verdicts.
const (
	Linearizable    Verdict = "true"
	NotLinearizable Verdict = "false"
	Unknown         Verdict = "unknown"
)

// NoGrant is the reason beside an Unknown verdict of the fenced-mutex
// check on a history in which no acquire completed: it has nothing to
// check, and so nothing to show either way. The report counts such
// histories apart from those the check could not settle.
const NoGrant = "no grant to check"

// Known reports whether v is a definite yes or no.
func (v Verdict) Known() bool { return v == Linearizable || v == NotLinearizable }

// String is v in words: "true", "false", "unknown" or "not checked".
func (v Verdict) String() string {
	if v == "" {
		return "not checked"
	}
	return string(v)
}

// MarshalJSON encodes true, false, "unknown", or null when unchecked.
func (v Verdict) MarshalJSON() ([]byte, error) {
	switch v {
	case "":
		return []byte("null"), nil
	case Linearizable, NotLinearizable:
		return []byte(v), nil
	}
	return json.Marshal(string(v))
}

// UnmarshalJSON reads what MarshalJSON writes.
func (v *Verdict) UnmarshalJSON(b []byte) error {
	var x any
	if err := json.Unmarshal(b, &x); err != nil {
		return err
	}
	switch t := x.(type) {
	case nil:
		*v = ""
	case bool:
		*v = Verdict(fmt.Sprint(t))
	case string:
		if Verdict(t) != Unknown {
			return fmt.Errorf("verdict %s: want true, false or \"unknown\"", b)
		}
		*v = Unknown
	default:
		return fmt.Errorf("verdict %s: want true, false or \"unknown\"", b)
	}
	return nil
}

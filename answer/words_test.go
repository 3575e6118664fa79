package answer

import (
	"strings"
	"testing"
)

// TestSkipReasonFirstLine: a skip whose reason carries a failed server's
// log reaches the answer as its first line only.
func TestSkipReasonFirstLine(t *testing.T) {
	for _, tt := range []struct{ reason, want string }{
		{"needs a cluster of at least 3 nodes", "needs a cluster of at least 3 nodes"},
		{"servers for zookeeper: compose: zookeeper-13 was still running but not ready; log:\n=== start: /usr/bin/java\nWARN x",
			"servers for zookeeper: compose: zookeeper-13 was still running but not ready; log (the log is in the report's skipped cases)"},
	} {
		got := firstLine(tt.reason)
		if got != tt.want || strings.Contains(got, "\n") {
			t.Errorf("firstLine(%q) = %q, want %q", tt.reason, got, tt.want)
		}
	}
}

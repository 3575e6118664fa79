package remote

import (
	"os/exec"
	"testing"
)

// TestQuote: a quoted word reaches a POSIX shell's command as it was.
func TestQuote(t *testing.T) {
	for _, s := range []string{"", "plain", "/usr/bin/x", "a b", "it's", `"$HOME"`, "`id`", "a\nb", "*", "-n", "x;rm -rf /", `back\slash`, "ünï"} {
		out, err := exec.Command("sh", "-c", "printf %s "+quote(s)).Output()
		if err != nil || string(out) != s {
			t.Errorf("quote(%q) = %s: the shell saw %q (%v)", s, quote(s), out, err)
		}
	}
}

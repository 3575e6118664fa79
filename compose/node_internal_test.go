package compose

import (
	"os"
	"os/exec"
	"slices"
	"testing"
)

// TestChildrenOf: the processes Kill waits for beyond a server's group
// are found by their parent.
func TestChildrenOf(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	if kids := childrenOf(os.Getpid()); !slices.Contains(kids, cmd.Process.Pid) {
		t.Fatalf("childrenOf(%d) = %v, missing %d", os.Getpid(), kids, cmd.Process.Pid)
	}
	if kids := childrenOf(cmd.Process.Pid); len(kids) != 0 {
		t.Fatalf("sleep has children %v", kids)
	}
}

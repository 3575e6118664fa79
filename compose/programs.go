package compose

import "os"

// Programs are the programs compose itself runs, beside the servers: the
// C compiler of the clock preload. A server's own programs belong to its
// kind's package (kinds/<kind>: its Programs, DefaultPrograms and
// environment variables), so that a new kind adds nothing here.
type Programs struct {
	// CC is the C compiler that builds the clock preload, on each host
	// where a server runs under it (unless its Placement names a prebuilt
	// ClockPreload).
	CC string
}

// CCEnv is the environment variable DefaultPrograms reads for
// Programs.CC.
const CCEnv = "LOCKBENCH_CC"

// DefaultPrograms returns Debian's gcc (the one make deps installs),
// replaced by $LOCKBENCH_CC when that is set: New gives every Env these.
func DefaultPrograms() Programs {
	p := Programs{CC: "gcc"}
	if v := os.Getenv(CCEnv); v != "" {
		p.CC = v
	}
	return p
}

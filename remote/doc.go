// Package remote is how lockbench reaches a host — this machine, or one
// over SSH — the way Jepsen's control node reaches its nodes: a small
// Remote that runs commands and starts long-lived processes, and every
// other operation written once on top of it, as shell scripts run through
// that Remote.
//
// A Remote has four operations (Name, Run, Spawn, Close), which Local
// (this machine, optionally inside a network namespace) and SSH (a host
// over golang.org/x/crypto/ssh) implement. What faults and server starts
// need is built from them, so no fault is written twice:
//
//   - Upload and Download move files through Run (cat on the host).
//   - Start starts a server detached from the call, in a session of its
//     own, with a pidfile; a Proc then reads its State (running, stopped
//     in state T, gone), signals its process group, pauses, resumes, stops
//     and kills it. A process is only ever found by its pidfile, never by
//     its name, and the pidfile records the process's start time beside
//     its pid, so a signal never reaches a process that reused the pid.
//   - Cut drops a host's packets to chosen peer addresses with blackhole
//     policy rules (ip rule … blackhole), leaving every other path as it
//     was, and refuses to cut the control node's or the judge's (Keeper);
//     Heal lifts the cuts and Cuts reads back those in force. A cut is one
//     way (what the host sends): a partition between two hosts is a cut on
//     each. No nft or iptables is needed.
//
// The SSH transport verifies every host key against a known_hosts file or
// a key pinned in the inventory and refuses an unknown or changed key,
// naming the host; it authenticates with keys from the user's agent or
// from files (never a password), and runs commands through `sudo -n` when
// its user is not root. Values of Cmd.Env travel on the command's stdin,
// never on its command line, so they stay out of process lists, sudo's
// log and every error: put secrets there, not in arguments.
//
// Commands on a host run under a POSIX shell (sh) with the usual tools
// (cat, mkdir, mv, chmod, kill, sleep, setsid; ip for cuts); `lockbench
// hosts check` verifies they are there.
package remote

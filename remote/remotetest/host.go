package remotetest

import (
	"bufio"
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/lockbench/lockbench/remote"
)

// hostInit is the first process of a host's PID namespace. It gives the
// host its own /run, /tmp and /proc, says ready, and waits while the
// control node writes the host's files into its /run (through
// /proc/PID/root) and wires its network; then it puts the host's accounts
// in place, hides what the test wants missing, and becomes sshd.
const hostInit = `set -e
mount --make-rprivate /
mount -t tmpfs -o mode=0755 lockbench-run /run
mount -t tmpfs -o mode=1777 lockbench-tmp /tmp
mount -t proc proc /proc
mkdir -m 0755 /run/sshd /run/lbhost
echo ready
read -r go
cd /run/lbhost
for f in passwd group shadow; do mount --bind "$f" "/etc/$f"; done
if [ -d sudoers.d ] && [ -d /etc/sudoers.d ]; then mount --bind sudoers.d /etc/sudoers.d; fi
while IFS= read -r p; do
	if [ -d "$p" ]; then mount --bind empty.d "$p"; else mount --bind empty "$p"; fi
done < hide
exec 1>&2
exec /usr/sbin/sshd -D -e -f /run/lbhost/sshd_config`

// rootHome is root's home on a host.
const rootHome = "/run/lbhost/root"

const sshdConfig = `Port 22
ListenAddress 0.0.0.0
HostKey /run/lbhost/ssh_host_ed25519_key
AuthorizedKeysFile /run/lbhost/authorized_keys
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
UseDNS no
PidFile none
StrictModes yes
PrintMotd no
MaxSessions 32
MaxStartups 32:30:64
LogLevel INFO
`

// syncBuffer is a buffer that sshd's log is copied into while tests read it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startHost starts host i: its namespaces, files, network and sshd.
func (l *Lab) startHost(i int, hide []string) (_ *Host, err error) {
	h := &Host{Name: "host" + strconv.Itoa(i+1), Addr: slotAddr(l.slot, byte(10+i)), log: &syncBuffer{}}
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	if h.HostKey, err = ssh.NewPublicKey(pub); err != nil {
		return nil, err
	}
	block, err := ssh.MarshalPrivateKey(priv, h.Name)
	if err != nil {
		return nil, err
	}
	files, err := l.hostFiles(pem.EncodeToMemory(block), hide)
	if err != nil {
		return nil, err
	}

	cmd := exec.Command("/bin/sh", "-c", hostInit, "lockbench-"+h.Name)
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags: syscall.CLONE_NEWNET | syscall.CLONE_NEWPID | syscall.CLONE_NEWNS,
		// sshd dies with this process, and with it every process of the
		// host's PID namespace.
		Pdeathsig: syscall.SIGKILL,
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = h.log
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("remotetest: %s: %w", h.Name, err)
	}
	h.init = cmd
	h.exited = make(chan struct{})
	// Wait closes the pipes once the process has exited: read stdout
	// before waiting.
	line, readErr := bufio.NewReader(stdout).ReadString('\n')
	go func() { _ = cmd.Wait(); close(h.exited) }()
	defer func() {
		if err != nil {
			err = fmt.Errorf("remotetest: %s: %w; its log:\n%s", h.Name, err, h.Log())
		}
	}()
	if readErr != nil || line != "ready\n" {
		return h, fmt.Errorf("its first process did not start (%q, %v)", line, readErr)
	}
	root := fmt.Sprintf("/proc/%d/root/run/lbhost", cmd.Process.Pid)
	for _, f := range files {
		p := filepath.Join(root, f.name)
		if f.dir {
			err = os.Mkdir(p, f.mode)
		} else {
			err = os.WriteFile(p, f.data, f.mode)
		}
		if err == nil {
			err = os.Chmod(p, f.mode)
		}
		if err != nil {
			return h, err
		}
	}
	if h.Netns, err = os.Open(fmt.Sprintf("/proc/%d/ns/net", cmd.Process.Pid)); err != nil {
		return h, err
	}
	port := "h" + strconv.Itoa(i)
	err = ip(remote.Local{Netns: l.sw},
		fmt.Sprintf("link add %s type veth peer name eth0 netns %d", port, cmd.Process.Pid),
		"link set "+port+" master br0",
		"link set "+port+" up")
	if err != nil {
		return h, err
	}
	err = ip(remote.Local{Netns: h.Netns},
		"link set lo up",
		fmt.Sprintf("addr add %s/24 dev eth0", h.Addr),
		"link set eth0 up")
	if err != nil {
		return h, err
	}
	if _, err := stdin.Write([]byte("go\n")); err != nil {
		return h, err
	}
	stdin.Close()
	return h, h.waitListening(30 * time.Second)
}

// waitListening waits until the host's sshd accepts connections.
func (h *Host) waitListening(d time.Duration) error {
	deadline := time.Now().Add(d)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	addr := net.JoinHostPort(h.Addr.String(), "22")
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("sshd not listening on %s after %v: %w", addr, d, err)
		}
		select {
		case <-h.exited:
			return errors.New("sshd exited")
		case <-tick.C:
		}
	}
}

// stop kills the host's sshd, which ends its PID namespace: the kernel
// kills every process in it before the first one is reaped.
func (h *Host) stop() error {
	var errs []error
	if h.init != nil {
		if err := h.init.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
			errs = append(errs, fmt.Errorf("remotetest: kill %s: %w", h.Name, err))
		}
		<-h.exited
	}
	if h.Netns != nil {
		errs = append(errs, h.Netns.Close())
	}
	return errors.Join(errs...)
}

// hostFile is a file (or dir) to put in a host's /run/lbhost.
type hostFile struct {
	name string
	data []byte
	mode os.FileMode
	dir  bool
}

// hostFiles are a host's files: sshd's config and key, the lab's client
// key authorized, the accounts, sudo's rule, and what to hide.
func (l *Lab) hostFiles(hostKey []byte, hide []string) ([]hostFile, error) {
	passwd, group, shadow, err := accounts()
	if err != nil {
		return nil, err
	}
	var resolved []string
	for _, p := range hide {
		r, err := filepath.EvalSymlinks(p)
		if err != nil {
			return nil, fmt.Errorf("remotetest: hide %s: %w", p, err)
		}
		resolved = append(resolved, r+"\n")
	}
	files := []hostFile{
		{name: "sshd_config", data: []byte(sshdConfig), mode: 0o644},
		{name: "ssh_host_ed25519_key", data: hostKey, mode: 0o600},
		{name: "authorized_keys", data: ssh.MarshalAuthorizedKey(l.Key), mode: 0o644},
		{name: "passwd", data: passwd, mode: 0o644},
		{name: "group", data: group, mode: 0o644},
		{name: "shadow", data: shadow, mode: 0o640},
		{name: "hide", data: []byte(strings.Join(resolved, "")), mode: 0o644},
		{name: "empty", mode: 0},
		{name: "empty.d", mode: 0, dir: true},
		{name: "root", mode: 0o700, dir: true},
	}
	if SudoAvailable() {
		files = append(files,
			hostFile{name: "sudoers.d", mode: 0o755, dir: true},
			hostFile{name: "sudoers.d/lockbench", data: []byte(Sudoer + " ALL=(ALL:ALL) NOPASSWD: ALL\n"), mode: 0o440})
	}
	return files, nil
}

// accounts are this machine's passwd, group and shadow with the host's
// accounts added: Sudoer and Guest, and sshd's privilege-separation
// account if the machine lacks it. Root may log in with a key (a locked
// password would forbid it without PAM), and has a home of its own.
func accounts() (passwd, group, shadow []byte, err error) {
	read := func(f string) ([]string, error) {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("remotetest: %w", err)
		}
		return strings.Split(strings.TrimRight(string(b), "\n"), "\n"), nil
	}
	pw, err := read("/etc/passwd")
	if err != nil {
		return nil, nil, nil, err
	}
	gr, err := read("/etc/group")
	if err != nil {
		return nil, nil, nil, err
	}
	sh, err := read("/etc/shadow")
	if err != nil {
		return nil, nil, nil, err
	}
	has := func(lines []string, name string) bool {
		for _, l := range lines {
			if strings.HasPrefix(l, name+":") {
				return true
			}
		}
		return false
	}
	uids := map[string]bool{}
	for _, l := range pw {
		if f := strings.Split(l, ":"); len(f) > 3 {
			uids[f[2]] = true
		}
	}
	next := 61000
	add := func(name, home, shell string) {
		if has(pw, name) {
			return
		}
		for uids[strconv.Itoa(next)] {
			next++
		}
		id := strconv.Itoa(next)
		uids[id] = true
		pw = append(pw, name+":x:"+id+":"+id+":lockbench lab:"+home+":"+shell)
		gr = append(gr, name+":x:"+id+":")
		sh = append(sh, name+":*:19000:0:99999:7:::")
	}
	add("sshd", "/run/sshd", "/usr/sbin/nologin")
	add(Sudoer, "/tmp", "/bin/sh")
	add(Guest, "/tmp", "/bin/sh")
	// root: logs in with a key, at home in the host's own /run (this
	// machine's shell startup files stay out of the host's commands).
	edit := func(lines []string, field int, to func(string) string) {
		for i, l := range lines {
			if f := strings.Split(l, ":"); f[0] == "root" && len(f) > field {
				f[field] = to(f[field])
				lines[i] = strings.Join(f, ":")
			}
		}
	}
	edit(sh, 1, func(pw string) string {
		if strings.HasPrefix(pw, "!") {
			return "*"
		}
		return pw
	})
	edit(pw, 5, func(string) string { return rootHome })
	join := func(lines []string) []byte { return []byte(strings.Join(lines, "\n") + "\n") }
	return join(pw), join(gr), join(sh), nil
}

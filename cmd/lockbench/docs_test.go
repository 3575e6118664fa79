package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/lockbench/lockbench/nemesis"
)

// repoRoot is the repository's root, from this package's dir.
const repoRoot = "../.."

// docPage is a user doc: README.md or a page under docs/.
type docPage struct {
	path string // relative to the repository's root
	text string
}

// userDocs reads README.md and docs/*.md.
func userDocs(t *testing.T) []docPage {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(repoRoot, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	var out []docPage
	for _, p := range append([]string{filepath.Join(repoRoot, "README.md")}, paths...) {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(repoRoot, p)
		out = append(out, docPage{path: rel, text: string(b)})
	}
	return out
}

// foreignFlags are flags the docs name that belong to other programs:
// the servers lockbench starts, go test, and the tools they describe.
var foreignFlags = map[string]string{
	"sentinel":              "redis-server --sentinel, how a sentinel runs",
	"unsafe-no-fsync":       "etcd's flag behind the fast profile",
	"headless":              "chromium",
	"no-sandbox":            "chromium",
	"race":                  "go test",
	"short":                 "go test",
	"no-install-recommends": "apt-get",
	"quiet":                 "git diff, in the Makefile",
	// lockbench lazyfs parses its own flags (compose's lazy filesystem
	// daemon, started on hosts): cobra does not know them.
	"backing": "lockbench lazyfs",
	"mount":   "lockbench lazyfs",
	"control": "lockbench lazyfs",
}

// pendingCommands are commands the docs name that a branch merging
// beside this one adds (lockbench advise): checked once they exist, and
// to be dropped from this list then.
var pendingCommands = map[string]bool{}

// commandFlags returns every flag of cmd (its own and inherited), by
// name, and those of every command under root, by command path.
func commandFlags(root *cobra.Command) (all map[string]bool, byPath map[string]map[string]bool) {
	all, byPath = map[string]bool{"help": true, "version": true}, map[string]map[string]bool{}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		names := map[string]bool{"help": true}
		add := func(f *pflag.Flag) { names[f.Name], all[f.Name] = true, true }
		c.Flags().VisitAll(add)
		c.InheritedFlags().VisitAll(add)
		c.PersistentFlags().VisitAll(add)
		byPath[c.CommandPath()] = names
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	root.InitDefaultHelpCmd()
	walk(root)
	return all, byPath
}

// makeTargets returns the targets the Makefile defines.
func makeTargets(t *testing.T) map[string]bool {
	t.Helper()
	f, err := os.Open(filepath.Join(repoRoot, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	targets := map[string]bool{}
	target := regexp.MustCompile(`^([a-z][a-z0-9-]*):([^=]|$)`)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if m := target.FindStringSubmatch(sc.Text()); m != nil {
			targets[m[1]] = true
		}
	}
	return targets
}

var (
	makeRef   = regexp.MustCompile("`make ([a-z][a-z0-9-]*)")
	makeProse = regexp.MustCompile(`(?m)^make ([a-z][a-z0-9-]*)`)
	// A command is named in code: in backticks, or at the start of a
	// line of a code block (codeLine).
	commandRef = regexp.MustCompile("`lockbench((?: [a-z][a-z0-9-]*)+)")
	codeLine   = regexp.MustCompile(`^\s*(?:\$ )?lockbench((?: [a-z][a-z0-9-]*)+)`)
	flagRef    = regexp.MustCompile(`(?:^|[\s\x60(\[|,])--([a-z][a-z0-9-]*)`)
	suiteRef   = regexp.MustCompile(`--suite[ =]([a-z]+)`)
	faultRef   = regexp.MustCompile(`--fault[ =]([a-z?=0-9.,&-]+)`)
	faultRow   = regexp.MustCompile("(?m)^\\| `([a-z-]+)` \\|")
	issueRef   = regexp.MustCompile(`(?i)\bissue \d+|\bthis stop\b|\bissue \d+'s\b`)
	linkRef    = regexp.MustCompile(`\]\(([^)#\s]+)(?:#[^)]*)?\)`)
)

// TestDocsNameWhatExists fails when README.md or a page of docs/ names a
// make target the Makefile lacks, a lockbench command or flag the CLI
// lacks, a suite run refuses, a fault the catalogue lacks, or a file a
// link points at that is not there; and when a docs page is not linked
// from the README, or user docs refer to issues or internal history.
func TestDocsNameWhatExists(t *testing.T) {
	root := rootCmd()
	targets := makeTargets(t)
	faults := nemesis.Names()
	pages := userDocs(t)
	for _, p := range pages {
		for _, re := range []*regexp.Regexp{makeRef, makeProse} {
			for _, m := range re.FindAllStringSubmatch(p.text, -1) {
				if !targets[m[1]] {
					t.Errorf("%s names make %s: no such target in the Makefile", p.path, m[1])
				}
			}
		}
		for _, m := range commandRefs(p.text, false) {
			words := strings.Fields(m[1])
			c, rest, err := root.Find(words)
			switch {
			case (err != nil || c == root) && pendingCommands[words[0]]:
				t.Logf("%s names lockbench %s, not merged yet", p.path, words[0])
			case err != nil || c == root:
				t.Errorf("%s names lockbench %s: no such command", p.path, words[0])
			case len(c.Commands()) > 0 && !c.Runnable() && len(rest) > 0:
				t.Errorf("%s names lockbench %s: %s has no subcommand %s", p.path, m[1], c.CommandPath(), rest[0])
			}
		}
		for _, problem := range flagProblems(root, p, false) {
			t.Error(problem)
		}
		for _, m := range suiteRef.FindAllStringSubmatch(p.text, -1) {
			_, _, err := lockbench(t, "run", "--suite", m[1], "--backend", "no-such-backend", "--out", filepath.Join(t.TempDir(), "out"))
			if err == nil || strings.Contains(err.Error(), `suite "`+m[1]+`"`) {
				t.Errorf("%s names the suite %s: run refuses it (%v)", p.path, m[1], err)
			}
		}
		var named []string
		for _, m := range faultRef.FindAllStringSubmatch(p.text, -1) {
			for _, spec := range strings.Split(m[1], ",") {
				name, _, _ := strings.Cut(spec, "?")
				named = append(named, name)
			}
		}
		for _, m := range faultRow.FindAllStringSubmatch(p.text, -1) {
			named = append(named, m[1])
		}
		for _, name := range named {
			if name != "" && !slices.Contains(faults, name) {
				t.Errorf("%s names the fault %s: not in the catalogue (%s)", p.path, name, strings.Join(faults, ", "))
			}
		}
		if m := issueRef.FindString(p.text); m != "" && p.path != filepath.Join("docs", "measurements.md") {
			t.Errorf("%s says %q: user docs do not refer to issues or internal history", p.path, m)
		}
		for _, m := range linkRef.FindAllStringSubmatch(p.text, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			if _, err := os.Stat(filepath.Join(repoRoot, filepath.Dir(p.path), target)); errors.Is(err, os.ErrNotExist) {
				t.Errorf("%s links to %s: no such file", p.path, target)
			}
		}
	}
	readme := pages[0].text
	for _, p := range pages[1:] {
		if !strings.Contains(readme, "]("+filepath.ToSlash(p.path)+")") {
			t.Errorf("README.md does not link to %s", p.path)
		}
	}
	if n := strings.Count(readme, "\n"); n > 250 {
		t.Errorf("README.md has %d lines, want at most 250", n)
	}
}

// flagProblems returns what page p gets wrong about flags: a flag on a
// line that runs a lockbench command must be that command's; any other
// must be some command's, or a foreign one. startInCode reads p as if
// inside a code block from its start (the Makefile's recipes).
func flagProblems(root *cobra.Command, p docPage, startInCode bool) []string {
	allFlags, byPath := commandFlags(root)
	var problems []string
	inCode := startInCode
	for line := range strings.Lines(p.text) {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			inCode = !inCode
		}
		cmdFlags := map[string]bool(nil)
		if m := commandRefs(line, inCode); len(m) > 0 && strings.Count(line, "lockbench ") == 1 {
			if c, _, err := root.Find(strings.Fields(m[0][1])); err == nil && c != root {
				cmdFlags = byPath[c.CommandPath()]
			}
		}
		for _, m := range flagRef.FindAllStringSubmatch(line, -1) {
			name := m[1]
			if _, ok := foreignFlags[name]; ok {
				continue
			}
			switch {
			case !allFlags[name]:
				problems = append(problems, fmt.Sprintf("%s names the flag --%s: no lockbench command has it", p.path, name))
			case cmdFlags != nil && !cmdFlags[name] && !strings.Contains(line, "go test"):
				problems = append(problems, fmt.Sprintf("%s: %q gives --%s to a command that does not take it", p.path, strings.TrimSpace(line), name))
			}
		}
	}
	return problems
}

// TestMakefileFlags checks the flags the Makefile's recipes give
// lockbench as the docs' are checked.
func TestMakefileFlags(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	text := strings.ReplaceAll(string(b), "$(BIN)/lockbench ", "lockbench ")
	if !strings.Contains(text, "\tlockbench advise ") {
		t.Fatal("the Makefile runs no lockbench advise: the recipes' form changed, this test reads none")
	}
	for _, problem := range flagProblems(rootCmd(), docPage{path: "Makefile", text: text}, true) {
		t.Error(problem)
	}
}

// TestDocsDriftSeesAMissingFlag: the flag check fails a page that names
// a flag no command has (as when a named flag is removed), and one that
// gives a command another's flag.
func TestDocsDriftSeesAMissingFlag(t *testing.T) {
	page := docPage{path: "x.md", text: "Run `lockbench run --no-such-flag` or:\n\n```\nlockbench check --budget 5m DIR\n```\n"}
	got := flagProblems(rootCmd(), page, false)
	if len(got) != 2 || !strings.Contains(got[0], "--no-such-flag") || !strings.Contains(got[1], "--budget") {
		t.Errorf("flag problems %q, want --no-such-flag named and --budget given to check", got)
	}
}

// commandRefs returns the lockbench commands text names in code: in
// backticks, and at the start of the lines of its fenced code blocks
// (inCode: text starts inside one).
func commandRefs(text string, inCode bool) [][]string {
	var out [][]string
	for line := range strings.Lines(text) {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			inCode = !inCode
			continue
		}
		out = append(out, commandRef.FindAllStringSubmatch(line, -1)...)
		if m := codeLine.FindStringSubmatch(line); inCode && m != nil {
			out = append(out, m)
		}
	}
	return out
}

package report_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/lockbench/lockbench/report"
	"github.com/lockbench/lockbench/results"
)

// TestAgree: two runs agree when they pick the same with the same
// runner-up and decided; they differ only inside a tie when neither
// decided and each one's first pick is in the other's tie; otherwise the
// differing pick and the separation only one run made are named.
func TestAgree(t *testing.T) {
	sep := results.Separation{Winner: "redis", Loser: "table", Measure: results.MeasureSpeed, P: 1e-4, Level: 1e-3}
	run := func(ch results.Choice) *results.File {
		ch.Intent = results.IntentEfficiency
		return &results.File{Answer: &results.Answer{Efficiency: &ch}}
	}
	decided := results.Choice{Pick: []string{"redis"}, RunnerUp: "table", Decided: true, Separations: []results.Separation{sep}}
	for _, tt := range []struct {
		name       string
		a, b       results.Choice
		agree, tie bool
		want       []string
	}{
		{"same", decided, decided, true, false, []string{"the answers agree: redis (decided true)"}},
		{"inside a tie", results.Choice{Pick: []string{"redis", "table"}, RunnerUp: "table"},
			results.Choice{Pick: []string{"table", "redis"}, RunnerUp: "redis"}, false, true,
			[]string{"differ only inside a tie", "runner-up: table against redis"}},
		{"differ", decided, results.Choice{Pick: []string{"table", "redis"}, RunnerUp: "redis"}, false, false,
			[]string{"the answers differ", "pick: redis against a tie of table and redis", "decided: true against false",
				"only the first run set apart table from redis on speed"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g := report.Agree(run(tt.a), run(tt.b))
			if len(g) != 1 || g[0].Agree != tt.agree || g[0].InTie != tt.tie {
				t.Fatalf("agreement %+v, want agree %v, in tie %v", g, tt.agree, tt.tie)
			}
			var b bytes.Buffer
			all, err := report.AgreeText(&b, run(tt.a), run(tt.b))
			if err != nil {
				t.Fatal(err)
			}
			if all != (tt.agree || tt.tie) {
				t.Errorf("all agree %v, want %v", all, tt.agree || tt.tie)
			}
			for _, w := range tt.want {
				if !strings.Contains(b.String(), w) {
					t.Errorf("the text lacks %q:\n%s", w, b.String())
				}
			}
		})
	}
}

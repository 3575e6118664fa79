package report

// A document is the report's content independent of its format: the
// Markdown and HTML writers render the same blocks, so report.md and
// index.html never disagree.
type document struct {
	title  string
	blocks []block
}

// block is one of heading, para, list, table, figure, answers, contents.
type block interface{ isBlock() }

type heading struct {
	level int
	text  string
}

// para is a paragraph of plain text; strong marks it as a key finding,
// small as a side note.
type para struct {
	text          string
	strong, small bool
}

type list struct{ items []string }

// table is a table of plain-text cells; numeric columns align right.
type table struct {
	header  []string
	rows    [][]string
	numeric []bool
	// flag, when set, marks the rows to highlight (violations,
	// regressions).
	flag []bool
	// folded, when set, is the one-line summary under which the HTML
	// page folds a long table (it opens on a click); Markdown shows it
	// as a caption.
	folded string
}

// figure is a chart with its reading guide and notes.
type figure struct{ c *chart }

// answers are the report's opening: each question's answer with its
// evidence, side by side in HTML so that both fit one screen.
type answers struct{ items []answerBox }

type answerBox struct {
	title, answer string
	evidence      []string
}

// contents marks where the HTML page puts its table of contents
// (Markdown readers have their own).
type contents struct{}

func (heading) isBlock()  {}
func (para) isBlock()     {}
func (list) isBlock()     {}
func (table) isBlock()    {}
func (figure) isBlock()   {}
func (answers) isBlock()  {}
func (contents) isBlock() {}

func (d *document) h(level int, text string) { d.blocks = append(d.blocks, heading{level, text}) }
func (d *document) p(text string)            { d.blocks = append(d.blocks, para{text: text}) }
func (d *document) strong(text string)       { d.blocks = append(d.blocks, para{text: text, strong: true}) }
func (d *document) list(items []string) {
	if len(items) > 0 {
		d.blocks = append(d.blocks, list{items})
	}
}
func (d *document) table(t table) { d.blocks = append(d.blocks, t) }
func (d *document) figure(c *chart) {
	if c != nil {
		d.blocks = append(d.blocks, figure{c})
	}
}

package report

import (
	"fmt"
	"io"
	"path"
	"strings"
)

// writeMarkdown renders d as GitHub-flavoured Markdown. Charts are
// referenced by their relative path under charts/.
func writeMarkdown(w io.Writer, d *document) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# %s\n", mdEscape(d.title))
	for _, blk := range d.blocks {
		b.WriteString("\n")
		switch x := blk.(type) {
		case heading:
			fmt.Fprintf(&b, "%s %s\n", strings.Repeat("#", min(max(x.level, 2), 6)), mdEscape(x.text))
		case para:
			if x.strong {
				fmt.Fprintf(&b, "**%s**\n", mdEscape(x.text))
			} else {
				fmt.Fprintf(&b, "%s\n", mdEscape(x.text))
			}
		case list:
			for _, it := range x.items {
				fmt.Fprintf(&b, "- %s\n", mdEscape(it))
			}
		case table:
			if x.folded != "" {
				fmt.Fprintf(&b, "*%s:*\n\n", mdEscape(x.folded))
			}
			writeMDTable(&b, x)
		case answers:
			for i, a := range x.items {
				if i > 0 {
					b.WriteString("\n")
				}
				fmt.Fprintf(&b, "### %s\n\n**%s**\n", mdEscape(a.title), mdEscape(a.answer))
				if len(a.evidence) > 0 {
					b.WriteString("\n")
				}
				for _, it := range a.evidence {
					fmt.Fprintf(&b, "- %s\n", mdEscape(it))
				}
			}
		case contents:
			b.WriteString("---\n")
		case figure:
			c := x.c
			png := path.Join(chartDir, c.Name+".png")
			fmt.Fprintf(&b, "![%s](%s)\n\n", mdEscape(c.Title), png)
			if c.svg {
				fmt.Fprintf(&b, "*How to read it:* %s ([SVG](%s))\n", mdEscape(c.Read), path.Join(chartDir, c.Name+".svg"))
			} else {
				fmt.Fprintf(&b, "*How to read it:* %s\n", mdEscape(c.Read))
			}
			if len(c.Notes) > 0 {
				b.WriteString("\n")
				for _, n := range c.Notes {
					fmt.Fprintf(&b, "- %s\n", mdEscape(n))
				}
			}
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func writeMDTable(b *strings.Builder, t table) {
	if len(t.header) == 0 {
		return
	}
	b.WriteString("|")
	for _, h := range t.header {
		fmt.Fprintf(b, " %s |", cellEscape(h))
	}
	b.WriteString("\n|")
	for i := range t.header {
		if i < len(t.numeric) && t.numeric[i] {
			b.WriteString("---:|")
		} else {
			b.WriteString("---|")
		}
	}
	b.WriteString("\n")
	for i, row := range t.rows {
		b.WriteString("|")
		for j := range t.header {
			cell := ""
			if j < len(row) {
				cell = cellEscape(row[j])
			}
			if j == 0 && i < len(t.flag) && t.flag[i] && cell != "" {
				cell = "**" + cell + "**"
			}
			fmt.Fprintf(b, " %s |", cell)
		}
		b.WriteString("\n")
	}
}

// mdEscape keeps text literal: characters Markdown would read as markup
// are escaped.
func mdEscape(s string) string {
	r := strings.NewReplacer(`\`, `\\`, "*", `\*`, "_", `\_`, "`", "\\`", "[", `\[`, "]", `\]`, "<", "&lt;", ">", "&gt;", "#", `\#`, "|", `\|`)
	return r.Replace(s)
}

// cellEscape escapes text for a table cell, where a newline would end
// the row.
func cellEscape(s string) string {
	return strings.ReplaceAll(mdEscape(s), "\n", " ")
}

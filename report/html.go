package report

import (
	"encoding/base64"
	"fmt"
	"html"
	"io"
	"net/url"
	"strings"
)

// css is the whole style of index.html: inline, system fonts only, so
// the page needs no network.
const css = `
body{font:15px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"Liberation " +
	"Sans",Arial,sans-serif;color:#1b1b1b;max-width:1180px;margin:0 auto;padding:1.5em 2em 4em;background:#fff}
h1{font-size:1.8em;margin-bottom:.2em}h2{margin-top:2em;border-bottom:2px solid #e3e3e3;padding-bottom:.2em}h3{margin-top:1.6em}
table{border-collapse:collapse;margin:.8em 0;font-size:.92em}th,td{border:1px solid #d6d6d6;padding:.3em ` +
	`.6em;text-align:left;vertical-align:top}
th{background:#f3f4f6}td.n{text-align:right;font-variant-numeric:tabular-nums}tr.flag td{background:#fde4dc;font-weight:600}
tbody tr:nth-child(even):not(.flag) td{background:#fafafa}
figure{margin:1.5em 0;padding:0}figure img{max-width:100%;height:auto;border:1px solid #e3e3e3}
figcaption{font-size:.93em;color:#333;margin-top:.4em}figcaption ul{margin:.3em 0}
p.strong{font-weight:600;background:#eef6ff;border-left:4px solid #0072b2;padding:.5em .8em}
nav ul{columns:3;font-size:.92em}code{font-size:.92em}
.tw{overflow-x:auto;max-width:100%}details{margin:.8em 0}summary{cursor:pointer;font-weight:600}
.answers{display:grid;grid-template-columns:1fr 1fr;gap:1em;margin:.6em 0}
.answer{border:1px solid #c9d8ea;border-top:5px solid #0072b2;border-radius:4px;padding:.3em ` +
	`.9em;background:#f8fbff;font-size:.84em;line-height:1.35}
.answer h3{margin:.3em 0 .4em}.answer p.strong{margin:.3em 0}.answer ul{margin:.3em 0;padding-left:1.2em}.answer li{margin:.15em 0}
p.small{font-size:.85em;color:#555;margin-top:-.4em}h1+p.small+h2{margin-top:.5em}
@media (max-width:900px){.answers{grid-template-columns:1fr}}
`

// writeHTML renders d as one self-contained HTML page: the charts are
// inlined as PNG data URIs and the style is inline, so the file works
// offline, requests nothing and can be mailed on its own. With link the
// page links its charts (charts/<name>.png) instead: a page a tenth of
// the size, for a place that keeps the charts beside it (docs/sample).
// The table of contents goes where the document put its contents marker.
func writeHTML(w io.Writer, d *document, link bool) error {
	var b strings.Builder
	e := html.EscapeString
	fmt.Fprintf(&b, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<meta name=\"viewport\" "+
		"content=\"width=device-width, "+
		"initial-scale=1\">\n<title>%s</title>\n<style>%s</style>\n</head>\n<body>\n<h1>%s</h1>\n", e(d.title), css, e(d.title))
	var toc []string
	for i, blk := range d.blocks {
		if h, ok := blk.(heading); ok && h.level == 2 {
			toc = append(toc, fmt.Sprintf(`<li><a href="#s%d">%s</a></li>`, i, e(h.text)))
		}
	}
	nav := ""
	if len(toc) > 1 {
		nav = fmt.Sprintf("<nav><ul>\n%s\n</ul></nav>\n", strings.Join(toc, "\n"))
	}
	for i, blk := range d.blocks {
		switch x := blk.(type) {
		case heading:
			lvl := min(max(x.level, 2), 6)
			fmt.Fprintf(&b, "<h%d id=\"s%d\">%s</h%d>\n", lvl, i, e(x.text), lvl)
		case para:
			switch {
			case x.strong:
				fmt.Fprintf(&b, "<p class=\"strong\">%s</p>\n", e(x.text))
			case x.small:
				fmt.Fprintf(&b, "<p class=\"small\">%s</p>\n", e(x.text))
			default:
				fmt.Fprintf(&b, "<p>%s</p>\n", e(x.text))
			}
		case list:
			b.WriteString("<ul>\n")
			for _, it := range x.items {
				fmt.Fprintf(&b, "<li>%s</li>\n", e(it))
			}
			b.WriteString("</ul>\n")
		case table:
			writeHTMLTable(&b, x)
		case answers:
			b.WriteString("<div class=\"answers\">\n")
			for _, a := range x.items {
				fmt.Fprintf(&b, "<section class=\"answer\">\n<h3>%s</h3>\n<p class=\"strong\">%s</p>\n", e(a.title), e(a.answer))
				writeEvidence(&b, a.evidence)
				b.WriteString("</section>\n")
			}
			b.WriteString("</div>\n")
		case contents:
			b.WriteString(nav)
		case figure:
			c := x.c
			src := "data:image/png;base64," + base64.StdEncoding.EncodeToString(c.PNG)
			if link {
				src = chartDir + "/" + url.PathEscape(c.Name) + ".png"
			}
			fmt.Fprintf(&b, "<figure id=\"chart-%s\">\n<img alt=\"%s\" src=\"%s\">\n<figcaption><strong>How to read it:</strong> %s",
				e(c.Name), e(c.Title), e(src), e(c.Read))
			if len(c.Notes) > 0 {
				b.WriteString("\n<ul>\n")
				for _, n := range c.Notes {
					fmt.Fprintf(&b, "<li>%s</li>\n", e(n))
				}
				b.WriteString("</ul>")
			}
			b.WriteString("</figcaption>\n</figure>\n")
		}
	}
	b.WriteString("</body>\n</html>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// answerShown is how many lines of an answer's evidence its box shows
// open: a real run's answer has dozens (every candidate set apart, what
// would settle each tie), which would push the other intent's answer
// and the page's first screen down; the rest open on a click.
const answerShown = 3

// writeEvidence writes an answer's evidence: its first answerShown lines,
// the rest folded under a summary that counts them.
func writeEvidence(b *strings.Builder, evidence []string) {
	e := html.EscapeString
	list := func(items []string) {
		b.WriteString("<ul>\n")
		for _, it := range items {
			fmt.Fprintf(b, "<li>%s</li>\n", e(it))
		}
		b.WriteString("</ul>\n")
	}
	if len(evidence) == 0 {
		return
	}
	list(evidence[:min(len(evidence), answerShown)])
	if rest := evidence[min(len(evidence), answerShown):]; len(rest) > 0 {
		fmt.Fprintf(b, "<details><summary>The rest of the evidence (%d lines)</summary>\n", len(rest))
		list(rest)
		b.WriteString("</details>\n")
	}
}

func writeHTMLTable(b *strings.Builder, t table) {
	if len(t.header) == 0 {
		return
	}
	e := html.EscapeString
	if t.folded != "" {
		fmt.Fprintf(b, "<details>\n<summary>%s (%d rows; click to open)</summary>\n", e(t.folded), len(t.rows))
		defer b.WriteString("</details>\n")
	}
	b.WriteString("<div class=\"tw\">\n<table>\n<thead><tr>")
	for _, h := range t.header {
		fmt.Fprintf(b, "<th>%s</th>", e(h))
	}
	b.WriteString("</tr></thead>\n<tbody>\n")
	for i, row := range t.rows {
		if i < len(t.flag) && t.flag[i] {
			b.WriteString(`<tr class="flag">`)
		} else {
			b.WriteString("<tr>")
		}
		for j := range t.header {
			cell := ""
			if j < len(row) {
				cell = row[j]
			}
			if j < len(t.numeric) && t.numeric[j] {
				fmt.Fprintf(b, `<td class="n">%s</td>`, e(cell))
			} else {
				fmt.Fprintf(b, "<td>%s</td>", e(cell))
			}
		}
		b.WriteString("</tr>\n")
	}
	b.WriteString("</tbody>\n</table>\n</div>\n")
}

package report

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// fmtRate formats grants per second compactly: 950, 9.5k, 21k, 1.2M.
func fmtRate(v float64) string {
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		return "n/a"
	case v >= 1e6:
		return trimZero(fmt.Sprintf("%.1f", v/1e6)) + "M"
	case v >= 1e4:
		return fmt.Sprintf("%.0fk", v/1e3)
	case v >= 1e3:
		return trimZero(fmt.Sprintf("%.1f", v/1e3)) + "k"
	case v >= 10 || v == 0:
		return fmt.Sprintf("%.0f", v)
	}
	return trimZero(fmt.Sprintf("%.2f", v))
}

// fmtRate3 formats grants per second to three significant digits (1.22k,
// 12.3k, 885), for medians and ranges, which two-digit rounding would
// make look equal when they are not.
func fmtRate3(v float64) string {
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		return "n/a"
	case v >= 1e6:
		return trimZero(strconv.FormatFloat(v/1e6, 'f', max(0, 2-int(math.Floor(math.Log10(v/1e6)))), 64)) + "M"
	case v >= 999.5:
		return trimZero(strconv.FormatFloat(v/1e3, 'f', max(0, 2-int(math.Floor(math.Log10(v/1e3)))), 64)) + "k"
	case v >= 10 || v == 0:
		return fmt.Sprintf("%.0f", v)
	}
	return trimZero(fmt.Sprintf("%.2f", v))
}

// fmtUS formats microseconds with a unit that keeps the number short:
// 850 µs, 3.2 ms, 1.5 s.
func fmtUS(us float64) string {
	switch {
	case math.IsNaN(us) || math.IsInf(us, 0):
		return "n/a"
	case us >= 1e6:
		return trimZero(fmt.Sprintf("%.2f", us/1e6)) + " s"
	case us >= 1e3:
		return trimZero(fmt.Sprintf("%.1f", us/1e3)) + " ms"
	}
	return fmt.Sprintf("%.0f µs", us)
}

// fmtSeconds formats a time in seconds for fault windows.
func fmtSeconds(s float64) string { return trimZero(fmt.Sprintf("%.1f", s)) }

// fmtRatio formats a ratio as ×1.23; an undefined ratio (a zero base) as
// "n/a".
func fmtRatio(r float64) string {
	if math.IsNaN(r) || math.IsInf(r, 0) {
		return "n/a"
	}
	return fmt.Sprintf("×%.2f", r)
}

func trimZero(s string) string {
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	return s
}

// fmtFloat formats a float for machine-readable output; NaN and
// infinities become the empty string.
func fmtFloat(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return ""
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

// plural returns "1 trial", "3 trials", "2 classes", "2 histories".
func plural(n int64, word string) string {
	if n == 1 {
		return "1 " + word
	}
	switch {
	case strings.HasSuffix(word, "s"), strings.HasSuffix(word, "x"), strings.HasSuffix(word, "sh"), strings.HasSuffix(word, "ch"):
		word += "es"
	case strings.HasSuffix(word, "y") && !strings.ContainsAny(word[len(word)-2:len(word)-1], "aeiou"):
		word = word[:len(word)-1] + "ies"
	default:
		word += "s"
	}
	return fmt.Sprintf("%d %s", n, word)
}

// nodesText returns "5 nodes" (the count the backend reported; the
// noop control reports 0).
func nodesText(n int) string { return plural(int64(max(n, 0)), "node") }

// joinAnd joins ["a","b","c"] as "a, b and c".
func joinAnd(s []string) string { return joinWith(s, " and ") }

// joinOr joins ["a","b","c"] as "a, b or c".
func joinOr(s []string) string { return joinWith(s, " or ") }

func joinWith(s []string, last string) string {
	switch len(s) {
	case 0:
		return ""
	case 1:
		return s[0]
	}
	return strings.Join(s[:len(s)-1], ", ") + last + s[len(s)-1]
}

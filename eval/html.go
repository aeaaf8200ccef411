package eval

import (
	"fmt"
	"html/template"
	"io"
	"sync"
)

// chart is one scorer's bar chart: a bar per variant (its mean score),
// the 95% interval as a whisker, the pass rate as a label.
type chart struct {
	Scorer string
	Height int
	Bars   []bar
}

type bar struct {
	Label, Short      string  // the variant, and as the chart shows it
	Y, Width          int     // the bar's row and length in pixels
	Low, High         int     // the whisker's ends
	Mean, PassRate    string  // labels
	MeanF             float64 // for the title
	Regression        bool
	DeltaText         string
	WhiskerY, TextY   int
	BarHeight, LabelX int
}

const (
	chartLeft  = 180 // the variant labels' column
	chartWidth = 400 // a score of 1
	rowHeight  = 28
)

func (r *Record) charts() []chart {
	var out []chart
	for _, s := range r.scorerNames() {
		ch := chart{Scorer: s}
		for _, c := range r.Matrix {
			if c.Scorer != s {
				continue
			}
			y := 10 + len(ch.Bars)*rowHeight
			short := c.Variant
			if r := []rune(short); len(r) > 26 {
				short = string(r[:25]) + "…"
			}
			b := bar{Label: c.Variant, Short: short, Y: y, Width: int(c.Mean * chartWidth), Low: chartLeft + int(c.Low*chartWidth), High: chartLeft + int(c.High*chartWidth),
				Mean: formatScore(c.Mean), PassRate: fmt.Sprintf("%.0f%%", 100*c.PassRate), MeanF: c.Mean,
				WhiskerY: y + 9, TextY: y + 14, BarHeight: 18, LabelX: chartLeft + chartWidth + 10}
			if r.Comparison != nil {
				for _, d := range r.Comparison.Deltas {
					if d.Variant == c.Variant && d.Scorer == s {
						b.DeltaText, b.Regression = fmt.Sprintf("%+.2f", d.Mean), d.Regression
					}
				}
			}
			ch.Bars = append(ch.Bars, b)
		}
		ch.Height = 20 + len(ch.Bars)*rowHeight
		out = append(out, ch)
	}
	return out
}

// htmlReport is built on first use, not at package initialisation, which
// every skein command pays.
var htmlReport = sync.OnceValue(func() *template.Template {
	return template.Must(template.New("report").Funcs(template.FuncMap{
		"score": formatScore, "cost": formatCost, "ms": formatMS, "pct": func(f float64) string { return fmt.Sprintf("%.0f%%", 100*f) },
		"signed": func(f float64) string { return fmt.Sprintf("%+.2f", f) }, "inc": func(i int) int { return i + 1 },
		"left": func() int { return chartLeft }, "width": func() int { return chartLeft + chartWidth + 280 }, "full": func() int { return chartLeft + chartWidth },
	}).Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>eval {{.R.Name}} — {{.R.ID}}</title>
<style>
body{font:14px/1.45 system-ui,sans-serif;margin:2em;color:#222;max-width:1100px}
h1{font-size:1.4em}h2{font-size:1.15em;margin-top:2em}
table{border-collapse:collapse;margin:.5em 0}th,td{padding:.25em .7em;border-bottom:1px solid #ddd;text-align:left;vertical-align:top}
th{background:#f4f4f4}td.num{text-align:right;font-variant-numeric:tabular-nums}
.reg{color:#b00020;font-weight:bold}.ok{color:#1b7f3b}.muted{color:#777}
svg text{font:12px system-ui,sans-serif}code{font-size:12px}
</style></head><body>
<h1>eval {{.R.Name}}</h1>
<p>{{.R.Summary}}<br><span class="muted">file {{.R.File}} · started {{.R.Started.Format "2006-01-02 15:04:05 UTC"}} · {{.R.Parallel}} at a time</span></p>
<h2>Matrix</h2>
<table><tr><th>variant</th><th>scorer</th><th>mean</th><th>pass rate</th><th>95% interval</th><th>cost</th><th>p50</th><th>p95</th><th>errors</th></tr>
{{range .R.Matrix}}<tr><td>{{.Variant}}</td><td>{{.Scorer}}</td><td class="num">{{score .Mean}}</td><td class="num">{{pct .PassRate}}</td><td class="num">{{score .Low}}–{{score .High}}</td><td class="num">{{cost .}}</td><td class="num">{{ms .P50MS}}</td><td class="num">{{ms .P95MS}}</td><td class="num">{{.Errors}}</td></tr>
{{end}}</table>
{{range .Charts}}<h2>{{.Scorer}}</h2>
<svg width="{{width}}" height="{{.Height}}" role="img" aria-label="mean score of {{.Scorer}} per variant">
<line x1="{{left}}" y1="0" x2="{{left}}" y2="{{.Height}}" stroke="#999"/><line x1="{{full}}" y1="0" x2="{{full}}" y2="{{.Height}}" stroke="#ddd" stroke-dasharray="3,3"/>
{{range .Bars}}<text x="{{left}}" dx="-8" y="{{.TextY}}" text-anchor="end">{{.Short}}<title>{{.Label}}</title></text>
<rect x="{{left}}" y="{{.Y}}" width="{{.Width}}" height="{{.BarHeight}}" fill="{{if .Regression}}#e57373{{else}}#5c8dd6{{end}}"><title>mean {{.Mean}}, pass rate {{.PassRate}}</title></rect>
<line x1="{{.Low}}" y1="{{.WhiskerY}}" x2="{{.High}}" y2="{{.WhiskerY}}" stroke="#222"/>
<text x="{{.LabelX}}" y="{{.TextY}}">{{.Mean}} · {{.PassRate}}{{if .DeltaText}} · {{.DeltaText}}{{if .Regression}} regression{{end}}{{end}}</text>
{{end}}</svg>
{{end}}
{{with .R.Comparison}}<h2>Compared with run {{.Baseline}}</h2>
<table><tr><th>variant</th><th>scorer</th><th>before</th><th>after</th><th>delta</th><th></th></tr>
{{range .Deltas}}<tr><td>{{.Variant}}</td><td>{{.Scorer}}</td><td class="num">{{score .Before}}</td><td class="num">{{score .After}}</td><td class="num">{{signed .Mean}}</td><td>{{if .Regression}}<span class="reg">regression</span>{{else}}<span class="ok">ok</span>{{end}}</td></tr>
{{end}}</table>
{{if .NewlyFailing}}<p>Newly failing: {{range $i, $f := .NewlyFailing}}{{if $i}}; {{end}}{{$f}}{{end}}</p>{{end}}
{{end}}
<h2>Failures ({{len .Failures}})</h2>
{{if .Failures}}<table><tr><th>variant</th><th>case</th><th>repeat</th><th>scorer</th><th>reason</th><th>session</th></tr>
{{range .Failures}}<tr><td>{{.Variant}}</td><td>{{.Case}}</td><td class="num">{{inc .Repeat}}</td><td>{{.Scorer}}</td><td>{{.Reason}}</td><td>{{if .SessionID}}<code>{{.SessionID}}</code>{{end}}</td></tr>
{{end}}</table>{{else}}<p class="ok">Every score passed.</p>{{end}}
<p class="muted">A case's session: <code>skein sessions show SESSION</code>, or the viewer of <code>skein serve</code> on the same store.</p>
</body></html>
`))
})

// WriteHTML writes a self-contained page (no script, no external file):
// the matrix, a bar chart per scorer (mean per variant with its 95%
// interval and pass rate, regressions in red), the comparison with the
// baseline and every failure with its reason and session.
func WriteHTML(w io.Writer, r *Record) error {
	return htmlReport().Execute(w, map[string]any{"R": r, "Charts": r.charts(), "Failures": r.Failures()})
}

package console

import (
	"fmt"
	"html/template"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/airlock-gate/airlock/services/shared/calls"
)

// Charts are drawn on the server as inline SVG: no script, no build step,
// no external asset, and the page's content security policy stays strict
// (colours come from style.css classes, not inline styles). Every text in
// a chart is escaped here.

// AuditDecision is one call a person was asked about and its outcome, for
// the analytics charts.
type AuditDecision struct {
	Tool string
	// Outcome is approved, rejected, changes_requested, expired or canceled.
	Outcome            string
	By                 string
	AskedAt, DecidedAt time.Time
}

// outcomes a person decides, in the order charts stack them.
var chartOutcomes = []struct{ Key, Label string }{
	{"approved", "approved"}, {"rejected", "rejected"}, {"changes_requested", "changes requested"}, {"expired", "expired"},
}

// svgText escapes s for SVG text and attributes.
func svgText(s string) string { return template.HTMLEscapeString(s) }

type svg struct {
	b    strings.Builder
	w, h int
}

func newSVG(w, h int, label string) *svg {
	s := &svg{w: w, h: h}
	fmt.Fprintf(&s.b, `<svg class="chart" viewBox="0 0 %d %d" role="img" aria-label="%s" xmlns="http://www.w3.org/2000/svg"><title>%s</title>`, w, h, svgText(label), svgText(label))
	return s
}

func (s *svg) rect(class string, x, y, w, h float64, tip string) {
	fmt.Fprintf(&s.b, `<rect class="%s" x="%.1f" y="%.1f" width="%.1f" height="%.1f"><title>%s</title></rect>`, class, x, y, max(w, 0), max(h, 0), svgText(tip))
}

func (s *svg) text(class string, x, y float64, anchor, t string) {
	fmt.Fprintf(&s.b, `<text class="%s" x="%.1f" y="%.1f" text-anchor="%s">%s</text>`, class, x, y, anchor, svgText(t))
}

func (s *svg) line(class string, x1, y1, x2, y2 float64) {
	fmt.Fprintf(&s.b, `<line class="%s" x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f"/>`, class, x1, y1, x2, y2)
}

func (s *svg) html() template.HTML {
	s.b.WriteString(`</svg>`)
	return template.HTML(s.b.String())
}

// empty is a chart frame saying there is nothing to draw yet.
func emptyChart(label, msg string) template.HTML {
	s := newSVG(640, 80, label)
	s.text("chart-empty", 320, 45, "middle", msg)
	return s.html()
}

// bucketing chooses hour or day buckets for the span of the decisions.
func bucketing(ds []AuditDecision) (time.Duration, string) {
	if len(ds) == 0 {
		return time.Hour, "15:04"
	}
	first, last := ds[0].DecidedAt, ds[0].DecidedAt
	for _, d := range ds {
		if d.DecidedAt.Before(first) {
			first = d.DecidedAt
		}
		if d.DecidedAt.After(last) {
			last = d.DecidedAt
		}
	}
	if last.Sub(first) <= 48*time.Hour {
		return time.Hour, "Jan 2 15:00"
	}
	return 24 * time.Hour, "Jan 2"
}

type bucket struct {
	start  time.Time
	counts map[string]int
	secs   []float64
}

func buckets(ds []AuditDecision) ([]*bucket, string) {
	size, format := bucketing(ds)
	byStart := map[time.Time]*bucket{}
	for _, d := range ds {
		start := d.DecidedAt.UTC().Truncate(size)
		b := byStart[start]
		if b == nil {
			b = &bucket{start: start, counts: map[string]int{}}
			byStart[start] = b
		}
		b.counts[d.Outcome]++
		if d.Outcome != "expired" && d.Outcome != "canceled" {
			b.secs = append(b.secs, d.DecidedAt.Sub(d.AskedAt).Seconds())
		}
	}
	out := make([]*bucket, 0, len(byStart))
	for _, b := range byStart {
		out = append(out, b)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].start.Before(out[j].start) })
	if len(out) > 60 {
		out = out[len(out)-60:] // the most recent 60 buckets
	}
	return out, format
}

const (
	chartW, chartH         = 640, 240
	padL, padR, padT, padB = 48.0, 12.0, 16.0, 40.0
	plotW, plotH           = chartW - padL - padR, chartH - padT - padB
	legendY                = chartH - 6.0
	axisLabelY             = chartH - padB + 14
	maxAxisLabels          = 8
	rateBarH, rateLabelW   = 22.0, 210.0
	rateChartW             = 640
	histogramNote          = "calls"
	decisionsChartLabel    = "Decisions over time, by outcome"
	timeToDecideChartLabel = "Median time to decide over time"
	distributionChartLabel = "How long people took to decide"
	approvalRateChartLabel = "Approval rate per tool"
	noDecisionsYet         = "No decisions by people in this period yet."
)

// decisionsChart stacks each bucket's outcomes.
func decisionsChart(ds []AuditDecision) template.HTML {
	if len(ds) == 0 {
		return emptyChart(decisionsChartLabel, noDecisionsYet)
	}
	bs, format := buckets(ds)
	top := 1
	for _, b := range bs {
		n := 0
		for _, c := range b.counts {
			n += c
		}
		top = max(top, n)
	}
	s := newSVG(chartW, chartH, decisionsChartLabel)
	scale := axes(s, float64(top), 1, func(v float64) string { return fmt.Sprintf("%.0f", v) })
	slot := plotW / float64(len(bs))
	bw := math.Min(48, math.Max(2, slot*0.7))
	for i, b := range bs {
		x := padL + float64(i)*slot + (slot-bw)/2
		y := padT + plotH
		for _, o := range chartOutcomes {
			n := b.counts[o.Key]
			if n == 0 {
				continue
			}
			h := plotH * float64(n) / scale
			y -= h
			s.rect("bar-"+o.Key, x, y, bw, h, fmt.Sprintf("%s: %d %s", b.start.Format(format), n, o.Label))
		}
		timeLabel(s, i, len(bs), padL+float64(i)*slot+slot/2, b.start.Format(format))
	}
	x := padL
	for _, o := range chartOutcomes {
		s.rect("bar-"+o.Key, x, legendY-9, 10, 10, o.Label)
		s.text("chart-legend", x+14, legendY, "start", o.Label)
		x += 14 + float64(len(o.Label))*7 + 18
	}
	return s.html()
}

// timeToDecideChart draws each bucket's median time to decide.
func timeToDecideChart(ds []AuditDecision) template.HTML {
	bs, format := buckets(ds)
	var pts []*bucket
	top := 1.0
	for _, b := range bs {
		if len(b.secs) > 0 {
			pts = append(pts, b)
			top = math.Max(top, median(b.secs))
		}
	}
	if len(pts) == 0 {
		return emptyChart(timeToDecideChartLabel, noDecisionsYet)
	}
	s := newSVG(chartW, chartH, timeToDecideChartLabel)
	top = axes(s, top, 0.1, func(v float64) string { return secsText(v) })
	slot := plotW / float64(len(pts))
	var path strings.Builder
	for i, b := range pts {
		m := median(b.secs)
		x, y := padL+float64(i)*slot+slot/2, padT+plotH-plotH*m/top
		if i == 0 {
			fmt.Fprintf(&path, "M%.1f %.1f", x, y)
		} else {
			fmt.Fprintf(&path, " L%.1f %.1f", x, y)
		}
		timeLabel(s, i, len(pts), x, b.start.Format(format))
	}
	fmt.Fprintf(&s.b, `<path class="chart-line" d="%s"/>`, path.String())
	for i, b := range pts {
		m := median(b.secs)
		x, y := padL+float64(i)*slot+slot/2, padT+plotH-plotH*m/top
		fmt.Fprintf(&s.b, `<circle class="chart-point" cx="%.1f" cy="%.1f" r="3.5"><title>%s</title></circle>`, x, y,
			svgText(fmt.Sprintf("%s: median %s over %d decision(s)", b.start.Format(format), secsText(m), len(b.secs))))
	}
	return s.html()
}

// distributionBins are the time-to-decide ranges of the histogram.
var distributionBins = []struct {
	upTo  time.Duration
	label string
}{
	{5 * time.Second, "< 5 s"}, {30 * time.Second, "5–30 s"}, {time.Minute, "30 s–1 min"}, {5 * time.Minute, "1–5 min"},
	{15 * time.Minute, "5–15 min"}, {time.Hour, "15–60 min"}, {math.MaxInt64, "> 1 h"},
}

// distributionChart is a histogram of the time people took to decide.
func distributionChart(ds []AuditDecision) template.HTML {
	counts := make([]int, len(distributionBins))
	total := 0
	for _, d := range ds {
		if d.Outcome == "expired" || d.Outcome == "canceled" {
			continue
		}
		took := d.DecidedAt.Sub(d.AskedAt)
		for i, b := range distributionBins {
			if took < b.upTo {
				counts[i]++
				total++
				break
			}
		}
	}
	if total == 0 {
		return emptyChart(distributionChartLabel, noDecisionsYet)
	}
	top := 1
	for _, n := range counts {
		top = max(top, n)
	}
	s := newSVG(chartW, chartH, distributionChartLabel)
	scale := axes(s, float64(top), 1, func(v float64) string { return fmt.Sprintf("%.0f", v) })
	slot := plotW / float64(len(counts))
	for i, n := range counts {
		h := plotH * float64(n) / scale
		x := padL + float64(i)*slot + slot*0.1
		class := "bar-approved"
		if distributionBins[i].upTo <= 5*time.Second {
			class = "bar-fast" // approvals this quick may be rubber stamps
		}
		s.rect(class, x, padT+plotH-h, slot*0.8, h, fmt.Sprintf("%s: %d %s (%.0f%%)", distributionBins[i].label, n, histogramNote, 100*float64(n)/float64(total)))
		s.text("chart-axis", padL+float64(i)*slot+slot/2, axisLabelY, "middle", distributionBins[i].label)
	}
	return s.html()
}

// approvalRateChart is a horizontal bar per tool: the share of decided
// calls that were approved.
func approvalRateChart(tools []AuditToolStats) template.HTML {
	var rows []AuditToolStats
	for _, t := range tools {
		if t.Approved+t.Rejected+t.Changes > 0 {
			rows = append(rows, t)
		}
	}
	if len(rows) == 0 {
		return emptyChart(approvalRateChartLabel, "No tool was decided by a person in this period yet.")
	}
	h := int(padT) + len(rows)*int(rateBarH+6) + 10
	s := newSVG(rateChartW, h, approvalRateChartLabel)
	barW := rateChartW - rateLabelW - 60
	for i, t := range rows {
		y := padT + float64(i)*(rateBarH+6)
		decided := t.Approved + t.Rejected + t.Changes
		s.text("chart-label", rateLabelW-8, y+rateBarH*0.7, "end", calls.Cut(t.Tool, 30))
		s.rect("bar-track", rateLabelW, y, float64(barW), rateBarH, "")
		s.rect("bar-approved", rateLabelW, y, float64(barW)*t.ApprovalRate, rateBarH,
			fmt.Sprintf("%s: %d of %d decided calls approved (%s)", t.Tool, t.Approved, decided, pct(t.ApprovalRate)))
		s.text("chart-value", rateLabelW+float64(barW)+6, y+rateBarH*0.7, "start", pct(t.ApprovalRate))
	}
	return s.html()
}

// axes draws the value axis: four gridlines at round steps (1, 2 or 5
// times a power of ten, at least minStep) from 0 to the first one at or
// above top. It returns the axis's top, which values are scaled to.
func axes(s *svg, top, minStep float64, format func(float64) string) float64 {
	const ticks = 4
	step := niceStep(math.Max(top/ticks, minStep))
	for i := 0; i <= ticks; i++ {
		y := padT + plotH - plotH*float64(i)/ticks
		s.line("chart-grid", padL, y, padL+plotW, y)
		s.text("chart-axis", padL-6, y+4, "end", format(step*float64(i)))
	}
	s.line("chart-axis-line", padL, padT+plotH, padL+plotW, padT+plotH)
	return step * ticks
}

// niceStep is the smallest of 1, 2 or 5 times a power of ten that is at least x.
func niceStep(x float64) float64 {
	if x <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(x)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= x*(1-1e-9) {
			return m * p
		}
	}
	return 10 * p
}

// timeLabel labels every few buckets so labels never overlap.
func timeLabel(s *svg, i, n int, x float64, label string) {
	step := max(1, (n+maxAxisLabels-1)/maxAxisLabels)
	if i%step == 0 {
		s.text("chart-axis", x, axisLabelY, "middle", label)
	}
}

func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s) == 0 {
		return 0
	}
	return s[(len(s)-1)/2]
}

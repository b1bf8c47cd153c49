//go:build linux

package main

// Charts: latency distributions (one box plot panel per scenario) and
// concurrency scaling (throughput and latency against the number of busy
// sandboxes), as PNG files next to the Markdown table.

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"sort"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// peerColor gives each system the same color in every chart.
func peerColor(name string) color.Color {
	switch {
	case len(name) >= 4 && (name[:4] == "boxd" || name[:4] == "boxc"):
		return color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff} // blue
	case len(name) >= 3 && name[:3] == "ctr":
		return color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff} // green
	default:
		return color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff} // docker: orange
	}
}

// ticks125 marks a log axis at 1, 2 and 5 times powers of ten (LogTicks
// labels powers of ten only, which leaves short ranges unlabelled); on a
// range narrower than that gives, it marks 1 to 9 times powers of ten.
type ticks125 struct{}

func (ticks125) Ticks(lo, hi float64) []plot.Tick {
	// A log axis has no tick at or below zero, and an infinite bound
	// would never end the loop over powers of ten below.
	if !logDrawable(lo) || !logDrawable(hi) || lo > hi {
		return nil
	}
	mark := func(ms []float64) []plot.Tick {
		var ts []plot.Tick
		for e := math.Floor(math.Log10(lo)); e <= math.Ceil(math.Log10(hi)); e++ {
			for _, m := range ms {
				v := m * math.Pow(10, e)
				if v >= lo/1.01 && v <= hi*1.01 {
					ts = append(ts, plot.Tick{Value: v, Label: fmt.Sprintf("%g", v)})
				}
			}
		}
		return ts
	}
	if ts := mark([]float64{1, 2, 5}); len(ts) >= 3 {
		return ts
	}
	return mark([]float64{1, 2, 3, 4, 5, 6, 7, 8, 9})
}

// wrap breaks a title into lines of about width characters.
func wrap(s string, width int) string {
	var lines []string
	line := ""
	for _, w := range strings.Fields(s) {
		if line != "" && len(line)+1+len(w) > width {
			lines = append(lines, line)
			line = w
			continue
		}
		if line != "" {
			line += " "
		}
		line += w
	}
	return strings.Join(append(lines, line), "\n")
}

// logDrawable reports whether v can stand on a log axis: finite and above
// zero. A zero, negative, NaN or infinite value makes gonum's log scale
// draw from -Inf (which spins for ever), so such rows stay in the tables
// and are left out of the charts, and the report says so.
func logDrawable(v float64) bool {
	return v > 0 && !math.IsInf(v, 0) && !math.IsNaN(v)
}

// valuesDrawable reports whether every value of a box can stand on a log
// axis; one that cannot would put the axis (or the box's whiskers) at
// -Inf, NaN or +Inf.
func valuesDrawable(v plotter.Values) bool {
	if len(v) == 0 {
		return false
	}
	for _, x := range v {
		if !logDrawable(x) {
			return false
		}
	}
	return true
}

func msValues(s []time.Duration) plotter.Values {
	v := make(plotter.Values, len(s))
	for i, d := range s {
		v[i] = float64(d) / 1e6
	}
	return v
}

// boxPanel is one scenario's distributions in milliseconds, one box per
// peer.
type boxPanel struct {
	title  string
	names  []string
	values []plotter.Values
}

// latencyPanels gives the panels of the latency chart. Which rows cannot
// be drawn is decided when the chart is drawn (drawablePanels).
func latencyPanels(lats []*latency, bursts []*burstResult) []boxPanel {
	var ps []boxPanel
	add := func(p *boxPanel, name string, s []time.Duration) {
		if len(s) > 0 {
			p.names = append(p.names, name)
			p.values = append(p.values, msValues(s))
		}
	}
	for _, l := range lats {
		p := boxPanel{title: l.scenario}
		for _, name := range l.peers {
			add(&p, name, l.samples[name])
		}
		ps = append(ps, p)
	}
	if len(bursts) > 0 {
		p := boxPanel{title: fmt.Sprintf("time to interactive, burst of %d", bursts[0].n)}
		for _, b := range bursts {
			add(&p, b.peer, b.samples)
		}
		ps = append(ps, p)
	}
	return ps
}

// drawablePanels keeps the boxes whose every value can stand on the
// chart's log scale and names the others: a row with a value at zero or
// below (a difference, such as boxd's part beyond the transport's floor,
// or a measurement gone wrong) or not finite is in the table only.
func drawablePanels(in []boxPanel) (ps []boxPanel, omitted []string) {
	for _, p := range in {
		q := boxPanel{title: p.title}
		for i, v := range p.values {
			if valuesDrawable(v) {
				q.names = append(q.names, p.names[i])
				q.values = append(q.values, v)
			} else {
				omitted = append(omitted, p.title+", "+p.names[i])
			}
		}
		if len(q.names) > 0 {
			ps = append(ps, q)
		}
	}
	return ps, omitted
}

func (bp boxPanel) plot() (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = wrap(bp.title, 44)
	p.Y.Label.Text = "ms (log scale)"
	p.X.Tick.Label.Font.Size = vg.Points(9)
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = ticks125{}
	lo, hi := math.Inf(1), 0.0
	for i, vals := range bp.values {
		for _, v := range vals {
			lo, hi = math.Min(lo, v), math.Max(hi, v)
		}
		b, err := plotter.NewBoxPlot(vg.Points(28), float64(i), vals)
		if err != nil {
			return nil, err
		}
		b.FillColor = peerColor(bp.names[i])
		p.Add(b)
	}
	p.NominalX(bp.names...)
	// Pad the range so the boxes do not touch the frame (and a single
	// value, or all equal, still spans a range).
	p.Y.Min, p.Y.Max = lo/1.3, hi*1.3
	return p, nil
}

// writeLatencyChart draws the drawable boxes of the panels in a grid of
// two columns and names the rows it left out.
func writeLatencyChart(path string, in []boxPanel) (omitted []string, err error) {
	panels, omitted := drawablePanels(in)
	if len(panels) == 0 {
		return omitted, nil
	}
	cols := 2
	rows := (len(panels) + cols - 1) / cols
	plots := make([][]*plot.Plot, rows)
	for j := range plots {
		plots[j] = make([]*plot.Plot, cols)
	}
	for i, bp := range panels {
		p, err := bp.plot()
		if err != nil {
			return omitted, err
		}
		plots[i/cols][i%cols] = p
	}
	return omitted, drawGrid(path, plots, 9*vg.Inch, vg.Length(rows)*3.2*vg.Inch)
}

// writeConcurrencyChart draws throughput and p50/p99 latency against the
// number of sandboxes busy at once, and says which points it left out.
func writeConcurrencyChart(path string, rs []*concResult) (omitted []string, err error) {
	if len(rs) == 0 {
		return nil, nil
	}
	byPeer := map[string][]*concResult{}
	var peers []string
	for _, r := range rs {
		if _, ok := byPeer[r.peer]; !ok {
			peers = append(peers, r.peer)
		}
		byPeer[r.peer] = append(byPeer[r.peer], r)
	}
	tp := plot.New()
	tp.Title.Text = "throughput of `true` execs"
	tp.X.Label.Text = "sandboxes busy at once"
	tp.Y.Label.Text = "execs per second"
	tp.X.Scale, tp.X.Tick.Marker = plot.LogScale{}, ticks125{}
	tp.Legend.Top, tp.Legend.Left = true, true
	tp.Legend.XOffs = vg.Millimeter * 3
	lp := plot.New()
	lp.Title.Text = "exec latency (solid p50, dashed p99)"
	lp.X.Label.Text = "sandboxes busy at once"
	lp.Y.Label.Text = "ms (log scale)"
	lp.Y.Scale = plot.LogScale{}
	lp.Y.Tick.Marker = ticks125{}
	lp.X.Scale, lp.X.Tick.Marker = plot.LogScale{}, ticks125{}
	lp.Legend.Top, lp.Legend.Left = true, true
	lp.Legend.XOffs = vg.Millimeter * 3
	lo, hi, top := math.Inf(1), 0.0, 0.0
	for _, name := range peers {
		series := byPeer[name]
		sort.Slice(series, func(i, j int) bool { return series[i].level < series[j].level })
		var thr, p50, p99 plotter.XYs
		for _, r := range series {
			if len(r.lat) == 0 {
				continue
			}
			x := float64(r.level)
			a, b := float64(quantile(r.lat, 0.5))/1e6, float64(quantile(r.lat, 0.99))/1e6
			if !logDrawable(x) || !logDrawable(a) || !logDrawable(b) || !logDrawable(r.throughput()) {
				omitted = append(omitted, fmt.Sprintf("concurrency %d, %s", r.level, name))
				continue
			}
			thr = append(thr, plotter.XY{X: x, Y: r.throughput()})
			top = math.Max(top, r.throughput())
			p50 = append(p50, plotter.XY{X: x, Y: a})
			p99 = append(p99, plotter.XY{X: x, Y: b})
			lo, hi = math.Min(lo, a), math.Max(hi, b)
		}
		if len(thr) == 0 {
			continue
		}
		c := peerColor(name)
		for _, s := range []struct {
			p      *plot.Plot
			xys    plotter.XYs
			label  string
			dashed bool
		}{{tp, thr, name, false}, {lp, p50, name + " p50", false}, {lp, p99, name + " p99", true}} {
			l, pts, err := plotter.NewLinePoints(s.xys)
			if err != nil {
				return omitted, err
			}
			l.Color, pts.Color = c, c
			l.Width = vg.Points(1.5)
			if s.dashed {
				l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
			}
			s.p.Add(l, pts)
			s.p.Legend.Add(s.label, l, pts)
		}
	}
	// Head room for the legends.
	tp.Y.Min, tp.Y.Max = 0, top*1.4
	if top == 0 {
		return omitted, nil // no point could be drawn
	}
	lp.Y.Min, lp.Y.Max = lo/1.5, hi*6
	return omitted, drawGrid(path, [][]*plot.Plot{{tp, lp}}, 10*vg.Inch, 4*vg.Inch)
}

func drawGrid(path string, plots [][]*plot.Plot, w, h vg.Length) error {
	// A white background: PNG viewers with dark themes show transparency
	// as black.
	img := vgimg.NewWith(vgimg.UseWH(w, h), vgimg.UseDPI(110), vgimg.UseBackgroundColor(color.White))
	dc := draw.New(img)
	t := draw.Tiles{Rows: len(plots), Cols: len(plots[0]), PadX: vg.Millimeter * 6, PadY: vg.Millimeter * 6,
		PadTop: vg.Millimeter * 3, PadBottom: vg.Millimeter * 3, PadLeft: vg.Millimeter * 3, PadRight: vg.Millimeter * 3}
	canvases := plot.Align(plots, t, dc)
	for j := range plots {
		for i, p := range plots[j] {
			if p != nil {
				p.Draw(canvases[j][i])
			}
		}
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

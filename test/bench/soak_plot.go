package main

import (
	"fmt"
	"image/color"
	"os"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// plotSoak draws the soak's samples into a PNG: the sequencer's RSS, its
// goroutines, kube-apiserver's open watches, and the node rollouts and the
// sequencer's writes per sample, each against the minutes of the soak.
func plotSoak(samples []soakSample, path string) error {
	series := []struct {
		title, unit string
		lines       []func(soakSample) float64
		names       []string
	}{
		{"sequencer RSS", "MiB", []func(soakSample) float64{func(s soakSample) float64 { return s.RSSMiB }}, nil},
		{"sequencer goroutines", "goroutines", []func(soakSample) float64{func(s soakSample) float64 { return float64(s.Goroutines) }}, nil},
		{"open watches (kube-apiserver, every client)", "watches", []func(soakSample) float64{func(s soakSample) float64 { return float64(s.Watches) }}, nil},
		{"per sample", "count", []func(soakSample) float64{
			func(s soakSample) float64 { return float64(s.Rollouts) },
			func(s soakSample) float64 { return float64(s.Writes) },
			func(s soakSample) float64 { return float64(s.Events) },
		}, []string{"node rollouts", "sequencer writes", "Events"}},
	}
	colors := []color.Color{color.RGBA{B: 200, A: 255}, color.RGBA{R: 200, A: 255}, color.RGBA{G: 150, A: 255}}
	plots := make([][]*plot.Plot, len(series))
	for i, s := range series {
		p := plot.New()
		p.Title.Text = s.title
		p.X.Label.Text = "minutes"
		p.Y.Label.Text = s.unit
		p.Y.Min = 0
		for j, f := range s.lines {
			pts := make(plotter.XYs, len(samples))
			for k, x := range samples {
				pts[k] = plotter.XY{X: x.At.Minutes(), Y: f(x)}
			}
			line, err := plotter.NewLine(pts)
			if err != nil {
				return err
			}
			line.Color = colors[j]
			line.Width = vg.Points(1.5)
			p.Add(line)
			if s.names != nil {
				p.Legend.Add(s.names[j], line)
			}
		}
		p.Legend.Top = true
		plots[i] = []*plot.Plot{p}
	}
	img := vgimg.New(vg.Points(720), vg.Points(900))
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: len(series), Cols: 1, PadTop: vg.Points(4), PadBottom: vg.Points(4), PadX: vg.Points(8), PadY: vg.Points(8)}
	canvases := plot.Align(plots, tiles, dc)
	for i := range plots {
		plots[i][0].Draw(canvases[i][0])
	}
	png := vgimg.PngCanvas{Canvas: img}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := png.WriteTo(f); err != nil {
		f.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return f.Close()
}

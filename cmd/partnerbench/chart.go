package main

import (
	"encoding/csv"
	"fmt"
	"image/color"
	"os"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// chart draws the scale run's CSV (see runScale) as one PNG of two
// panels: list-100 p50 against the workspace's size (first and deep
// pages, and a small workspace among many), and token-check throughput
// against the number of live tokens.
func chart(csvPath, pngPath string) error {
	f, err := os.Open(csvPath)
	if err != nil {
		return err
	}
	recs, err := csv.NewReader(f).ReadAll()
	f.Close()
	if err != nil {
		return fmt.Errorf("read %s: %w", csvPath, err)
	}
	series := map[string]plotter.XYs{}
	for _, r := range recs[1:] {
		size, _ := strconv.ParseFloat(r[1], 64)
		rps, _ := strconv.ParseFloat(r[3], 64)
		p50, _ := strconv.ParseFloat(r[4], 64)
		switch r[0] {
		case "list":
			series["list "+r[2]] = append(series["list "+r[2]], plotter.XY{X: size, Y: p50})
		case "tenants":
			series["tenants"] = append(series["tenants"], plotter.XY{X: size, Y: p50})
		case "tokens":
			series["tokens"] = append(series["tokens"], plotter.XY{X: size, Y: rps})
		}
	}

	lists := plot.New()
	lists.Title.Text = "GET /api/v1/contacts?limit=100"
	lists.X.Label.Text = "contacts in the workspace"
	lists.Y.Label.Text = "p50 (ms)"
	lists.X.Scale, lists.X.Tick.Marker = plot.LogScale{}, plot.LogTicks{Prec: -1}
	lists.Y.Min = 0
	for i, name := range []string{"list first", "list deep", "tenants", "list custom-eq", "list search"} {
		xy := series[name]
		if len(xy) == 0 {
			continue
		}
		label := map[string]string{"list first": "first page", "list deep": "page 90 % deep", "tenants": "1 of 1,000 workspaces of 1k",
			"list custom-eq": "customFields.code= (1 in 1,000)", "list search": "q= (a last name)"}[name]
		if err := addSeries(lists, xy, label, i); err != nil {
			return err
		}
	}

	tokens := plot.New()
	tokens.Title.Text = "GET /api/v1/me (token check)"
	tokens.X.Label.Text = "live tokens"
	tokens.Y.Label.Text = "req/s"
	tokens.X.Scale, tokens.X.Tick.Marker = plot.LogScale{}, plot.LogTicks{Prec: -1}
	tokens.Y.Min = 0
	if xy := series["tokens"]; len(xy) > 0 {
		if err := addSeries(tokens, xy, "working set of 1,000 tokens", 0); err != nil {
			return err
		}
	}

	img := vgimg.New(vg.Points(900), vg.Points(360))
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 1, Cols: 2, PadX: vg.Points(20), PadTop: vg.Points(10), PadBottom: vg.Points(10), PadLeft: vg.Points(10), PadRight: vg.Points(10)}
	canvases := plot.Align([][]*plot.Plot{{lists, tokens}}, tiles, dc)
	lists.Draw(canvases[0][0])
	tokens.Draw(canvases[0][1])
	out, err := os.Create(pngPath)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(out); err != nil {
		out.Close()
		return fmt.Errorf("write %s: %w", pngPath, err)
	}
	return out.Close()
}

var palette = []color.Color{color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}, color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff}, color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff}}

func addSeries(p *plot.Plot, xy plotter.XYs, label string, i int) error {
	line, points, err := plotter.NewLinePoints(xy)
	if err != nil {
		return err
	}
	line.Color, points.Color = palette[i%len(palette)], palette[i%len(palette)]
	points.Shape = draw.CircleGlyph{}
	p.Add(line, points)
	p.Legend.Add(label, line, points)
	p.Legend.Top = true
	return nil
}

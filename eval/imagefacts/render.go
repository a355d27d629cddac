package imagefacts

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/png"

	"golang.org/x/image/draw"
	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"
)

// Image size. Both sides stay within the 800 px the compactor sends, so
// the stored bytes reach the model unchanged (images.Downscale returns an
// image already within its side as it is) and the tEXt chunk with them.
const (
	Width  = 640
	Height = 400
	// textScale enlarges the 7x13 bitmap font so a model reads it easily.
	textScale = 2
)

var (
	white  = color.RGBA{255, 255, 255, 255}
	black  = color.RGBA{20, 20, 20, 255}
	grey   = color.RGBA{150, 150, 150, 255}
	light  = color.RGBA{228, 228, 228, 255}
	dark   = color.RGBA{32, 34, 38, 255}
	red    = color.RGBA{220, 60, 50, 255}
	green  = color.RGBA{40, 150, 70, 255}
	blue   = color.RGBA{50, 100, 200, 255}
	yellow = color.RGBA{250, 215, 90, 255}
)

// Render draws the fact's image as a PNG with the fact in a tEXt chunk.
// The same fact always gives the same bytes.
func Render(f Fact) ([]byte, error) {
	c := newCanvas(Width, Height)
	switch f.Kind {
	case ErrorScreenshot:
		drawError(c, f)
	case Chart:
		drawChart(c, f)
	case Diagram:
		drawDiagram(c, f)
	case Receipt:
		drawReceipt(c, f)
	case UIBug:
		drawUIBug(c, f)
	case ConfigDiff:
		drawDiff(c, f)
	default:
		return nil, fmt.Errorf("imagefacts: no drawing for kind %q", f.Kind)
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, c.img); err != nil {
		return nil, fmt.Errorf("imagefacts: encode %s: %w", f.Kind, err)
	}
	return WithText(buf.Bytes(), TextKeyword, f.Fact)
}

type canvas struct{ img *image.RGBA }

func newCanvas(w, h int) *canvas {
	c := &canvas{img: image.NewRGBA(image.Rect(0, 0, w, h))}
	c.fill(c.img.Bounds(), white)
	return c
}

func (c *canvas) fill(r image.Rectangle, col color.Color) {
	draw.Draw(c.img, r, image.NewUniform(col), image.Point{}, draw.Src)
}

// box draws a rectangle's outline, 2 px wide.
func (c *canvas) box(r image.Rectangle, col color.Color) {
	c.fill(image.Rect(r.Min.X, r.Min.Y, r.Max.X, r.Min.Y+2), col)
	c.fill(image.Rect(r.Min.X, r.Max.Y-2, r.Max.X, r.Max.Y), col)
	c.fill(image.Rect(r.Min.X, r.Min.Y, r.Min.X+2, r.Max.Y), col)
	c.fill(image.Rect(r.Max.X-2, r.Min.Y, r.Max.X, r.Max.Y), col)
}

// text draws s with its top left corner at (x, y), enlarged by textScale.
// Each character is 14 px wide and 26 px tall.
func (c *canvas) text(x, y int, s string, col color.Color) {
	face := basicfont.Face7x13
	w := font.MeasureString(face, s).Ceil()
	if w == 0 {
		return
	}
	small := image.NewRGBA(image.Rect(0, 0, w, face.Height))
	d := font.Drawer{Dst: small, Src: image.NewUniform(col), Face: face, Dot: fixed.P(0, face.Ascent)}
	d.DrawString(s)
	dst := image.Rect(x, y, x+w*textScale, y+face.Height*textScale)
	draw.NearestNeighbor.Scale(c.img, dst, small, small.Bounds(), draw.Over, nil)
}

func drawError(c *canvas, f Fact) {
	c.fill(c.img.Bounds(), dark)
	c.fill(image.Rect(0, 0, Width, 40), color.RGBA{70, 72, 78, 255})
	for i, col := range []color.Color{red, yellow, green} {
		c.fill(image.Rect(14+i*22, 13, 28+i*22, 27), col)
	}
	c.text(90, 7, "payment-service logs", light)
	y := 70
	for _, line := range f.Detail {
		c.text(20, y, line, grey)
		y += 40
	}
	c.fill(image.Rect(10, y-6, Width-10, y+32), color.RGBA{90, 30, 30, 255})
	c.text(20, y, "ERROR "+f.Fact, color.RGBA{255, 170, 160, 255})
}

func drawChart(c *canvas, f Fact) {
	c.text(20, 14, f.Fact, black)
	c.text(20, 48, f.Detail[0], grey)
	base, left := Height-60, 60
	c.fill(image.Rect(left, 90, left+2, base), black)
	c.fill(image.Rect(left, base, Width-30, base+2), black)
	heights := []int{90, 140, 230, 170, 150, 120} // March the tallest
	for i, h := range heights {
		x := left + 20 + i*88
		col := blue
		if i == 2 {
			col = red
		}
		c.fill(image.Rect(x, base-h, x+56, base), col)
	}
	c.text(left+20, base+12, "Jan   Feb   Mar   Apr   May   Jun", black)
}

func drawDiagram(c *canvas, f Fact) {
	c.text(20, 14, f.Fact, black)
	boxes := []image.Rectangle{
		image.Rect(30, 120, 150, 180),  // web
		image.Rect(220, 120, 420, 180), // checkout-api
		image.Rect(460, 260, 620, 320), // ledger-db
		image.Rect(220, 300, 400, 360), // fraud-check
	}
	for i, r := range boxes {
		c.box(r, blue)
		c.text(r.Min.X+10, r.Min.Y+17, f.Detail[i], black)
	}
	c.fill(image.Rect(150, 149, 220, 151), black) // web -> checkout-api
	c.fill(image.Rect(420, 149, 540, 151), red)   // checkout-api -> ledger-db
	c.fill(image.Rect(539, 150, 541, 260), red)
	c.fill(image.Rect(309, 180, 311, 300), black) // checkout-api -> fraud-check
	c.text(430, 110, "writes", red)
}

func drawReceipt(c *canvas, f Fact) {
	c.fill(c.img.Bounds(), light)
	paper := image.Rect(90, 10, 550, 390)
	c.fill(paper, white)
	c.text(130, 30, "HARBOR OFFICE SUPPLY", black)
	y := 90
	for _, line := range f.Detail {
		c.text(110, y, line, black)
		y += 40
	}
	c.fill(image.Rect(110, y, 530, y+2), black)
	c.text(110, y+20, f.Fact, black)
}

func drawUIBug(c *canvas, f Fact) {
	c.fill(image.Rect(0, 0, Width, 50), blue)
	c.text(20, 12, f.Detail[0], white)
	c.text(30, 80, f.Detail[1], black)
	c.box(image.Rect(30, 110, 400, 150), grey)
	c.text(30, 180, f.Detail[2], black)
	c.box(image.Rect(420, 176, 450, 206), grey)
	// The Save button, half covered by the banner.
	c.fill(image.Rect(440, 250, 600, 300), green)
	c.text(490, 262, "Save", white)
	c.fill(image.Rect(0, 270, Width, 340), dark)
	c.text(20, 292, f.Detail[3], white)
	c.fill(image.Rect(0, 350, Width, 400), yellow)
	c.text(8, 362, "BUG: "+f.Fact, black)
}

func drawDiff(c *canvas, f Fact) {
	c.text(20, 14, "commit: "+f.Fact, black)
	c.fill(image.Rect(0, 60, Width, 100), light)
	c.text(20, 67, f.Detail[0], black)
	rows := []struct {
		text string
		bg   color.Color
	}{
		{f.Detail[1], white},
		{"- max_connections: 100", color.RGBA{255, 220, 220, 255}},
		{"+ max_connections: 25", color.RGBA{215, 245, 215, 255}},
		{f.Detail[2], white},
	}
	y := 110
	for _, r := range rows {
		c.fill(image.Rect(0, y, Width, y+40), r.bg)
		c.text(20, y+7, r.text, black)
		y += 44
	}
}

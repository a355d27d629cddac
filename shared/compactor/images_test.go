package compactor_test

import (
	"bytes"
	"context"
	"errors"
	"image"
	"image/color"
	"image/png"
	"strings"
	"testing"

	"github.com/durachat/durachat/shared/compactor"
	"github.com/durachat/durachat/shared/memory"
	"github.com/durachat/durachat/shared/model"
)

var (
	red   = color.RGBA{255, 0, 0, 255}
	green = color.RGBA{0, 255, 0, 255}
	blue  = color.RGBA{0, 0, 255, 255}
)

// attached lists the (label, image) pairs after the task, checking that
// each image part follows its own label part.
func attached(t *testing.T, req model.Request) (labels []string, imgs []*model.Image) {
	t.Helper()
	parts := req.Messages[0].Parts
	for i := 2; i < len(parts); i += 2 {
		if i+1 >= len(parts) || parts[i].Image != nil || parts[i+1].Image == nil {
			t.Fatalf("parts after the task are not label, image pairs: %+v", parts[2:])
		}
		if parts[i].Text != refOf(*parts[i+1].Image) {
			t.Fatalf("label %q is followed by image %s", parts[i].Text, parts[i+1].Image.Name)
		}
		labels = append(labels, parts[i].Text)
		imgs = append(imgs, parts[i+1].Image)
	}
	return labels, imgs
}

func imageLeaf(source string, imgs ...model.Image) memory.CompactRequest {
	return leaf(source, imgs...)
}

func TestImagesFollowTheTaskEachAfterItsLabel(t *testing.T) {
	a, b := named("a", pngOf(t, 10, 10, red)), named("b", pngOf(t, 12, 8, green))
	source := "user: compare " + refOf(a) + " with " + refOf(b)
	m := &scripted{caps: vision, answer: replies(strings.Repeat("a long description of both images ", 10))}
	out, err := compactor.New(m, compactor.Options{}).Compact(context.Background(), imageLeaf(source, a, b))
	if err != nil {
		t.Fatal(err)
	}
	// A line about images may be longer than its source.
	if len(out.Line) <= len(source) || out.Attempts != 1 || out.Attached != 2 || out.Skipped != 0 || out.Verbatim {
		t.Fatalf("out = %+v", out)
	}
	req := m.calls()[0]
	parts := req.Messages[0].Parts
	if parts[0].Text != view || !parts[0].Prefix || parts[1].Image != nil {
		t.Fatalf("the view and the task do not come first: %+v", parts[:2])
	}
	if !strings.Contains(parts[1].Text, "follows its [image <name>] label") ||
		!strings.Contains(parts[1].Text, "keep each [image <name>] exactly as written") {
		t.Fatalf("the task lacks the image sentence:\n%s", parts[1].Text)
	}
	labels, imgs := attached(t, req)
	if len(labels) != 2 || labels[0] != refOf(a) || labels[1] != refOf(b) {
		t.Fatalf("labels = %v", labels)
	}
	if !bytes.Equal(imgs[0].Data, a.Data) || !bytes.Equal(imgs[1].Data, b.Data) || imgs[0].MimeType != "image/png" {
		t.Fatal("small images are not sent as they are")
	}
}

func TestCachedPrefixIsTheSameWithAndWithoutImages(t *testing.T) {
	a := named("a", pngOf(t, 10, 10, red))
	m := &scripted{caps: vision, answer: func(int, model.Request) (model.Response, error) {
		return model.Response{Text: "line"}, nil
	}}
	c := compactor.New(m, compactor.Options{})
	if _, err := c.Compact(context.Background(), imageLeaf("user: see "+refOf(a), a)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Compact(context.Background(), imageLeaf(long(900))); err != nil {
		t.Fatal(err)
	}
	calls := m.calls()
	withImages, textOnly := calls[0], calls[1]
	if withImages.System != textOnly.System || withImages.Messages[0].Parts[0] != textOnly.Messages[0].Parts[0] {
		t.Fatal("the system prompt and the view part differ between an image call and a text call")
	}
}

func TestImagesAreDownscaledTo800PixelsOnTheLongSide(t *testing.T) {
	big := named("big", pngOf(t, 1600, 900, blue))
	m := &scripted{caps: vision, answer: replies("a blue picture")}
	if _, err := compactor.New(m, compactor.Options{}).Compact(context.Background(), imageLeaf("user: "+refOf(big), big)); err != nil {
		t.Fatal(err)
	}
	_, imgs := attached(t, m.calls()[0])
	cfg, _, err := image.DecodeConfig(bytes.NewReader(imgs[0].Data))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Width != 800 || cfg.Height != 450 {
		t.Fatalf("sent %dx%d, want 800x450", cfg.Width, cfg.Height)
	}
}

func TestTextOnlyModelGetsNoImages(t *testing.T) {
	a := named("a", pngOf(t, 10, 10, red))
	m := &scripted{caps: model.Capabilities{}, answer: replies("text line")}
	c := compactor.New(m, compactor.Options{})

	short := "user: look " + refOf(a)
	out, err := c.Compact(context.Background(), imageLeaf(short, a))
	if err != nil {
		t.Fatal(err)
	}
	if !out.Verbatim || out.Line != short || out.Attached != 0 || out.Skipped != 1 || len(m.calls()) != 0 {
		t.Fatalf("short message: %+v, %d calls; want it word for word without a call", out, len(m.calls()))
	}

	longSource := long(900) + " " + refOf(a)
	if _, err := c.Compact(context.Background(), imageLeaf(longSource, a)); err != nil {
		t.Fatal(err)
	}
	req := m.calls()[0]
	if len(req.Messages[0].Parts) != 2 || strings.Contains(req.Messages[0].Parts[1].Text, "follows its [image") {
		t.Fatalf("a text-only model got images or the image sentence: %+v", req.Messages[0].Parts)
	}
}

func TestMergesAreTextOnly(t *testing.T) {
	a := named("a", pngOf(t, 10, 10, red))
	m := &scripted{caps: vision, answer: replies("merged")}
	in := memory.CompactRequest{Level: 1, Index: 0, Label: "0+2", Context: view,
		Source: long(400) + "\n" + long(400) + refOf(a), Images: []model.Image{a}}
	out, err := compactor.New(m, compactor.Options{}).Compact(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	if out.Attached != 0 || len(m.calls()[0].Messages[0].Parts) != 2 {
		t.Fatalf("a merge sent images: %+v", out)
	}
}

func TestLabelsStayAlignedWhenAnImageIsSkipped(t *testing.T) {
	a, c := named("a", pngOf(t, 10, 10, red)), named("c", pngOf(t, 10, 10, blue))
	tests := []struct {
		name   string
		middle model.Image
		caps   model.Capabilities
	}{
		{"unsupported format", named("b", []byte("%PDF-1.7 not an image")), vision},
		{"over the provider's size", named("b", noisyPNG(t, 64, 64)),
			model.Capabilities{Images: true, MaxImages: 20, MaxImageBytes: len(a.Data) + 10}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := tt.middle
			source := "user: " + refOf(a) + " then " + refOf(b) + " then " + refOf(c)
			m := &scripted{caps: tt.caps, answer: replies("three pictures, two seen")}
			out, err := compactor.New(m, compactor.Options{}).Compact(context.Background(), imageLeaf(source, a, b, c))
			if err != nil {
				t.Fatal(err)
			}
			if out.Attached != 2 || out.Skipped != 1 {
				t.Fatalf("attached %d skipped %d, want 2 and 1", out.Attached, out.Skipped)
			}
			labels, imgs := attached(t, m.calls()[0])
			if len(labels) != 2 || labels[0] != refOf(a) || labels[1] != refOf(c) {
				t.Fatalf("labels = %v, want a then c", labels)
			}
			if !bytes.Equal(imgs[0].Data, a.Data) || !bytes.Equal(imgs[1].Data, c.Data) {
				t.Fatal("an image is sent under another image's label")
			}
			if !strings.Contains(m.calls()[0].Messages[0].Parts[1].Text, refOf(b)) {
				t.Fatal("the skipped image's name left the source")
			}
		})
	}
}

func TestLabelsStayAlignedWhenMoreImagesAreNamedThanTheProviderAccepts(t *testing.T) {
	imgs := []model.Image{
		named("a", pngOf(t, 4, 4, red)), named("b", pngOf(t, 4, 4, green)), named("c", pngOf(t, 4, 4, blue)),
	}
	m := &scripted{caps: model.Capabilities{Images: true, MaxImages: 2}, answer: replies("line")}
	source := "user: " + refOf(imgs[0]) + refOf(imgs[1]) + refOf(imgs[2])
	out, err := compactor.New(m, compactor.Options{}).Compact(context.Background(), imageLeaf(source, imgs...))
	if err != nil {
		t.Fatal(err)
	}
	labels, sent := attached(t, m.calls()[0])
	if out.Attached != 2 || out.Skipped != 1 || len(labels) != 2 || labels[0] != refOf(imgs[0]) || labels[1] != refOf(imgs[1]) ||
		!bytes.Equal(sent[1].Data, imgs[1].Data) {
		t.Fatalf("out %+v labels %v", out, labels)
	}
}

// noisyPNG draws an image that does not compress, so it is far larger
// than the one-colour ones.
func noisyPNG(t *testing.T, w, h int) []byte {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	x := uint32(1)
	for i := range img.Pix {
		x = x*1664525 + 1013904223
		img.Pix[i] = byte(x >> 24)
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// rejectImages fails every call that carries an image with err, and
// answers the others with text.
func rejectImages(err error, text string) func(int, model.Request) (model.Response, error) {
	return func(_ int, req model.Request) (model.Response, error) {
		for _, p := range req.Messages[0].Parts {
			if p.Image != nil {
				return model.Response{}, err
			}
		}
		return model.Response{Text: text}, nil
	}
}

var imageRejected = model.StatusError(400, errors.New("image could not be processed"))

func TestRejectedImageIsAskedOnceMoreByNameOnly(t *testing.T) {
	a := named("a", pngOf(t, 10, 10, red))
	tests := []struct {
		name     string
		source   string
		line     string
		verbatim bool
	}{
		{"short message stays word for word", "user: what is this? " + refOf(a), "user: what is this? " + refOf(a), true},
		{"long message takes the line", long(900) + " " + refOf(a), "a line written from the names", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := &scripted{caps: vision, answer: rejectImages(imageRejected, "a line written from the names")}
			out, err := compactor.New(m, compactor.Options{}).Compact(context.Background(), imageLeaf(tt.source, a))
			if err != nil {
				t.Fatal(err)
			}
			if out.Line != tt.line || out.Verbatim != tt.verbatim || !out.NamesOnly || out.Attempts != 1 {
				t.Fatalf("out = %+v", out)
			}
			calls := m.calls()
			if len(calls) != 2 {
				t.Fatalf("%d calls, want the image call and one names-only call", len(calls))
			}
			retry := calls[1]
			if len(retry.Messages) != 1 || len(retry.Messages[0].Parts) != 2 {
				t.Fatalf("names-only call is not the bare request: %+v", retry.Messages)
			}
			task := retry.Messages[0].Parts[1].Text
			if strings.Contains(task, "follows its [image") || !strings.Contains(task, refOf(a)) ||
				!strings.Contains(task, "cannot be shown") {
				t.Fatalf("names-only task:\n%s", task)
			}
			if retry.Messages[0].Parts[0] != calls[0].Messages[0].Parts[0] || retry.System != calls[0].System {
				t.Fatal("names-only call changed the cached prefix")
			}
		})
	}
}

func TestAnErrorThatIsNotTheImagesFailsAgainAndIsReturned(t *testing.T) {
	a := named("a", pngOf(t, 10, 10, red))
	tests := []struct {
		name      string
		err       error
		calls     int
		retryable bool
	}{
		{"bad key", model.StatusError(401, errors.New("invalid key")), 2, false},
		{"no quota", &model.Error{Status: 429, Err: errors.New("insufficient quota")}, 2, false},
		{"dropped connection", model.TransportError(errors.New("connection reset by peer")), 1, true},
		{"throttled", model.StatusError(429, errors.New("slow down")), 1, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := &scripted{caps: vision, answer: func(int, model.Request) (model.Response, error) {
				return model.Response{}, tt.err
			}}
			out, err := compactor.New(m, compactor.Options{}).Compact(context.Background(), imageLeaf("user: "+refOf(a), a))
			if err == nil {
				t.Fatalf("no error, out %+v", out)
			}
			if model.IsRetryable(err) != tt.retryable || !errors.Is(err, tt.err) {
				t.Fatalf("err = %v", err)
			}
			if len(m.calls()) != tt.calls || out.NamesOnly || out.Line != "" {
				t.Fatalf("%d calls, out %+v", len(m.calls()), out)
			}
		})
	}
}

func TestFifthAttemptImageErrorStillGetsTheNamesOnlyCall(t *testing.T) {
	a := named("a", pngOf(t, 10, 10, red))
	for _, tt := range []struct {
		name, source, line string
	}{
		{"long", long(900) + refOf(a), "names-only line"},
		{"short", "user: " + refOf(a), "user: " + refOf(a)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m := &scripted{caps: vision, answer: func(n int, req model.Request) (model.Response, error) {
				switch {
				case n < 4:
					return model.Response{Text: strings.Repeat("w", 600+n)}, nil
				case n == 4:
					return model.Response{}, imageRejected
				}
				return rejectImages(imageRejected, "names-only line")(n, req)
			}}
			out, err := compactor.New(m, compactor.Options{}).Compact(context.Background(), imageLeaf(tt.source, a))
			if err != nil {
				t.Fatal(err)
			}
			if len(m.calls()) != 6 || out.Attempts != 5 || !out.NamesOnly || out.Line != tt.line {
				t.Fatalf("%d calls, out %+v", len(m.calls()), out)
			}
		})
	}
}

func TestRefusedShortImageSummaryKeepsItsWords(t *testing.T) {
	a := named("a", pngOf(t, 10, 10, red))
	source := "user: is this fine? " + refOf(a)
	refused := model.RefusedError(model.ErrRefused)

	// The image was what the model declined: the names-only call answers.
	m := &scripted{caps: vision, answer: rejectImages(refused, "ignored")}
	out, err := compactor.New(m, compactor.Options{}).Compact(context.Background(), imageLeaf(source, a))
	if err != nil || out.Line != source || !out.Verbatim || !out.NamesOnly {
		t.Fatalf("out %+v, err %v", out, err)
	}

	// The model declines the words too: the refusal is returned as such,
	// for memory to count; no line is made up.
	m = &scripted{caps: vision, answer: func(int, model.Request) (model.Response, error) { return model.Response{}, refused }}
	out, err = compactor.New(m, compactor.Options{}).Compact(context.Background(), imageLeaf(source, a))
	if !model.IsRefused(err) || out.Line != "" || len(m.calls()) != 2 {
		t.Fatalf("out %+v, err %v, %d calls", out, err, len(m.calls()))
	}
}

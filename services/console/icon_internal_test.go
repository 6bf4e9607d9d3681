package console

import (
	"bytes"
	"image/png"
	"testing"
)

func TestDrawIconIsAPNGOfTheSizeAsked(t *testing.T) {
	for _, n := range iconSizes {
		b, err := drawIcon(n)
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(bytes.NewReader(b))
		if err != nil || img.Bounds().Dx() != n || img.Bounds().Dy() != n {
			t.Fatalf("icon %d: %v %v", n, err, img.Bounds())
		}
	}
}

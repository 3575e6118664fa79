package report

import (
	"bytes"
	"cmp"
	"image"
	"image/color"
	"image/png"
	"slices"
)

// maxColours is the size of a chart PNG's palette: a paletted PNG is a
// fraction of a true-colour one (one byte a pixel instead of four, and
// runs that compress), which keeps index.html and docs/sample small.
const maxColours = 256

// palettedPNG encodes img as a PNG of at most maxColours colours. Charts
// are flat colours on white with anti-aliased edges, so a popularity
// palette loses nothing a reader sees: colours are grouped in boxes of
// 8 levels a channel, the most frequent boxes kept, each drawn by its
// most frequent exact colour (white stays white, a series colour stays
// itself), and every pixel takes the nearest kept colour, without
// dithering (dither noise would cost more bytes than it saves).
func palettedPNG(img image.Image) ([]byte, error) {
	b := img.Bounds()
	type box struct {
		n     int
		top   color.RGBA
		topN  int
		exact map[color.RGBA]int
	}
	boxes := map[uint32]*box{}
	rgba := func(x, y int) color.RGBA {
		r, g, bl, a := img.At(x, y).RGBA()
		return color.RGBA{uint8(r >> 8), uint8(g >> 8), uint8(bl >> 8), uint8(a >> 8)}
	}
	key := func(c color.RGBA) uint32 {
		return uint32(c.R>>3)<<15 | uint32(c.G>>3)<<10 | uint32(c.B>>3)<<5 | uint32(c.A>>7)
	}
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			c := rgba(x, y)
			k := key(c)
			bx := boxes[k]
			if bx == nil {
				bx = &box{exact: map[color.RGBA]int{}}
				boxes[k] = bx
			}
			bx.n++
			bx.exact[c]++
			if n := bx.exact[c]; n > bx.topN {
				bx.top, bx.topN = c, n
			}
		}
	}
	all := make([]*box, 0, len(boxes))
	for _, bx := range boxes {
		all = append(all, bx)
	}
	// Most frequent first; ties by colour, so the file is the same on
	// every run.
	slices.SortFunc(all, func(p, q *box) int {
		if c := cmp.Compare(q.n, p.n); c != 0 {
			return c
		}
		return cmp.Compare(key(p.top), key(q.top))
	})
	pal := make(color.Palette, 0, maxColours)
	for _, bx := range all[:min(len(all), maxColours)] {
		pal = append(pal, bx.top)
	}
	out := image.NewPaletted(b, pal)
	nearest := map[color.RGBA]uint8{}
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			c := rgba(x, y)
			i, ok := nearest[c]
			if !ok {
				i = uint8(pal.Index(c))
				nearest[c] = i
			}
			out.SetColorIndex(x, y, i)
		}
	}
	var buf bytes.Buffer
	enc := png.Encoder{CompressionLevel: png.BestCompression}
	if err := enc.Encode(&buf, out); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

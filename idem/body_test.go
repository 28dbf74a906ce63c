package idem

import (
	"bytes"
	"errors"
	"io"
	"mime/multipart"
	"strings"
	"testing"
)

func multipartOf(t *testing.T, boundary string, parts ...[3]string) *multipart.Reader {
	t.Helper()
	var b bytes.Buffer
	w := multipart.NewWriter(&b)
	if err := w.SetBoundary(boundary); err != nil {
		t.Fatal(err)
	}
	for _, p := range parts {
		pw, err := w.CreateFormFile(p[0], p[1])
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(pw, p[2])
	}
	w.Close()
	return multipart.NewReader(&b, boundary)
}

func fingerprintOf(t *testing.T, v any) string {
	t.Helper()
	fp, err := Fingerprint("op", Part{Name: "body", Value: v})
	if err != nil {
		t.Fatal(err)
	}
	return string(fp)
}

// The fingerprint of a multipart body covers its parts, not its boundary; the business
// reads the same parts, as often as it runs.
func TestMultipartBody(t *testing.T) {
	parts := [][3]string{{"file", "a.txt", "hello"}, {"meta", "m.json", `{"k":1}`}}
	a, b := BufferMultipart(multipartOf(t, "boundary-a", parts...)), BufferMultipart(multipartOf(t, "boundary-b", parts...))
	for _, m := range []*MultipartBody{a, b} {
		if err := m.buffer(1 << 20); err != nil {
			t.Fatal(err)
		}
	}
	if fingerprintOf(t, a) != fingerprintOf(t, b) {
		t.Error("the same parts under another boundary fingerprint differently")
	}
	c := BufferMultipart(multipartOf(t, "boundary-a", [3]string{"file", "a.txt", "hellO"}, parts[1]))
	if err := c.buffer(1 << 20); err != nil {
		t.Fatal(err)
	}
	if fingerprintOf(t, a) == fingerprintOf(t, c) {
		t.Error("other bytes in a part fingerprint the same")
	}
	for run := 0; run < 2; run++ {
		r := a.Reader()
		for _, want := range parts {
			p, err := r.NextPart()
			if err != nil {
				t.Fatalf("run %d: %v", run, err)
			}
			data, _ := io.ReadAll(p)
			if p.FormName() != want[0] || p.FileName() != want[1] || string(data) != want[2] {
				t.Errorf("run %d: part %q %q %q, want %q", run, p.FormName(), p.FileName(), data, want)
			}
		}
		if _, err := r.NextPart(); err != io.EOF {
			t.Errorf("run %d: after the parts: %v, want io.EOF", run, err)
		}
	}
}

func TestBodyLimit(t *testing.T) {
	m := BufferMultipart(multipartOf(t, "b", [3]string{"f", "f", strings.Repeat("x", 100)}))
	if err := m.buffer(99); !errors.Is(err, ErrBodyTooLarge) {
		t.Errorf("multipart over the limit: %v, want ErrBodyTooLarge", err)
	}
	r := BufferReader(strings.NewReader(strings.Repeat("x", 100)))
	if err := r.buffer(99); !errors.Is(err, ErrBodyTooLarge) {
		t.Errorf("raw body over the limit: %v, want ErrBodyTooLarge", err)
	}
	ok := BufferReader(strings.NewReader(strings.Repeat("x", 100)))
	if err := ok.buffer(100); err != nil {
		t.Fatalf("raw body at the limit: %v", err)
	}
	for run := 0; run < 2; run++ {
		if data, _ := io.ReadAll(ok.Reader()); len(data) != 100 {
			t.Errorf("run %d: read %d bytes, want 100", run, len(data))
		}
	}
	var none *MultipartBody
	if none.Reader() != nil || none.buffer(1) != nil || BufferMultipart(nil) != nil || BufferReader(nil) != nil {
		t.Error("a body of another content type (nil) must stay nil")
	}
}

package idem

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/textproto"
)

// DefaultMaxBodyBytes is the largest streamed request body (multipart, raw bytes) the
// protocol reads into memory to fingerprint, unless [WithMaxBodyBytes] says otherwise.
const DefaultMaxBodyBytes = 10 << 20 // 10 MiB

// ErrBodyTooLarge is wrapped by the error of a body over the limit; [Store.Do] answers
// it 413.
var ErrBodyTooLarge = errors.New("idem: request body too large")

// bufferer is a request body [Store.Do] reads into memory before it fingerprints.
type bufferer interface {
	buffer(limit int64) error
}

// MultipartBody is a multipart request body read into memory, so that it can be
// fingerprinted and then read again by the business method. The fingerprint covers its
// parts in order (field name, file name, content type and the SHA-256 of the bytes), not
// the boundary: a retry that a client encodes with a new boundary replays.
//
// The generated code wraps the request's *multipart.Reader with [BufferMultipart],
// passes the MultipartBody as a fingerprint [Part] (Store.Do reads it, at most the
// store's body limit, 413 past it) and hands the business method Reader().
type MultipartBody struct {
	src     *multipart.Reader
	encoded []byte // the parts, re-encoded with boundary
	parts   []partDigest
}

type partDigest struct {
	Name        string `json:"name"`
	FileName    string `json:"filename,omitempty"`
	ContentType string `json:"content_type,omitempty"`
	SHA256      string `json:"sha256"`
}

const bufferedBoundary = "idem-buffered-multipart-boundary"

// BufferMultipart wraps r, unread; nil for a nil r (a body of another content type).
func BufferMultipart(r *multipart.Reader) *MultipartBody {
	if r == nil {
		return nil
	}
	return &MultipartBody{src: r}
}

func (b *MultipartBody) buffer(limit int64) error {
	if b == nil || b.src == nil {
		return nil
	}
	var out bytes.Buffer
	w := multipart.NewWriter(&out)
	if err := w.SetBoundary(bufferedBoundary); err != nil {
		return err
	}
	left := limit
	for {
		p, err := b.src.NextRawPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			var mb *http.MaxBytesError
			if errors.As(err, &mb) {
				return fmt.Errorf("%w: over the server's limit of %d bytes", ErrBodyTooLarge, mb.Limit)
			}
			return fmt.Errorf("idem: reading multipart body: %w", err)
		}
		data, err := readLimited(p, &left, limit)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(data)
		b.parts = append(b.parts, partDigest{Name: p.FormName(), FileName: p.FileName(),
			ContentType: p.Header.Get("Content-Type"), SHA256: hex.EncodeToString(sum[:])})
		pw, err := w.CreatePart(textproto.MIMEHeader(p.Header))
		if err != nil {
			return err
		}
		pw.Write(data) // a bytes.Buffer does not fail
	}
	if err := w.Close(); err != nil {
		return err
	}
	b.src, b.encoded = nil, out.Bytes()
	if b.parts == nil {
		b.parts = []partDigest{}
	}
	return nil
}

// Reader returns a new reader over the buffered parts, with their headers and bytes as
// received; nil for a nil b.
func (b *MultipartBody) Reader() *multipart.Reader {
	if b == nil {
		return nil
	}
	if b.src != nil { // not buffered: Store.Do did not run (a rejected request)
		return b.src
	}
	return multipart.NewReader(bytes.NewReader(b.encoded), bufferedBoundary)
}

// MarshalJSON encodes the fingerprint form: the parts in order, each as name, file name,
// content type and SHA-256.
func (b *MultipartBody) MarshalJSON() ([]byte, error) {
	if b.src != nil {
		return nil, errors.New("idem: multipart body not buffered")
	}
	return json.Marshal(b.parts)
}

// ReaderBody is a raw request body (application/octet-stream, images, ... anything
// oapi-codegen passes as an io.Reader) read into memory, so that it can be fingerprinted
// (its SHA-256) and read again by the business method. See [MultipartBody].
type ReaderBody struct {
	src  io.Reader
	data []byte
	done bool
}

// BufferReader wraps r, unread; nil for a nil r.
func BufferReader(r io.Reader) *ReaderBody {
	if r == nil {
		return nil
	}
	return &ReaderBody{src: r}
}

func (b *ReaderBody) buffer(limit int64) error {
	if b == nil || b.done {
		return nil
	}
	left := limit
	data, err := readLimited(b.src, &left, limit)
	if err != nil {
		return err
	}
	b.data, b.done, b.src = data, true, nil
	return nil
}

// Reader returns a new reader over the buffered bytes; nil for a nil b.
func (b *ReaderBody) Reader() io.Reader {
	if b == nil {
		return nil
	}
	if !b.done {
		return b.src
	}
	return bytes.NewReader(b.data)
}

// MarshalJSON encodes the fingerprint form: the SHA-256 and the length of the bytes.
func (b *ReaderBody) MarshalJSON() ([]byte, error) {
	if !b.done {
		return nil, errors.New("idem: body not buffered")
	}
	sum := sha256.Sum256(b.data)
	return json.Marshal(struct {
		SHA256 string `json:"sha256"`
		Length int    `json:"length"`
	}{hex.EncodeToString(sum[:]), len(b.data)})
}

// readLimited reads r to its end, taking from *left; past it the error wraps
// ErrBodyTooLarge.
func readLimited(r io.Reader, left *int64, limit int64) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, *left+1))
	if err != nil {
		var mb *http.MaxBytesError // the server's own limit (http.MaxBytesHandler)
		if errors.As(err, &mb) {
			return nil, fmt.Errorf("%w: over the server's limit of %d bytes", ErrBodyTooLarge, mb.Limit)
		}
		return nil, fmt.Errorf("idem: reading request body: %w", err)
	}
	if int64(len(data)) > *left {
		return nil, fmt.Errorf("%w: over %d bytes", ErrBodyTooLarge, limit)
	}
	*left -= int64(len(data))
	return data, nil
}

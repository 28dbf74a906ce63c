package idemvalidate

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
)

// jsonBody is a request's JSON body decoded once, as openapi3filter's JSON body decoder
// decodes it (encoding/json, numbers as json.Number), with the schema it is validated
// against. value is nil when the body is left to openapi3filter whole: not JSON, empty,
// no schema for its media type, or a binary string.
type jsonBody struct {
	value any
	media *openapi3.MediaType
}

// readJSONBody reads r's body into memory and puts it back for the handler, unchanged.
// A JSON body (application/json or +json) must be exactly one JSON value: openapi3filter
// and the generated decoder both read the first value and ignore what follows
// (`{"n":1}garbage`). When route's operation declares a schema for it, the body is
// decoded once, checked for case variants (casefold.go) and returned for validateBody.
func readJSONBody(r *http.Request, route *routers.Route) (jsonBody, error) {
	ct := r.Header.Get("Content-Type")
	mt, _, _ := strings.Cut(ct, ";")
	mt = strings.ToLower(strings.TrimSpace(mt))
	if r.Body == nil || r.Body == http.NoBody || !(mt == "application/json" || strings.HasSuffix(mt, "+json")) {
		return jsonBody{}, nil
	}
	data, err := readAll(r)
	if err != nil {
		return jsonBody{}, readError(err)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return jsonBody{}, nil // no body: openapi3filter knows whether one is required
	}
	if !json.Valid(data) {
		var v json.RawMessage
		err := json.Unmarshal(data, &v) // encoding/json's own words for what is wrong
		return jsonBody{}, &Error{Detail: "request body: " + err.Error(), Err: err}
	}
	op := route.Operation
	if op == nil || op.RequestBody == nil || op.RequestBody.Value == nil {
		return jsonBody{}, nil
	}
	media := op.RequestBody.Value.Content.Get(ct) // as openapi3filter.ValidateRequestBody finds it
	if media == nil || media.Schema == nil || media.Schema.Value == nil ||
		(media.Schema.Value.Type.Is("string") && media.Schema.Value.Format == "binary") {
		return jsonBody{}, nil
	}
	v, err := decodeJSON(data)
	if err != nil {
		return jsonBody{}, &Error{Detail: "request body: " + err.Error(), Err: err} // json.Valid held: not reached
	}
	if err := caseVariant(v, media.Schema.Value); err != nil {
		return jsonBody{}, err
	}
	if v == nil {
		return jsonBody{}, nil // the body is null: openapi3filter validates it as it did
	}
	return jsonBody{value: v, media: media}, nil
}

// readError is the error of a body that could not be read: the *http.MaxBytesError of a
// body over the limit (413), else a 400's.
func readError(err error) error {
	var mb *http.MaxBytesError
	if errors.As(err, &mb) {
		return mb
	}
	return &Error{Detail: "request body: " + err.Error(), Err: err}
}

// readAll reads r's body whole and puts the bytes back as its body.
func readAll(r *http.Request) ([]byte, error) {
	data, err := io.ReadAll(r.Body)
	r.Body.Close()
	body := &bytesBody{}
	body.Reset(data)
	r.Body = body
	return data, err
}

// decoders are encoding/json Decoders kept from one request to the next, each reading
// its own bytes.Reader. A Decoder decodes a stream of values, and the bodies one decoder
// is given one after the other are such a stream: each is exactly one JSON value
// (json.Valid held), and what the Decoder buffered after it is white space. The
// Decoder, its read buffer and its scanner's stack are then allocated once per decoder,
// not once per request (3 allocations).
var decoders = sync.Pool{New: func() any {
	d := &decoder{}
	d.dec = json.NewDecoder(&d.src)
	d.dec.UseNumber()
	return d
}}

type decoder struct {
	src bytes.Reader
	dec *json.Decoder
}

// maxPooledBody is the largest body whose decoder goes back to decoders: the Decoder
// keeps a read buffer the size of the largest body it read.
const maxPooledBody = 64 << 10

// decodeJSON decodes data, exactly one JSON value, as openapi3filter's JSON body decoder
// does (encoding/json, numbers as json.Number). The value shares no memory with data or
// with the decoder.
func decodeJSON(data []byte) (any, error) {
	d := decoders.Get().(*decoder)
	v, err := d.decode(data)
	if err == nil && len(data) <= maxPooledBody {
		decoders.Put(d) // after an error the Decoder may keep it: not reused
	}
	return v, err
}

// decode decodes data, the next value of d's stream.
func (d *decoder) decode(data []byte) (any, error) {
	d.src.Reset(data)
	var v any
	err := d.dec.Decode(&v)
	d.src.Reset(nil) // data is the request's: not kept
	return v, err
}

// bytesBody is a body read into memory: a bytes.Reader that closes (one allocation where
// io.NopCloser(bytes.NewReader(data)) takes two).
type bytesBody struct{ bytes.Reader }

// Close does nothing: the bytes stay readable.
func (*bytesBody) Close() error { return nil }

// validateBody validates the decoded body against its schema with the options
// openapi3filter.ValidateRequestBody passes, and fails as it does (a RequestError
// naming the request body, the schema error inside).
func (v *validator) validateBody(input *openapi3filter.RequestValidationInput, body jsonBody) error {
	opts := v.bodyOpts
	if input.Route.Spec.IsOpenAPI31OrLater() {
		opts = v.bodyOpts31
	}
	err := body.media.Schema.Value.VisitJSON(body.value, opts...)
	if err == nil {
		return nil
	}
	reason := "doesn't match schema" // and the schema's name, as openapi3filter says it
	if id := strings.TrimSpace(body.media.Schema.Ref); id != "" {
		reason += " " + id
	} else if id := strings.TrimSpace(body.media.Schema.Value.Title); id != "" {
		reason += " " + id
	}
	return &openapi3filter.RequestError{Input: input, RequestBody: input.Route.Operation.RequestBody.Value, Reason: reason, Err: err}
}

package idem

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
)

// Response is an HTTP answer: recorded from the business handler and stored with a
// completed key, replayed from the store, or a protocol rejection (400/409/422 problem
// details).
type Response struct {
	// Status is the HTTP status code.
	Status int
	// Header holds the header lines in order: sorted by canonical name, each name's values
	// in the order they were written. A value is kept intact, commas included.
	Header []HeaderLine
	// Body is the response body, byte for byte.
	Body []byte
	// Outcome says how the protocol answered.
	Outcome Outcome
}

// HeaderLine is one response header field line.
type HeaderLine struct {
	Name  string
	Value string
}

// MarshalJSON encodes a line as the two-element array ["Name","value"], the shape of the
// response_headers column.
func (l HeaderLine) MarshalJSON() ([]byte, error) { return json.Marshal([2]string{l.Name, l.Value}) }

// UnmarshalJSON is the inverse of MarshalJSON.
func (l *HeaderLine) UnmarshalJSON(b []byte) error {
	var a [2]string
	if err := json.Unmarshal(b, &a); err != nil {
		return err
	}
	l.Name, l.Value = a[0], a[1]
	return nil
}

// unrecordedHeaders are dropped when a response is recorded: hop-by-hop or computed
// fields are the server's to set again.
var unrecordedHeaders = map[string]bool{
	"Date":              true,
	"Content-Length":    true,
	"Connection":        true,
	"Transfer-Encoding": true,
	ReplayedHeader:      true,
}

// WriteTo writes the response to w: header lines, then status, then body.
func (r *Response) WriteTo(w http.ResponseWriter) error {
	h := w.Header()
	// h.Add for each line, with the values of the names w has not set in one array.
	vals := make([]string, len(r.Header))
	for i, l := range r.Header {
		name := http.CanonicalHeaderKey(l.Name)
		if old, ok := h[name]; ok {
			h[name] = append(old, l.Value)
			continue
		}
		vals[i] = l.Value
		h[name] = vals[i : i+1 : i+1]
	}
	if r.Outcome == OutcomeReplayed {
		h.Set(ReplayedHeader, "true")
	}
	w.WriteHeader(r.Status)
	_, err := w.Write(r.Body)
	return err
}

// StoredHeader returns the header lines of r that are stored with a completed key and
// replayed: all but Set-Cookie, since a replay must not hand one client's session to
// whoever retries with the key.
func (r *Response) StoredHeader() []HeaderLine {
	var out []HeaderLine
	for _, l := range r.Header {
		if l.stored() {
			out = append(out, l)
		}
	}
	return out
}

// stored reports whether the line is stored with a completed key and replayed (see
// [Response.StoredHeader]).
func (l HeaderLine) stored() bool { return http.CanonicalHeaderKey(l.Name) != "Set-Cookie" }

// encodeStoredHeader is the response_headers column of r: its stored header lines
// ([Response.StoredHeader]) as a JSON array of ["Name","value"] pairs, encoded as
// json.Marshal encodes them (TestEncodeStoredHeader).
func encodeStoredHeader(r *Response) ([]byte, error) {
	size := 2
	for _, l := range r.Header {
		size += len(l.Name) + len(l.Value) + 8
	}
	out := make([]byte, 0, size)
	out = append(out, '[')
	for _, l := range r.Header {
		if !l.stored() {
			continue
		}
		if len(out) > 1 {
			out = append(out, ',')
		}
		out = append(out, '[')
		out = appendJSONString(out, l.Name)
		out = append(out, ',')
		out = appendJSONString(out, l.Value)
		out = append(out, ']')
	}
	if len(out) == 1 {
		return []byte("null"), nil // json.Marshal of StoredHeader's nil
	}
	return append(out, ']'), nil
}

// appendJSONString appends s as a JSON string, as json.Marshal writes it: as it is when
// every byte is printable ASCII that json.Marshal leaves alone, else through json.Marshal.
func appendJSONString(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			b, _ := json.Marshal(s) // a string always encodes
			return append(dst, b...)
		}
	}
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"')
}

// Problem is an RFC 9457 problem details object.
type Problem struct {
	Type   string `json:"type,omitempty"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail,omitempty"`
}

// problemResponse renders p as application/problem+json. retryAfter, when > 0, is sent
// as Retry-After in whole seconds.
func problemResponse(o Outcome, p Problem, retryAfter int) *Response {
	body, _ := json.Marshal(p) // a struct of strings and an int always encodes
	lines := []HeaderLine{{Name: "Content-Type", Value: "application/problem+json"}}
	if retryAfter > 0 {
		lines = append(lines, HeaderLine{Name: "Retry-After", Value: strconv.Itoa(retryAfter)})
	}
	return &Response{Status: p.Status, Header: lines, Body: append(body, '\n'), Outcome: o}
}

// ProblemResponse returns an RFC 9457 application/problem+json response with the given
// status, its standard reason phrase as title, and detail. For error handlers of the
// generated server (bad request bodies, 413, 401 from a scope function).
func ProblemResponse(status int, detail string) *Response {
	return problemResponse(OutcomeRejected, Problem{Title: http.StatusText(status), Status: status, Detail: detail}, 0)
}

// WriteProblem writes [ProblemResponse](status, detail) to w.
func WriteProblem(w http.ResponseWriter, status int, detail string) {
	_ = ProblemResponse(status, detail).WriteTo(w)
}

// String formats p as "STATUS TITLE: DETAIL".
func (p Problem) String() string { return fmt.Sprintf("%d %s: %s", p.Status, p.Title, p.Detail) }

// Error makes a *Problem an error: a [ScopeFunc] returning one (e.g. 401 for a request
// without credentials) has the request answered with it.
func (p *Problem) Error() string { return p.String() }

package gen

import (
	"fmt"
	"mime"
	"strings"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"gopkg.in/yaml.v3"
)

// Op is a marked operation with its resolved policy: the typed model the templates render.
type Op struct {
	Method    string // upper case: POST
	Path      string
	Operation string // the stored operation name: the spec's operationId, else "POST /path"
	Pos       Pos    // of the x-idempotent key

	// Key source: exactly one of KeyHeader and KeyBody is set.
	KeyHeader string // header name, as the spec (or the marker) spells it
	KeyBody   string // JSON pointer into the request body
	// InjectHeader is set when the spec does not declare the key header: idemgen adds it
	// to the operation as an optional header parameter so it reaches the Params struct.
	InjectHeader bool

	Required  bool
	Lease     time.Duration
	Retention time.Duration
	Timeout   time.Duration // zero: none
	Isolation string        // "" (database default), "serializable", ...
}

// Lease and Retention defaults: the idem runtime's.
const (
	DefaultLease     = 30 * time.Second
	DefaultRetention = 24 * time.Hour
)

// buildOps checks each marker against the loaded document and resolves it into an Op.
func (s *source) buildOps(doc *openapi3.T, markers []opMarker, errs *ErrorList) []*Op {
	var ops []*Op
	for _, om := range markers {
		item := doc.Paths.Value(om.path)
		if item == nil {
			continue
		}
		op := item.Operations()[strings.ToUpper(om.method)]
		if op == nil {
			continue
		}
		m := om.m
		o := &Op{
			Method:    strings.ToUpper(om.method),
			Path:      om.path,
			Operation: op.OperationID,
			Pos:       m.pos,
			Lease:     DefaultLease,
			Retention: DefaultRetention,
			Required:  m.required.v,
			Timeout:   m.timeout.v,
			Isolation: m.isolation.v,
		}
		if o.Operation == "" {
			o.Operation = o.Method + " " + o.Path
		}
		if m.lease.set {
			o.Lease = m.lease.v
		}
		if m.retention.set {
			o.Retention = m.retention.v
		}
		if o.Retention < o.Lease {
			at := m.retention.pos
			if !m.retention.set {
				at = m.lease.pos
			}
			errs.add(at, "%s.retention: %s is shorter than the lease (%s): a completed answer must be replayable for at least as long as a claim can block retries", MarkerExt, humanDuration(o.Retention), humanDuration(o.Lease))
			continue
		}
		if o.Method == "GET" || o.Method == "HEAD" || o.Method == "OPTIONS" || o.Method == "TRACE" {
			errs.add(m.pos, "%s: %s %s is a safe method, idempotent by definition; mark operations that change state (POST, PUT, PATCH, DELETE)", MarkerExt, o.Method, o.Path)
			continue
		}
		params := append(openapi3.Parameters{}, item.Parameters...)
		params = append(params, op.Parameters...)
		body := jsonBodySchema(op)
		hasInput := op.RequestBody != nil && op.RequestBody.Value != nil
		for _, p := range params {
			if p.Value != nil && (p.Value.In == openapi3.ParameterInPath || p.Value.In == openapi3.ParameterInQuery) {
				hasInput = true
			}
		}
		if !hasInput {
			errs.add(m.pos, "%s: %s %s has no request to fingerprint: no path or query parameters and no request body (a retry with other input could not be told apart)", MarkerExt, o.Method, o.Path)
			continue
		}
		if m.body.set {
			o.KeyBody = m.body.v
			if body == nil {
				errs.add(m.body.pos, "%s.body: %s %s has no JSON request body to read the key from", MarkerExt, o.Method, o.Path)
				continue
			}
			if cts := sortedKeys(op.RequestBody.Value.Content); len(cts) > 1 {
				errs.add(m.body.pos, "%s.body: %s %s accepts several request content types (%s); a key in the body is read from one JSON body only: accept only that one, or take the key from a header",
					MarkerExt, o.Method, o.Path, strings.Join(cts, ", "))
				continue
			}
			if msg := checkPointer(body, m.body.v); msg != "" {
				errs.add(m.body.pos, "%s.body: %s", MarkerExt, msg)
				continue
			}
		} else {
			o.KeyHeader = "Idempotency-Key"
			if m.header.set {
				o.KeyHeader = m.header.v
			}
			declared := findHeader(params, o.KeyHeader)
			if declared == nil {
				o.InjectHeader = true
			} else {
				o.KeyHeader = declared.Name
				if declared.Required {
					if m.required.set && !m.required.v {
						errs.add(m.required.pos, "%s.required: false, but the spec declares header %s as required: true", MarkerExt, declared.Name)
						continue
					}
					o.Required = true
				}
				if sch := declared.Schema; sch == nil || sch.Value == nil || !sch.Value.Type.Permits(openapi3.TypeString) ||
					sch.Value.Format != "" || len(sch.Value.Enum) > 0 || sch.Value.Extensions["x-go-type"] != nil {
					p := m.pos
					if m.header.set {
						p = m.header.pos
					}
					errs.add(p, "%s.header: the declared header parameter %q must have a plain string schema (no format, enum or x-go-type) to carry the key", MarkerExt, declared.Name)
					continue
				}
			}
		}
		ops = append(ops, o)
	}
	return ops
}

// checkRefPathItems reports markers that readMarkers could not see: on the operations of a
// path item that is a $ref (to another file, or to components/pathItems). Ignoring them
// would leave a marked operation without idempotency.
func (s *source) checkRefPathItems(doc *openapi3.T, errs *ErrorList) {
	_, paths := s.lookup("paths")
	if paths == nil || paths.Kind != yaml.MappingNode {
		return
	}
	for i := 0; i+1 < len(paths.Content); i += 2 {
		path := paths.Content[i].Value
		_, ref := entry(paths.Content[i+1], "$ref")
		item := doc.Paths.Value(path)
		if ref == nil || item == nil {
			continue
		}
		for _, method := range sortedKeys(item.Operations()) {
			if v, ok := item.Operations()[method].Extensions[MarkerExt]; ok && v != false {
				errs.add(s.pos(ref), "%s: %s %s is marked in the path item this $ref names; idemgen reads markers in the spec file only: move the path item here", MarkerExt, method, path)
			}
		}
	}
}

// findHeader returns the header parameter named name (case-insensitively), or nil.
func findHeader(params openapi3.Parameters, name string) *openapi3.Parameter {
	for _, p := range params {
		if p.Value != nil && p.Value.In == openapi3.ParameterInHeader && strings.EqualFold(p.Value.Name, name) {
			return p.Value
		}
	}
	return nil
}

// jsonBodySchema returns the schema of the operation's JSON request body, or nil.
func jsonBodySchema(op *openapi3.Operation) *openapi3.Schema {
	if op.RequestBody == nil || op.RequestBody.Value == nil {
		return nil
	}
	for _, ct := range sortedKeys(op.RequestBody.Value.Content) {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || !(mt == "application/json" || strings.HasSuffix(mt, "+json")) {
			continue
		}
		if m := op.RequestBody.Value.Content[ct]; m != nil && m.Schema != nil && m.Schema.Value != nil {
			return m.Schema.Value
		}
	}
	return nil
}

// checkPointer checks that the JSON pointer names a string property of schema; it returns
// the problem, or "".
func checkPointer(schema *openapi3.Schema, ptr string) string {
	cur := schema
	for _, tok := range strings.Split(ptr[1:], "/") {
		tok = strings.NewReplacer("~1", "/", "~0", "~").Replace(tok)
		next := property(cur, tok)
		if next == nil {
			return fmt.Sprintf("%q: the request body schema has no property %q there", ptr, tok)
		}
		cur = next
	}
	if !cur.Type.Permits(openapi3.TypeString) || cur.Type.IsEmpty() {
		return fmt.Sprintf("%q: the property is %s, and a key must be a string", ptr, typeName(cur))
	}
	return ""
}

func property(s *openapi3.Schema, name string) *openapi3.Schema {
	if p := s.Properties[name]; p != nil && p.Value != nil {
		return p.Value
	}
	for _, sub := range s.AllOf {
		if sub.Value != nil {
			if p := property(sub.Value, name); p != nil {
				return p
			}
		}
	}
	return nil
}

func typeName(s *openapi3.Schema) string {
	if s.Type.IsEmpty() {
		return "untyped"
	}
	return "of type " + strings.Join(s.Type.Slice(), "|")
}

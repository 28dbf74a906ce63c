package gen

import (
	"fmt"
	"mime"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/idemgen/idemgen/idem"
	"github.com/idemgen/idemgen/internal/ecmaregexp"
)

// headerKey resolves a header key: the marker's (or the defaults') header, else the one
// declared header spelled like an idempotency key, else idem.DefaultKeyHeader
// (Idempotency-Key), added by idemgen.
func (s *source) headerKey(o *operation, mk marker, params openapi3.Parameters, errs *ErrorList) {
	at := mk.pos
	var declared *openapi3.Parameter
	if mk.header.set {
		at = mk.header.pos
		o.Key.Header = mk.header.v
		declared = findParam(params, openapi3.ParameterInHeader, mk.header.v)
	} else {
		candidates := keyHeaderCandidates(params)
		switch len(candidates) {
		case 0:
			o.Key.Header = idem.DefaultKeyHeader
		case 1:
			declared = candidates[0]
		default:
			var names []string
			for _, c := range candidates {
				names = append(names, c.Name)
			}
			errs.add(mk.pos, "%s: %s %s declares several headers that could carry the idempotency key (%s): name the one with %s: {header: NAME}",
				MarkerExt, o.Method, o.Path, strings.Join(names, ", "), MarkerExt)
			return
		}
	}
	if declared == nil {
		return // idemgen adds it, optional
	}
	o.Key.Header, o.Key.Declared = declared.Name, true
	if declared.Required {
		if mk.required.set && !mk.required.v {
			errs.add(mk.required.pos, "%s.required: false, but the spec declares header %s as required: true", MarkerExt, declared.Name)
			return
		}
		o.Required = true
	}
	if declared.Schema == nil || declared.Schema.Value == nil || !isString(declared.Schema.Value) {
		errs.add(at, "%s.header: the declared header parameter %q must have a string schema to carry the key (it has %s)", MarkerExt, declared.Name, typeName(schemaOf(declared.Schema)))
		return
	}
	o.Key.Schema = s.readKeySchema(declared.Schema.Value, at, errs)
}

// keyHeaderCandidates returns the declared header parameters whose name is an
// idempotency key in any spelling: Idempotency-Key, x-idempotency-key, idempotency_key,
// IdempotencyKey, any case.
func keyHeaderCandidates(params openapi3.Parameters) []*openapi3.Parameter {
	var out []*openapi3.Parameter
	for _, p := range params {
		if p.Value != nil && p.Value.In == openapi3.ParameterInHeader && isKeyName(p.Value.Name) {
			out = append(out, p.Value)
		}
	}
	return out
}

func isKeyName(name string) bool {
	n := strings.ToLower(name)
	n = strings.TrimPrefix(n, "x-")
	n = strings.NewReplacer("-", "", "_", "").Replace(n)
	return n == "idempotencykey"
}

// bodyKey resolves a key read from a JSON pointer into the JSON request body.
func (s *source) bodyKey(o *operation, mk marker, op *openapi3.Operation, errs *ErrorList) {
	o.Key.Body = mk.body.v
	body := jsonBodySchema(op)
	if body == nil {
		errs.add(mk.body.pos, "%s.body: %s %s has no JSON request body to read the key from", MarkerExt, o.Method, o.Path)
		return
	}
	if cts := sortedKeys(op.RequestBody.Value.Content); len(cts) > 1 {
		errs.add(mk.body.pos, "%s.body: %s %s accepts several request content types (%s); a key in the body is read from one JSON body only: accept only that one, or take the key from a header",
			MarkerExt, o.Method, o.Path, strings.Join(cts, ", "))
		return
	}
	prop, required, msg := pointerProperty(body, mk.body.v)
	if msg != "" {
		errs.add(mk.body.pos, "%s.body: %s", MarkerExt, msg)
		return
	}
	if required && op.RequestBody.Value.Required {
		if mk.required.set && !mk.required.v {
			errs.add(mk.required.pos, "%s.required: false, but the request body schema requires %s", MarkerExt, mk.body.v)
			return
		}
		o.Required = true
	}
	o.Key.Schema = s.readKeySchema(prop, mk.body.pos, errs)
}

// readKeySchema reads the constraints of the key's declared string schema. A pattern that
// is not an ECMA-262 regular expression (as OpenAPI defines pattern) is an error: the
// protocol enforces it, with the same engine (internal/ecmaregexp).
func (s *source) readKeySchema(sch *openapi3.Schema, at Pos, errs *ErrorList) keySchema {
	ks := keySchema{MinLength: sch.MinLength, Pattern: sch.Pattern, Format: sch.Format}
	if sch.MaxLength != nil {
		ks.MaxLength = *sch.MaxLength
	}
	if ks.Pattern != "" {
		if _, err := ecmaregexp.Compile(ks.Pattern); err != nil {
			errs.add(at, "%s: the key's pattern %q is not an ECMA-262 regular expression: %v", MarkerExt, ks.Pattern, err)
		}
	}
	return ks
}

func isString(s *openapi3.Schema) bool {
	return s.Type.Permits(openapi3.TypeString) && !s.Type.IsEmpty()
}

// jsonBodySchema returns the schema of the operation's JSON request body, or nil.
func jsonBodySchema(op *openapi3.Operation) *openapi3.Schema {
	if op.RequestBody == nil || op.RequestBody.Value == nil {
		return nil
	}
	for _, ct := range sortedKeys(op.RequestBody.Value.Content) {
		if !isJSON(ct) {
			continue
		}
		if m := op.RequestBody.Value.Content[ct]; m != nil && m.Schema != nil && m.Schema.Value != nil {
			return m.Schema.Value
		}
	}
	return nil
}

// mediaType returns the lower-case type/subtype of a content type, parameters dropped.
func mediaType(ct string) string {
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return strings.ToLower(strings.TrimSpace(ct))
	}
	return mt
}

func isJSON(ct string) bool {
	mt := mediaType(ct)
	return mt == "application/json" || strings.HasSuffix(mt, "+json")
}

// pointerProperty returns the schema of the string property the JSON pointer names, and
// whether every property on the way is required; or the problem.
func pointerProperty(schema *openapi3.Schema, ptr string) (prop *openapi3.Schema, required bool, problem string) {
	cur, required := schema, true
	for _, tok := range strings.Split(ptr[1:], "/") {
		tok = unescapePointer(tok)
		next, req := property(cur, tok)
		if next == nil {
			return nil, false, fmt.Sprintf("%q: the request body schema has no property %q there", ptr, tok)
		}
		cur, required = next, required && req
	}
	if !isString(cur) {
		return nil, false, fmt.Sprintf("%q: the property has %s, and a key must be a string", ptr, typeName(cur))
	}
	return cur, required, ""
}

// property finds the property name of s (allOf members included) and whether it is
// required.
func property(s *openapi3.Schema, name string) (*openapi3.Schema, bool) {
	if p := s.Properties[name]; p != nil && p.Value != nil {
		return p.Value, requires(s, name)
	}
	for _, sub := range s.AllOf {
		if sub.Value != nil {
			if p, req := property(sub.Value, name); p != nil {
				return p, req || requires(s, name)
			}
		}
	}
	return nil, false
}

func requires(s *openapi3.Schema, name string) bool {
	for _, r := range s.Required {
		if r == name {
			return true
		}
	}
	return false
}

func schemaOf(r *openapi3.SchemaRef) *openapi3.Schema {
	if r == nil || r.Value == nil {
		return &openapi3.Schema{}
	}
	return r.Value
}

func typeName(s *openapi3.Schema) string {
	if s.Type.IsEmpty() {
		return "no type"
	}
	return "type " + strings.Join(s.Type.Slice(), "|")
}

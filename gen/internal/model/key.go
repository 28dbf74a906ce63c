package model

import (
	"fmt"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"go.yaml.in/yaml/v4"

	"github.com/idemgen/idemgen/gen/internal/marker"
	"github.com/idemgen/idemgen/gen/internal/spec"
	"github.com/idemgen/idemgen/internal/ecmaregexp"
)

// headerKey resolves the key of a marker (or defaults) that names its header: the
// operation's declared header parameter of that name (any case) when there is one, else
// a header idemgen adds, optional.
func (s *source) headerKey(o *Operation, mk marker.Marker, params openapi3.Parameters, w *Warnings, errs *spec.ErrorList) {
	n0 := len(*errs)
	o.Key.Header = mk.Header.V
	var decls []*openapi3.Parameter
	for _, p := range params {
		if p.Value != nil && p.Value.In == openapi3.ParameterInHeader && strings.EqualFold(p.Value.Name, mk.Header.V) {
			decls = append(decls, p.Value)
		}
	}
	switch len(decls) {
	case 0:
		// idemgen adds it, optional
	case 1:
		s.declaredHeaderKey(o, mk, decls[0], mk.Header.Pos, errs)
	default:
		s.declaredHeaderKey(o, mk, s.mergeCaseDuplicates(o, mk, decls, w), mk.Header.Pos, errs)
	}
	if q := keyQueryParams(params); len(q) > 0 && len(*errs) == n0 {
		s.queryKeyIgnored(o, mk, q, w)
	}
}

// declaredHeaderKey makes the declared header parameter decl the key: its spelling, its
// required-ness and its string schema's constraints. at locates errors about it.
func (s *source) declaredHeaderKey(o *Operation, mk marker.Marker, decl *openapi3.Parameter, at spec.Pos, errs *spec.ErrorList) {
	o.Key.Header, o.Key.Declared = decl.Name, true
	if decl.Required {
		if mk.Required.Set && !mk.Required.V {
			errs.Add(mk.Required.Pos, "%s.required: false, but the spec declares header %s as required: true", marker.MarkerExt, decl.Name)
			return
		}
		o.Required = true
	}
	if decl.Schema == nil || decl.Schema.Value == nil || !isString(decl.Schema.Value) {
		errs.Add(at, "%s.header: the declared header parameter %q must have a string schema to carry the key (it has %s)", marker.MarkerExt, decl.Name, typeName(schemaOf(decl.Schema)))
		return
	}
	if p := decl.Schema.Value.Pattern; p != "" {
		if pat, ok := s.headerPatternPos(o, decl.Name, p); ok {
			at = pat // a pattern in error is located at itself
		}
	}
	o.Key.Schema = s.readKeySchema(decl.Schema.Value, at, errs)
}

// headerPatternPos returns the position of pattern in the schema of o's declared header
// parameter name (any case; the operation's or its path item's, local $refs followed).
func (s *source) headerPatternPos(o *Operation, name, pattern string) (spec.Pos, bool) {
	_, item := s.Lookup("paths", o.Path)
	if item, _ = s.PathItem(item); item == nil {
		return spec.Pos{}, false
	}
	_, op := spec.Entry(item, strings.ToLower(o.Method))
	for _, owner := range []*yaml.Node{op, item} {
		_, list := spec.Entry(owner, "parameters")
		if list == nil || list.Kind != yaml.SequenceNode {
			continue
		}
		for _, p := range list.Content {
			p = s.Resolve(p)
			_, in := spec.Entry(p, "in")
			_, n := spec.Entry(p, "name")
			if in == nil || n == nil || in.Value != "header" || !strings.EqualFold(n.Value, name) {
				continue
			}
			_, sch := spec.Entry(p, "schema")
			if _, pat := spec.Entry(s.Resolve(sch), "pattern"); pat != nil && pat.Value == pattern {
				return s.Pos(pat), true
			}
		}
	}
	return spec.Pos{}, false
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

func isKeyName(name string) bool { return normalizeName(name) == "idempotencykey" }

// bodyKey resolves a key read from the JSON pointer ptr into the request body: a JSON or
// a form (application/x-www-form-urlencoded) body; with both, the property must be in
// each, and the key is read from the one the request sends. at locates errors.
// name prefixes messages: x-idempotent.body, or x-idempotent for a key found by its name.
func (s *source) bodyKey(o *Operation, mk marker.Marker, op *openapi3.Operation, ptr string, at spec.Pos, name string, errs *spec.ErrorList) {
	o.Key.Body = ptr
	bodies := keyBodies(op)
	if len(bodies) == 0 {
		errs.Add(at, "%s: %s %s has no JSON or form request body to read the key from", name, o.Method, o.Path)
		return
	}
	if cts := spec.SortedKeys(op.RequestBody.Value.Content); len(cts) > len(bodies) {
		errs.Add(at, "%s: %s %s accepts several request content types (%s); a key in the body is read from JSON and form bodies only: accept only those, or take the key from a header",
			name, o.Method, o.Path, strings.Join(cts, ", "))
		return
	}
	required := op.RequestBody.Value.Required
	var prop *openapi3.Schema
	for _, b := range bodies {
		p, req, msg := pointerProperty(b.schema, ptr)
		if msg != "" {
			if len(bodies) > 1 {
				msg = b.contentType + ": " + msg
			}
			errs.Add(at, "%s: %s", name, msg)
			return
		}
		if prop == nil {
			prop = p
		}
		required = required && req
	}
	if required {
		if mk.Required.Set && !mk.Required.V {
			errs.Add(mk.Required.Pos, "%s.required: false, but the request body schema requires %s", marker.MarkerExt, ptr)
			return
		}
		o.Required = true
	}
	o.Key.Schema = s.readKeySchema(prop, at, errs)
}

// keyBody is a request body a key can be read from.
type keyBody struct {
	contentType string
	schema      *openapi3.Schema
}

// keyBodies returns the operation's JSON and form request bodies, by content type.
func keyBodies(op *openapi3.Operation) []keyBody {
	if op.RequestBody == nil || op.RequestBody.Value == nil {
		return nil
	}
	var out []keyBody
	for _, ct := range spec.SortedKeys(op.RequestBody.Value.Content) {
		if !spec.IsJSON(ct) && spec.MediaType(ct) != "application/x-www-form-urlencoded" {
			continue
		}
		if m := op.RequestBody.Value.Content[ct]; m != nil && m.Schema != nil && m.Schema.Value != nil {
			out = append(out, keyBody{ct, m.Schema.Value})
		}
	}
	return out
}

// readKeySchema reads the constraints of the key's declared string schema. A pattern that
// is not an ECMA-262 regular expression (as OpenAPI defines pattern) is an error: the
// protocol enforces it, with the same engine (internal/ecmaregexp).
func (s *source) readKeySchema(sch *openapi3.Schema, at spec.Pos, errs *spec.ErrorList) KeySchema {
	ks := KeySchema{MinLength: sch.MinLength, Pattern: sch.Pattern, Format: sch.Format}
	if sch.MaxLength != nil {
		ks.MaxLength = *sch.MaxLength
	}
	if ks.Pattern != "" {
		if _, err := ecmaregexp.Compile(ks.Pattern); err != nil {
			errs.Add(at, "%s: the key's pattern %q is not an ECMA-262 regular expression: %v", marker.MarkerExt, ks.Pattern, err)
		}
	}
	return ks
}

func isString(s *openapi3.Schema) bool {
	return s.Type.Permits(openapi3.TypeString) && !s.Type.IsEmpty()
}

// pointerProperty returns the schema of the string property the JSON pointer names, and
// whether every property on the way is required; or the problem.
func pointerProperty(schema *openapi3.Schema, ptr string) (prop *openapi3.Schema, required bool, problem string) {
	cur, required := schema, true
	for _, tok := range strings.Split(ptr[1:], "/") {
		tok = spec.UnescapePointer(tok)
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

// property finds the property name of s and whether it is required: among s's own
// properties, its allOf members', or those of every member of its oneOf (or anyOf), where
// it is required when every member requires it (the schema of the first member's is
// returned).
func property(s *openapi3.Schema, name string) (*openapi3.Schema, bool) {
	return propertyDepth(s, name, 0)
}

func propertyDepth(s *openapi3.Schema, name string, depth int) (*openapi3.Schema, bool) {
	if s == nil || depth > 8 { // a cycle through allOf or a union: give up
		return nil, false
	}
	if p := s.Properties[name]; p != nil && p.Value != nil {
		return p.Value, requires(s, name)
	}
	for _, sub := range s.AllOf {
		if sub.Value != nil {
			if p, req := propertyDepth(sub.Value, name, depth+1); p != nil {
				return p, req || requires(s, name)
			}
		}
	}
	for _, members := range []openapi3.SchemaRefs{s.OneOf, s.AnyOf} {
		if len(members) == 0 {
			continue
		}
		var first *openapi3.Schema
		all := true
		for _, m := range members {
			if m == nil || m.Value == nil {
				first = nil
				break
			}
			p, req := propertyDepth(m.Value, name, depth+1)
			if p == nil {
				first = nil
				break
			}
			if first == nil {
				first = p
			}
			all = all && req
		}
		if first != nil {
			return first, all || requires(s, name)
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

// KeyRules lists what k constrains: "format uuid", "maxLength 64", ...
func KeyRules(k KeySchema) []string {
	var c []string
	if k.Format != "" {
		c = append(c, "format "+k.Format)
	}
	if k.MinLength > 0 {
		c = append(c, fmt.Sprintf("minLength %d", k.MinLength))
	}
	if k.MaxLength > 0 {
		c = append(c, fmt.Sprintf("maxLength %d", k.MaxLength))
	}
	if k.Pattern != "" {
		c = append(c, fmt.Sprintf("pattern %q", k.Pattern))
	}
	return c
}

// normalizeName lowercases name and drops '-', '_' and a leading "x-".
func normalizeName(name string) string {
	n := strings.TrimPrefix(strings.ToLower(name), "x-")
	return strings.NewReplacer("-", "", "_", "").Replace(n)
}

// keyQueryParams returns the names of the declared query parameters named like an
// idempotency key.
func keyQueryParams(params openapi3.Parameters) []string {
	var out []string
	for _, p := range params {
		if p.Value != nil && p.Value.In == openapi3.ParameterInQuery && isKeyName(p.Value.Name) {
			out = append(out, p.Value.Name)
		}
	}
	return out
}

// mergeCaseDuplicates makes one declaration of a header declared several times in
// different cases: the stricter one (required beats optional; then the one with more
// constraints), its schema completed by the others' constraints where they are stricter
// (the larger minLength, the smaller maxLength, a pattern or format it lacks).
func (s *source) mergeCaseDuplicates(o *Operation, mk marker.Marker, decls []*openapi3.Parameter, w *Warnings) *openapi3.Parameter {
	win := decls[0]
	for _, d := range decls[1:] {
		if stricter(d, win) {
			win = d
		}
	}
	merged := *win
	var sch openapi3.Schema
	if win.Schema != nil && win.Schema.Value != nil {
		sch = *win.Schema.Value
	}
	var names []string
	for _, d := range decls {
		names = append(names, d.Name)
		if d.Required {
			merged.Required = true
		}
		if d.Schema == nil || d.Schema.Value == nil || !isString(d.Schema.Value) {
			continue
		}
		ds := d.Schema.Value
		if ds.MinLength > sch.MinLength {
			sch.MinLength = ds.MinLength
		}
		if ds.MaxLength != nil && (sch.MaxLength == nil || *ds.MaxLength < *sch.MaxLength) {
			sch.MaxLength = ds.MaxLength
		}
		if sch.Pattern == "" {
			sch.Pattern = ds.Pattern
		}
		if sch.Format == "" {
			sch.Format = ds.Format
		}
		if sch.Type.IsEmpty() {
			sch.Type = ds.Type
		}
	}
	merged.Schema = &openapi3.SchemaRef{Value: &sch}
	req := "optional"
	if merged.Required {
		req = "required"
	}
	rules := append([]string{req}, KeyRules(keySchemaOf(&sch))...)
	note := fmt.Sprintf("the spec declares the key header %d times, differing only in case (%s): one header, %s, with the stricter of each rule: %s",
		len(decls), strings.Join(names, ", "), win.Name, strings.Join(rules, ", "))
	o.Notes = append(o.Notes, note)
	w.addOp(o, mk.Pos, "%s: %s %s: %s", marker.MarkerExt, o.Method, o.Path, note)
	return &merged
}

// stricter reports whether declaration a constrains the key more than b.
func stricter(a, b *openapi3.Parameter) bool {
	if a.Required != b.Required {
		return a.Required
	}
	return constraintCount(a) > constraintCount(b)
}

func constraintCount(p *openapi3.Parameter) int {
	if p.Schema == nil || p.Schema.Value == nil {
		return 0
	}
	s, n := p.Schema.Value, 0
	for _, set := range []bool{s.MinLength > 0, s.MaxLength != nil, s.Pattern != "", s.Format != ""} {
		if set {
			n++
		}
	}
	return n
}

// keySchemaOf is s's constraints as the model keeps them, unchecked (for messages).
func keySchemaOf(s *openapi3.Schema) KeySchema {
	ks := KeySchema{MinLength: s.MinLength, Pattern: s.Pattern, Format: s.Format}
	if s.MaxLength != nil {
		ks.MaxLength = *s.MaxLength
	}
	return ks
}

// queryKeyIgnored notes a query parameter named like the key beside a header or body key:
// the key is read from one place; the query parameter stays an ordinary one (and part of
// the fingerprint).
func (s *source) queryKeyIgnored(o *Operation, mk marker.Marker, queries []string, w *Warnings) {
	src := "header " + o.Key.Header
	if o.Key.Body != "" {
		src = "body " + o.Key.Body
	}
	note := fmt.Sprintf("the query parameter %s is not read as the key (the key is %s); it is an ordinary query parameter, part of the fingerprint", strings.Join(queries, ", "), src)
	o.Notes = append(o.Notes, note)
	w.addOp(o, mk.Pos, "%s: %s %s: %s", marker.MarkerExt, o.Method, o.Path, note)
}

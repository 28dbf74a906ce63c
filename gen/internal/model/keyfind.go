package model

import (
	"fmt"
	"slices"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/idemgen/idemgen/gen/internal/marker"
	"github.com/idemgen/idemgen/gen/internal/spec"
	"github.com/idemgen/idemgen/idem"
)

// This file finds the key a spec declares for an operation marked without header: or
// body: (x-idempotent: true, or an object that names neither): a header parameter, a JSON
// or form body property, spelled like an idempotency key. Where it has to guess (the name
// of an added header, a property that only suggests it is the key, one header declared
// twice), the guess goes into the policy comment (operation.Notes) and is a warning
// (model.Warnings).

// keyConvention is the header name a spec gives its idempotency key, when it has one:
// the spelling its operations (any method) declare most often.
type keyConvention struct {
	Header string // "" when no operation declares a key header
	Count  int    // how many operations declare it
}

// specKeyConvention counts the key headers (named like an idempotency key) that the
// operations of doc declare, by exact spelling; the most declared wins, ties in byte
// order.
func specKeyConvention(doc *openapi3.T) keyConvention {
	counts := map[string]int{}
	spec.ForEachOperation(doc, func(item *openapi3.PathItem, op *openapi3.Operation) {
		seen := map[string]bool{}
		for _, p := range spec.OperationParams(item, op) {
			if p.Value != nil && p.Value.In == openapi3.ParameterInHeader && isKeyName(p.Value.Name) && !seen[p.Value.Name] {
				seen[p.Value.Name] = true
				counts[p.Value.Name]++
			}
		}
	})
	var c keyConvention
	for _, name := range spec.SortedKeys(counts) {
		if counts[name] > c.Count {
			c = keyConvention{Header: name, Count: counts[name]}
		}
	}
	return c
}

// declaredKey resolves the key of an operation whose marker names no source: the one
// header or body property the spec declares named like an idempotency key (several are
// an error asking for header: or body:); else a header idemgen adds, named by the
// spec's convention (else Idempotency-Key), optional.
func (s *source) declaredKey(o *Operation, mk marker.Marker, op *openapi3.Operation, params openapi3.Parameters, conv keyConvention, w *Warnings, errs *spec.ErrorList) {
	headers := keyHeaderGroups(params)
	props := bodyKeyCandidates(op)
	queries := keyQueryParams(params)
	var places []string
	for _, g := range headers {
		places = append(places, "header "+g[0].Name)
	}
	for _, p := range props {
		places = append(places, "body "+p)
	}
	switch {
	case len(places) > 1 && len(props) == 0:
		var names []string
		for _, g := range headers {
			names = append(names, g[0].Name)
		}
		errs.Add(mk.Pos, "%s: %s %s declares several headers that could carry the idempotency key (%s): name the one with %s: {header: NAME}",
			marker.MarkerExt, o.Method, o.Path, strings.Join(names, ", "), marker.MarkerExt)
		return
	case len(places) > 1:
		errs.Add(mk.Pos, "%s: %s %s declares several places that could carry the idempotency key (%s): name the one with %s: {header: NAME} or {body: /POINTER}",
			marker.MarkerExt, o.Method, o.Path, strings.Join(places, ", "), marker.MarkerExt)
		return
	case len(headers) == 1:
		decl := headers[0][0]
		if len(headers[0]) > 1 {
			decl = s.mergeCaseDuplicates(o, mk, headers[0], w)
		}
		s.declaredHeaderKey(o, mk, decl, mk.Pos, errs)
	case len(props) == 1:
		s.bodyKey(o, mk, op, props[0], mk.Pos, marker.MarkerExt+" (the body's "+props[0]+" is named like an idempotency key)", errs)
		o.Notes = append(o.Notes, fmt.Sprintf("the key is the request body's %s, as the spec declares it (named like an idempotency key)", props[0]))
	case len(queries) > 0:
		errs.Add(mk.Pos, "%s: %s %s declares the idempotency key as a query parameter (%s): idemgen reads a key from a header or the body; declare it as a header too and name it with %s: {header: NAME}, or mark the operation with %s: false",
			marker.MarkerExt, o.Method, o.Path, queries[0], marker.MarkerExt, marker.MarkerExt)
		return
	default:
		o.Key.Header = idem.DefaultKeyHeader
		if conv.Header != "" {
			o.Key.Header = conv.Header
			note := fmt.Sprintf("the added header is named %s, as %d operation(s) of the spec name their key header", conv.Header, conv.Count)
			o.Notes = append(o.Notes, note)
			if conv.Header != idem.DefaultKeyHeader {
				w.addOp(o, mk.Pos, "%s: %s %s declares no idempotency key: %s", marker.MarkerExt, o.Method, o.Path, note)
			}
		}
		for _, hint := range bodyKeyHints(op) {
			note := fmt.Sprintf("the request body's %s %s: if it is the key, mark the operation with %s: {body: %s}", hint.ptr, hint.why, marker.MarkerExt, hint.ptr)
			o.Notes = append(o.Notes, note)
			w.addOp(o, mk.Pos, "%s: %s %s: the key is the added header %s; %s", marker.MarkerExt, o.Method, o.Path, o.Key.Header, note)
		}
	}
	if len(queries) > 0 && o.Key.Header != "" || len(queries) > 0 && o.Key.Body != "" {
		s.queryKeyIgnored(o, mk, queries, w)
	}
}

// otherKeys notes the places named like an idempotency key that the spec declares
// besides the one the marker (or the defaults) names: they are not read as the key.
func otherKeys(o *Operation, mk marker.Marker, op *openapi3.Operation, params openapi3.Parameters, w *Warnings) {
	var others []string
	for _, g := range keyHeaderGroups(params) {
		if !strings.EqualFold(g[0].Name, o.Key.Header) {
			others = append(others, "header "+g[0].Name)
		}
	}
	for _, p := range bodyKeyCandidates(op) {
		if p != o.Key.Body {
			others = append(others, "body "+p)
		}
	}
	if len(others) == 0 {
		return
	}
	src, field := "header "+o.Key.Header, "header"
	if o.Key.Body != "" {
		src, field = "body "+o.Key.Body, "body"
	}
	note := fmt.Sprintf("the spec also declares %s, named like an idempotency key, which is not read as the key (the key is %s, as %s: names it)", strings.Join(others, ", "), src, field)
	o.Notes = append(o.Notes, note)
	w.addOp(o, mk.Pos, "%s: %s %s: %s", marker.MarkerExt, o.Method, o.Path, note)
}

// keyHeaderGroups returns the declared header parameters named like an idempotency key
// (Idempotency-Key, x-idempotency-key, idempotency_key, IdempotencyKey, any case),
// grouped by name case-insensitively (header names are): a group of several is one
// header declared more than once.
func keyHeaderGroups(params openapi3.Parameters) [][]*openapi3.Parameter {
	var out [][]*openapi3.Parameter
	for _, p := range keyHeaderCandidates(params) {
		i := slices.IndexFunc(out, func(g []*openapi3.Parameter) bool { return strings.EqualFold(g[0].Name, p.Name) })
		if i < 0 {
			out = append(out, []*openapi3.Parameter{p})
		} else {
			out[i] = append(out[i], p)
		}
	}
	return out
}

// bodyKeyCandidates returns, as JSON pointers, the top-level properties (allOf members
// included) of the operation's JSON and form request bodies named like an idempotency
// key, in byte order, each once.
func bodyKeyCandidates(op *openapi3.Operation) []string {
	var out []string
	for _, b := range keyBodies(op) {
		for _, name := range propertyNames(b.schema) {
			if isKeyName(name) && !slices.Contains(out, "/"+escapePointer(name)) {
				out = append(out, "/"+escapePointer(name))
			}
		}
	}
	slices.Sort(out)
	return out
}

type keyHint struct{ ptr, why string }

// bodyKeyHints returns the top-level body properties whose name or description suggests
// an idempotency key without being named like one (idempotency_token, a description
// saying "idempotency"): each a warning.
func bodyKeyHints(op *openapi3.Operation) []keyHint {
	var out []keyHint
	seen := map[string]bool{}
	for _, b := range keyBodies(op) {
		for _, name := range propertyNames(b.schema) {
			ptr := "/" + escapePointer(name)
			if seen[ptr] || isKeyName(name) {
				continue
			}
			prop, _ := property(b.schema, name)
			switch {
			case strings.Contains(normalizeName(name), "idempoten"):
				out = append(out, keyHint{ptr, "has a name that speaks of idempotency"})
			case prop != nil && strings.Contains(strings.ToLower(prop.Description), "idempoten"):
				out = append(out, keyHint{ptr, "has a description that speaks of idempotency"})
			default:
				continue
			}
			seen[ptr] = true
		}
	}
	return out
}

// propertyNames returns, sorted, the names property finds in s: its own properties, its
// allOf members', and those every member of its oneOf (or anyOf) has.
func propertyNames(s *openapi3.Schema) []string {
	out := propertyNamesDepth(s, 0)
	slices.Sort(out)
	return slices.Compact(out)
}

func propertyNamesDepth(s *openapi3.Schema, depth int) []string {
	if s == nil || depth > 8 {
		return nil
	}
	var out []string
	for name := range s.Properties {
		out = append(out, name)
	}
	for _, sub := range s.AllOf {
		if sub != nil {
			out = append(out, propertyNamesDepth(sub.Value, depth+1)...)
		}
	}
	for _, members := range []openapi3.SchemaRefs{s.OneOf, s.AnyOf} {
		var common []string
		for i, m := range members {
			if m == nil {
				common = nil
				break
			}
			names := propertyNamesDepth(m.Value, depth+1)
			if i == 0 {
				common = names
				continue
			}
			common = slices.DeleteFunc(common, func(n string) bool { return !slices.Contains(names, n) })
		}
		out = append(out, common...)
	}
	return out
}

func escapePointer(tok string) string {
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(tok)
}

// unprotectedKeys warns, once for the spec each, about the operations that declare an
// idempotency key (a header, or a body property, named like one) but run without the
// protocol: safe operations (GET, HEAD, OPTIONS, TRACE), which idemgen never marks
// (idempotent by definition), and unmarked operations that change state. Their key
// reaches the handler as an ordinary parameter or field. An operation marked
// x-idempotent: false was opted out on purpose, and is left alone.
func (s *source) unprotectedKeys(doc *openapi3.T, marked []marker.OpMarker, w *Warnings) {
	isMarked := map[string]bool{}
	for _, om := range marked {
		isMarked[strings.ToUpper(om.Method)+" "+om.Path] = true
	}
	var safe, unmarked []string
	var safeAt, unmarkedAt spec.Pos
	for _, path := range spec.SortedKeys(doc.Paths.Map()) {
		item := doc.Paths.Value(path)
		for _, method := range []string{"get", "head", "options", "trace", "post", "put", "patch", "delete"} {
			op := item.Operations()[strings.ToUpper(method)]
			name := strings.ToUpper(method) + " " + path
			if op == nil || isMarked[name] || op.Extensions[marker.MarkerExt] == false {
				continue
			}
			declares := len(keyHeaderCandidates(spec.OperationParams(item, op))) > 0
			isSafe := !slices.Contains(marker.MarkableMethods, method)
			if !isSafe && !declares {
				declares = len(bodyKeyCandidates(op)) > 0
			}
			if !declares {
				continue
			}
			k, _ := s.Operation(path, method)
			if isSafe {
				if len(safe) == 0 {
					safeAt = s.Pos(k)
				}
				safe = append(safe, name)
			} else {
				if len(unmarked) == 0 {
					unmarkedAt = s.Pos(k)
				}
				unmarked = append(unmarked, name)
			}
		}
	}
	if len(safe) > 0 {
		w.add(safeAt, "%d safe operation(s) declare an idempotency key header (%s): idemgen does not mark safe methods (idempotent by definition), so no protocol reads their key; it reaches the handler as an ordinary header parameter", len(safe), listSome(safe))
	}
	if len(unmarked) > 0 {
		w.add(unmarkedAt, "%d unmarked operation(s) declare an idempotency key (%s): they run without the protocol, and their key reaches the handler as an ordinary parameter or field; mark them (%s, or %s.methods), or opt them out with %s: false", len(unmarked), listSome(unmarked), marker.MarkerExt, marker.DefaultsExt, marker.MarkerExt)
	}
}

// listSome lists the first three of names, and how many more there are.
func listSome(names []string) string {
	if len(names) <= 3 {
		return strings.Join(names, ", ")
	}
	return strings.Join(names[:3], ", ") + fmt.Sprintf(" and %d more", len(names)-3)
}

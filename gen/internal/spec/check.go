package spec

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"go.yaml.in/yaml/v4"
)

// This file holds the checks of the spec itself, run before the markers are read: what
// kind of document it is, duplicate keys, local $refs, and path templates against their
// declared path parameters. Each adds located errors to errs; none stops the others.

// checkVersion rejects documents that are not OpenAPI 3.0 or 3.1 (Swagger 2.0, other
// YAML). Its error is fatal: nothing else is worth checking in such a document.
func (s *Source) checkVersion() error {
	_, v := s.Lookup("openapi")
	if v == nil {
		if k, sv := s.Lookup("swagger"); sv != nil {
			return &Error{Pos: s.Pos(k), Msg: fmt.Sprintf("swagger %q: a Swagger 2.0 document; idemgen reads OpenAPI 3.0 and 3.1 (convert it first, e.g. with npx swagger2openapi)", sv.Value)}
		}
		return &Error{Pos: s.Pos(s.Root), Msg: `not an OpenAPI document: no "openapi" field at the root`}
	}
	if !strings.HasPrefix(v.Value, "3.0") && !strings.HasPrefix(v.Value, "3.1") {
		return &Error{Pos: s.Pos(v), Msg: fmt.Sprintf("openapi %q: idemgen reads OpenAPI 3.0 and 3.1", v.Value)}
	}
	return nil
}

// CheckTree reports, in one walk of the tree, every mapping key given twice (YAML refuses
// them, JSON parsers keep the last silently: either way the spec does not say what its
// author meant) and every local $ref ("#/...") that does not resolve.
func (s *Source) CheckTree(errs *ErrorList) {
	var refs refKinds
	defer func() { s.refs = &refs }()
	walk(s.Root, func(key, n *yaml.Node) {
		refs.add(key, n)
		if key != nil && key.Value == "$ref" && n.Kind == yaml.ScalarNode && strings.HasPrefix(n.Value, "#") {
			if _, ok := s.resolvePointer(n.Value); !ok {
				errs.Add(s.Pos(n), "$ref %q does not resolve: nothing at that path in this document", n.Value)
			}
		}
		if n.Kind != yaml.MappingNode || len(n.Content) < 4 {
			return
		}
		seen := make(map[string]*yaml.Node, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			if k.Kind != yaml.ScalarNode || k.Value == "<<" {
				continue
			}
			if first, dup := seen[k.Value]; dup {
				errs.Add(s.Pos(k), "duplicate key %q (first at %d:%d)", k.Value, first.Line, first.Column)
				continue
			}
			seen[k.Value] = k
		}
	})
}

var templateParam = regexp.MustCompile(`\{([^{}]*)\}`)

// CheckPathTemplates reports, for every operation, a path template parameter
// ("/things/{thing_id}") that neither the operation nor its path item declares in: path,
// and a declared path parameter that the template does not have. Both make a server that
// cannot route or bind the request.
func (s *Source) CheckPathTemplates(errs *ErrorList) {
	s.forEachOperationNode(func(pathKey, item, methodKey, op *yaml.Node) {
		var inTemplate []string
		for _, m := range templateParam.FindAllStringSubmatch(pathKey.Value, -1) {
			inTemplate = append(inTemplate, m[1])
		}
		method := strings.ToUpper(methodKey.Value)
		declared := append(s.pathParams(op), s.pathParams(item)...)
		for _, name := range inTemplate {
			if !slices.ContainsFunc(declared, func(p pathParam) bool { return p.name == name }) {
				errs.Add(s.Pos(pathKey), "path %s: %s %s does not declare the template parameter %q (a parameter with in: path)", pathKey.Value, method, pathKey.Value, name)
			}
		}
		for _, p := range declared {
			if !slices.Contains(inTemplate, p.name) {
				errs.Add(s.Pos(p.at), "parameter %q (in: path) of %s %s is not in the path template", p.name, method, pathKey.Value)
			}
		}
	})
}

// CheckOperationIDs reports an operationId that another operation of the spec declares too
// (compared as written: the OpenAPI specification makes them unique, "case-sensitive"), at
// the later one, naming the first: the operation names every generated type and the key's
// stored operation, so two operations would share their keys' replays.
func (s *Source) CheckOperationIDs(errs *ErrorList) {
	_, paths := s.Lookup("paths")
	if paths == nil || paths.Kind != yaml.MappingNode {
		return
	}
	type first struct {
		method, path string
		at           Pos
		id           *yaml.Node
	}
	seen := map[string]first{}
	for i := 0; i+1 < len(paths.Content); i += 2 {
		pathKey := paths.Content[i]
		item, ref := s.PathItem(paths.Content[i+1]) // a local $ref's too
		if item == nil || item.Kind != yaml.MappingNode {
			continue
		}
		for j := 0; j+1 < len(item.Content); j += 2 {
			method := strings.ToLower(item.Content[j].Value)
			if !HTTPMethods[method] {
				continue
			}
			_, id := Entry(Deref(item.Content[j+1]), "operationId")
			if id == nil || id.Kind != yaml.ScalarNode || id.Value == "" {
				continue
			}
			f, dup := seen[id.Value]
			switch {
			case dup && f.id == id && ref != nil:
				errs.Add(s.Pos(ref), "path %s: this $ref names the path item of %s too: its operationId %q (%s) would name both %s %s and %s %s, and operation ids are unique in a spec; give the path a path item of its own",
					pathKey.Value, f.path, id.Value, f.at, f.method, f.path, strings.ToUpper(method), pathKey.Value)
			case dup:
				errs.Add(s.Pos(id), "operationId %q of %s %s is also the operationId of %s %s (%s): operation ids are unique in a spec",
					id.Value, strings.ToUpper(method), pathKey.Value, f.method, f.path, f.at)
			default:
				seen[id.Value] = first{strings.ToUpper(method), pathKey.Value, s.Pos(id), id}
			}
		}
	}
}

type pathParam struct {
	name string
	at   *yaml.Node // the parameter's name, or its $ref
}

// pathParams returns the in: path parameters that mapping n (a path item or an operation)
// declares, following local $refs. A $ref to another file is skipped: kin-openapi loads
// it, and oapi-codegen checks it.
func (s *Source) pathParams(n *yaml.Node) []pathParam {
	_, list := Entry(n, "parameters")
	if list == nil || list.Kind != yaml.SequenceNode {
		return nil
	}
	var out []pathParam
	for _, p := range list.Content {
		_, ref := Entry(p, "$ref")
		p = s.Resolve(p)
		_, in := Entry(p, "in")
		nameKey, name := Entry(p, "name")
		if in == nil || name == nil || in.Value != "path" {
			continue
		}
		at := nameKey
		if ref != nil {
			at = ref
		}
		out = append(out, pathParam{name: name.Value, at: at})
	}
	return out
}

// locateLoadError gives a kin-openapi load error the position of the $ref it names, when
// it names one ("error resolving reference \"x.yaml#/A\": ..."); else the file alone.
func (s *Source) locateLoadError(err error) *Error {
	msg := err.Error()
	var found *yaml.Node
	walk(s.Root, func(key, n *yaml.Node) {
		if found == nil && key != nil && key.Value == "$ref" && n.Kind == yaml.ScalarNode && strings.Contains(msg, fmt.Sprintf("%q", n.Value)) {
			found = n
		}
	})
	if found == nil {
		found = s.pointerNamed(msg)
	}
	if found == nil {
		return &Error{Pos: Pos{File: s.file}, Msg: msg}
	}
	return &Error{Pos: s.Pos(found), Msg: msg}
}

// pointerNamed returns the node of the JSON pointer a kin-openapi message ends with
// ("cannot construct !!str `abc` into float64 in /paths/~1a/post/.../minimum"), or nil.
func (s *Source) pointerNamed(msg string) *yaml.Node {
	i := strings.LastIndex(msg, " in /")
	if i < 0 {
		return nil
	}
	ptr := msg[i+len(" in "):]
	if j := strings.IndexAny(ptr, " \n"); j >= 0 {
		ptr = ptr[:j]
	}
	n, ok := s.resolvePointer("#" + ptr)
	if !ok {
		return nil
	}
	return n
}

// forEachOperationNode calls f for every operation of the paths whose path item is in the
// file, a local $ref's (#/components/pathItems/X) under each path that names it, in file
// order: the path's key, the path item, the method's key and the operation.
func (s *Source) forEachOperationNode(f func(pathKey, item, methodKey, op *yaml.Node)) {
	_, paths := s.Lookup("paths")
	if paths == nil || paths.Kind != yaml.MappingNode {
		return
	}
	for i := 0; i+1 < len(paths.Content); i += 2 {
		pathKey := paths.Content[i]
		item, _ := s.PathItem(paths.Content[i+1]) // a local $ref's too, under this path
		if item == nil || item.Kind != yaml.MappingNode {
			continue // a path item in another file: kin-openapi and oapi-codegen check it
		}
		for j := 0; j+1 < len(item.Content); j += 2 {
			if HTTPMethods[strings.ToLower(item.Content[j].Value)] {
				f(pathKey, item, item.Content[j], Deref(item.Content[j+1]))
			}
		}
	}
}

// paramLocations are the values of a parameter's in.
var paramLocations = map[string]bool{"path": true, "query": true, "header": true, "cookie": true}

// CheckParameters reports the parameters the OpenAPI specification does not allow, each
// where it is written: an in other than path, query, header and cookie (Swagger 2.0's
// body and formData are request bodies in OpenAPI 3), a parameter with neither a schema
// nor a content map, or a content map without exactly one media type, and a parameter
// declared twice in one list (the same name and in). oapi-codegen would panic, refuse
// the spec, or bind one of the two. Each is reported once, where it is declared
// (components/parameters, a path item or an operation).
func (s *Source) CheckParameters(errs *ErrorList) {
	checked := map[*yaml.Node]bool{}
	list := func(params *yaml.Node, where string) {
		if params == nil || params.Kind != yaml.SequenceNode {
			return
		}
		seen := map[[2]string]*yaml.Node{}
		for _, p := range params.Content {
			v := s.Resolve(p)
			_, in := Entry(v, "in")
			at, name := Entry(v, "name")
			if in == nil || name == nil {
				continue // kin-openapi's error: a parameter has both
			}
			if _, ref := Entry(p, "$ref"); ref != nil {
				at = ref
			}
			if !checked[v] {
				checked[v] = true
				s.checkParameter(v, in, errs)
			}
			id := [2]string{in.Value, name.Value}
			if first, dup := seen[id]; dup {
				errs.Add(s.Pos(at), "parameter %q (in: %s) of %s is declared twice in one list (first at %d:%d): a parameter is unique by name and in", name.Value, in.Value, where, first.Line, first.Column)
				continue
			}
			seen[id] = at
		}
	}
	_, comps := s.Lookup("components", "parameters")
	if comps != nil && comps.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(comps.Content); i += 2 {
			if v := Deref(comps.Content[i+1]); !checked[v] {
				if _, in := Entry(v, "in"); in != nil {
					checked[v] = true
					s.checkParameter(v, in, errs)
				}
			}
		}
	}
	items := map[*yaml.Node]bool{}
	s.forEachOperationNode(func(pathKey, item, methodKey, op *yaml.Node) {
		if !items[item] {
			items[item] = true
			_, params := Entry(item, "parameters")
			list(params, "path "+pathKey.Value)
		}
		_, params := Entry(op, "parameters")
		list(params, strings.ToUpper(methodKey.Value)+" "+pathKey.Value)
	})
}

// checkParameter reports p's in (the node in) when OpenAPI has no such location, and a
// parameter without exactly one of a schema and a one-entry content map.
func (s *Source) checkParameter(p, in *yaml.Node, errs *ErrorList) {
	_, name := Entry(p, "name")
	if !paramLocations[in.Value] {
		errs.Add(s.Pos(in), "parameter %q: in: %s is not a parameter location (want path, query, header or cookie; a Swagger 2.0 body or formData parameter is a requestBody in OpenAPI 3)", name.Value, in.Value)
		return
	}
	_, schema := Entry(p, "schema")
	contentKey, content := Entry(p, "content")
	switch {
	case schema == nil && content == nil:
		errs.Add(s.Pos(name), "parameter %q (in: %s) has neither a schema nor a content map: OpenAPI requires one of them", name.Value, in.Value)
	case content != nil && (content.Kind != yaml.MappingNode || len(content.Content) != 2):
		errs.Add(s.Pos(contentKey), "parameter %q (in: %s): content must hold exactly one media type", name.Value, in.Value)
	}
}

// responseKey is what OpenAPI allows as a key of an operation's responses: a status code,
// a range (2XX, in upper case) or default; x- extensions are not responses.
var responseKey = regexp.MustCompile(`^(default|[1-5]XX|[1-5][0-9][0-9]|x-.*)$`)

// CheckResponseKeys reports every key of an operation's responses that is neither a
// status code, a range such as 2XX, nor default ("2xx", "200 OK"): the strict server
// names a type after it and compares it with the status code.
func (s *Source) CheckResponseKeys(errs *ErrorList) {
	s.forEachOperationNode(func(pathKey, _, methodKey, op *yaml.Node) {
		_, responses := Entry(op, "responses")
		if responses == nil || responses.Kind != yaml.MappingNode {
			return
		}
		for i := 0; i+1 < len(responses.Content); i += 2 {
			if k := responses.Content[i]; !responseKey.MatchString(k.Value) {
				errs.Add(s.Pos(k), "response %q of %s %s: a response key is a status code (201), a range in upper case (2XX) or default", k.Value, strings.ToUpper(methodKey.Value), pathKey.Value)
			}
		}
	})
}

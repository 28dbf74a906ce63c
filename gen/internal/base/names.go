package base

import (
	"fmt"
	"go/token"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/idemgen/idemgen/gen/internal/spec"
	"github.com/oapi-codegen/oapi-codegen/v2/pkg/codegen"
)

// This file gives every Go type the base declares a unique, valid name before
// oapi-codegen runs, so that it runs once. The names are not guessed: oapi-codegen's own
// exported functions (GenerateTypesFor*, OperationDefinitions) compute every type
// definition the spec yields, with its name. Colliding or invalid names are then changed
// in the document:
//
//   - a component keeps its name unless another component, an operation's type or a name
//     the generated code uses for itself claims it: it gets x-go-name Name2 (Name3, ...);
//   - an inline schema that oapi-codegen names after its path (an enum, an object with
//     additional properties or a union, an array's items) gets x-go-type-name: Name2,
//     or, when its path name is not a Go identifier (a component named "400"), N + name;
//   - a type whose name an enum constant takes (Color's "red" is ColorRed once prefixed)
//     is renamed the same way.
//
//   - an inline member of a union (oneOf, anyOf) that oapi-codegen would name like another
//     (Foo.bar's first member and FooBar's are both FooBar0: it names members after their
//     path, whatever they carry) is moved into a component of its own, FooBar02, and the
//     union refers to it.
//
// Names derived from operation ids (CreatePetParams, CreatePet200JSONResponse) cannot be
// changed; the others yield to them.

// reservedNames are declared by oapi-codegen's server and strict server templates
// whatever the router, and by the idempotent layer: no schema may take them.
var reservedNames = []string{
	"ServerInterface", "ServerInterfaceWrapper",
	"StrictServerInterface", "StrictHandlerFunc", "StrictMiddlewareFunc", "NewStrictHandler",
	"IdempotentServerInterface", "NewIdempotentStrictServer", "OpenAPI",
}

// routerNames are declared by each router's server templates (templates/{stdhttp,chi,echo,gin}
// of oapi-codegen) and by the strict server's options for it (templates/strict).
var routerNames = map[string][]string{
	RouterStdHTTP: append([]string{
		"MiddlewareFunc", "ServeMux", "StdHTTPServerOptions",
		"Handler", "HandlerFromMux", "HandlerFromMuxWithBaseURL", "HandlerWithOptions",
		"StrictHTTPServerOptions", "NewStrictHandlerWithOptions",
	}, paramErrorNames...),
	RouterChi: append([]string{
		"MiddlewareFunc", "ChiServerOptions", "Unimplemented",
		"Handler", "HandlerFromMux", "HandlerFromMuxWithBaseURL", "HandlerWithOptions",
		"StrictHTTPServerOptions", "NewStrictHandlerWithOptions",
	}, paramErrorNames...),
	RouterEcho: {
		"EchoRouter", "RegisterHandlers", "RegisterHandlersOptions", "RegisterHandlersWithBaseURL", "RegisterHandlersWithOptions",
	},
	RouterGin: {
		"MiddlewareFunc", "GinServerOptions", "RegisterHandlers", "RegisterHandlersWithOptions",
		"StrictGinServerOptions", "NewStrictHandlerWithOptions",
	},
}

// paramErrorNames are the parameter errors of the net/http and chi servers.
var paramErrorNames = []string{
	"UnescapedCookieParamError", "UnmarshalingParamError", "RequiredParamError", "RequiredHeaderError",
	"InvalidParamFormatError", "TooManyValuesForParamError",
}

// site is one type definition of the base and how it can be renamed.
type site struct {
	name   string
	td     codegen.TypeDefinition
	comp   *component       // a component's own type: renamed with x-go-name
	inline *openapi3.Schema // an inline schema named after its path: renamed with x-go-type-name
	rank   int              // which of colliding sites keeps the name: lowest first
}

const (
	rankFixed = iota // operation-derived, reserved, union members: cannot be renamed
	// components/responses: before schemas, because oapi-codegen's strict server names
	// a response component's types after its spec name whatever its x-go-name (N400JSONResponse
	// for a response "400" renamed N4002), while the operations refer to them by x-go-name.
	rankResponse
	rankSchema    // components/schemas
	rankComponent // other components
	rankInline    // inline schemas
)

func (s *site) renamable() bool { return s.comp != nil || s.inline != nil }

// keep orders colliding sites: the lowest keeps the name. Among components, one whose
// spec name is already its Go name ("FooBar" before "Foo-Bar") goes first.
func (s *site) keep() int {
	k := 2 * s.rank
	if s.comp != nil && s.comp.name != s.name {
		k++
	}
	return k
}

// resolveNames renames, in doc, every type that would collide or be invalid, router's
// names included, and returns the operations as oapi-codegen defines them (their ids,
// parameters, bodies and responses: what the idempotent layer uses, which no rename here
// changes). oapi-codegen's package state must hold this run's configuration (see
// initCodegen).
func resolveNames(doc *openapi3.T, router string, client bool) ([]codegen.OperationDefinition, []Degradation, error) {
	codegen.SetGlobalStateSpec(doc)
	comps := components(doc)
	sites, ops, degraded, err := collectSites(doc, comps, router, client)
	if err != nil {
		return nil, degraded, err
	}
	taken := map[string]bool{}
	for _, s := range sites {
		taken[s.name] = true
	}
	hoistCollidingUnionMembers(doc, sites, taken)
	resolveCollisions(sites, taken)
	resolveEnumConstants(sites, taken)
	keepFieldNames(doc, comps)
	return ops, degraded, nil
}

// keepFieldNames keeps the Go field name of every property that refers to a component
// renamed here: oapi-codegen takes a property's field name from the x-go-name it finds on
// the schema, the referenced component's included, so `foo: {$ref: FooBar}` would become
// a field FooBar2. The property's own x-go-name (next to its $ref) restores Foo.
func keepFieldNames(doc *openapi3.T, comps []*component) {
	renamed := map[string]bool{}
	for _, c := range comps {
		if c.section == "schemas" && c.renamed {
			renamed["#/components/schemas/"+c.name] = true
		}
	}
	if len(renamed) == 0 {
		return
	}
	spec.ForEachSchema(doc, func(s *openapi3.Schema) {
		for name, p := range s.Properties {
			if p == nil || !renamed[p.Ref] || p.Extensions["x-go-name"] != nil {
				continue
			}
			if p.Extensions == nil {
				p.Extensions = map[string]any{}
			}
			p.Extensions["x-go-name"] = name
		}
	})
}

// collectSites lists every type definition of the base: the components' (in the order
// oapi-codegen declares them), the operations', and the reserved names (the router's too).
func collectSites(doc *openapi3.T, comps []*component, router string, client bool) ([]*site, []codegen.OperationDefinition, []Degradation, error) {
	var sites []*site
	var degraded []Degradation
	var fails Failures
	otherJSON := otherJSONResponseSchemas(doc)
	for _, c := range comps {
		tds, err := c.typeDefinitions()
		for range 20 { // each round types one more schema loosely
			if err == nil {
				break
			}
			d, ok := degrade(c)
			if !ok {
				break
			}
			degraded = append(degraded, d)
			tds, err = c.typeDefinitions()
		}
		if err != nil {
			fails = append(fails, componentFailure(c, err))
			continue
		}
		for i, td := range tds {
			s := &site{name: td.TypeName, td: td, rank: rankInline, inline: inlineRenamable(td)}
			if i == 0 {
				s.inline, s.comp, s.rank = nil, c, rankComponent
				switch c.section {
				case "schemas":
					s.rank = rankSchema
				case "responses":
					s.rank = rankResponse
				}
				if c.ext == nil {
					s.comp, s.rank = nil, rankFixed
				}
			}
			pinOtherJSON(s, otherJSON)
			sites = append(sites, s)
		}
	}
	defs, opDegraded, err := operationDefinitions(doc)
	degraded = append(degraded, opDegraded...)
	if l, ok := err.(Failures); ok {
		fails = append(fails, l...)
	}
	if len(fails) > 0 {
		return nil, nil, degraded, fails
	}
	for _, op := range defs {
		if op.IsAlias {
			continue
		}
		for _, td := range op.TypeDefinitions {
			s := &site{name: td.TypeName, td: td, rank: rankInline, inline: inlineRenamable(td)}
			if s.inline == nil {
				s.rank = rankFixed
			}
			pinOtherJSON(s, otherJSON)
			sites = append(sites, s)
		}
		for _, n := range operationTypeNames(op) {
			sites = append(sites, &site{name: n, rank: rankFixed})
		}
		if client {
			for _, n := range clientOperationNames(op) {
				sites = append(sites, &site{name: n, rank: rankFixed})
			}
		}
	}
	reserved := slices.Concat(reservedNames, routerNames[router])
	if client {
		reserved = append(reserved, clientNames...)
	}
	for _, n := range reserved {
		sites = append(sites, &site{name: n, rank: rankFixed})
	}
	return sites, defs, degraded, nil
}

// pinOtherJSON gives an inline type of a response in a JSON media type other than
// application/json, or of a components/responses entry in any JSON media type
// (otherJSON), its name as x-go-type-name: oapi-codegen declares such a type by the name
// the type definitions give it, after the media type
// (CreateOrder201ApplicationHalPlusJSONResponseBodyStatus; a response component's after
// the component, MadeState), but refers to it by another, after the response's name tag
// (CreateOrder201HALJSONResponseBodyStatus; MadeJSONResponseBodyState in the strict
// server's own type for the component), so that the type is used but never declared;
// with x-go-type-name both are the one name. A schema
// reached again (a components/responses entry, and each operation that refers to it)
// keeps the name the first site gave it (Format drops the second, identical
// declaration oapi-codegen then writes).
func pinOtherJSON(s *site, otherJSON map[*openapi3.Schema]bool) {
	if s.inline == nil || !otherJSON[s.inline] {
		return
	}
	if n, ok := s.inline.Extensions["x-go-type-name"].(string); ok && n != "" {
		s.name = n
		return
	}
	rename(s, s.name)
}

// otherJSONResponseSchemas returns the inline schemas (not behind a $ref) of the
// operations' responses in a JSON media type other than application/json
// (application/hal+json, application/problem+json, ...), and of the components/responses
// entries in every JSON media type.
func otherJSONResponseSchemas(doc *openapi3.T) map[*openapi3.Schema]bool {
	out := map[*openapi3.Schema]bool{}
	var walk func(r *openapi3.SchemaRef)
	walk = func(r *openapi3.SchemaRef) {
		if r == nil || r.Ref != "" || r.Value == nil || out[r.Value] {
			return
		}
		s := r.Value
		out[s] = true
		for _, list := range []openapi3.SchemaRefs{s.AllOf, s.OneOf, s.AnyOf, s.PrefixItems} {
			for _, m := range list {
				walk(m)
			}
		}
		for _, p := range s.Properties {
			walk(p)
		}
		walk(s.Items)
		walk(s.AdditionalProperties.Schema)
	}
	response := func(r *openapi3.ResponseRef, component bool) {
		if r == nil || r.Value == nil {
			return
		}
		for ct, mt := range r.Value.Content {
			if mt != nil && spec.IsJSON(ct) && (component || spec.MediaType(ct) != "application/json") {
				walk(mt.Schema)
			}
		}
	}
	if doc.Components != nil {
		for _, r := range doc.Components.Responses {
			response(r, true)
		}
	}
	spec.ForEachOperation(doc, func(_ *openapi3.PathItem, op *openapi3.Operation) {
		if op.Responses != nil {
			for _, r := range op.Responses.Map() {
				response(r, false)
			}
		}
	})
	return out
}

// operationTypeNames are the names the strict server declares for an operation.
func operationTypeNames(op codegen.OperationDefinition) []string {
	id := op.OperationId
	names := []string{id + "RequestObject", id + "ResponseObject"}
	for _, b := range op.Bodies {
		if b.NameTag != "" {
			names = append(names, id+b.NameTag+"RequestBody")
		}
	}
	for _, r := range op.Responses {
		if len(r.Headers) > 0 && !r.IsRef() {
			names = append(names, id+r.StatusCode+"ResponseHeaders")
		}
		for _, c := range r.Contents {
			names = append(names, id+r.StatusCode+c.NameTagOrContentType()+"Response")
		}
		if len(r.Contents) == 0 {
			names = append(names, id+r.StatusCode+"Response")
		}
	}
	return names
}

// inlineRenamable returns the schema to put x-go-type-name on for an inline type
// definition, or nil when x-go-type-name would not rename it: oapi-codegen honours it on
// enums and on object schemas, but names a union's members after their position
// whatever they carry.
func inlineRenamable(td codegen.TypeDefinition) *openapi3.Schema {
	s := td.Schema.OAPISchema
	if s == nil || !strings.Contains(td.JsonName, ".") {
		return nil // not named after a path: a component's, an operation's or x-go-type-name's own
	}
	if len(td.Schema.EnumValues) > 0 {
		return s
	}
	if !s.Type.IsEmpty() && !s.Type.Is(openapi3.TypeObject) {
		return nil
	}
	last := td.JsonName[strings.LastIndexByte(td.JsonName, '.')+1:]
	if _, err := strconv.Atoi(last); err == nil {
		return nil // a union member
	}
	return s
}

// resolveCollisions renames, in each group of sites sharing a name, every renamable site
// but the one of lowest rank, and every site whose name is not a Go identifier.
func resolveCollisions(sites []*site, taken map[string]bool) {
	groups := map[string][]*site{}
	for _, s := range sites {
		groups[s.name] = append(groups[s.name], s)
	}
	for _, name := range spec.SortedKeys(groups) {
		g := groups[name]
		sort.SliceStable(g, func(i, j int) bool { return g[i].keep() < g[j].keep() })
		valid := token.IsIdentifier(name) && !token.IsKeyword(name)
		var renamed map[*openapi3.Schema]string // an inline schema reached by several sites: one name
		for i, s := range g {
			switch {
			case !valid && s.inline != nil && renamed[s.inline] != "":
				s.name = renamed[s.inline]
			case !valid && s.renamable():
				to := validName(name)
				if taken[to] {
					to = freeName(to, taken)
				}
				taken[to] = true
				rename(s, to)
				if s.inline != nil {
					if renamed == nil {
						renamed = map[*openapi3.Schema]string{}
					}
					renamed[s.inline] = to
				}
			case i == 0:
			case s.renamable() && !equivalentDuplicate(g[0], s):
				rename(s, freeName(name, taken))
			}
		}
	}
}

// equivalentDuplicate reports two inline definitions oapi-codegen declares once (the same
// schema reached twice, e.g. through allOf).
func equivalentDuplicate(a, b *site) bool {
	return a.inline != nil && b.inline != nil && a.inline == b.inline
}

// validName makes a path-derived name ("400_Details_Item") a Go identifier.
func validName(name string) string {
	var b strings.Builder
	for i, r := range name {
		switch {
		case r == '_' || 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z':
			b.WriteRune(r)
		case '0' <= r && r <= '9':
			if i == 0 {
				b.WriteByte('N')
			}
			b.WriteRune(r)
		}
	}
	if b.Len() == 0 || token.IsKeyword(b.String()) {
		return "T" + b.String()
	}
	return b.String()
}

func rename(s *site, to string) {
	switch {
	case s.comp != nil:
		s.comp.setGoName(to)
	case s.inline != nil:
		if s.inline.Extensions == nil {
			s.inline.Extensions = map[string]any{}
		}
		s.inline.Extensions["x-go-type-name"] = to
	}
	s.name = to
}

// freeName returns the first of base2, base3, ... that is not taken, and takes it. A base
// that is free and valid is returned as it is.
func freeName(base string, taken map[string]bool) string {
	for i := 2; ; i++ {
		n := base + strconv.Itoa(i)
		if !taken[n] {
			taken[n] = true
			return n
		}
	}
}

// resolveEnumConstants gives every enum constant a name nothing else in the base takes.
// The constants are computed as oapi-codegen's GenerateEnums does: an enum's values,
// prefixed with its type name when they conflict with another enum's or with a type name.
// Then, for each constant:
//
//   - a type named like it is renamed (Name2), an enum type included (Event.source's
//     prefixed "type" is EventSourceType, the type of Event.sourceType);
//   - when it cannot be (a name of the server or of an operation: an enum value
//     "Handler"), or when two prefixed enums both yield it (Scope "isGlobal" and ScopeIs
//     "global": ScopeIsGlobal, which oapi-codegen never compares), the constant is
//     renamed instead, with x-enum-varnames on the enum: ScopeIsGlobal2 (the later enum's).
func resolveEnumConstants(sites []*site, taken map[string]bool) {
	for range 5 {
		byName := map[string][]*site{}
		for _, s := range sites {
			byName[s.name] = append(byName[s.name], s)
		}
		enums := enumsOf(sites, byName)
		owners := map[string][]*enum{} // constant → the enums that declare it
		for _, e := range enums {
			for _, c := range e.constants() {
				owners[c] = append(owners[c], e)
			}
		}
		changed := false
		for _, c := range spec.SortedKeys(owners) {
			keep := 1 // how many of the enums declaring c keep it
			for _, s := range byName[c] {
				switch {
				case s.renamable() && len(s.td.Schema.EnumValues) == 0:
					rename(s, freeName(c, taken))
					changed = true
				case len(owners[c]) == 1 && owners[c][0].name == c:
					// An enum whose constant is its own name (a value ""): nothing to do.
				case s.renamable():
					rename(s, freeName(c, taken))
					changed = true
				default:
					keep = 0
				}
			}
			for _, e := range owners[c][min(keep, len(owners[c])):] {
				if renameConstant(e, c, owners, taken) {
					changed = true
				}
			}
		}
		if !changed {
			return
		}
	}
}

// enumsOf returns the enums the base declares (one per type name, as oapi-codegen's
// GenerateEnums keeps them), each prefixed as oapi-codegen prefixes it.
func enumsOf(sites []*site, byName map[string][]*site) []*enum {
	var enums []*enum
	seen := map[string]bool{}
	for _, s := range sites {
		if len(s.td.Schema.EnumValues) == 0 || seen[s.name] {
			continue
		}
		seen[s.name] = true
		enums = append(enums, &enum{name: s.name, values: s.td.Schema.EnumValues, schema: s.td.Schema.OAPISchema})
	}
	prefixConflicting(enums)
	for _, e := range enums {
		for k := range e.values {
			for _, s := range byName[k] {
				if len(s.td.Schema.EnumValues) == 0 && s.td.TypeName != "" {
					e.prefix = true
				}
			}
		}
		if _, self := e.values[e.name]; self {
			e.prefix = true
		}
	}
	return enums
}

// renameConstant gives e's constant c another name, free among the constants (owners) and
// the types (taken): its value name gets 2, 3, ... ("isGlobal" → "isGlobal2", the
// constant ScopeIsGlobal2), written as the enum's x-enum-varnames, which oapi-codegen
// names the constants by. It reports whether it renamed the constant.
func renameConstant(e *enum, c string, owners map[string][]*enum, taken map[string]bool) bool {
	if e.schema == nil {
		return false
	}
	var key string
	for k := range e.values {
		if e.constant(k) == c {
			key = k
		}
	}
	if key == "" {
		return false
	}
	newKey := ""
	for i := 2; newKey == ""; i++ {
		k := key + strconv.Itoa(i)
		if _, ok := e.values[k]; !ok && !taken[e.constant(k)] && len(owners[e.constant(k)]) == 0 {
			newKey = k
		}
	}
	values := e.schema.Enum
	if len(values) == 0 {
		values = []any{e.schema.Const}
	}
	keyOf := map[string]string{}
	for k, v := range e.values {
		keyOf[v] = k
	}
	names := make([]any, len(values))
	for i, v := range values {
		k := keyOf[fmt.Sprintf("%v", v)]
		if k == key {
			k = newKey
		}
		names[i] = k
	}
	if e.schema.Extensions == nil {
		e.schema.Extensions = map[string]any{}
	}
	e.schema.Extensions["x-enum-varnames"] = names
	// The value names as oapi-codegen computes them from x-enum-varnames; the map is the
	// site's own, so that the next round sees them.
	gs, err := codegen.GenerateGoSchema(&openapi3.SchemaRef{Value: e.schema}, []string{e.name})
	if err != nil || len(gs.EnumValues) != len(e.values) {
		delete(e.schema.Extensions, "x-enum-varnames")
		return false
	}
	clear(e.values)
	maps.Copy(e.values, gs.EnumValues)
	taken[e.constant(newKey)] = true
	return true
}

// enum is one enum type of the base: its name, its values (constant name → value, as
// oapi-codegen's Schema.EnumValues) and whether its constants are prefixed with its name.
type enum struct {
	name   string
	values map[string]string
	prefix bool
	schema *openapi3.Schema // where x-enum-varnames renames a constant
}

// constants are e's constant names: its value names, prefixed with its type name (the
// first character of the value name upper-cased) when e.prefix.
func (e *enum) constants() []string {
	out := make([]string, 0, len(e.values))
	for k := range e.values {
		out = append(out, e.constant(k))
	}
	return out
}

// constant is the name of the constant of value name k.
func (e *enum) constant(k string) string {
	if e.prefix {
		return e.name + codegen.UppercaseFirstCharacter(k)
	}
	return k
}

// prefixConflicting sets prefix on the enums oapi-codegen's GenerateEnums prefixes for
// conflicting with one another: two enums conflict, unless both are prefixed already,
// when they share a value name or when their constant names meet; oapi-codegen prefixes
// both and repeats until nothing changes. A conflict, once there, stays until both are
// prefixed (prefixing only adds names to meet), so the result is the smallest set closed
// under that rule whatever the order: every enum sharing a value name with another, then,
// from each enum prefixed, every unprefixed enum that has a value named like one of its
// prefixed constants. Each enum is prefixed once and each of its constants looked up
// once: linear in the number of values (oapi-codegen's pairwise loop is quadratic).
func prefixConflicting(enums []*enum) {
	byValue := map[string][]*enum{} // value name → the enums that have it
	for _, e := range enums {
		for k := range e.values {
			byValue[k] = append(byValue[k], e)
		}
	}
	var work []*enum
	mark := func(e *enum) {
		if !e.prefix {
			e.prefix = true
			work = append(work, e)
		}
	}
	for _, e := range enums {
		for k := range e.values {
			if len(byValue[k]) > 1 {
				mark(e)
				break
			}
		}
	}
	for len(work) > 0 {
		e := work[len(work)-1]
		work = work[:len(work)-1]
		for _, c := range e.constants() {
			for _, other := range byValue[c] {
				mark(other) // a no-op for e itself and for an enum prefixed already
			}
		}
	}
}

// clientNames are declared by oapi-codegen's client templates (client.tmpl,
// client-with-responses.tmpl) and by ClientFile: with gen.Options.Client no schema may take
// them.
var clientNames = []string{
	"Client", "ClientInterface", "ClientOption", "NewClient", "WithHTTPClient", "WithRequestEditorFn",
	"HttpRequestDoer", "RequestEditorFn", "ClientWithResponses", "ClientWithResponsesInterface",
	"NewClientWithResponses", "WithBaseURL",
	"IdempotentClient", "NewIdempotentClient",
}

// clientOperationNames are the names oapi-codegen's client declares for an operation:
// its response type, its request builders and its response parser.
func clientOperationNames(op codegen.OperationDefinition) []string {
	id := op.OperationId
	names := []string{id + "Response", "New" + id + "Request", "Parse" + id + "Response"}
	if op.HasBody() {
		names = append(names, "New"+id+"RequestWithBody")
	}
	for _, b := range op.Bodies {
		if b.IsSupportedByClient() && b.Suffix() != "" {
			names = append(names, "New"+id+"Request"+b.Suffix())
		}
	}
	return names
}

// hoistCollidingUnionMembers moves into components/schemas every inline union member that
// shares its name with another site (which keeps it: the lowest keep(), as in
// resolveCollisions), under a free name: oapi-codegen names an inline member after its
// path, and x-go-type-name does not change that, but a member that is a $ref takes the
// component's type. The site takes the component's name.
func hoistCollidingUnionMembers(doc *openapi3.T, sites []*site, taken map[string]bool) {
	groups := map[string][]*site{}
	for _, s := range sites {
		groups[s.name] = append(groups[s.name], s)
	}
	var slots map[*openapi3.Schema]*openapi3.SchemaRef // inline union members by schema
	for _, name := range spec.SortedKeys(groups) {
		g := groups[name]
		if len(g) < 2 {
			continue
		}
		sort.SliceStable(g, func(i, j int) bool { return g[i].keep() < g[j].keep() })
		for _, s := range g[1:] {
			if !unionMember(s.td) {
				continue
			}
			if slots == nil {
				slots = unionMemberSlots(doc)
			}
			slot := slots[s.td.Schema.OAPISchema]
			if slot == nil || slot.Ref != "" {
				continue
			}
			if doc.Components == nil {
				doc.Components = &openapi3.Components{}
			}
			if doc.Components.Schemas == nil {
				doc.Components.Schemas = openapi3.Schemas{}
			}
			to := freeName(name, taken)
			for doc.Components.Schemas[to] != nil {
				to = freeName(name, taken)
			}
			doc.Components.Schemas[to] = &openapi3.SchemaRef{Value: slot.Value}
			slot.Ref = "#/components/schemas/" + to
			s.name = to
		}
	}
}

// unionMember reports whether td is an inline member of a union, named after its
// position (Foo.Bar.0).
func unionMember(td codegen.TypeDefinition) bool {
	if td.Schema.OAPISchema == nil || !strings.Contains(td.JsonName, ".") {
		return false
	}
	_, err := strconv.Atoi(td.JsonName[strings.LastIndexByte(td.JsonName, '.')+1:])
	return err == nil
}

// unionMemberSlots returns the inline members of every union (oneOf, anyOf) in doc, by
// their schema, with the reference that holds each.
func unionMemberSlots(doc *openapi3.T) map[*openapi3.Schema]*openapi3.SchemaRef {
	out := map[*openapi3.Schema]*openapi3.SchemaRef{}
	seen := map[*openapi3.Schema]bool{}
	var visit func(r *openapi3.SchemaRef)
	visit = func(r *openapi3.SchemaRef) {
		if r == nil || r.Value == nil || seen[r.Value] {
			return
		}
		v := r.Value
		seen[v] = true
		for _, m := range slices.Concat(v.OneOf, v.AnyOf) {
			if m != nil && m.Ref == "" && m.Value != nil {
				out[m.Value] = m
			}
		}
		for _, m := range slices.Concat(v.OneOf, v.AnyOf, v.AllOf) {
			visit(m)
		}
		visit(v.Not)
		visit(v.Items)
		for _, n := range spec.SortedKeys(v.Properties) {
			visit(v.Properties[n])
		}
		if v.AdditionalProperties.Schema != nil {
			visit(v.AdditionalProperties.Schema)
		}
	}
	content := func(c openapi3.Content) {
		for _, n := range spec.SortedKeys(c) {
			if c[n] != nil {
				visit(c[n].Schema)
			}
		}
	}
	param := func(p *openapi3.ParameterRef) {
		if p != nil && p.Value != nil {
			visit(p.Value.Schema)
			content(p.Value.Content)
		}
	}
	response := func(r *openapi3.ResponseRef) {
		if r == nil || r.Value == nil {
			return
		}
		content(r.Value.Content)
		for _, n := range spec.SortedKeys(r.Value.Headers) {
			if h := r.Value.Headers[n]; h != nil && h.Value != nil {
				visit(h.Value.Schema)
			}
		}
	}
	if cs := doc.Components; cs != nil {
		for _, n := range spec.SortedKeys(cs.Schemas) {
			visit(cs.Schemas[n])
		}
		for _, n := range spec.SortedKeys(cs.Parameters) {
			param(cs.Parameters[n])
		}
		for _, n := range spec.SortedKeys(cs.RequestBodies) {
			if b := cs.RequestBodies[n]; b != nil && b.Value != nil {
				content(b.Value.Content)
			}
		}
		for _, n := range spec.SortedKeys(cs.Responses) {
			response(cs.Responses[n])
		}
	}
	if doc.Paths != nil {
		for _, path := range doc.Paths.InMatchingOrder() {
			item := doc.Paths.Value(path)
			for _, p := range item.Parameters {
				param(p)
			}
			for _, m := range spec.SortedKeys(item.Operations()) {
				op := item.Operations()[m]
				for _, p := range op.Parameters {
					param(p)
				}
				if op.RequestBody != nil && op.RequestBody.Value != nil {
					content(op.RequestBody.Value.Content)
				}
				if op.Responses != nil {
					for _, code := range spec.SortedKeys(op.Responses.Map()) {
						response(op.Responses.Value(code))
					}
				}
			}
		}
	}
	return out
}

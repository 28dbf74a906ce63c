package base

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/oapi-codegen/oapi-codegen/v2/pkg/codegen"

	"github.com/idemgen/idemgen/gen/internal/spec"
)

// This file gives operations, parameters and properties Go names the generated code can
// declare: distinct where oapi-codegen would give two one name, a name for a spec name
// with no letter Go takes (東京: oapi-codegen makes it ""), and, for a path parameter, a
// variable name no generated function declares for itself (w, r, err, ctx, params, ...).

// goName is the Go name oapi-codegen makes of a spec name, or, when it makes none (a
// name in a script Go identifiers take but oapi-codegen drops: 東京, or emoji), one
// spelled from its code points: U6771U4EAC.
func goName(name string) string {
	if g := codegen.SchemaNameToTypeName(name); g != "" {
		return g
	}
	return wordless(name)
}

// wordless spells name by its code points (U6771U4EAC), a Go name for a name of no
// letters oapi-codegen keeps.
func wordless(name string) string {
	var b strings.Builder
	for _, r := range name {
		fmt.Fprintf(&b, "U%04X", r)
	}
	if b.Len() == 0 {
		return "Empty"
	}
	return b.String()
}

// setGoNameExt sets x-go-name on ext.
func setGoNameExt(ext *map[string]any, name string) {
	if *ext == nil {
		*ext = map[string]any{}
	}
	(*ext)["x-go-name"] = name
}

// uniqueOperationIDs gives operations whose ids differ only in case or punctuation
// ("createPet", "CreatePet", "create_pet": all CreatePet in Go) distinct Go names: the one
// spelled like its Go name, else the first by id, keeps it; the others get createPet2,
// create_pet3 (the stored operation name, Policy.Operation, stays the spec's id).
//
// An id of which oapi-codegen makes no Go name (注文) is spelled by its code points first
// (U6CE8U6587, see goName).
func uniqueOperationIDs(doc *openapi3.T) {
	groups := map[string][]*openapi3.Operation{}
	spec.ForEachOperation(doc, func(_ *openapi3.PathItem, op *openapi3.Operation) {
		if op.OperationID != "" {
			g := codegen.SchemaNameToTypeName(op.OperationID)
			if g == "" {
				op.OperationID = wordless(op.OperationID)
				g = op.OperationID
			}
			groups[g] = append(groups[g], op)
		}
	})
	taken := map[string]bool{}
	for g := range groups {
		taken[g] = true
	}
	for _, g := range spec.SortedKeys(groups) {
		ops := groups[g]
		if len(ops) < 2 {
			continue
		}
		sort.SliceStable(ops, func(i, j int) bool {
			if (ops[i].OperationID == g) != (ops[j].OperationID == g) {
				return ops[i].OperationID == g
			}
			return ops[i].OperationID < ops[j].OperationID
		})
		for _, op := range ops[1:] {
			for n := 2; ; n++ {
				id := op.OperationID + strconv.Itoa(n)
				if name := codegen.SchemaNameToTypeName(id); !taken[name] {
					taken[name], op.OperationID = true, id
					break
				}
			}
		}
	}
}

// uniqueParamNames gives the query, header and cookie parameters of one operation
// distinct Go field names (x-go-name). "StartTime", "StartTime<" and "StartTime>" are all
// StartTime to oapi-codegen: a name with comparison operators spells them
// (StartTimeLt, StartTimeGt; "<=" is LtEq), whatever the order of declaration, and the
// plain name keeps StartTime. Other collisions ("created_at", "createdAt") number all but
// the first: CreatedAt2. A name of which oapi-codegen makes no Go name (名前) gets one
// (see goName).
func uniqueParamNames(params openapi3.Parameters) {
	groups := map[string][]*openapi3.Parameter{}
	var order []string
	for _, p := range params {
		v := p.Value
		if v == nil || v.In == openapi3.ParameterInPath {
			continue
		}
		g := paramGoName(v)
		if g == "" {
			g = wordless(v.Name)
			setGoNameExt(&v.Extensions, g)
		}
		if len(groups[g]) == 0 {
			order = append(order, g)
		}
		groups[g] = append(groups[g], v)
	}
	taken := map[string]bool{}
	for _, g := range order {
		taken[g] = true
	}
	for _, g := range order {
		members := groups[g]
		if len(members) < 2 {
			continue
		}
		// Plain names first, in declaration order: the first keeps g.
		sort.SliceStable(members, func(i, j int) bool {
			return operatorSuffix(members[i].Name) == "" && operatorSuffix(members[j].Name) != ""
		})
		for _, v := range members[1:] {
			alt := g + operatorSuffix(v.Name)
			if alt == g || taken[alt] {
				alt = freeName(g, taken)
			}
			taken[alt] = true
			setGoNameExt(&v.Extensions, alt)
		}
	}
}

// pathParamNames gives the path parameters of one operation Go names that are distinct
// ("item-id", "item_id": both ItemId to oapi-codegen) and whose variable names
// (oapi-codegen's GoVariableName: itemId) no generated function of the operation
// declares for itself (boundVar: a parameter named w, r, err, ctx, params, body,
// string, url, pathParam0, ...): oapi-codegen passes path parameters as arguments beside its own and
// binds them to variables of those names. Such a parameter gets x-go-name Name + Param
// (ErrParam: the variable errParam, the request object's field ErrParam), a collision a
// number (ItemId2); a name of no letters gets one (see goName).
func pathParamNames(params openapi3.Parameters) {
	var path []*openapi3.Parameter
	for _, p := range params {
		if p.Value != nil && p.Value.In == openapi3.ParameterInPath {
			path = append(path, p.Value)
		}
	}
	if len(path) == 0 {
		return
	}
	taken := map[string]bool{}
	for _, v := range path {
		taken[paramGoName(v)] = true
	}
	seen := map[string]bool{}
	for _, v := range path {
		g := paramGoName(v)
		to := g
		switch {
		case g == "":
			to = wordless(v.Name)
		case boundVar(goVariableName(g)):
			to = g + "Param"
		}
		if seen[to] || to != g && taken[to] {
			to = freeName(to, taken)
		}
		seen[to], taken[to] = true, true
		if to != g {
			setGoNameExt(&v.Extensions, to)
		}
	}
}

// goVariableName is the variable name oapi-codegen gives a parameter of Go name g
// (ParameterDefinition.GoVariableName).
func goVariableName(g string) string {
	name := codegen.LowercaseFirstCharacters(g)
	if codegen.IsGoKeyword(name) {
		name = "p" + codegen.UppercaseFirstCharacter(name)
	}
	if name != "" && name[0] >= '0' && name[0] <= '9' {
		name = "n" + name
	}
	return name
}

// boundVars are the names a path parameter's variable must not take: the variables,
// parameters and packages of the functions that take or bind path parameters, in
// oapi-codegen's server, strict server and client templates (stdhttp, chi, echo, gin,
// strict, client, client-with-responses) and idemgen's (client.go.tmpl), and Go's
// predeclared identifiers, which a variable would shadow for the function's own use.
var boundVars = setOf(
	// oapi-codegen's and idemgen's locals and parameters
	"all", "args", "binder", "body", "bodyBytes", "bodyReader", "bodyStr", "boundary", "buf", "c", "client",
	"contentType", "cookie", "ctx", "data", "decoded", "e", "editors", "encoded", "err", "errorHandler", "f", "fn",
	"flusher", "form", "found", "h", "handler", "headerParam", "headers", "i", "key", "m", "middleware", "mw", "n",
	"o", "ok", "op", "operationPath", "options", "opts", "out", "param", "paramValue", "params", "parent", "parts",
	"pathParam", "ptr", "qp", "queryFrag", "queryURL", "queryValues", "r", "rawQueryFragments", "reader",
	"reqEditors", "req", "request", "requiredError", "res", "resp", "response", "router", "rsp", "server",
	"serverURL", "sh", "si", "siw", "spec", "statusCode", "strict", "stringer", "value", "valueList", "values",
	"vb", "w", "wrapper", "writeErr", "writer",
	// packages the generated code imports
	"bytes", "context", "echo", "errors", "fmt", "gin", "http", "idem", "idemclient", "idemvalidate", "io",
	"json", "mime", "multipart", "openapi_types", "runtime", "strconv", "strings", "time", "url", "uuid", "xml",
	// Go's predeclared identifiers
	"any", "append", "bool", "byte", "cap", "clear", "close", "comparable", "complex", "complex64",
	"complex128", "copy", "delete", "error", "false", "float32", "float64", "imag", "int", "int8", "int16",
	"int32", "int64", "iota", "len", "make", "max", "min", "new", "nil", "panic", "print", "println", "real",
	"recover", "rune", "string", "true", "uint", "uint8", "uint16", "uint32", "uint64", "uintptr",
)

// boundVar reports a name in boundVars, or one of the client's pathParam0, pathParam1, ...
func boundVar(name string) bool {
	if n, ok := strings.CutPrefix(name, "pathParam"); ok && n != "" && strings.Trim(n, "0123456789") == "" {
		return true
	}
	return boundVars[name]
}

func setOf(names ...string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}

// uniqueFieldNames gives the properties of one object schema distinct Go field names
// (x-go-name next to the property): "isGlobal" and "is_global" are both IsGlobal to
// oapi-codegen. A property whose x-go-name the spec sets keeps its name, then the first in
// oapi-codegen's field order (x-order, then name); the others get IsGlobal2, IsGlobal3.
// A property named like a member oapi-codegen declares on the type (memberNames: the
// AdditionalProperties field, the Get and Set methods of an object with
// additionalProperties) is renamed too (AdditionalProperties2), and one of which
// oapi-codegen makes no Go name (東京) gets one (see goName).
func uniqueFieldNames(s *openapi3.Schema) {
	if len(s.Properties) == 0 {
		return
	}
	members := memberNames(s)
	if len(s.Properties) == 1 && members == nil {
		for name, p := range s.Properties {
			if p != nil && fieldGoName(name, p) == "" {
				setGoNameExt(&p.Extensions, wordless(name))
			}
		}
		return
	}
	groups := map[string][]string{}
	for _, name := range codegen.SortedSchemaKeys(s.Properties) {
		p := s.Properties[name]
		if p == nil {
			return // oapi-codegen refuses the schema before naming its fields
		}
		g := fieldGoName(name, p)
		if g == "" {
			g = wordless(name)
			setGoNameExt(&p.Extensions, g)
		}
		groups[g] = append(groups[g], name)
	}
	if len(groups) == len(s.Properties) && !anyKey(groups, members) {
		return
	}
	taken := map[string]bool{}
	for g := range groups {
		taken[g] = true
	}
	for _, m := range members {
		taken[m] = true
	}
	for _, g := range spec.SortedKeys(groups) {
		names := groups[g]
		keep := 1
		if slices.Contains(members, g) {
			keep = 0 // the type's own member keeps the name
		}
		if len(names) <= keep {
			continue
		}
		sort.SliceStable(names, func(i, j int) bool {
			return hasGoName(s.Properties[names[i]]) && !hasGoName(s.Properties[names[j]])
		})
		for _, name := range names[keep:] {
			setGoNameExt(&s.Properties[name].Extensions, freeName(g, taken))
		}
	}
}

// memberNames are the names oapi-codegen declares on the Go type of s besides its
// properties' fields, which no field may take: an object with additionalProperties
// beside its properties has the field AdditionalProperties and the methods Get, Set,
// MarshalJSON and UnmarshalJSON; one with oneOf/anyOf beside them has MarshalJSON,
// UnmarshalJSON, Discriminator and ValueByDiscriminator.
func memberNames(s *openapi3.Schema) []string {
	maps, unions := codegen.SchemaHasAdditionalProperties(s), len(s.OneOf)+len(s.AnyOf) > 0
	switch {
	case maps && unions:
		return slices.Concat(mapMembers, unionMembers)
	case maps:
		return mapMembers
	case unions:
		return unionMembers
	}
	return nil
}

var (
	mapMembers   = []string{"AdditionalProperties", "Get", "Set", "MarshalJSON", "UnmarshalJSON"}
	unionMembers = []string{"MarshalJSON", "UnmarshalJSON", "Discriminator", "ValueByDiscriminator"}
)

// anyKey reports whether m has one of keys.
func anyKey[V any](m map[string]V, keys []string) bool {
	for _, k := range keys {
		if _, ok := m[k]; ok {
			return true
		}
	}
	return false
}

// fieldGoName is the Go field name oapi-codegen gives the property name: its x-go-name
// (next to a $ref, else the schema's own), else its name, made a Go name.
func fieldGoName(name string, p *openapi3.SchemaRef) string {
	if n, ok := p.Extensions["x-go-name"].(string); ok && n != "" {
		return codegen.SchemaNameToTypeName(n)
	}
	if p.Value != nil {
		if n, ok := p.Value.Extensions["x-go-name"].(string); ok && n != "" {
			return codegen.SchemaNameToTypeName(n)
		}
	}
	return codegen.SchemaNameToTypeName(name)
}

func hasGoName(p *openapi3.SchemaRef) bool {
	_, own := p.Extensions["x-go-name"]
	return own || p.Value != nil && p.Value.Extensions["x-go-name"] != nil
}

// paramGoName is the Go field name oapi-codegen gives a parameter.
func paramGoName(v *openapi3.Parameter) string {
	name := v.Name
	if n, ok := v.Extensions["x-go-name"].(string); ok && n != "" {
		name = n
	}
	return codegen.SchemaNameToTypeName(name)
}

var operatorWords = map[rune]string{'<': "Lt", '>': "Gt", '=': "Eq", '!': "Not"}

// operatorSuffix spells the comparison operators of a parameter name: "StartTime<=" →
// "LtEq"; "" when it has none.
func operatorSuffix(name string) string {
	var b strings.Builder
	for _, r := range name {
		b.WriteString(operatorWords[r])
	}
	return b.String()
}

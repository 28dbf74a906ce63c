package base

import (
	"fmt"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/oapi-codegen/oapi-codegen/v2/pkg/codegen"

	"github.com/idemgen/idemgen/gen/internal/spec"
)

// Failure is an error of the base at a place of the document: Keys are the mapping keys
// and sequence indexes from the root to the schema, component or operation it is about
// (as spec.Source.Lookup follows them; RootKeys when it is about no one place), Msg says
// what oapi-codegen could not do and why.
type Failure struct {
	Keys []string
	Msg  string
}

// RootKeys is the place of a failure about the document as a whole: its openapi field.
var RootKeys = []string{"openapi"}

func (f Failure) Error() string { return strings.Join(f.Keys, ".") + ": " + f.Msg }

// Failures are every Failure of a run, in the order found; an error.
type Failures []Failure

func (l Failures) Error() string {
	msgs := make([]string, len(l))
	for i, f := range l {
		msgs[i] = f.Error()
	}
	return strings.Join(msgs, "\n")
}

// componentFailure is the failure of oapi-codegen to type component c that no schema of
// c could be degraded for.
func componentFailure(c *component, err error) Failure {
	return Failure{Keys: []string{"components", c.section, c.name},
		Msg: fmt.Sprintf("oapi-codegen cannot type components/%s/%s, and idemgen found no schema of it to type loosely: %s", c.section, c.name, rootCause(err))}
}

// operationDefinitions is codegen.OperationDefinitions(doc), with the operations'
// inline schemas oapi-codegen cannot type (a 3.1 multi-type scalar, an allOf it cannot
// merge, ...) typed loosely as json.RawMessage, each a Degradation. An operation that
// still fails is a Failure at the operation, every one of them at once. oapi-codegen's
// package state must hold this run's configuration.
func operationDefinitions(doc *openapi3.T) ([]codegen.OperationDefinition, []Degradation, error) {
	defs, err := codegen.OperationDefinitions(doc)
	if err == nil {
		return defs, nil, nil
	}
	var degraded []Degradation
	var fails Failures
	spec.ForEachOperationAt(doc, func(path, method string, item *openapi3.PathItem, op *openapi3.Operation) {
		for range 20 { // each round types one more schema loosely
			err := operationAlone(doc, path, method, item, op)
			if err == nil {
				return
			}
			d, ok := degradeFirst(operationSchemas(path, method, item, op))
			if !ok {
				fails = append(fails, Failure{Keys: []string{"paths", path, method},
					Msg: fmt.Sprintf("oapi-codegen cannot generate %s %s, and idemgen found no schema of it to type loosely: %s", strings.ToUpper(method), path, rootCause(err))})
				return
			}
			degraded = append(degraded, d)
		}
	})
	if len(fails) > 0 {
		return nil, degraded, fails
	}
	if defs, err = codegen.OperationDefinitions(doc); err != nil {
		return nil, degraded, Failures{{Keys: []string{"paths"}, Msg: "oapi-codegen cannot generate the operations: " + rootCause(err)}}
	}
	return defs, degraded, nil
}

// operationAlone runs codegen.OperationDefinitions on the operation at path and method
// alone (its path item's parameters with it), for the error it gives.
func operationAlone(doc *openapi3.T, path, method string, item *openapi3.PathItem, op *openapi3.Operation) error {
	one := &openapi3.PathItem{Ref: item.Ref, Parameters: item.Parameters, Servers: item.Servers}
	one.SetOperation(strings.ToUpper(method), op)
	_, err := codegen.OperationDefinitions(&openapi3.T{OpenAPI: doc.OpenAPI, Components: doc.Components, Paths: openapi3.NewPaths(openapi3.WithPath(path, one))})
	return err
}

// locateGenerateError turns an error of codegen.Generate, which names no position, into
// Failures, one per line of it (its spec validation joins one line per value it
// refuses), each at the place its text names: the operation ("in POST path \"/a\""), the
// path, the component ("schema \"Order\""), the type (an enum's, a duplicate type name's:
// the component or operation whose Go name it starts with), else the document.
func locateGenerateError(doc *openapi3.T, err error) Failures {
	var out Failures
	for _, line := range strings.Split(err.Error(), "\n") {
		if line = strings.TrimSpace(line); line != "" {
			out = append(out, Failure{Keys: placeNamed(doc, line), Msg: "oapi-codegen: " + rootCause(errorText(line))})
		}
	}
	return out
}

type errorText string

func (e errorText) Error() string { return string(e) }

// placeNamed returns the place that msg, an oapi-codegen message, names (see
// locateGenerateError).
func placeNamed(doc *openapi3.T, msg string) []string {
	quoted := func(after string) (string, bool) {
		i := strings.LastIndex(msg, after+` "`)
		if i < 0 {
			return "", false
		}
		rest := msg[i+len(after)+2:]
		j := strings.Index(rest, `"`)
		if j < 0 {
			return "", false
		}
		return rest[:j], true
	}
	if strings.Contains(msg, "the root security requirements") {
		return []string{"security"}
	}
	if p, ok := quoted("path"); ok {
		i := strings.LastIndex(msg, ` path "`)
		if f := strings.Fields(msg[:i]); len(f) > 0 && spec.HTTPMethods[strings.ToLower(f[len(f)-1])] {
			return []string{"paths", p, strings.ToLower(f[len(f)-1])}
		}
		return []string{"paths", p}
	}
	for _, c := range []struct{ text, section string }{
		{"component parameter", "parameters"}, {"component request body", "requestBodies"},
		{"component response", "responses"}, {"component header", "headers"}, {"schema", "schemas"},
	} {
		if n, ok := quoted(c.text); ok {
			return []string{"components", c.section, n}
		}
	}
	for _, marker := range []string{" of ", "duplicate typename '"} {
		if i := strings.LastIndex(msg, marker); i >= 0 {
			name := strings.FieldsFunc(msg[i+len(marker):], func(r rune) bool { return r == ' ' || r == '\'' || r == ',' })
			if len(name) > 0 {
				if keys := goNamePlace(doc, name[0]); keys != nil {
					return keys
				}
			}
		}
	}
	return RootKeys
}

// goNamePlace returns the place of the component or operation whose Go name is the
// longest prefix of the Go type name (OrderStatus: components/schemas/Order;
// CreateOrderParams: the operation createOrder), or nil.
func goNamePlace(doc *openapi3.T, name string) []string {
	if doc == nil {
		return nil
	}
	var best []string
	bestLen := 0
	consider := func(goName string, keys ...string) {
		if len(goName) > bestLen && strings.HasPrefix(name, goName) {
			best, bestLen = keys, len(goName)
		}
	}
	for _, c := range components(doc) {
		consider(c.goName, "components", c.section, c.name)
	}
	spec.ForEachOperationAt(doc, func(path, method string, _ *openapi3.PathItem, op *openapi3.Operation) {
		consider(codegen.SchemaNameToTypeName(op.OperationID), "paths", path, method)
	})
	return best
}

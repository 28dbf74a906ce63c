package base

import (
	"fmt"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/oapi-codegen/oapi-codegen/v2/pkg/codegen"

	"github.com/idemgen/idemgen/gen/internal/spec"
)

// Degradation is a schema the base types loosely because oapi-codegen cannot type it (a
// multi-type scalar, null in an integer enum, ...): Keys is its place in the document
// (mapping keys from the root: components, schemas, Thing, properties, amount), Why
// oapi-codegen's reason. The request is still validated against the spec as written, and
// the fingerprint reads the whole body: only the Go type is looser.
type Degradation struct {
	Keys []string
	Why  string
}

// Message is the warning's text, without its position.
func (d Degradation) Message() string {
	return fmt.Sprintf("%s: oapi-codegen cannot type this schema (%s): idemgen types it as json.RawMessage (validation and the fingerprint still read it whole)",
		strings.Join(d.Keys, "."), d.Why)
}

// degrade types loosely the deepest schema of component c that oapi-codegen fails on
// (err is its failure on c), with x-go-type json.RawMessage, and reports it; ok is false
// when no schema of c could be (the failure is elsewhere, or c is not a schema).
func degrade(c *component, err error) (Degradation, bool) {
	r, ok := c.ref.(*openapi3.SchemaRef)
	if !ok || c.section != "schemas" {
		return Degradation{}, false
	}
	keys := []string{"components", "schemas", c.name}
	failing, keys := deepestFailing(r, []string{c.name}, keys)
	if failing == nil || failing.Value == nil || failing.Value.Extensions["x-go-type"] != nil {
		return Degradation{}, false
	}
	if failing.Value.Extensions == nil {
		failing.Value.Extensions = map[string]any{}
	}
	// No x-go-type-import: oapi-codegen's imports always list encoding/json (Format drops
	// the unused ones), and a second import of it would not compile.
	failing.Value.Extensions["x-go-type"] = "json.RawMessage"
	return Degradation{Keys: keys, Why: rootCause(err)}, true
}

// deepestFailing returns, below r (at keys; path is oapi-codegen's naming path), the
// deepest inline schema oapi-codegen fails on whose inline children it does not: the
// property, item or member to type loosely. A $ref is not descended (its component is
// typed, and degraded, on its own).
func deepestFailing(r *openapi3.SchemaRef, path, keys []string) (*openapi3.SchemaRef, []string) {
	if r == nil || r.Value == nil {
		return nil, nil
	}
	if _, err := codegen.GenerateGoSchema(r, path); err == nil {
		return nil, nil
	}
	v := r.Value
	type child struct {
		r    *openapi3.SchemaRef
		name string
		keys []string
	}
	var children []child
	for _, n := range spec.SortedKeys(v.Properties) {
		children = append(children, child{v.Properties[n], n, []string{"properties", n}})
	}
	if v.Items != nil {
		children = append(children, child{v.Items, "Item", []string{"items"}})
	}
	if v.AdditionalProperties.Schema != nil {
		children = append(children, child{v.AdditionalProperties.Schema, "AdditionalProperties", []string{"additionalProperties"}})
	}
	for _, ch := range children {
		if ch.r == nil || ch.r.Ref != "" {
			continue
		}
		if f, k := deepestFailing(ch.r, append(path, ch.name), append(keys, ch.keys...)); f != nil {
			return f, k
		}
	}
	if r.Ref != "" {
		return nil, nil
	}
	return r, keys
}

// rootCause is the last of oapi-codegen's wrapped messages ("error converting Schema
// Thing to Go type: error generating Go schema for property 'amount': unhandled Schema
// type: &[number string]" → "unhandled Schema type: &[number string]").
func rootCause(err error) string {
	msg := err.Error()
	for {
		i := strings.Index(msg, ": ")
		if i < 0 || !strings.HasPrefix(msg, "error ") {
			return msg
		}
		msg = msg[i+2:]
	}
}

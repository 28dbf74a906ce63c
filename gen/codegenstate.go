package gen

import (
	"fmt"
	"slices"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/oapi-codegen/oapi-codegen/v2/pkg/codegen"
)

// initCodegen sets oapi-codegen's package state for cfg and doc's OpenAPI version (the
// options, the type mapping, the name normaliser and its initialisms, whether the document
// is 3.1), so that its exported type functions name types as the real run will (see
// resolveNames). oapi-codegen has no exported initialiser: its Generate sets that state
// first, then parses its templates (about 6 ms of CPU, a third of a small spec's whole
// run) and generates.
//
// initCodegen calls Generate on an empty document of doc's version with cfg and one
// streaming content type pattern that does not compile (stopPattern): Generate returns
// that pattern's error once it has set everything the names depend on and before it
// parses a template (in v2.8.2: the streaming patterns are compiled after the initialisms
// map, and only the templates read them). Should another oapi-codegen release stop
// earlier or elsewhere (any other error), initCodegen falls back to generating the empty
// document to the end. TestInitCodegenSetsTheNameState checks the shortcut against that
// full run.
func initCodegen(cfg codegen.Configuration, doc *openapi3.T) error {
	err := generateEmpty(stopEarly(cfg), doc)
	if err != nil && strings.Contains(err.Error(), stopPattern) {
		return nil
	}
	return fullInitCodegen(cfg, doc)
}

// fullInitCodegen sets the same state by generating an empty document to the end.
func fullInitCodegen(cfg codegen.Configuration, doc *openapi3.T) error {
	if err := generateEmpty(cfg, doc); err != nil {
		return fmt.Errorf("oapi-codegen: %w", err)
	}
	return nil
}

// stopPattern is a streaming content type pattern that does not compile: an unclosed
// group, and a name that says what it is in an error should it ever surface.
const stopPattern = "(idemgen-init-stop"

// stopEarly is cfg with stopPattern among its streaming content types.
func stopEarly(cfg codegen.Configuration) codegen.Configuration {
	cfg.OutputOptions.StreamingContentTypes = append(slices.Clip(cfg.OutputOptions.StreamingContentTypes), stopPattern)
	return cfg
}

func generateEmpty(cfg codegen.Configuration, doc *openapi3.T) error {
	empty := &openapi3.T{OpenAPI: doc.OpenAPI, Info: &openapi3.Info{Title: "init", Version: "0"}, Paths: openapi3.NewPaths()}
	_, err := codegen.Generate(empty, cfg)
	return err
}

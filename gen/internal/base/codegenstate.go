package base

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
//
// Generate stops before it resets the names a run with resolve-type-name-collisions left
// behind (its package state holds them for the type functions to read), so the shortcut
// is taken only when no such run can have happened since the state was last reset: in a
// process where no Generate has got past its name state yet, or where the last options
// set are those of idemgen's own last run to the end (ranCodegen), which reset them.
// Otherwise (oapi-codegen run by other code in the same process) the empty document is
// generated to the end.
func initCodegen(cfg codegen.Configuration, doc *openapi3.T) error {
	if stateIsIdemgens() {
		err := generateEmpty(stopEarly(cfg), doc)
		if err != nil && strings.Contains(err.Error(), stopPattern) {
			return nil
		}
	}
	return fullInitCodegen(cfg, doc)
}

// fullInitCodegen sets the same state by generating an empty document to the end.
func fullInitCodegen(cfg codegen.Configuration, doc *openapi3.T) error {
	if err := generateEmpty(cfg, doc); err != nil {
		return fmt.Errorf("oapi-codegen: %w", err)
	}
	ranCodegen(cfg)
	return nil
}

// lastRun is the NoVCSVersionOverride of idemgen's last oapi-codegen run that went to the
// end: a pointer of its own per run (baseConfig), which tells its options from anyone
// else's.
var lastRun *string

// ranCodegen records that oapi-codegen's Generate ran to the end with cfg.
func ranCodegen(cfg codegen.Configuration) { lastRun = cfg.NoVCSVersionOverride }

// stateIsIdemgens reports whether oapi-codegen's package state can hold no names resolved
// by another run: Generate has not yet got past its name state in this process (it sets
// the "opts" template function after resolving names), or its last options are those of
// idemgen's last run to the end.
func stateIsIdemgens() bool {
	current, set := codegen.TemplateFunctions["opts"]
	if !set {
		return true
	}
	opts, ok := current.(func() codegen.Configuration)
	return ok && lastRun != nil && opts().NoVCSVersionOverride == lastRun
}

// stopPattern is a streaming content type pattern that does not compile: an unclosed
// group, and a name that says what it is in an error should it ever surface.
const stopPattern = "(idemgen-init-stop"

// stopEarly is cfg with stopPattern among its streaming content types, and a
// NoVCSVersionOverride of its own, so that the stopped run's options are never taken for
// a run to the end (stateIsIdemgens).
func stopEarly(cfg codegen.Configuration) codegen.Configuration {
	cfg.OutputOptions.StreamingContentTypes = append(slices.Clip(cfg.OutputOptions.StreamingContentTypes), stopPattern)
	if v := cfg.NoVCSVersionOverride; v != nil {
		own := *v
		cfg.NoVCSVersionOverride = &own
	}
	return cfg
}

func generateEmpty(cfg codegen.Configuration, doc *openapi3.T) error {
	empty := &openapi3.T{OpenAPI: doc.OpenAPI, Info: &openapi3.Info{Title: "init", Version: "0"}, Paths: openapi3.NewPaths()}
	_, err := codegen.Generate(empty, cfg)
	return err
}

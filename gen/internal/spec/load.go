package spec

import (
	"os"

	"github.com/getkin/kin-openapi/openapi3"
)

// Spec is the input of a run: the file as a node tree, for positions, and as kin-openapi's
// document, for everything else.
type Spec struct {
	Src  *Source     // the node tree, for positions
	Data []byte      // the file's bytes (content $refs inlined), for the spec file (render.Spec)
	Doc  *openapi3.T // kin-openapi's document; nil when LoadErr is set. The base step rewrites it.
	// LoadErr is kin-openapi's error when it could not load the document: reported with
	// the source checks, and nothing that needs doc runs.
	LoadErr error
}

// Load reads and parses the spec file, and applies the overlay files to it in order
// (ApplyOverlays). Only an unreadable file, a YAML syntax error, an overlay that cannot
// be applied or a document that is not OpenAPI 3.0/3.1 stops it; kin-openapi's own load
// error is kept in LoadErr, located (an *Error), to be reported with every other error
// of the run.
func Load(path string, overlays ...string) (*Spec, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if len(overlays) > 0 {
		return loadOverlaid(path, data, overlays)
	}
	var doc *openapi3.T
	var docErr error
	viaTree := jsonText(data) && !externalRefText(data)
	if !viaTree {
		// kin-openapi's loader first, then the node tree: the loader's own node tree is
		// garbage by the time the source's is built, so the two are never alive
		// together. (JSON is decoded from the source's tree: jsondoc.go.)
		doc, docErr = LoadDoc(path, data)
	}
	src, err := ParseSource(path, data)
	if err != nil {
		return nil, err
	}
	if err := src.checkVersion(); err != nil {
		return nil, err
	}
	s := &Spec{Src: src, Data: data}
	if inlined, ok, err := src.inlineContentRefs(); err != nil {
		return nil, err
	} else if ok {
		// A bundler's content $refs, resolved (contentref.go): kin-openapi loads the
		// document again, with them inlined, and the spec file embeds it so.
		s.Data = inlined
		doc, docErr = LoadDoc(path, inlined)
	} else if viaTree {
		doc, docErr = src.decodeJSONDoc(path, data)
	}
	s.Doc = doc
	if docErr != nil {
		s.Doc, s.LoadErr = nil, src.locateLoadError(docErr)
	}
	return s, nil
}

// loadOverlaid is Load with overlays: the tree is overlaid, and kin-openapi and the spec
// file read the overlaid document, as YAML.
func loadOverlaid(path string, data []byte, overlays []string) (*Spec, error) {
	src, err := ParseSource(path, data)
	if err != nil {
		return nil, err
	}
	if err := src.checkVersion(); err != nil {
		return nil, err
	}
	if err := src.ApplyOverlays(overlays); err != nil {
		return nil, err
	}
	if err := src.checkVersion(); err != nil {
		return nil, err
	}
	s := &Spec{Src: src}
	inlined, ok, err := src.inlineContentRefs()
	if err != nil {
		return nil, err
	}
	if !ok {
		if inlined, err = src.encode(); err != nil {
			return nil, err
		}
	}
	s.Data = inlined
	doc, docErr := LoadDoc(path, inlined)
	s.Doc = doc
	if docErr != nil {
		s.Doc, s.LoadErr = nil, src.locateLoadError(docErr)
	}
	return s, nil
}

package spec

import (
	"fmt"
	"net/url"
	"path/filepath"

	"github.com/getkin/kin-openapi/openapi3"
)

// LoadDoc loads the spec with kin-openapi (external $refs to local files only). Each call
// returns a fresh document: the base step rewrites it.
func LoadDoc(path string, data []byte) (*openapi3.T, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	return newLoader().LoadFromDataWithPath(data, &url.URL{Path: filepath.ToSlash(abs)})
}

// newLoader is kin-openapi's loader as idemgen configures it: $refs to other files are
// followed, on the local file system only.
func newLoader() *openapi3.Loader {
	loader := openapi3.NewLoader()
	loader.IsExternalRefsAllowed = true
	// Local files only: a generator whose output depends on the network is not reproducible.
	loader.ReadFromURIFunc = func(l *openapi3.Loader, u *url.URL) ([]byte, error) {
		if u.Scheme != "" && u.Scheme != "file" {
			return nil, fmt.Errorf("remote $ref %s: idemgen reads local files only", u)
		}
		return openapi3.ReadFromFile(l, u)
	}
	return loader
}

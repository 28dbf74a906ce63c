// Package templates holds the text/templates idemgen renders, embedded.
package templates

import "embed"

// FS holds the *.tmpl files.
//
//go:embed *.tmpl
var FS embed.FS

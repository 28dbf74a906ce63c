package gen

import (
	"slices"
	"testing"

	"github.com/idemgen/idemgen/gen/internal/base"
	"github.com/idemgen/idemgen/gen/internal/marker"
)

// TestConstantsAgree: gen's exported constants keep their literal values (so that go doc
// shows them), and the steps that use them have their own; the two must agree.
func TestConstantsAgree(t *testing.T) {
	for _, c := range []struct{ name, gen, step string }{
		{"BaseOapiCodegen", BaseOapiCodegen, base.BaseOapiCodegen},
		{"BaseExternal", BaseExternal, base.BaseExternal},
		{"BaseFile", BaseFile, base.BaseFile},
		{"IdempotentFile", IdempotentFile, base.IdempotentFile},
		{"ClientFile", ClientFile, base.ClientFile},
		{"SpecFile", SpecFile, base.SpecFile},
		{"OapiCodegenVersion", OapiCodegenVersion, base.OapiCodegenVersion},
		{"RouterStdHTTP", RouterStdHTTP, base.RouterStdHTTP},
		{"RouterChi", RouterChi, base.RouterChi},
		{"RouterEcho", RouterEcho, base.RouterEcho},
		{"RouterGin", RouterGin, base.RouterGin},
		{"MarkerExt", MarkerExt, marker.MarkerExt},
		{"DefaultsExt", DefaultsExt, marker.DefaultsExt},
	} {
		if c.gen != c.step {
			t.Errorf("gen.%s = %q, the step's = %q", c.name, c.gen, c.step)
		}
	}
	if !slices.Equal(Routers, base.Routers) {
		t.Errorf("gen.Routers = %q, base.Routers = %q", Routers, base.Routers)
	}
}

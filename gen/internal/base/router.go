package base

import (
	"fmt"
	"strings"

	"github.com/oapi-codegen/oapi-codegen/v2/pkg/codegen"
)

// Routers: the HTTP server oapi-codegen writes into the base, around its strict server.
// The idempotent layer is the same for each: it implements StrictServerInterface, whose
// responses write to an http.ResponseWriter whatever the router.
const (
	RouterStdHTTP = "std-http" // net/http's ServeMux (the default)
	RouterChi     = "chi"      // github.com/go-chi/chi/v5
	RouterEcho    = "echo"     // github.com/labstack/echo/v4
	RouterGin     = "gin"      // github.com/gin-gonic/gin
)

// Routers lists the routers idemgen writes a base for, the default first.
var Routers = []string{RouterStdHTTP, RouterChi, RouterEcho, RouterGin}

// router is what differs in the base from one router to another.
type router struct {
	server func(*codegen.GenerateOptions) // turns on oapi-codegen's server for the router
	label  string                         // the server, in the base's header comment
	// mark is a type only this router's oapi-codegen server declares: it recognises
	// the router of a package's own oapi-codegen output (-base=external).
	mark string
}

var routers = map[string]router{
	RouterStdHTTP: {func(g *codegen.GenerateOptions) { g.StdHTTPServer = true }, "net/http server", "StdHTTPServerOptions"},
	RouterChi:     {func(g *codegen.GenerateOptions) { g.ChiServer = true }, "chi server", "ChiServerOptions"},
	RouterEcho:    {func(g *codegen.GenerateOptions) { g.EchoServer = true }, "echo server", "EchoRouter"},
	RouterGin:     {func(g *codegen.GenerateOptions) { g.GinServer = true }, "gin server", "GinServerOptions"},
}

// CheckRouter accepts "" and the names of Routers.
func CheckRouter(name string) error {
	if _, ok := routers[name]; ok || name == "" {
		return nil
	}
	return fmt.Errorf("unknown router %q (want %s)", name, strings.Join(Routers, ", "))
}

// externalRouter returns the router of a package's own oapi-codegen output, from the
// types it declares: the one -router names (which must agree with the package), else
// the one the package's server declares, else "" (a server idemgen does not know, such
// as gorilla's: the generated doc comment then shows no router's wiring).
func externalRouter(want string, declared map[string]bool) (string, error) {
	found := ""
	for _, name := range Routers {
		if declared[routers[name].mark] {
			found = name
		}
	}
	switch {
	case want == "" || found == want:
		return found, nil
	case found == "":
		return want, nil
	}
	return "", fmt.Errorf("-router %s, but the package's oapi-codegen output has the %s (it declares %s); generate it with the %s server, or drop -router", want, routers[found].label, routers[found].mark, want)
}

package gen

import (
	"fmt"
	"time"

	"github.com/idemgen/idemgen/gen/internal/model"
)

// Policy is one marked operation's resolved idempotency policy, as the generated layer
// would enforce it: what `idemgen policies` prints and compares.
type Policy struct {
	// Operation is the stored operation name (idem.Policy.Operation): the spec's
	// operationId, else "POST /path". Method is upper case.
	Operation, Method, Path string
	Pos                     Pos  // of the x-idempotent key, or of the method when marked by the defaults
	ByMethod                bool // marked by x-idempotent-defaults.methods
	// KeySource is where the key comes from: "header Idempotency-Key" or "body /key";
	// KeyAdded: the header is not in the spec (idemgen adds it). KeyRules are the key's
	// constraints from the spec ("format uuid", "maxLength 64").
	KeySource string
	KeyAdded  bool
	KeyRules  []string
	Required  bool // a request without a key is answered 400; else it runs unprotected
	// Lease, Retention; Timeout and Wait zero when none.
	Lease, Retention, Timeout, Wait time.Duration
	Isolation                       string // "" for the database default
	Store                           string // "postgres" or "redis"
	FingerprintHeaders              []string
}

// Policies reads the spec at path, with its markers, and returns every marked operation's
// policy in the spec's order of paths and methods, and the generator's warnings (located
// "FILE:LINE:COL: message"), without running oapi-codegen. Its error is an [ErrorList]
// of the spec's located errors, or the one that stopped the load.
func Policies(path string) ([]Policy, []string, error) {
	return PoliciesOverlaid(path, nil)
}

// PoliciesOverlaid is [Policies] of the spec at path with the overlay files applied to
// it in order, as [Options].Overlays are.
func PoliciesOverlaid(path string, overlays []string) ([]Policy, []string, error) {
	m, err := model.Policies(path, overlays...)
	if err != nil {
		return nil, nil, located(err)
	}
	warnings := modelWarnings(m)
	out := make([]Policy, 0, len(m.Ops))
	for _, o := range m.Ops {
		out = append(out, policyOf(o))
	}
	return out, warnings, nil
}

// modelWarnings are m's warnings as located lines.
func modelWarnings(m *model.Model) []string {
	var warnings []string
	for _, w := range m.Warnings {
		warnings = append(warnings, w.Error())
	}
	for _, u := range m.Unmarked {
		warnings = append(warnings, unmarkedWarning(u))
	}
	return warnings
}

// unmarkedWarning is the warning about u, an operation the defaults leave unmarked.
func unmarkedWarning(u model.SkippedOp) string {
	return fmt.Sprintf("%s: %s %s is left unmarked by %s.methods: %s", u.Pos, u.Method, u.Path, DefaultsExt, u.Why)
}

// policyOf is o's Policy.
func policyOf(o *model.Operation) Policy {
	p := Policy{
		Operation: o.Name, Method: o.Method, Path: o.Path, Pos: o.Pos, ByMethod: o.ByMethod,
		KeySource: "header " + o.Key.Header, KeyAdded: o.Key.Body == "" && !o.Key.Declared,
		KeyRules: model.KeyRules(o.Key.Schema), Required: o.Required,
		Lease: o.Lease, Retention: o.Retention, Timeout: o.Timeout, Wait: o.Wait,
		Isolation: o.Isolation, Store: o.Store, FingerprintHeaders: o.FingerprintHeaders,
	}
	if o.Key.Body != "" {
		p.KeySource = "body " + o.Key.Body
	}
	return p
}

package model

import (
	"fmt"
	"time"

	"github.com/idemgen/idemgen/gen/internal/marker"
	"github.com/idemgen/idemgen/gen/internal/spec"
)

// Model is what idemgen generates from: every marked operation with its resolved policy,
// in file order. It holds no Go source; render turns it into code with oapi-codegen's
// names (package render); the base (package base) reads the key headers and bodies.
type Model struct {
	Ops []*Operation
	// Unmarked lists operations that x-idempotent-defaults.methods names but that cannot
	// be marked (a streaming response), for the warning and the generated file's comment.
	Unmarked []SkippedOp
	// Warnings are idemgen's guesses and the things it leaves alone (keyfind.go), each
	// also in the policy comment of its operation, or in the generated file's comment.
	Warnings Warnings
}

// SkippedOp is an operation the document defaults would mark but idemgen leaves unmarked.
type SkippedOp struct {
	Method, Path string
	Why          string
	Pos          spec.Pos // of the operation's method
}

// Operation is a marked operation and its policy.
type Operation struct {
	Method string // upper case: POST
	Path   string
	// Name is the stored operation name (idem.Policy.Operation): the spec's operationId,
	// else "POST /path".
	Name     string
	Pos      spec.Pos // of the x-idempotent key, or of the method when marked by the defaults
	ByMethod bool     // marked by x-idempotent-defaults.methods

	Key       KeySource
	Required  bool // a request without a key is answered 400
	Lease     time.Duration
	Retention time.Duration
	Timeout   time.Duration // zero: none
	Wait      time.Duration // zero: a duplicate is answered 409 at once
	Isolation string        // "" (database default), "serializable", ...
	// Store is where the keys live: marker.StorePostgres (in the business transaction) or
	// marker.StoreRedis (idem/idemredis: no transaction, a weaker guarantee).
	Store string

	// FingerprintHeaders are the declared header parameters (spec spelling) that are part
	// of the fingerprint; OtherHeaders the declared ones that are not (the key excluded).
	// Cookies are the declared cookie parameters: never part of the fingerprint.
	FingerprintHeaders []string
	OtherHeaders       []string
	Cookies            []string
	// OwnErrors are the statuses among the protocol's rejections (400, 409, 413, 422)
	// for which the operation declares a body in its own shape (not problem+json).
	OwnErrors []string
	// Notes are what idemgen decided about the key where the spec does not say it
	// plainly (the name of an added header, a header declared twice, a property that
	// only suggests it is the key): lines of the policy comment, each also a warning.
	Notes []string
}

// KeySource is where an operation's idempotency key comes from, and what the spec says
// of it.
type KeySource struct {
	Header string // header name as the spec (or the marker) spells it; "" for a body key
	Body   string // JSON pointer into the request body; "" for a header key
	// Declared: the spec declares the header parameter. When it does not, idemgen adds it
	// (optional, string) to the base it writes.
	Declared bool
	Schema   KeySchema
}

// KeySchema is what the key's declared schema constrains, enforced by the protocol
// before any SQL (idem.KeySchema). Zero values constrain nothing.
type KeySchema struct {
	MinLength uint64
	MaxLength uint64 // 0: none (the protocol's own 255-byte limit remains)
	Pattern   string // ECMA-262 as written in the spec; checked to compile (internal/ecmaregexp)
	Format    string // "uuid" is enforced; other formats are carried for the comment only
}

// source is the spec file's node tree with the marker reader's methods (marker.Source),
// and the checks of each marker against the operation it marks as its own.
type source struct{ *marker.Source }

// protocolRejections are the statuses the protocol answers with on its own.
var protocolRejections = []string{"400", "409", "413", "422"}

// Warnings collects the generator's warnings, each located: things it generates but
// guessed (the name of an added key header, a header declared twice, a property that may
// be the key), or leaves alone. Each is also a Note of its operation, when it has one.
type Warnings []Warning

// Warning is one warning, located; Method (upper case) and Path name the operation it is
// about, both "" for one about the spec (several operations at once).
type Warning struct {
	Pos          spec.Pos
	Msg          string // without the position
	Method, Path string
}

// Error is "pos: msg", as a spec.Error is.
func (w Warning) Error() string { return (&spec.Error{Pos: w.Pos, Msg: w.Msg}).Error() }

// add adds a warning about the spec.
func (w *Warnings) add(at spec.Pos, format string, args ...any) {
	*w = append(*w, Warning{Pos: at, Msg: fmt.Sprintf(format, args...)})
}

// addOp adds a warning about the operation o, at its marker.
func (w *Warnings) addOp(o *Operation, at spec.Pos, format string, args ...any) {
	*w = append(*w, Warning{Pos: at, Msg: fmt.Sprintf(format, args...), Method: o.Method, Path: o.Path})
}

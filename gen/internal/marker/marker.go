package marker

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v4"

	"github.com/idemgen/idemgen/gen/internal/spec"
	"github.com/idemgen/idemgen/internal/cliflag"
)

// Source is the spec file's node tree and positions (spec.Source), with the marker
// reader and the checks of the extensions' names as its methods.
type Source struct{ *spec.Source }

// Extension names read from the spec.
const (
	// MarkerExt marks an operation idempotent.
	MarkerExt = "x-idempotent"
	// DefaultsExt, at the document root, holds defaults for every marker's fields.
	DefaultsExt = "x-idempotent-defaults"
)

// Isolation levels a marker may ask for, as pgx spells them.
var IsolationLevels = map[string]string{
	"serializable":     "pgx.Serializable",
	"repeatable read":  "pgx.RepeatableRead",
	"read committed":   "pgx.ReadCommitted",
	"read uncommitted": "pgx.ReadUncommitted",
}

// Marker is one x-idempotent object (or the document defaults) as written: each field
// with whether it was set and where. The fields are the marker grammar's (gen's package
// doc, "Marker grammar"): Header a header name (an RFC 9110 token), Body a JSON pointer
// into the request body, Lease, Retention, Timeout and Wait durations of at least 1ms,
// Isolation a key of IsolationLevels, Store StorePostgres or StoreRedis. A field in error
// is Bad (and the marker Failed): its error is in the run's list already.
type Marker struct {
	Header, Body              Field[string]
	Required                  Field[bool]
	Lease, Retention, Timeout Field[time.Duration]
	Wait                      Field[time.Duration]
	Isolation                 Field[string]
	Store                     Field[string] // "postgres" or "redis"
	FingerprintHeaders        Field[[]Named]
	methods                   Field[[]string] // x-idempotent-defaults only: mark every operation of these methods
	Pos                       spec.Pos        // of the marker's key, or of the operation's method when marked by methods
	ByMethod                  bool            // marked by x-idempotent-defaults.methods, not by its own marker
	OwnIsolation              bool            // the isolation is the operation's own, not a document default
	OwnLease, OwnRetention    bool            // the lease, the retention is the operation's own, not a document default
	Failed                    bool            // some field is in error (reported)
}

// Field is one field of a marker as written: its value, whether the marker (or the
// defaults) set it, whether it was given in error, and where its value is.
type Field[T any] struct {
	V   T // the value, when Set
	Set bool
	Bad bool     // given but in error (reported): the checks that need its value are left out
	Pos spec.Pos // of the value
}

func (f *Field[T]) put(v T, p spec.Pos) { f.V, f.Set, f.Pos = v, true, p }

// Named is a name a marker lists (a fingerprint header), as the spec writes it, with its
// own position: an error about one item of a list points at that item.
type Named struct {
	Name string
	Pos  spec.Pos
}

// given reports whether the marker writes the field, well or badly: a default does not
// replace a field given in error.
func (f Field[T]) given() bool { return f.Set || f.Bad }

// over returns m with the fields d sets and m does not.
func (m Marker) over(d Marker) Marker {
	if !m.Header.given() && !m.Body.given() {
		m.Header, m.Body = d.Header, d.Body
	}
	if !m.Required.given() {
		m.Required = d.Required
	}
	m.OwnLease, m.OwnRetention = m.Lease.given(), m.Retention.given()
	if !m.Lease.given() {
		m.Lease = d.Lease
	}
	if !m.Retention.given() {
		m.Retention = d.Retention
	}
	if !m.Timeout.given() {
		m.Timeout = d.Timeout
	}
	if !m.Wait.given() {
		m.Wait = d.Wait
	}
	m.OwnIsolation = m.Isolation.given()
	if !m.Isolation.given() {
		m.Isolation = d.Isolation
	}
	if !m.Store.given() {
		m.Store = d.Store
	}
	if !m.FingerprintHeaders.given() {
		m.FingerprintHeaders = d.FingerprintHeaders
	}
	return m
}

// fail marks the field named name (as the spec spells it) as given in error.
func (m *Marker) fail(name string) {
	m.Failed = true
	switch name {
	case "header":
		m.Header.Bad = true
	case "body":
		m.Body.Bad = true
	case "required":
		m.Required.Bad = true
	case "lease":
		m.Lease.Bad = true
	case "retention":
		m.Retention.Bad = true
	case "timeout":
		m.Timeout.Bad = true
	case "wait":
		m.Wait.Bad = true
	case "isolation":
		m.Isolation.Bad = true
	case "store":
		m.Store.Bad = true
	case "fingerprint-headers":
		m.FingerprintHeaders.Bad = true
	case "methods":
		m.methods.Bad = true
	}
}

var markerFields = []string{"header", "body", "required", "lease", "retention", "timeout", "wait", "isolation", "store", "fingerprint-headers"}

// Stores a marker may name (x-idempotent.store): where the operation's idempotency keys
// live. PostgreSQL, the default, keeps a key in the business transaction; Redis keeps it
// apart (idem/idemredis), for operations whose rare duplicate is acceptable.
const (
	StorePostgres = "postgres"
	StoreRedis    = "redis"
)

// MarkableMethods are the methods x-idempotent-defaults.methods may name: the ones that
// change state. GET, HEAD, OPTIONS and TRACE are safe, idempotent by definition.
var MarkableMethods = []string{"post", "put", "patch", "delete"}

// parseMarker reads a marker value: true (all defaults), false (not marked), or an object.
// name prefixes messages ("x-idempotent", "x-idempotent-defaults"). ok is false when the
// operation is not marked (false) or the value is not an object (reported to errs). An
// object marks the operation even when some of its fields are in error: those are
// reported to errs and marked bad, so that the checks of the other fields against each
// other and against the operation still run, and every error of the marker comes in one
// run.
func (s *Source) parseMarker(key, n *yaml.Node, name string, allowBool bool, errs *spec.ErrorList) (m Marker, ok bool) {
	m.Pos = s.Pos(key)
	n = spec.Deref(n)
	switch n.Kind {
	case yaml.ScalarNode:
		if allowBool && n.Tag == "!!bool" {
			return m, n.Value == "true"
		}
		want := "an object"
		if allowBool {
			want = "true or an object"
		}
		errs.Add(s.Pos(n), "%s: want %s, got %s", name, want, describe(n))
		return m, false
	case yaml.MappingNode:
	default:
		errs.Add(s.Pos(n), "%s: want an object, got %s", name, describe(n))
		return m, false
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if seen[k.Value] {
			continue // CheckTree reports the duplicate key
		}
		seen[k.Value] = true
		if !s.parseField(&m, k, v, name, allowBool, errs) {
			m.fail(k.Value)
		}
	}
	if m.Header.Set && m.Body.Set {
		errs.Add(m.Body.Pos, "%s: header and body are exclusive: the key comes from one place", name)
		m.Body = Field[string]{Pos: m.Body.Pos} // the key's source is unknown: no key checks
		m.fail("body")
	}
	return m, true
}

// parseField reads the marker field k: v into m, or reports why it cannot (ok false).
func (s *Source) parseField(m *Marker, k, v *yaml.Node, name string, allowBool bool, errs *spec.ErrorList) (ok bool) {
	fname := name + "." + k.Value
	p := s.Pos(v)
	switch k.Value {
	case "header":
		str, good := s.str(v, fname, errs)
		if good && !validHeaderName(str) {
			errs.Add(p, "%s: %q is not a valid HTTP header name (RFC 9110 token)", fname, str)
			return false
		}
		if good {
			m.Header.put(str, p)
		}
		return good
	case "body":
		str, good := s.str(v, fname, errs)
		if good && (!strings.HasPrefix(str, "/") || len(str) < 2) {
			errs.Add(p, "%s: %q is not a JSON pointer to a body field (want e.g. \"/idempotency_key\")", fname, str)
			return false
		}
		if good {
			m.Body.put(str, p)
		}
		return good
	case "required":
		if v.Kind != yaml.ScalarNode || v.Tag != "!!bool" {
			errs.Add(p, "%s: want true or false, got %s", fname, describe(v))
			return false
		}
		m.Required.put(v.Value == "true", p)
		return true
	case "lease", "retention", "timeout", "wait":
		d, good := s.duration(v, fname, errs)
		if !good {
			return false
		}
		switch k.Value {
		case "lease":
			m.Lease.put(d, p)
		case "retention":
			m.Retention.put(d, p)
		case "wait":
			m.Wait.put(d, p)
		default:
			m.Timeout.put(d, p)
		}
		return true
	case "isolation":
		str, good := s.str(v, fname, errs)
		if !good {
			return false
		}
		lvl := strings.ToLower(strings.Join(strings.Fields(str), " "))
		if _, known := IsolationLevels[lvl]; !known {
			errs.Add(p, "%s: %q is not an isolation level (want \"serializable\", \"repeatable read\", \"read committed\" or \"read uncommitted\")", fname, str)
			return false
		}
		m.Isolation.put(lvl, p)
		return true
	case "store":
		str, good := s.str(v, fname, errs)
		if !good {
			return false
		}
		switch strings.ToLower(str) {
		case "postgres", "postgresql":
			m.Store.put(StorePostgres, p)
		case "redis":
			m.Store.put(StoreRedis, p)
		default:
			errs.Add(p, "%s: %q is not a store (want \"postgres\", the default: the key commits with the business; or \"redis\", for operations whose rare duplicate is acceptable)", fname, str)
			return false
		}
		return true
	case "fingerprint-headers":
		list, good := s.headerList(v, fname, errs)
		if good {
			m.FingerprintHeaders.put(list, p)
		}
		return good
	case "methods":
		if allowBool { // an operation's own marker
			errs.Add(s.Pos(k), "%s: belongs in %s (it marks every operation of the methods it names)", fname, DefaultsExt)
			return false
		}
		list, good := s.methodList(v, fname, errs)
		if good {
			m.methods.put(list, p)
		}
		return good
	}
	want := markerFields
	if !allowBool {
		want = append(slices.Clone(want), "methods")
	}
	unknown := "unknown field"
	if c := cliflag.Suggest(k.Value, want); c != "" {
		unknown += ", did you mean " + c + "?"
	}
	errs.Add(s.Pos(k), "%s: %s (want one of %s)", fname, unknown, strings.Join(want, ", "))
	return false
}

// duration reads a lease, retention or timeout: a Go duration of at least 1ms.
func (s *Source) duration(v *yaml.Node, name string, errs *spec.ErrorList) (time.Duration, bool) {
	str, good := s.str(v, name, errs)
	if !good {
		return 0, false
	}
	p := s.Pos(v)
	d, err := time.ParseDuration(str)
	switch {
	case err != nil:
		errs.Add(p, "%s: %q is not a duration (want e.g. \"30s\", \"5m\", \"24h\")", name, str)
	case d <= 0:
		errs.Add(p, "%s: %q must be positive", name, str)
	case d < time.Millisecond:
		// The table keeps microseconds: 1ns would be stored as a lease of 0.
		errs.Add(p, "%s: %q is shorter than the 1ms minimum", name, str)
	default:
		return d, true
	}
	return 0, false
}

// headerList reads a list of header names, each with its position.
func (s *Source) headerList(v *yaml.Node, name string, errs *spec.ErrorList) ([]Named, bool) {
	if v.Kind != yaml.SequenceNode {
		errs.Add(s.Pos(v), "%s: want a list of header names, got %s", name, describe(v))
		return nil, false
	}
	var out []Named
	ok := true
	for _, item := range v.Content {
		h, good := s.str(spec.Deref(item), name, errs)
		switch {
		case !good:
			ok = false
		case !validHeaderName(h):
			errs.Add(s.Pos(item), "%s: %q is not a valid HTTP header name (RFC 9110 token)", name, h)
			ok = false
		default:
			out = append(out, Named{h, s.Pos(item)})
		}
	}
	return out, ok
}

// methodList reads x-idempotent-defaults.methods: a list of markable methods.
func (s *Source) methodList(v *yaml.Node, name string, errs *spec.ErrorList) ([]string, bool) {
	if v.Kind != yaml.SequenceNode {
		errs.Add(s.Pos(v), "%s: want a list of methods (e.g. [post]), got %s", name, describe(v))
		return nil, false
	}
	var out []string
	ok := true
	for _, item := range v.Content {
		m, good := s.str(spec.Deref(item), name, errs)
		lower := strings.ToLower(m)
		switch {
		case !good:
			ok = false
		case lower == "get" || lower == "head" || lower == "options" || lower == "trace":
			errs.Add(s.Pos(item), "%s: %s is a safe method, idempotent by definition; name methods that change state (%s)", name, strings.ToUpper(m), strings.Join(MarkableMethods, ", "))
			ok = false
		case !slices.Contains(MarkableMethods, lower):
			errs.Add(s.Pos(item), "%s: %q is not a method idemgen marks (want %s)", name, m, strings.Join(MarkableMethods, ", "))
			ok = false
		default:
			out = append(out, lower)
		}
	}
	return out, ok
}

func (s *Source) str(v *yaml.Node, name string, errs *spec.ErrorList) (string, bool) {
	if v.Kind != yaml.ScalarNode || v.Tag != "!!str" {
		errs.Add(s.Pos(v), "%s: want a string, got %s", name, describe(v))
		return "", false
	}
	return v.Value, true
}

func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "an object"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		switch n.Tag {
		case "!!bool":
			return n.Value
		case "!!null":
			return "null"
		case "!!int", "!!float":
			return "the number " + n.Value
		}
		return fmt.Sprintf("%q", n.Value)
	}
	return "an alias"
}

// validHeaderName reports whether s is an RFC 9110 field name (a token).
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// ReadMarkers reads the document defaults and every operation's marker, in file order.
// An operation without a marker whose method x-idempotent-defaults.methods names is
// marked too; x-idempotent: false opts it out. The operations of a path item that is a
// $ref within the file (to components/pathItems, or to another path) are read where the
// $ref points; OpMarker.Shared names the paths of a path item several share.
func (s *Source) ReadMarkers(errs *spec.ErrorList) (defaults Marker, ops []OpMarker) {
	if k, v := s.Lookup(DefaultsExt); v != nil {
		defaults, _ = s.parseMarker(k, v, DefaultsExt, false, errs)
	}
	_, paths := s.Lookup("paths")
	if paths == nil || paths.Kind != yaml.MappingNode {
		return defaults, nil
	}
	sharers := map[*yaml.Node][]string{} // a path item: the paths whose item it is
	for i := 0; i+1 < len(paths.Content); i += 2 {
		if item, _ := s.PathItem(paths.Content[i+1]); item != nil {
			sharers[item] = append(sharers[item], paths.Content[i].Value)
		}
	}
	for i := 0; i+1 < len(paths.Content); i += 2 {
		// A path item that is a local $ref is read where it is written; one in another
		// file is CheckRefPathItems'.
		path := paths.Content[i].Value
		item, _ := s.PathItem(paths.Content[i+1])
		var shared []string
		if len(sharers[item]) > 1 {
			shared = sharers[item]
		}
		if k, _ := spec.Entry(item, MarkerExt); k != nil {
			errs.Add(s.Pos(k), "%s: belongs on an operation (get, post, ...), not on the path item %s", MarkerExt, path)
		}
		if item == nil || item.Kind != yaml.MappingNode {
			continue
		}
		for j := 0; j+1 < len(item.Content); j += 2 {
			methodKey, op := item.Content[j], item.Content[j+1]
			method := strings.ToLower(methodKey.Value)
			if !spec.HTTPMethods[method] {
				continue
			}
			k, v := spec.Entry(op, MarkerExt)
			if k == nil {
				if slices.Contains(defaults.methods.V, method) {
					m := defaults
					m.Pos, m.ByMethod = s.Pos(methodKey), true
					ops = append(ops, OpMarker{Path: path, Method: method, Marker: m, Shared: shared})
				}
				continue
			}
			m, ok := s.parseMarker(k, v, MarkerExt, true, errs)
			if ok {
				ops = append(ops, OpMarker{Path: path, Method: method, Marker: m.over(defaults), Shared: shared})
			}
		}
	}
	return defaults, ops
}

// OpMarker is the marker of one operation, by its path and method (lower case, as the
// spec's path item keys them), with the document defaults applied.
type OpMarker struct {
	Path, Method string
	Marker       Marker
	// Shared lists, in file order, the paths whose path item the operation's is too,
	// through $refs within the file (this path included); nil when it is its own.
	Shared []string
}

// HumanDuration prints d the short way: 24h, 1h30m, 30s, 1.5s.
func HumanDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

package gen

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Extension names read from the spec.
const (
	// MarkerExt marks an operation idempotent.
	MarkerExt = "x-idempotent"
	// DefaultsExt, at the document root, holds defaults for every marker's fields.
	DefaultsExt = "x-idempotent-defaults"
)

// Isolation levels a marker may ask for, as pgx spells them.
var isolationLevels = map[string]string{
	"serializable":     "pgx.Serializable",
	"repeatable read":  "pgx.RepeatableRead",
	"read committed":   "pgx.ReadCommitted",
	"read uncommitted": "pgx.ReadUncommitted",
}

// marker is one x-idempotent object (or the document defaults) as written: each field
// with whether it was set and where.
type marker struct {
	header, body              field[string]
	required                  field[bool]
	lease, retention, timeout field[time.Duration]
	isolation                 field[string]
	pos                       Pos // of the marker's key
}

type field[T any] struct {
	v   T
	set bool
	pos Pos // of the value
}

func (f *field[T]) put(v T, p Pos) { f.v, f.set, f.pos = v, true, p }

// over returns m with the fields d sets and m does not.
func (m marker) over(d marker) marker {
	if !m.header.set && !m.body.set {
		m.header, m.body = d.header, d.body
	}
	if !m.required.set {
		m.required = d.required
	}
	if !m.lease.set {
		m.lease = d.lease
	}
	if !m.retention.set {
		m.retention = d.retention
	}
	if !m.timeout.set {
		m.timeout = d.timeout
	}
	if !m.isolation.set {
		m.isolation = d.isolation
	}
	return m
}

var markerFields = []string{"header", "body", "required", "lease", "retention", "timeout", "isolation"}

// parseMarker reads a marker value: true (all defaults), false (not marked), or an object.
// name prefixes messages ("x-idempotent", "x-idempotent-defaults"). ok is false when the
// operation is not marked (false) or the value is in error (reported to errs).
func (s *source) parseMarker(key, n *yaml.Node, name string, allowBool bool, errs *ErrorList) (m marker, ok bool) {
	m.pos = s.pos(key)
	for n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	switch n.Kind {
	case yaml.ScalarNode:
		if allowBool && n.Tag == "!!bool" {
			return m, n.Value == "true"
		}
		want := "an object"
		if allowBool {
			want = "true or an object"
		}
		errs.add(s.pos(n), "%s: want %s, got %s", name, want, describe(n))
		return m, false
	case yaml.MappingNode:
	default:
		errs.add(s.pos(n), "%s: want an object, got %s", name, describe(n))
		return m, false
	}
	n0 := len(*errs)
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		fname := name + "." + k.Value
		p := s.pos(v)
		if seen[k.Value] {
			errs.add(s.pos(k), "%s: given twice", fname)
			continue
		}
		seen[k.Value] = true
		switch k.Value {
		case "header":
			if str, good := s.str(v, fname, errs); good {
				if !validHeaderName(str) {
					errs.add(p, "%s: %q is not a valid HTTP header name (RFC 9110 token)", fname, str)
				} else {
					m.header.put(str, p)
				}
			}
		case "body":
			if str, good := s.str(v, fname, errs); good {
				if !strings.HasPrefix(str, "/") || len(str) < 2 {
					errs.add(p, "%s: %q is not a JSON pointer to a body field (want e.g. \"/idempotency_key\")", fname, str)
				} else {
					m.body.put(str, p)
				}
			}
		case "required":
			if v.Kind != yaml.ScalarNode || v.Tag != "!!bool" {
				errs.add(p, "%s: want true or false, got %s", fname, describe(v))
			} else {
				m.required.put(v.Value == "true", p)
			}
		case "lease", "retention", "timeout":
			str, good := s.str(v, fname, errs)
			if !good {
				continue
			}
			d, err := time.ParseDuration(str)
			if err != nil {
				errs.add(p, "%s: %q is not a duration (want e.g. \"30s\", \"5m\", \"24h\")", fname, str)
				continue
			}
			if d <= 0 {
				errs.add(p, "%s: %q must be positive", fname, str)
				continue
			}
			if d < time.Millisecond {
				// The table keeps microseconds: 1ns would be stored as a lease of 0.
				errs.add(p, "%s: %q is shorter than the 1ms minimum", fname, str)
				continue
			}
			switch k.Value {
			case "lease":
				m.lease.put(d, p)
			case "retention":
				m.retention.put(d, p)
			default:
				m.timeout.put(d, p)
			}
		case "isolation":
			if str, good := s.str(v, fname, errs); good {
				lvl := strings.ToLower(strings.Join(strings.Fields(str), " "))
				if _, known := isolationLevels[lvl]; !known {
					errs.add(p, "%s: %q is not an isolation level (want \"serializable\", \"repeatable read\" or \"read committed\")", fname, str)
				} else {
					m.isolation.put(lvl, p)
				}
			}
		default:
			errs.add(s.pos(k), "%s: unknown field (want one of %s)", fname, strings.Join(markerFields, ", "))
		}
	}
	if m.header.set && m.body.set {
		errs.add(m.body.pos, "%s: header and body are exclusive: the key comes from one place", name)
	}
	return m, len(*errs) == n0
}

func (s *source) str(v *yaml.Node, name string, errs *ErrorList) (string, bool) {
	if v.Kind != yaml.ScalarNode || v.Tag != "!!str" {
		errs.add(s.pos(v), "%s: want a string, got %s", name, describe(v))
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

// readMarkers reads the document defaults and every operation's marker, in file order.
func (s *source) readMarkers(errs *ErrorList) (defaults marker, ops []opMarker) {
	if k, v := s.lookup(DefaultsExt); v != nil {
		defaults, _ = s.parseMarker(k, v, DefaultsExt, false, errs)
	}
	_, paths := s.lookup("paths")
	if paths == nil || paths.Kind != yaml.MappingNode {
		return defaults, nil
	}
	for i := 0; i+1 < len(paths.Content); i += 2 {
		path, item := paths.Content[i].Value, paths.Content[i+1]
		if k, _ := entry(item, MarkerExt); k != nil {
			errs.add(s.pos(k), "%s: belongs on an operation (get, post, ...), not on the path item %s", MarkerExt, path)
		}
		if item.Kind != yaml.MappingNode {
			continue
		}
		for j := 0; j+1 < len(item.Content); j += 2 {
			method, op := strings.ToLower(item.Content[j].Value), item.Content[j+1]
			if !httpMethods[method] {
				continue
			}
			k, v := entry(op, MarkerExt)
			if k == nil {
				continue
			}
			m, ok := s.parseMarker(k, v, MarkerExt, true, errs)
			if ok {
				ops = append(ops, opMarker{path: path, method: method, m: m.over(defaults)})
			}
		}
	}
	return defaults, ops
}

type opMarker struct {
	path, method string
	m            marker
}

var httpMethods = map[string]bool{
	"get": true, "put": true, "post": true, "delete": true,
	"options": true, "head": true, "patch": true, "trace": true,
}

// humanDuration prints d the short way: 24h, 1h30m, 30s, 1.5s.
func humanDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// goDuration prints d as a Go expression: 30 * time.Second, 24 * time.Hour.
func goDuration(d time.Duration) string {
	units := []struct {
		d    time.Duration
		name string
	}{
		{time.Hour, "time.Hour"}, {time.Minute, "time.Minute"}, {time.Second, "time.Second"},
		{time.Millisecond, "time.Millisecond"}, {time.Microsecond, "time.Microsecond"},
	}
	for _, u := range units {
		if d%u.d == 0 {
			if d == u.d {
				return u.name
			}
			return fmt.Sprintf("%d * %s", d/u.d, u.name)
		}
	}
	return fmt.Sprintf("%d", int64(d))
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

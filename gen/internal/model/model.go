package model

import (
	"fmt"
	"slices"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/idemgen/idemgen/gen/internal/marker"
	"github.com/idemgen/idemgen/gen/internal/spec"
	"github.com/idemgen/idemgen/idem"
)

// Policies loads the spec at path and checks it into the model: every marked operation
// with its resolved policy, and the warnings, with no oapi-codegen run. Its error is the
// run's located errors (an ErrorList, sorted by position), or the one that stopped the
// load (an unreadable file, a YAML or JSON syntax error, a document that is not OpenAPI
// 3.0/3.1, an overlay that cannot be applied). The overlays are applied to the spec in
// order (spec.Load).
func Policies(path string, overlays ...string) (*Model, error) {
	s, err := spec.Load(path, overlays...)
	if err != nil {
		return nil, err
	}
	var errs spec.ErrorList
	m := Check(s, &errs)
	if err := errs.Err(); err != nil {
		return nil, err
	}
	return m, nil
}

// Check runs every check of the loaded spec and of its markers and builds the model,
// adding every problem to errs: the document itself (duplicate keys, path templates,
// content $refs), the extensions' spelling, the markers, and each marker against the
// operation it marks. It returns nil when kin-openapi could not load the document (its
// error is in errs, unless a check located a clearer one).
func Check(s *spec.Spec, errs *spec.ErrorList) *Model {
	src := &source{&marker.Source{Source: s.Src}}
	src.CheckTree(errs)
	src.CheckPathTemplates(errs)
	src.CheckOperationIDs(errs)
	src.CheckParameters(errs)
	src.CheckResponseKeys(errs)
	src.CheckContentRefs(errs)
	src.CheckSpelling(errs)
	defaults, markers := src.ReadMarkers(errs)
	if s.LoadErr != nil {
		if len(*errs) == 0 { // an error we located ourselves is the clearer one
			*errs = append(*errs, s.LoadErr.(*spec.Error))
		}
		return nil
	}
	elsewhere := src.CheckRefPathItems(s.Doc, defaults, errs)
	m := src.buildModel(s.Doc, markers, errs)
	for _, o := range elsewhere {
		m.Unmarked = append(m.Unmarked, SkippedOp{Method: o.Method, Path: o.Path, Pos: o.Pos,
			Why: fmt.Sprintf("its path item is in another file (%s); idemgen reads markers in the spec file only: move the path item into this file to mark it", o.Ref)})
	}
	return m
}

// buildModel checks each marker against the loaded document and resolves it into an
// operation; every problem is added to errs.
func (s *source) buildModel(doc *openapi3.T, markers []marker.OpMarker, errs *spec.ErrorList) *Model {
	m := &Model{}
	conv := specKeyConvention(doc)
	if len(markers) > 0 {
		s.unprotectedKeys(doc, markers, &m.Warnings)
	}
	for _, om := range markers {
		item := doc.Paths.Value(om.Path)
		if item == nil {
			continue
		}
		op := item.Operations()[strings.ToUpper(om.Method)]
		if op == nil {
			continue
		}
		if len(om.Shared) > 1 {
			s.sharedPathItem(m, om, errs)
			continue
		}
		if ct := streamingResponse(op); ct != "" {
			if om.Marker.ByMethod {
				m.Unmarked = append(m.Unmarked, SkippedOp{Method: strings.ToUpper(om.Method), Path: om.Path, Pos: om.Marker.Pos,
					Why: fmt.Sprintf("its %s response is a stream, which cannot be recorded and replayed", ct)})
				continue
			}
			errs.Add(om.Marker.Pos, "%s: %s %s answers with a stream (%s): a stream cannot be recorded and replayed; leave the operation unmarked, or drop the streaming response",
				marker.MarkerExt, strings.ToUpper(om.Method), om.Path, ct)
			continue
		}
		if o := s.buildOperation(om, item, op, conv, &m.Warnings, errs); o != nil {
			m.Ops = append(m.Ops, o)
		}
	}
	return m
}

// sharedPathItem reports a marker on an operation whose path item several paths share
// (through $refs): oapi-codegen generates one operation for them all, which one policy
// per path cannot wrap. Marked by the defaults' methods, each path is left unmarked with a
// warning; marked by x-idempotent, it is an error at the marker, once.
func (s *source) sharedPathItem(m *Model, om marker.OpMarker, errs *spec.ErrorList) {
	others := slices.DeleteFunc(slices.Clone(om.Shared), func(p string) bool { return p == om.Path })
	why := fmt.Sprintf("its path item is also that of %s (through a $ref), and oapi-codegen generates one operation for all of them", strings.Join(others, ", "))
	switch {
	case om.Marker.ByMethod:
		m.Unmarked = append(m.Unmarked, SkippedOp{Method: strings.ToUpper(om.Method), Path: om.Path, Pos: om.Marker.Pos, Why: why + "; give each path a path item of its own to mark it"})
	case om.Path == om.Shared[0]:
		errs.Add(om.Marker.Pos, "%s: %s %s: %s, which a policy per path cannot wrap; give each of %s a path item of its own (a copy) to mark it",
			marker.MarkerExt, strings.ToUpper(om.Method), om.Path, why, strings.Join(om.Shared, ", "))
	}
}

func (s *source) buildOperation(om marker.OpMarker, item *openapi3.PathItem, op *openapi3.Operation, conv keyConvention, w *Warnings, errs *spec.ErrorList) *Operation {
	mk := om.Marker
	o := &Operation{
		Method:    strings.ToUpper(om.Method),
		Path:      om.Path,
		Name:      op.OperationID,
		Pos:       mk.Pos,
		ByMethod:  mk.ByMethod,
		Lease:     idem.DefaultLease,
		Retention: idem.DefaultRetention,
		Required:  mk.Required.V,
		Timeout:   mk.Timeout.V,
		Wait:      mk.Wait.V,
		Isolation: mk.Isolation.V,
		Store:     marker.StorePostgres,
	}
	if mk.Store.Set {
		o.Store = mk.Store.V
	}
	if o.Name == "" {
		o.Name = o.Method + " " + o.Path
	}
	if mk.Lease.Set {
		o.Lease = mk.Lease.V
	}
	if mk.Retention.Set {
		o.Retention = mk.Retention.V
	}
	// Every check runs, so that all errors of the marker come at once; a check that needs
	// a field given in error (already reported) is left out.
	n0 := len(*errs)
	if o.Store == marker.StoreRedis && !mk.Isolation.Bad {
		if mk.Isolation.Set && mk.OwnIsolation {
			errs.Add(mk.Isolation.Pos, "%s.isolation: %s %s keeps its keys in Redis (store: redis): its business gets no transaction, so no isolation level; drop one of them", marker.MarkerExt, strings.ToUpper(om.Method), om.Path)
		}
		o.Isolation = "" // a document default isolation is for the PostgreSQL operations
		if o.Timeout > o.Lease {
			w.addOp(o, mk.Pos, "%s: %s %s keeps its key in Redis (store: redis) with a lease (%s) shorter than its timeout (%s): the Redis lease is not extended while the business runs, so a business past %s loses its key to a retry, which runs it again; set lease to at least the timeout",
				marker.MarkerExt, strings.ToUpper(om.Method), om.Path, marker.HumanDuration(o.Lease), marker.HumanDuration(o.Timeout), marker.HumanDuration(o.Lease))
		}
	}
	if o.Timeout > 0 && o.Wait > o.Timeout && !mk.Wait.Bad && !mk.Timeout.Bad {
		w.addOp(o, mk.Pos, "%s: %s %s makes a duplicate wait up to %s for the key's owner, longer than the owner's business may run (timeout %s): by then the owner has answered, is finishing its commit, or was cut off, so most of the wait past the timeout only holds the duplicate's request; set wait to at most the timeout",
			marker.MarkerExt, strings.ToUpper(om.Method), om.Path, marker.HumanDuration(o.Wait), marker.HumanDuration(o.Timeout))
	}
	if o.Retention < o.Lease && !mk.Lease.Bad && !mk.Retention.Bad {
		retentionShort(o, mk, errs)
	}
	if o.Method == "GET" || o.Method == "HEAD" || o.Method == "OPTIONS" || o.Method == "TRACE" {
		errs.Add(mk.Pos, "%s: %s %s is a safe method, idempotent by definition; mark operations that change state (POST, PUT, PATCH, DELETE)", marker.MarkerExt, o.Method, o.Path)
	}
	params := spec.OperationParams(item, op)
	switch {
	case mk.Header.Bad || mk.Body.Bad:
		// The key's source is in error: its checks wait for the fix.
	case mk.Body.Set:
		s.bodyKey(o, mk, op, mk.Body.V, mk.Body.Pos, marker.MarkerExt+".body", errs)
		if q := keyQueryParams(params); len(q) > 0 {
			s.queryKeyIgnored(o, mk, q, w)
		}
		otherKeys(o, mk, op, params, w)
	case mk.Header.Set:
		s.headerKey(o, mk, params, w, errs)
		otherKeys(o, mk, op, params, w)
	default:
		s.declaredKey(o, mk, op, params, conv, w, errs)
	}
	s.fingerprintHeaders(o, mk, params, errs)
	if len(*errs) > n0 || mk.Failed {
		return nil
	}
	o.OwnErrors = ownErrorShapes(op)
	return o
}

// ownErrorShapes returns the protocol's rejection statuses for which op declares a
// response body other than problem+json: the spec's own error shape.
func ownErrorShapes(op *openapi3.Operation) []string {
	var out []string
	for _, status := range protocolRejections {
		r := op.Responses.Value(status)
		if r == nil || r.Value == nil || len(r.Value.Content) == 0 {
			continue
		}
		if r.Value.Content.Get("application/problem+json") == nil {
			out = append(out, status)
		}
	}
	return out
}

// fingerprintHeaders resolves the marker's fingerprint-headers against the declared header
// parameters, and lists the declared headers and cookies left out.
func (s *source) fingerprintHeaders(o *Operation, mk marker.Marker, params openapi3.Parameters, errs *spec.ErrorList) {
	for _, h := range mk.FingerprintHeaders.V {
		p := spec.FindParam(params, openapi3.ParameterInHeader, h.Name)
		switch {
		case p == nil && spec.FindParam(params, openapi3.ParameterInCookie, h.Name) != nil:
			errs.Add(h.Pos, "%s.fingerprint-headers: %s %s declares %s as a cookie (in: cookie), not a header: cookies are never part of the fingerprint", marker.MarkerExt, o.Method, o.Path, h.Name)
		case p == nil:
			errs.Add(h.Pos, "%s.fingerprint-headers: %s %s declares no header parameter %s (only declared headers reach the handler)", marker.MarkerExt, o.Method, o.Path, h.Name)
		case o.Key.Header != "" && strings.EqualFold(p.Name, o.Key.Header):
			errs.Add(h.Pos, "%s.fingerprint-headers: %s is the idempotency key, not a part of the request it identifies", marker.MarkerExt, p.Name)
		default:
			o.FingerprintHeaders = append(o.FingerprintHeaders, p.Name)
		}
	}
	for _, p := range params {
		if p.Value == nil {
			continue
		}
		name := p.Value.Name
		switch p.Value.In {
		case openapi3.ParameterInCookie:
			o.Cookies = append(o.Cookies, name)
		case openapi3.ParameterInHeader:
			if !strings.EqualFold(name, o.Key.Header) && !slices.Contains(o.FingerprintHeaders, name) {
				o.OtherHeaders = append(o.OtherHeaders, name)
			}
		}
	}
}

// streamingResponse returns the first streaming content type among op's responses
// (oapi-codegen's streaming set: text/event-stream, JSON lines), or "".
func streamingResponse(op *openapi3.Operation) string {
	if op.Responses == nil {
		return ""
	}
	for _, code := range spec.SortedKeys(op.Responses.Map()) {
		r := op.Responses.Value(code)
		if r == nil || r.Value == nil {
			continue
		}
		for _, ct := range spec.SortedKeys(r.Value.Content) {
			switch spec.MediaType(ct) {
			case "text/event-stream", "application/jsonl", "application/x-ndjson":
				return ct
			}
		}
	}
	return ""
}

// retentionShort reports a retention shorter than the lease at the retention the spec
// writes (the operation's, or x-idempotent-defaults'), naming the operation when its own
// lease meets the defaults' retention; with the retention left at its default, at the
// lease.
func retentionShort(o *Operation, mk marker.Marker, errs *spec.ErrorList) {
	const why = "a completed answer must be replayable for at least as long as a claim can block retries"
	ext := func(own bool) string {
		if own {
			return marker.MarkerExt
		}
		return marker.DefaultsExt
	}
	if !mk.Retention.Set {
		errs.Add(mk.Lease.Pos, "%s.lease: %s is longer than the retention (%s, the default): %s; set retention too",
			ext(mk.OwnLease), marker.HumanDuration(o.Lease), marker.HumanDuration(o.Retention), why)
		return
	}
	lease := "the lease"
	switch {
	case mk.Lease.Set && mk.OwnLease && !mk.OwnRetention:
		lease += " of " + o.Method + " " + o.Path
	case mk.Lease.Set && !mk.OwnLease && mk.OwnRetention:
		lease += " of " + marker.DefaultsExt
	}
	errs.Add(mk.Retention.Pos, "%s.retention: %s is shorter than %s (%s): %s",
		ext(mk.OwnRetention), marker.HumanDuration(o.Retention), lease, marker.HumanDuration(o.Lease), why)
}

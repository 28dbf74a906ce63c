package gen

import (
	"fmt"
	"os"
	"slices"
	"strings"

	"go.yaml.in/yaml/v4"

	"github.com/idemgen/idemgen/gen/internal/model"
	"github.com/idemgen/idemgen/gen/internal/spec"
)

// Annotation is what idemgen makes of one operation of a spec: whether it is marked and
// its policy, or, unmarked, whether it is a candidate and the policy x-idempotent: true
// would give it. `idemgen annotate` prints them.
type Annotation struct {
	// Operation is the operationId, else "POST /path"; Method is upper case.
	Operation, Method, Path string
	Pos                     Pos // of the operation (its method's key), or of its path item's $ref to another file
	// At is where the spec file writes the operation, as the keys from the root: "paths",
	// "/pets", "post"; through a path item's local $ref, where it points ("components",
	// "pathItems", "Pets", "post"), which other paths may share. nil when the operation
	// is in another file (a path item's $ref to it): then no marker can go into the spec.
	At       []string
	Marked   bool    // marked x-idempotent, or by x-idempotent-defaults.methods
	OptedOut bool    // x-idempotent: false, or left unmarked by the defaults
	Policy   *Policy // marked: its policy; a candidate: the one x-idempotent: true gives it
	// Candidate: unmarked (not opted out), and a POST, PUT or PATCH, or an operation that
	// declares a key; Why says which. Problem is why x-idempotent: true would not generate
	// (the errors it gives), "" when it would: then the candidate is markable.
	Candidate    bool
	Why, Problem string
	// Warnings are the generator's warnings about the operation, each a located line
	// ("FILE:LINE:COL: message"): a marked one's, one left unmarked by the defaults', or
	// for a markable candidate those that marking it x-idempotent: true would give
	// (located at the operation).
	Warnings []string
}

// methods are the operation keys of a path item, in the order annotate lists them.
var methods = []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}

// Annotate reads the spec at path with the overlays applied in order and returns every
// operation's annotation in the spec's order of paths and methods (each with its own
// warnings), and the generator's warnings that are about no one operation (located
// lines). Its error is the spec's own errors, as [Policies] returns them: the candidates
// are judged on a spec that generates.
func Annotate(path string, overlays []string) ([]Annotation, []string, error) {
	s, err := spec.Load(path, overlays...)
	if err != nil {
		return nil, nil, located(err)
	}
	var errs spec.ErrorList
	m := model.Check(s, &errs)
	if err := errs.Err(); err != nil {
		return nil, nil, located(err)
	}
	marked := map[string]*model.Operation{}
	for _, o := range m.Ops {
		marked[o.Method+" "+o.Path] = o
	}
	left := map[string]bool{}
	for _, u := range m.Unmarked {
		left[strings.ToUpper(u.Method)+" "+u.Path] = true
	}
	var out []Annotation
	var trial []int // the operations tried with x-idempotent: true
	_, paths := s.Src.Lookup("paths")
	if paths != nil {
		for i := 0; i+1 < len(paths.Content); i += 2 {
			p := paths.Content[i].Value
			item, ref := s.Src.PathItem(paths.Content[i+1]) // a local $ref's, where it points
			if item == nil {
				if ref != nil {
					out = append(out, elsewhere(s, p, ref, left)...)
				}
				continue
			}
			for _, meth := range methods {
				k, op := spec.Entry(item, meth)
				if k == nil {
					continue
				}
				a := Annotation{Method: strings.ToUpper(meth), Path: p, Pos: s.Src.Pos(k), Operation: strings.ToUpper(meth) + " " + p,
					At: s.Src.OperationAt(p, meth)}
				if _, id := spec.Entry(op, "operationId"); id != nil && id.Value != "" {
					a.Operation = id.Value
				}
				mk, _ := spec.Entry(op, MarkerExt)
				if o := marked[a.Method+" "+p]; o != nil {
					pol := policyOf(o)
					a.Marked, a.Policy = true, &pol
				} else if mk != nil || left[a.Method+" "+p] {
					a.OptedOut = true
				} else if !slices.Contains([]string{"GET", "HEAD", "OPTIONS", "TRACE"}, a.Method) {
					trial = append(trial, len(out))
				}
				out = append(out, a)
			}
		}
	}
	if err := tryMarking(path, overlays, out, trial); err != nil {
		return nil, nil, err
	}
	return out, attachWarnings(out, m), nil
}

// elsewhere annotates the operations of the path item of p that its $ref ref names in
// another file, as kin-openapi loaded them: none is marked (a marker there is an error),
// and a POST, PUT or PATCH is a candidate that cannot be marked in the spec file, nor by
// an overlay of it. Each is located at the $ref.
func elsewhere(s *spec.Spec, p string, ref *yaml.Node, left map[string]bool) []Annotation {
	var out []Annotation
	item := s.Doc.Paths.Value(p)
	if item == nil {
		return nil
	}
	ops := item.Operations()
	for _, meth := range methods {
		op := ops[strings.ToUpper(meth)]
		if op == nil {
			continue
		}
		a := Annotation{Method: strings.ToUpper(meth), Path: p, Pos: s.Src.Pos(ref), Operation: op.OperationID}
		if a.Operation == "" {
			a.Operation = a.Method + " " + p
		}
		switch {
		case op.Extensions[MarkerExt] == false || left[a.Method+" "+p]:
			a.OptedOut = true
		case a.Method == "POST" || a.Method == "PUT" || a.Method == "PATCH":
			a.Candidate, a.Why = true, "a "+a.Method
			a.Problem = fmt.Sprintf("its path item is in another file (%s, the $ref at %s): idemgen reads markers in the spec file only, which is all an overlay changes too; move the path item into the spec to mark it",
				ref.Value, a.Pos)
		}
		out = append(out, a)
	}
	return out
}

// attachWarnings adds m's warnings to the annotations of the operations they are about,
// and returns the others: those about the spec.
func attachWarnings(anns []Annotation, m *model.Model) []string {
	at := map[string]int{}
	for i, a := range anns {
		at[a.Method+" "+a.Path] = i
	}
	var rest []string
	attach := func(method, path, line string) {
		if i, ok := at[method+" "+path]; ok && method != "" {
			anns[i].Warnings = append(anns[i].Warnings, line)
		} else {
			rest = append(rest, line)
		}
	}
	for _, w := range m.Warnings {
		attach(w.Method, w.Path, w.Error())
	}
	for _, u := range m.Unmarked {
		attach(u.Method, u.Path, unmarkedWarning(u))
	}
	return rest
}

// tryMarking marks the trial operations x-idempotent: true, all at once through an
// overlay, and records for each the policy it gets, whether it is a candidate, and the
// errors that marking it gives. An error located in the trial overlay (at the marker) is
// its operation's; the operation is set aside and the others tried again. Errors located
// elsewhere (a key the spec declares badly) are found by halving the operations tried.
func tryMarking(path string, overlays []string, anns []Annotation, trial []int) error {
	pending := trial
	for len(pending) > 0 {
		res, errs, err := markTrial(path, overlays, anns, pending)
		if err != nil {
			return err
		}
		if len(errs) == 0 {
			for _, i := range pending {
				judge(&anns[i], res.policies, "")
				if !anns[i].Candidate {
					continue
				}
				for _, w := range res.warnings[anns[i].Method+" "+anns[i].Path] {
					w.Pos = anns[i].Pos // the marker is in the trial overlay, no file of the user's
					anns[i].Warnings = append(anns[i].Warnings, w.Error())
				}
			}
			return nil
		}
		byOp := map[int][]string{}
		var other []string
		for _, e := range errs {
			if e.action >= 0 {
				byOp[pending[e.action]] = append(byOp[pending[e.action]], e.msg)
			} else {
				other = append(other, e.msg)
			}
		}
		if len(byOp) == 0 {
			if len(pending) == 1 {
				judge(&anns[pending[0]], nil, strings.Join(other, "\n"))
				return nil
			}
			h := len(pending) / 2
			if err := tryMarking(path, overlays, anns, pending[:h]); err != nil {
				return err
			}
			return tryMarking(path, overlays, anns, pending[h:])
		}
		var rest []int
		for _, i := range pending {
			if msgs, ok := byOp[i]; ok {
				judge(&anns[i], nil, strings.Join(msgs, "\n"))
			} else {
				rest = append(rest, i)
			}
		}
		pending = rest
	}
	return nil
}

// judge records what marking a gave: its policy, or the problem.
func judge(a *Annotation, policies map[string]Policy, problem string) {
	p, ok := policies[a.Method+" "+a.Path]
	switch {
	case problem != "":
		a.Problem = problem
	case ok:
		a.Policy = &p
	}
	switch {
	case a.Method == "POST" || a.Method == "PUT" || a.Method == "PATCH":
		a.Candidate, a.Why = true, "a "+a.Method
	case ok && !p.KeyAdded:
		a.Candidate, a.Why = true, "declares a key: "+p.KeySource
	}
	if a.Candidate && ok && !p.KeyAdded && a.Why == "a "+a.Method {
		a.Why += ", declares a key: " + p.KeySource
	}
}

// trialError is an error of a trial: its text, and the index of the trial's operation
// whose action it is located in (-1: located elsewhere).
type trialError struct {
	msg    string
	action int
}

// trialResult is what marking the trial operations gives, by "METHOD /path": each one's
// policy and its warnings.
type trialResult struct {
	policies map[string]Policy
	warnings map[string][]model.Warning
}

// markTrial generates the policies with the operations of trial marked x-idempotent:
// true by an overlay (a temporary file), or returns the errors that gives.
func markTrial(path string, overlays []string, anns []Annotation, trial []int) (trialResult, []trialError, error) {
	f, err := os.CreateTemp("", "idemgen-annotate-*.yaml")
	if err != nil {
		return trialResult{}, nil, err
	}
	defer os.Remove(f.Name())
	var ops []Annotation
	for _, i := range trial {
		ops = append(ops, anns[i])
	}
	text, starts := candidateOverlay("idemgen annotate trial", ops)
	if _, err := f.Write(text); err != nil {
		f.Close()
		return trialResult{}, nil, err
	}
	if err := f.Close(); err != nil {
		return trialResult{}, nil, err
	}
	m, err := model.Policies(path, append(slices.Clip(overlays), f.Name())...)
	if err != nil {
		located := spec.Errors(err)
		if located == nil {
			return trialResult{}, nil, err
		}
		var errs []trialError
		for _, e := range located {
			te := trialError{msg: e.Error(), action: -1}
			if e.Pos.File == f.Name() {
				te.msg = e.Msg // the trial overlay is no file of the user's
				if j, ok := slices.BinarySearch(starts, e.Pos.Line); ok {
					te.action = j
				} else if j > 0 {
					te.action = j - 1
				}
			}
			errs = append(errs, te)
		}
		return trialResult{}, errs, nil
	}
	res := trialResult{policies: map[string]Policy{}, warnings: map[string][]model.Warning{}}
	for _, o := range m.Ops {
		res.policies[o.Method+" "+o.Path] = policyOf(o)
	}
	for _, w := range m.Warnings {
		if w.Method != "" { // those about the spec are the spec's without the trial
			res.warnings[w.Method+" "+w.Path] = append(res.warnings[w.Method+" "+w.Path], w)
		}
	}
	return res, nil, nil
}

package model_test

import (
	"errors"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idemgen/idemgen/gen/internal/model"
	"github.com/idemgen/idemgen/gen/internal/spec"
)

// TestPolicies: the model stands alone: from a spec file to every marked operation's
// resolved policy, as the generated idempotent layer states it (gen's golden keyspec case).
func TestPolicies(t *testing.T) {
	m, err := model.Policies("../../testdata/golden/keyspec/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	type policy struct {
		name, header, body string
		required           bool
		schema             model.KeySchema
	}
	var got []policy
	for _, o := range m.Ops {
		if o.Lease != 30*time.Second || o.Retention != 24*time.Hour {
			t.Errorf("%s: lease %v, retention %v; want the defaults", o.Name, o.Lease, o.Retention)
		}
		got = append(got, policy{o.Name, o.Key.Header, o.Key.Body, o.Required, o.Key.Schema})
	}
	slices.SortFunc(got, func(a, b policy) int { return strings.Compare(a.name, b.name) })
	want := []policy{
		{"createCharge", "", "/idempotency_key", true, model.KeySchema{MaxLength: 45}},
		{"createPayout", "Idempotency-Key", "", false, model.KeySchema{MinLength: 8, MaxLength: 64, Pattern: "^[A-Za-z0-9_-]+$"}},
		{"createTransfer", "x-idempotency-key", "", true, model.KeySchema{Format: "uuid"}},
	}
	if !slices.Equal(got, want) {
		t.Errorf("policies:\n got %+v\nwant %+v", got, want)
	}
}

// TestPoliciesErrors: a spec in error gives its located errors, all at once.
func TestPoliciesErrors(t *testing.T) {
	_, err := model.Policies("../../testdata/errors/many.yaml")
	var l spec.ErrorList
	if !errors.As(err, &l) || len(l) < 2 {
		t.Fatalf("Policies = %v; want several located errors", err)
	}
	for _, e := range l {
		if e.Pos.Line == 0 {
			t.Errorf("error without a line: %v", e)
		}
	}
}

// TestModelRunsNoBase: the model's package imports no later step and not oapi-codegen,
// so that commands that need the policies only (annotate, policies) build no base.
func TestModelRunsNoBase(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Skipf("go list: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		if strings.Contains(dep, "oapi-codegen") || strings.HasPrefix(dep, "github.com/idemgen/idemgen/gen/internal/") &&
			!slices.Contains([]string{"spec", "marker", "model"}, strings.TrimPrefix(dep, "github.com/idemgen/idemgen/gen/internal/")) {
			t.Errorf("the model depends on %s", dep)
		}
	}
}

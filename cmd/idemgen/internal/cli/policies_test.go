package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const policiesOld = `openapi: 3.0.3
info: {title: orders, version: "1"}
paths:
  /orders:
    post:
      operationId: createOrder
      x-idempotent: {lease: 30s, required: true}
      responses: {"201": {description: created}}
  /orders/{id}:
    parameters: [{name: id, in: path, required: true, schema: {type: string}}]
    delete:
      operationId: deleteOrder
      x-idempotent: true
      responses: {"204": {description: deleted}}
    put:
      operationId: replaceOrder
      responses: {"200": {description: replaced}}
`

// policiesNew is policiesOld with createOrder's lease shortened and its key made optional,
// deleteOrder's marker removed and replaceOrder marked.
const policiesNew = `openapi: 3.0.3
info: {title: orders, version: "1"}
paths:
  /orders:
    post:
      operationId: createOrder
      x-idempotent: {lease: 10s}
      responses: {"201": {description: created}}
  /orders/{id}:
    parameters: [{name: id, in: path, required: true, schema: {type: string}}]
    delete:
      operationId: deleteOrder
      responses: {"204": {description: deleted}}
    put:
      operationId: replaceOrder
      x-idempotent: {header: X-Request-Id, retention: 1h}
      responses: {"200": {description: replaced}}
`

// TestPolicies prints a spec's policies as a table and as JSON, compares two versions of a
// spec for a reviewer (a lease from 30s to 10s, a key made optional, a marker removed and
// one added), and locates a spec's error.
func TestPolicies(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	oldSpec, newSpec := write("old.yaml", policiesOld), write("new.yaml", policiesNew)

	code, stdout, stderr := run("policies", oldSpec)
	if code != ExitOK || !strings.Contains(stdout, "createOrder") || !strings.Contains(stdout, "deleteOrder") ||
		strings.Contains(stdout, "replaceOrder") || !strings.Contains(stdout, "header Idempotency-Key (ADDED)") {
		t.Fatalf("policies: exit %d:\n%s%s", code, stdout, stderr)
	}

	code, stdout, _ = run("policies", "-json", newSpec)
	var ps []policyJSON
	if err := json.Unmarshal([]byte(stdout), &ps); err != nil || code != ExitOK || len(ps) != 2 {
		t.Fatalf("policies -json: exit %d, %v:\n%s", code, err, stdout)
	}
	if ps[0].Operation != "createOrder" || ps[0].Lease != "10s" || ps[0].Required || ps[1].Key != "header X-Request-Id" || ps[1].Retention != "1h" {
		t.Fatalf("policies -json: %+v", ps)
	}

	code, stdout, stderr = run("policies", "-against", oldSpec, newSpec)
	for _, want := range []string{
		"RISK deleteOrder (DELETE /orders/{id}): no longer marked",
		"replaceOrder (PUT /orders/{id}): newly marked: key from header X-Request-Id, lease 30s, retention 1h",
		"createOrder (POST /orders): lease 30s -> 10s",
		"createOrder (POST /orders): RISK key required -> optional",
		"4 changes",
	} {
		if code != ExitOK || !strings.Contains(stdout, want) {
			t.Errorf("policies -against: exit %d, output lacks %q:\n%s%s", code, want, stdout, stderr)
		}
	}
	if code, stdout, _ := run("policies", "-against", oldSpec, oldSpec); code != ExitOK || stdout != "no policy changed\n" {
		t.Errorf("policies -against itself: exit %d:\n%s", code, stdout)
	}

	bad := write("bad.yaml", strings.Replace(policiesNew, "lease: 10s", "lease: 10 seconds", 1))
	code, _, stderr = run("policies", bad)
	if code != ExitFail || !strings.Contains(stderr, "bad.yaml:7:") || !strings.Contains(stderr, "is not a duration") {
		t.Errorf("policies of a spec in error: exit %d:\n%s", code, stderr)
	}
	if code, _, stderr := run("policies"); code != ExitUsage || !strings.Contains(stderr, "want one SPEC") {
		t.Errorf("policies without a spec: exit %d:\n%s", code, stderr)
	}
}

// TestPoliciesBoundRisks flags a shortened retention as a risk (a retry later than the
// new retention runs again) and a lengthened one as a plain change; a removed timeout as
// a risk, an added one as a plain change.
func TestPoliciesBoundRisks(t *testing.T) {
	dir := t.TempDir()
	// spec is policiesOld with fields ("retention: 1h") added to createOrder's marker.
	spec := func(name, fields string) string {
		p := filepath.Join(dir, name)
		text := strings.Replace(policiesOld, "{lease: 30s, required: true}", "{lease: 30s, required: true, "+fields+"}", 1)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	day, hour := spec("day.yaml", "retention: 24h"), spec("hour.yaml", "retention: 1h")
	code, stdout, stderr := run("policies", "-against", day, hour)
	if want := "createOrder (POST /orders): RISK retention 24h -> 1h (a retry later than 1h runs again)"; code != ExitOK || !strings.Contains(stdout, want) {
		t.Errorf("policies -against, retention shortened: exit %d, output lacks %q:\n%s%s", code, want, stdout, stderr)
	}
	code, stdout, stderr = run("policies", "-against", hour, day)
	if want := "createOrder (POST /orders): retention 1h -> 24h\n"; code != ExitOK || !strings.Contains(stdout, want) || strings.Contains(stdout, "RISK") {
		t.Errorf("policies -against, retention lengthened: exit %d, want %q without RISK:\n%s%s", code, want, stdout, stderr)
	}

	bounded := spec("bounded.yaml", "retention: 24h, timeout: 10s")
	code, stdout, stderr = run("policies", "-against", bounded, day)
	if want := "createOrder (POST /orders): RISK timeout 10s -> none ("; code != ExitOK || !strings.Contains(stdout, want) {
		t.Errorf("policies -against, timeout removed: exit %d, output lacks %q:\n%s%s", code, want, stdout, stderr)
	}
	code, stdout, stderr = run("policies", "-against", day, bounded)
	if want := "createOrder (POST /orders): timeout none -> 10s\n"; code != ExitOK || !strings.Contains(stdout, want) || strings.Contains(stdout, "RISK") {
		t.Errorf("policies -against, timeout added: exit %d, want %q without RISK:\n%s%s", code, want, stdout, stderr)
	}
}

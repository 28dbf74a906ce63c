// Package monitoring_test checks the operational files beside it against the metrics
// idem/idemprom exports: every metric name and outcome in the Prometheus rules and the
// Grafana dashboard exists. (CI also runs promtool check rules and promtool test rules.)
package monitoring_test

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"gopkg.in/yaml.v3"

	"github.com/idemgen/idemgen/idem"
	"github.com/idemgen/idemgen/idem/idemprom"
)

const (
	rulesFile     = "prometheus/idem.rules.yml"
	dashboardFile = "grafana/idem-dashboard.json"
)

// outcomes are the values of idem_outcomes_total's outcome label.
var outcomes = []idem.Outcome{
	idem.OutcomeCompleted, idem.OutcomeReplayed, idem.OutcomeInProgress, idem.OutcomeMismatch,
	idem.OutcomeMissingKey, idem.OutcomeInvalidKey, idem.OutcomeLeaseLost, idem.OutcomeNotStored,
	idem.OutcomeUnkeyed, idem.OutcomeRejected, idem.OutcomeClaimed, idem.OutcomeTakenOver,
	idem.OutcomeReclaimed, idem.OutcomeReleased, idem.OutcomeRetried, idem.OutcomeFailed,
}

// exported returns the metric names idemprom's collectors describe.
func exported(t *testing.T) map[string]bool {
	ch := make(chan *prometheus.Desc, 32)
	idemprom.NewOutcomes().Describe(ch)
	idemprom.NewStoreCollector(nil, 0).Describe(ch)
	idemprom.NewPurgeMetrics().Describe(ch)
	close(ch)
	fqName := regexp.MustCompile(`fqName: "([^"]+)"`)
	names := map[string]bool{}
	for d := range ch {
		m := fqName.FindStringSubmatch(d.String())
		if m == nil {
			t.Fatalf("cannot read the name of %s", d)
		}
		names[m[1]] = true
	}
	if len(names) < 3 {
		t.Fatalf("idemprom describes %v", names)
	}
	return names
}

type ruleFile struct {
	Groups []struct {
		Name  string
		Rules []struct {
			Record, Alert, Expr string
		}
	}
}

func readRules(t *testing.T) ruleFile {
	data, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	var f ruleFile
	if err := yaml.Unmarshal(data, &f); err != nil {
		t.Fatalf("%s: %v", rulesFile, err)
	}
	return f
}

var (
	// idem metric names and recording rules (level:metric:operations) in an expression.
	metricRef = regexp.MustCompile(`\bidem[a-z_]*(:[a-z0-9_]+)*\b`)
	// outcome="x" or outcome=~"x|y".
	outcomeRef = regexp.MustCompile(`outcome=~?"([^"]*)"`)
)

// checkExpr reports names and outcomes in expr that nothing exports.
func checkExpr(t *testing.T, where, expr string, known map[string]bool) {
	t.Helper()
	refs := metricRef.FindAllString(expr, -1)
	if len(refs) == 0 {
		t.Errorf("%s: %q refers to no idem metric", where, expr)
	}
	for _, name := range refs {
		if !known[name] {
			t.Errorf("%s: %q refers to %s, which neither idemprom nor a recording rule exports", where, expr, name)
		}
	}
	for _, m := range outcomeRef.FindAllStringSubmatch(expr, -1) {
		for _, o := range strings.Split(m[1], "|") {
			if !slices.Contains(outcomes, idem.Outcome(o)) {
				t.Errorf("%s: %q selects outcome %q, which idem does not have", where, expr, o)
			}
		}
	}
}

func TestRulesUseExportedMetrics(t *testing.T) {
	known := exported(t)
	f := readRules(t)
	var alerts []string
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			checkExpr(t, rulesFile+": "+r.Record+r.Alert, r.Expr, known)
			if r.Record != "" {
				known[r.Record] = true // usable by the rules after it
			} else {
				alerts = append(alerts, r.Alert)
			}
		}
	}
	slices.Sort(alerts)
	want := []string{"IdempotencyClaimsPastLease", "IdempotencyConflictRatioHigh", "IdempotencyPayloadUnderManyKeys", "IdempotencyPurgeBehind"}
	if !slices.Equal(alerts, want) {
		t.Errorf("alerts %v, want %v", alerts, want)
	}
}

func TestDashboardUsesExportedMetrics(t *testing.T) {
	known := exported(t)
	for _, g := range readRules(t).Groups {
		for _, r := range g.Rules {
			if r.Record != "" {
				known[r.Record] = true
			}
		}
	}
	data, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		UID    string
		Title  string
		Panels []struct {
			ID      int
			Title   string
			Targets []struct{ Expr string }
		}
		Templating struct {
			List []struct {
				Name       string
				Definition string
			}
		}
	}
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	if d.UID == "" || d.Title == "" || len(d.Panels) == 0 {
		t.Fatalf("%s: uid %q, title %q, %d panels", dashboardFile, d.UID, d.Title, len(d.Panels))
	}
	ids := map[int]bool{}
	for _, p := range d.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d used twice", p.ID)
		}
		ids[p.ID] = true
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, q := range p.Targets {
			checkExpr(t, dashboardFile+": panel "+p.Title, q.Expr, known)
		}
	}
	for _, v := range d.Templating.List {
		if v.Definition != "" {
			checkExpr(t, dashboardFile+": variable "+v.Name, v.Definition, known)
		}
	}
}

package tools

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	pg "github.com/pganalyze/pg_query_go/v6"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// The distribution contract: every statement idem sends (queries/) and every statement of
// the payments example (examples/payments/db/queries.sql), read with the PostgreSQL parser
// sqlc uses (pg_query_go), against the rules under which Citus routes a statement to one
// shard or refuses it. The distributed tables and their columns are read from the files
// that distribute them: schema_citus.sql (`idemgen schema -citus`) and the example's
// db/citus.sql. CI has no Citus cluster; this test runs there.

// citusRules cite where the Citus documentation (and, where the documentation is silent,
// Citus's source at v13.2.2) states each rule.
var citusRules = map[string]string{
	"routing": "a statement on a distributed table names its distribution column by equality, or it runs on " +
		"every shard (https://docs.citusdata.com/en/stable/develop/reference_processing.html, router executor; " +
		"https://docs.citusdata.com/en/stable/sharding/data_modeling.html, multi-tenant data model)",
	"on-conflict": "no STABLE or VOLATILE function in an ON CONFLICT clause on a distributed table: refused with " +
		"\"functions used in the DO UPDATE SET clause of INSERTs on distributed tables must be marked IMMUTABLE\" " +
		"(https://docs.citusdata.com/en/stable/develop/reference_workarounds.html; src/backend/distributed/planner/multi_router_planner.c)",
	"set-config": "no set_config: a function in a SELECT without a distributed table runs on the node the " +
		"session entered through, not on the key's shard " +
		"(https://docs.citusdata.com/en/stable/develop/reference_processing.html)",
	"join": "distributed tables are joined on their distribution columns, and only co-located tables are, " +
		"or the join is refused (\"complex joins are only supported when all distributed tables are co-located " +
		"and joined on their distribution columns\") " +
		"(https://docs.citusdata.com/en/stable/sharding/data_modeling.html#co-location; src/backend/distributed/planner/multi_join_order.c)",
	"generic-plan": "a statement with parameters on one distributed table is one Citus can route under a generic " +
		"plan only without subqueries and CTEs (the fast path: one table, filtered by its distribution column; an " +
		"INSERT ... VALUES): else \"could not create distributed plan\" under plan_cache_mode=force_generic_plan " +
		"(https://docs.citusdata.com/en/stable/develop/reference_processing.html; src/backend/distributed/planner/fast_path_router_planner.c)",
	"insert-select": "no INSERT ... SELECT into a distributed table from a request: Citus runs it through the " +
		"coordinator unless source and target are co-located and the distribution column passes through unchanged " +
		"(https://docs.citusdata.com/en/stable/develop/reference_dml.html, INSERT ... SELECT)",
}

// multiShard names the statements that read or write every shard by design, per rule they
// are exempt from, with the reason. Nothing a request sends is here.
var multiShard = map[string]map[string]string{
	"PurgeBound": {
		"routing": "maintenance: the end of the purge's next batch, along expires_at across every tenant " +
			"(each shard returns its first rows in order, the coordinator merges them); sent in the simple protocol",
	},
	"PurgeExpired": {
		"routing": "maintenance: deletes a range of expires_at of every tenant, one batch; sent in the simple protocol",
	},
	"DuplicatePayloads": {
		"routing":      "the repeated-payload gauge: groups the recent keys of every tenant",
		"generic-plan": "sent in pgx's simple protocol (idem's simpleProtocol): never a prepared statement",
	},
	"StarPayment": {"generic-plan": "the example sends it in pgx's simple protocol (db.SimpleProtocol): planned with its values, Citus routes it to the account's shard"},
	// The example's audits count every tenant's rows: an operator's check, not a request.
	"AuditPayments":       {"routing": "the audit: counts every tenant's rows", "generic-plan": "the audit: run rarely, by an operator"},
	"AuditPaymentSamples": {"routing": "the audit: samples every tenant's rows", "generic-plan": "the audit: run rarely, by an operator"},
	"AuditRefunds":        {"routing": "the audit: counts every tenant's rows", "generic-plan": "the audit: run rarely, by an operator"},
	"AuditRefundSamples":  {"routing": "the audit: samples every tenant's rows", "generic-plan": "the audit: run rarely, by an operator"},
}

// statementFiles are the statements checked, relative to the repository root.
var statementFiles = []string{
	"queries/idempotency_keys.sql",
	"queries/citus/monitoring.sql",
	"examples/payments/db/queries.sql",
}

// distributionFiles distribute the tables (create_distributed_table calls).
var distributionFiles = []string{"schema_citus.sql", "examples/payments/db/citus.sql"}

func TestCitusDistributionContract(t *testing.T) {
	dist := map[string]string{}
	for _, f := range distributionFiles {
		for table, col := range distributedTables(t, readRepo(t, f)) {
			dist[table] = col
		}
	}
	if dist["idempotency_keys"] != "scope" {
		t.Fatalf("schema_citus.sql does not distribute idempotency_keys by scope: %v", dist)
	}
	for _, table := range []string{"payments", "refunds", "payment_stars"} {
		if dist[table] != "account_id" {
			t.Fatalf("examples/payments/db/citus.sql: no distribution of %s by account_id read (the file's form changed?): %v", table, dist)
		}
	}
	checked := 0
	for _, f := range statementFiles {
		for _, st := range statements(t, readRepo(t, f)) {
			checked++
			for _, v := range checkStatement(st, dist) {
				if reason, ok := multiShard[st.name][v.rule]; ok {
					t.Logf("%s: %s (%s): exempt: %s", f, st.name, v.rule, reason)
					continue
				}
				t.Errorf("%s: %s: %s\n\trule %s: %s", f, st.name, v.detail, v.rule, citusRules[v.rule])
			}
		}
	}
	if checked < 25 {
		t.Fatalf("only %d statements read: the files moved?", checked)
	}
}

// TestCitusDistributionContractCatches feeds the contract one statement that breaks each
// rule (and one that keeps them all): the contract can fail.
func TestCitusDistributionContractCatches(t *testing.T) {
	dist := map[string]string{"idempotency_keys": "scope", "payments": "account_id", "refunds": "account_id"}
	cases := []struct {
		sql  string
		rule string // "" keeps every rule
	}{
		{`SELECT status FROM idempotency_keys WHERE scope = $1 AND key = $2`, ""},
		{`SELECT status FROM idempotency_keys WHERE key = $1`, "routing"},
		{`UPDATE payments SET amount = 1 WHERE id = $1`, "routing"},
		{`INSERT INTO idempotency_keys AS k (scope, key) VALUES ($1, $2)
		  ON CONFLICT (scope, key) DO UPDATE SET created_at = now()`, "on-conflict"},
		{`INSERT INTO idempotency_keys AS k (scope, key) VALUES ($1, $2)
		  ON CONFLICT (scope, key) DO UPDATE SET status = 'x' WHERE k.expires_at <= CURRENT_TIMESTAMP`, "on-conflict"},
		{`SELECT set_config('lock_timeout', '1s', true)`, "set-config"},
		{`SELECT count(*) FROM payments p JOIN refunds r ON r.payment_id = p.id WHERE p.account_id = $1 AND r.account_id = $1`, "join"},
		{`SELECT count(*) FROM payments p JOIN refunds r ON r.account_id = p.account_id AND r.payment_id = p.id WHERE p.account_id = $1`, ""},
		{`SELECT pg_try_advisory_xact_lock($1), (SELECT 1 FROM idempotency_keys WHERE scope = $2 AND key = $3)`, "generic-plan"},
		{`WITH d AS (INSERT INTO idempotency_keys (scope, key) VALUES ($1, $2) RETURNING 1) SELECT count(*) FROM d`, "generic-plan"},
		{`INSERT INTO refunds (account_id, payment_id) SELECT p.id, p.id FROM payments p WHERE p.account_id = $1 AND p.id = $2`, "insert-select"},
		{`INSERT INTO refunds (account_id, payment_id) SELECT p.account_id, p.id FROM payments p WHERE p.id = $2`, "insert-select"},
		{`INSERT INTO refunds (account_id, payment_id) SELECT p.account_id, p.id FROM payments p WHERE p.account_id = $1 AND p.id = $2`, "generic-plan"},
		{`SELECT (SELECT count(*) FROM payments), (SELECT count(*) FROM idempotency_keys k WHERE k.scope = $1)`, "routing"},
		{`SELECT count(*) FROM idempotency_keys k WHERE k.scope = $1 AND NOT EXISTS (SELECT 1 FROM payments p WHERE p.idempotency_key = k.key)`, "join"},
	}
	for _, c := range cases {
		sts := statements(t, "-- name: Case :one\n"+c.sql+";\n")
		var rules []string
		for _, v := range checkStatement(sts[0], dist) {
			rules = append(rules, v.rule)
		}
		if c.rule == "" && len(rules) > 0 || c.rule != "" && !slices.Contains(rules, c.rule) {
			t.Errorf("%s\n\tbroke %v; want %q", c.sql, rules, c.rule)
		}
	}
}

// statement is one sqlc query: its name (the "-- name:" comment before it) and its tree.
type statement struct {
	name string
	sql  string
	tree *pg.Node
}

type violation struct{ rule, detail string }

var nameComment = regexp.MustCompile(`--\s*name:\s*(\w+)`)

func statements(t *testing.T, sql string) []statement {
	t.Helper()
	res, err := pg.Parse(sql)
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	var out []statement
	for _, raw := range res.Stmts {
		start := int(raw.StmtLocation)
		end := start + int(raw.StmtLen)
		if raw.StmtLen == 0 {
			end = len(sql)
		}
		text := sql[start:end]
		name := "(unnamed)"
		// The name comment is inside the statement's text (PostgreSQL's statement
		// locations include the comments before it) or, for the first one, before it.
		if m := nameComment.FindAllStringSubmatch(sql[:start]+text, -1); len(m) > 0 {
			name = m[len(m)-1][1]
		}
		out = append(out, statement{name: name, sql: text, tree: raw.Stmt})
	}
	return out
}

// distributedTables reads the tables sql distributes and their columns: its
// create_distributed_table('table', 'column', ...) calls, and the (n, 'table', 'column')
// rows of a VALUES list a DO block loops over to call it (the example's citus.sql).
func distributedTables(t *testing.T, sql string) map[string]string {
	t.Helper()
	out := map[string]string{}
	call := regexp.MustCompile(`create_distributed_table\(\s*'(\w+)'\s*,\s*'(\w+)'|\(\s*\d+\s*,\s*'(\w+)'\s*,\s*'(\w+)'\s*\)`)
	for _, st := range statements(t, sql) {
		// Calls in DO blocks are in the block's string: read them from the text.
		for _, m := range call.FindAllStringSubmatch(st.sql, -1) {
			if m[1] == "" {
				m = []string{m[0], m[3], m[4]}
			}
			if !strings.Contains(lineOf(st.sql, m[0]), "--") {
				out[m[1]] = m[2]
			}
		}
	}
	return out
}

// lineOf is the line of s that holds sub.
func lineOf(s, sub string) string {
	i := strings.Index(s, sub)
	start := strings.LastIndex(s[:i], "\n") + 1
	return s[start : i+len(sub)]
}

// checkStatement returns the rules st breaks, with dist the distributed tables and their
// distribution columns.
func checkStatement(st statement, dist map[string]string) []violation {
	var out []violation
	add := func(rule, format string, args ...any) {
		if v := (violation{rule, fmt.Sprintf(format, args...)}); !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	type ref = tableRef
	var refs []ref
	equal := map[[2]string]bool{} // column equalities: {"k.scope", "$"} (a value) or {"k.scope", "p.account_id"}
	hasSub, hasCTE, insertSelect := false, false, false
	insertSource := "" // INSERT ... SELECT: the select's column for the target's distribution column
	insertCols := map[string]bool{}
	var insertTable string
	walk(st.tree.ProtoReflect(), func(m protoreflect.Message) {
		switch n := m.Interface().(type) {
		case *pg.RangeVar:
			alias := aliasOf(n)
			// References are told apart by alias: the same table under the same alias in
			// two subqueries of one statement (the audit's counts) is one reference.
			if _, ok := dist[n.Relname]; ok && !slices.Contains(refs, ref{n.Relname, alias}) {
				refs = append(refs, ref{n.Relname, alias})
			}
		case *pg.A_Expr:
			if n.Kind == pg.A_Expr_Kind_AEXPR_OP && len(n.Name) == 1 && n.Name[0].GetString_().GetSval() == "=" {
				l, r := column(n.Lexpr), column(n.Rexpr)
				switch {
				case l != "" && r != "":
					equal[[2]string{l, r}], equal[[2]string{r, l}] = true, true
				case l != "":
					equal[[2]string{l, "$"}] = true
				case r != "":
					equal[[2]string{r, "$"}] = true
				}
			}
		case *pg.FuncCall:
			if funcName(n) == "set_config" {
				add("set-config", "calls set_config")
			}
		case *pg.SubLink:
			hasSub = true
		case *pg.WithClause:
			hasCTE = true
		case *pg.InsertStmt:
			insertTable = n.Relation.GetRelname()
			for _, c := range n.Cols {
				insertCols[c.GetResTarget().GetName()] = true
			}
			if sel := n.SelectStmt.GetSelectStmt(); sel != nil && len(sel.ValuesLists) == 0 {
				insertSelect = true
				// The column the SELECT gives the target's distribution column.
				for i, c := range n.Cols {
					if c.GetResTarget().GetName() == dist[n.Relation.GetRelname()] && i < len(sel.TargetList) {
						insertSource = column(sel.TargetList[i].GetResTarget().GetVal())
					}
				}
			}
			if oc := n.OnConflictClause; oc != nil {
				checkOnConflict(oc, add)
			}
		}
	})
	// routing: each reference names its distribution column by equality with a value, or
	// with a column of another reference that does (a join on the tenant).
	named := func(r ref) bool {
		col := dist[r.table]
		for _, c := range []string{r.alias + "." + col, col} {
			if equal[[2]string{c, "$"}] {
				return true
			}
		}
		return false
	}
	// INSERT ... SELECT runs on one shard when the SELECT reads co-located tables on one
	// shard and passes a distribution column through to the target's.
	insertRouted := false
	for _, r := range refs {
		if insertSelect && r.table != insertTable && named(r) && insertSource == r.alias+"."+dist[r.table] {
			insertRouted = true
		}
	}
	for _, r := range refs {
		if r.table == insertTable && insertCols[dist[r.table]] && (!insertSelect || insertRouted) {
			continue // routed by the value of its distribution column
		}
		if named(r) {
			continue
		}
		joinedToNamed := false
		for _, o := range refs {
			if o != r && named(o) && joined(r, o, dist, equal) {
				joinedToNamed = true
			}
		}
		if !joinedToNamed {
			add("routing", "%s (as %s) is not filtered by %s = a value: the statement runs on every shard", r.table, r.alias, dist[r.table])
		}
	}
	// join: the references one query block joins (those of its FROM, and those of an outer
	// block its columns refer to: a correlated subquery) are joined on their distribution
	// columns.
	for _, pair := range joinedPairs(st.tree, dist) {
		a, b := pair[0], pair[1]
		{
			if a.table == insertTable && insertSelect || b.table == insertTable && insertSelect {
				continue // INSERT ... SELECT: its own rule
			}
			if !joined(a, b, dist, equal) {
				add("join", "%s (as %s) and %s (as %s) are not joined on %s = %s", a.table, a.alias, b.table, b.alias,
					a.alias+"."+dist[a.table], b.alias+"."+dist[b.table])
			}
		}
	}
	if insertSelect && dist[insertTable] != "" {
		if !insertRouted {
			add("insert-select", "INSERT INTO %s ... SELECT that does not pass a distribution column of a table it reads on one shard to %s", insertTable, dist[insertTable])
		}
		add("generic-plan", "INSERT INTO %s ... SELECT: Citus routes it only when planned with its values", insertTable)
	}
	if len(refs) > 0 && (hasSub || hasCTE) {
		add("generic-plan", "a statement on %s with a subquery or CTE", refs[0].table)
	}
	return out
}

// joinedPairs returns the pairs of references to distributed tables that one query block
// of tree joins: two in the block's own FROM (or the target of an UPDATE, DELETE or
// INSERT), or one of the block's and one of an enclosing block that the block's columns
// name (a correlated subquery). Blocks are told apart at each SELECT.
func joinedPairs(tree *pg.Node, dist map[string]string) [][2]tableRef {
	var pairs [][2]tableRef
	var visit func(root protoreflect.Message, outer []tableRef)
	visit = func(root protoreflect.Message, outer []tableRef) {
		var own []tableRef
		used := map[string]bool{}
		var nested []protoreflect.Message
		walkPrune(root, func(m protoreflect.Message) bool {
			if _, sel := m.Interface().(*pg.SelectStmt); sel && m.Interface() != root.Interface() {
				nested = append(nested, m)
				return false
			}
			switch n := m.Interface().(type) {
			case *pg.RangeVar:
				if _, ok := dist[n.Relname]; ok {
					own = append(own, tableRef{n.Relname, aliasOf(n)})
				}
			case *pg.ColumnRef:
				if len(n.Fields) == 2 {
					used[n.Fields[0].GetString_().GetSval()] = true
				}
			}
			return true
		})
		for i, a := range own {
			for _, b := range own[i+1:] {
				pairs = append(pairs, [2]tableRef{a, b})
			}
			for _, o := range outer {
				if used[o.alias] {
					pairs = append(pairs, [2]tableRef{a, o})
				}
			}
		}
		for _, n := range nested {
			visit(n, append(slices.Clone(outer), own...))
		}
	}
	var root protoreflect.Message
	tree.ProtoReflect().Range(func(_ protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		root = v.Message() // the statement inside the Node's oneof
		return false
	})
	if root != nil {
		visit(root, nil)
	}
	return pairs
}

// tableRef is a reference to a distributed table in a statement, with its alias (its name
// when it has none).
type tableRef struct{ table, alias string }

func aliasOf(n *pg.RangeVar) string {
	if n.Alias != nil {
		return n.Alias.Aliasname
	}
	return n.Relname
}

// walkPrune calls f on m and on the messages below it, below those for which f is true.
func walkPrune(m protoreflect.Message, f func(protoreflect.Message) bool) {
	if !f(m) {
		return
	}
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsList() && fd.Kind() == protoreflect.MessageKind:
			for i := range v.List().Len() {
				walkPrune(v.List().Get(i).Message(), f)
			}
		case fd.Kind() == protoreflect.MessageKind && !fd.IsMap():
			walkPrune(v.Message(), f)
		}
		return true
	})
}

// joined reports whether references a and b are equated on their distribution columns.
func joined(a, b tableRef, dist map[string]string, equal map[[2]string]bool) bool {
	return equal[[2]string{a.alias + "." + dist[a.table], b.alias + "." + dist[b.table]}]
}

// checkOnConflict reports the function calls of an ON CONFLICT clause (sqlc's own
// sqlc.arg and sqlc.narg are parameters, not calls).
func checkOnConflict(oc *pg.OnConflictClause, add func(rule, format string, args ...any)) {
	parts := append([]*pg.Node{oc.WhereClause}, oc.TargetList...)
	for _, p := range parts {
		if p == nil {
			continue
		}
		walk(p.ProtoReflect(), func(m protoreflect.Message) {
			switch n := m.Interface().(type) {
			case *pg.FuncCall:
				if name := funcName(n); !strings.HasPrefix(name, "sqlc.") {
					add("on-conflict", "calls %s() in its ON CONFLICT clause", name)
				}
			case *pg.SQLValueFunction:
				add("on-conflict", "reads %s in its ON CONFLICT clause", strings.TrimPrefix(n.Op.String(), "SVFOP_"))
			}
		})
	}
}

// column is the dotted name of a column reference ("k.scope", "scope"), or "" for any
// other expression (a parameter, a literal, a cast of a parameter).
func column(n *pg.Node) string {
	if tc := n.GetTypeCast(); tc != nil {
		return column(tc.Arg)
	}
	cr := n.GetColumnRef()
	if cr == nil {
		return ""
	}
	var parts []string
	for _, f := range cr.Fields {
		parts = append(parts, f.GetString_().GetSval())
	}
	return strings.Join(parts, ".")
}

func funcName(f *pg.FuncCall) string {
	var parts []string
	for _, n := range f.Funcname {
		parts = append(parts, n.GetString_().GetSval())
	}
	name := strings.Join(parts, ".")
	return strings.TrimPrefix(name, "pg_catalog.")
}

// walk calls f on m and on every message below it.
func walk(m protoreflect.Message, f func(protoreflect.Message)) {
	walkPrune(m, func(m protoreflect.Message) bool { f(m); return true })
}

func readRepo(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", rel))
	if err != nil {
		t.Fatalf("the distribution contract reads %s: %v", rel, err)
	}
	return string(b)
}

var _ proto.Message = (*pg.Node)(nil)

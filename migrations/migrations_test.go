// Package migrations_test applies the migrations beside it with the migration tools' own
// Go libraries against real PostgreSQL, up, down and up again, and checks that the
// result is exactly what ../schema.sql creates. A change to schema.sql without a new
// numbered migration fails here.
package migrations_test

import (
	"context"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"ariga.io/atlas/sql/migrate"
	golangmigrate "github.com/golang-migrate/migrate/v4"
	_ "github.com/golang-migrate/migrate/v4/database/pgx/v5" // the pgx5:// driver
	"github.com/golang-migrate/migrate/v4/source/iofs"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pmezard/go-difflib/difflib"
	"github.com/pressly/goose/v3"

	"github.com/idemgen/idemgen"
	"github.com/idemgen/idemgen/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// -update rewrites atlas/atlas.sum after a new migration was added (what `atlas migrate
// hash` does, with atlas's own library): go -C migrations test . -run TestAtlas -update
var update = flag.Bool("update", false, "rewrite atlas/atlas.sum")

// toolTables are the migration tools' own bookkeeping tables, left out of the catalog.
var toolTables = []string{"goose_db_version", "schema_migrations", "atlas_schema_revisions"}

// catalog describes what a schema holds in public: sequences, columns (by name: a column
// added by ALTER TABLE lands last), constraints, indexes and the storage options of
// tables and indexes (autovacuum settings, fill factors), one object per line.
func catalog(t *testing.T, pool *pgxpool.Pool) string {
	t.Helper()
	const q = `
SELECT 'sequence ' || sequencename || ' ' || data_type::text || ' start ' || start_value || ' increment ' || increment_by
FROM pg_sequences WHERE schemaname = 'public' AND NOT sequencename LIKE ANY (SELECT tt || '%' FROM unnest($1::text[]) AS tt)
UNION ALL
SELECT 'column ' || c.relname || '.' || a.attname || ' ' || format_type(a.atttypid, a.atttypmod)
       || CASE WHEN a.attnotnull THEN ' NOT NULL' ELSE '' END
       || coalesce(' DEFAULT ' || pg_get_expr(d.adbin, d.adrelid), '')
FROM pg_attribute a
JOIN pg_class c ON c.oid = a.attrelid AND c.relkind = 'r'
JOIN pg_namespace n ON n.oid = c.relnamespace AND n.nspname = 'public'
LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
WHERE a.attnum > 0 AND NOT a.attisdropped AND c.relname <> ALL ($1)
UNION ALL
SELECT 'constraint ' || c.relname || ' ' || k.conname || ' ' || pg_get_constraintdef(k.oid)
FROM pg_constraint k
JOIN pg_class c ON c.oid = k.conrelid
JOIN pg_namespace n ON n.oid = c.relnamespace AND n.nspname = 'public'
WHERE c.relname <> ALL ($1)
UNION ALL
SELECT 'index ' || indexdef FROM pg_indexes WHERE schemaname = 'public' AND tablename <> ALL ($1)
UNION ALL
SELECT 'options ' || c.relname || ' ' || array_to_string(ARRAY(SELECT unnest(c.reloptions) ORDER BY 1), ',')
FROM pg_class c
JOIN pg_namespace n ON n.oid = c.relnamespace AND n.nspname = 'public'
WHERE c.reloptions IS NOT NULL AND c.relname <> ALL ($1)
ORDER BY 1`
	rows, err := pool.Query(context.Background(), q, toolTables)
	if err != nil {
		t.Fatal(err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(lines, "\n")
}

// want is the catalog schema.sql creates on an empty database.
func want(t *testing.T) string {
	t.Helper()
	pool := pgtest.Pool(t, pgtest.NewDB(t))
	if _, err := pool.Exec(context.Background(), idemgen.Schema, pgx.QueryExecModeSimpleProtocol); err != nil {
		t.Fatalf("schema.sql: %v", err)
	}
	c := catalog(t, pool)
	if !strings.Contains(c, "idempotency_keys") {
		t.Fatalf("schema.sql created no idempotency_keys:\n%s", c)
	}
	return c
}

// same fails t when got differs from schema.sql's catalog, with a diff.
func same(t *testing.T, step, want, got string) {
	t.Helper()
	if got == want {
		return
	}
	diff, _ := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
		A: difflib.SplitLines(want + "\n"), B: difflib.SplitLines(got + "\n"),
		FromFile: "schema.sql", ToFile: step, Context: 1,
	})
	t.Errorf("%s differs from what schema.sql creates; add a new numbered migration (see migrations/README.md):\n%s", step, diff)
}

// empty fails t when a down migration left any of idemgen's objects.
func empty(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	if c := catalog(t, pool); c != "" {
		t.Errorf("down left:\n%s", c)
	}
}

func TestGoose(t *testing.T) {
	want := want(t)
	url := pgtest.NewDB(t)
	pool := pgtest.Pool(t, url)
	db := stdlib.OpenDBFromPool(pool)
	defer db.Close()
	p, err := goose.NewProvider(goose.DialectPostgres, db, os.DirFS("goose"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := p.Up(ctx); err != nil {
		t.Fatalf("up: %v", err)
	}
	same(t, "goose up", want, catalog(t, pool))
	if _, err := p.DownTo(ctx, 0); err != nil {
		t.Fatalf("down: %v", err)
	}
	empty(t, pool)
	if _, err := p.Up(ctx); err != nil {
		t.Fatalf("up again: %v", err)
	}
	same(t, "goose up, down, up", want, catalog(t, pool))
}

// A database that idem.Migrate (schema.sql) set up adopts the migrations: up succeeds.
func TestGooseAdoptsASchemaFromMigrate(t *testing.T) {
	pool := pgtest.Pool(t, pgtest.NewDB(t))
	ctx := context.Background()
	if _, err := pool.Exec(ctx, idemgen.Schema, pgx.QueryExecModeSimpleProtocol); err != nil {
		t.Fatal(err)
	}
	db := stdlib.OpenDBFromPool(pool)
	defer db.Close()
	p, err := goose.NewProvider(goose.DialectPostgres, db, os.DirFS("goose"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Up(ctx); err != nil {
		t.Fatalf("goose up on a database made by schema.sql: %v", err)
	}
}

func TestGolangMigrate(t *testing.T) {
	want := want(t)
	url := pgtest.NewDB(t)
	pool := pgtest.Pool(t, url)
	src, err := iofs.New(os.DirFS("golang-migrate"), ".")
	if err != nil {
		t.Fatal(err)
	}
	m, err := golangmigrate.NewWithSourceInstance("iofs", src, "pgx5://"+strings.TrimPrefix(url, "postgres://"))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if err := m.Up(); err != nil {
		t.Fatalf("up: %v", err)
	}
	same(t, "golang-migrate up", want, catalog(t, pool))
	if err := m.Down(); err != nil {
		t.Fatalf("down: %v", err)
	}
	empty(t, pool)
	if err := m.Up(); err != nil {
		t.Fatalf("up again: %v", err)
	}
	same(t, "golang-migrate up, down, up", want, catalog(t, pool))
	if err := m.Up(); !errors.Is(err, golangmigrate.ErrNoChange) {
		t.Fatalf("a second up: %v, want no change", err)
	}
}

// Atlas: atlas.sum matches the files (atlas's own check, which fails on an edited
// migration), and the files, applied in order, give schema.sql's catalog. Atlas has no
// down files: `atlas migrate down` plans the reverse against a dev database.
func TestAtlas(t *testing.T) {
	dir, err := migrate.NewLocalDir("atlas")
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		files, err := dir.Files()
		if err != nil {
			t.Fatal(err)
		}
		sum, err := migrate.NewHashFile(files)
		if err == nil {
			err = migrate.WriteSumFile(dir, sum)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := migrate.Validate(dir); err != nil {
		t.Fatalf("atlas.sum: %v (a released migration was edited, or a new one added without `go -C migrations test . -run TestAtlas -update`)", err)
	}
	files, err := dir.Files()
	if err != nil || len(files) == 0 {
		t.Fatalf("%d atlas files: %v", len(files), err)
	}
	want := want(t)
	pool := pgtest.Pool(t, pgtest.NewDB(t))
	for _, f := range files {
		if _, err := pool.Exec(context.Background(), string(f.Bytes()), pgx.QueryExecModeSimpleProtocol); err != nil {
			t.Fatalf("%s: %v", f.Name(), err)
		}
	}
	same(t, "atlas files", want, catalog(t, pool))
}

// The three formats carry the same statements, version for version.
func TestFormatsAgree(t *testing.T) {
	gooseFiles, _ := filepath.Glob("goose/*.sql")
	if len(gooseFiles) == 0 {
		t.Fatal("no goose migrations")
	}
	for _, g := range gooseFiles {
		name := strings.TrimSuffix(filepath.Base(g), ".sql")
		up, down := splitGoose(t, g)
		for file, want := range map[string]string{
			"golang-migrate/" + name + ".up.sql":   up,
			"golang-migrate/" + name + ".down.sql": down,
			"atlas/" + name + ".sql":               up,
		} {
			if got := statements(t, file); got != want {
				t.Errorf("%s and %s differ:\n%s\n---\n%s", file, g, got, want)
			}
		}
	}
}

var comment = regexp.MustCompile(`(?m)^\s*--.*\n`)

// statements is file without comment lines and blank lines at either end.
func statements(t *testing.T, file string) string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(comment.ReplaceAllString(string(b), ""))
}

// splitGoose returns the statements of a goose file's Up and Down sections.
func splitGoose(t *testing.T, file string) (up, down string) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok1 := strings.Cut(string(b), "-- +goose Up\n")
	upPart, downPart, ok2 := strings.Cut(rest, "-- +goose Down\n")
	if !ok1 || !ok2 {
		t.Fatalf("%s: want a -- +goose Up and a -- +goose Down section", file)
	}
	clean := func(s string) string { return strings.TrimSpace(comment.ReplaceAllString(s, "")) }
	return clean(upPart), clean(downPart)
}

// A table made by v1 (migration 00001 alone) and upgraded by schema.sql, as idem.Migrate
// does on start, ends as schema.sql makes a new one, and the upgrade is re-runnable.
func TestSchemaUpgradesAV1Table(t *testing.T) {
	want := want(t)
	pool := pgtest.Pool(t, pgtest.NewDB(t))
	up, _ := splitGoose(t, "goose/00001_idempotency_keys.sql")
	ctx := context.Background()
	if _, err := pool.Exec(ctx, up, pgx.QueryExecModeSimpleProtocol); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := pool.Exec(ctx, idemgen.Schema, pgx.QueryExecModeSimpleProtocol); err != nil {
			t.Fatalf("schema.sql on a v1 table: %v", err)
		}
	}
	same(t, "00001 then schema.sql", want, catalog(t, pool))
}

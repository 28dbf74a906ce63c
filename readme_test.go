package idemgen

import (
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"regexp"
	"strings"
	"testing"
)

// quoteMarker precedes every Go block of README.md: the block is the named declarations
// of FILE, verbatim (with their doc comments), one blank line apart. FILE is a _test.go
// file whose Example functions `go vet` and `go test` compile, so the README's Go compiles.
//
// Names: "imports" (the import block), "go:generate" (the file's //go:generate lines),
// a function, a type, or TYPE.METHOD.
var quoteMarker = regexp.MustCompile(`^<!-- quoted from ([^:]+): (.+) -->$`)

// -update rewrites the quoted blocks of README.md from their files.
var update = flag.Bool("update", false, "rewrite README.md's quoted Go blocks")

func TestREADMEGoIsQuotedFromCompiledFiles(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(readme), "\n")
	quoted, referenced := map[string]bool{}, map[string]int{}
	var (
		out      []string
		quotes   int
		want     string // the expected next Go block; "" when no marker precedes it
		wantFrom string
	)
	for i := 0; i < len(lines); i++ {
		text := lines[i]
		out = append(out, text)
		if m := quoteMarker.FindStringSubmatch(text); m != nil {
			var refs []string
			want, refs, err = quote(m[1], strings.Split(m[2], ","))
			if err != nil {
				t.Fatalf("README.md:%d: %v", i+1, err)
			}
			wantFrom = m[1]
			for _, name := range strings.Split(m[2], ",") {
				quoted[m[1]+" "+strings.TrimSpace(name)] = true
			}
			for _, r := range refs {
				referenced[m[1]+" "+r] = i + 1
			}
			continue
		}
		if strings.TrimSpace(text) != "```go" {
			continue
		}
		start := i + 1
		var block []string
		for i++; i < len(lines) && lines[i] != "```"; i++ {
			block = append(block, lines[i])
		}
		got := strings.Join(block, "\n")
		switch {
		case want == "":
			t.Errorf("README.md:%d: a Go block without a <!-- quoted from FILE: NAMES --> line above it", start)
			out = append(out, block...)
		case got != want && !*update:
			t.Errorf("README.md:%d: the block differs from %s (go test . -update rewrites it); want:\n%s", start, wantFrom, want)
			out = append(out, block...)
		default:
			out = append(out, want)
		}
		out = append(out, "```")
		quotes++
		want = ""
	}
	if quotes == 0 {
		t.Fatal("README.md has no quoted Go block")
	}
	// Self-contained: what a quoted declaration refers to in its file is quoted too.
	for ref, line := range referenced {
		if !quoted[ref] {
			file, name, _ := strings.Cut(ref, " ")
			t.Errorf("README.md:%d: the quote refers to %s, which it does not quote from %s", line, name, file)
		}
	}
	if *update {
		if err := os.WriteFile("README.md", []byte(strings.Join(out, "\n")), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// quote returns the source of the named declarations of file, one blank line apart, and
// the file's package-level names that they refer to.
func quote(file string, names []string) (src string, refs []string, err error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return "", nil, err
	}
	fset := token.NewFileSet()
	parsed, err := parser.ParseFile(fset, file, data, parser.ParseComments)
	if err != nil {
		return "", nil, err
	}
	if !strings.HasSuffix(file, "_test.go") && !strings.Contains(strings.Join(names, ","), "go:generate") {
		return "", nil, fmt.Errorf("%s: quote Go from _test.go files (examples), which the tests compile", file)
	}
	var parts []string
	for _, name := range names {
		name = strings.TrimSpace(name)
		if name == "go:generate" {
			var lines []string
			for l := range strings.Lines(string(data)) {
				if strings.HasPrefix(l, "//go:generate ") {
					lines = append(lines, strings.TrimSuffix(l, "\n"))
				}
			}
			parts = append(parts, strings.Join(lines, "\n"))
			continue
		}
		node := findDecl(parsed, name)
		if node == nil {
			return "", nil, fmt.Errorf("%s: no declaration %q", file, name)
		}
		from, to := fset.Position(node.Pos()).Offset, fset.Position(node.End()).Offset
		parts = append(parts, string(data[from:to]))
		if d, ok := node.(docNode); ok {
			node = d.Node
		}
		ast.Inspect(node, func(n ast.Node) bool {
			if id, ok := n.(*ast.Ident); ok && id.Obj != nil && parsed.Scope.Lookup(id.Name) == id.Obj {
				refs = append(refs, id.Name)
			}
			return true
		})
	}
	return strings.Join(parts, "\n\n"), refs, nil
}

// findDecl returns the declaration of name in f, from its doc comment on.
func findDecl(f *ast.File, name string) ast.Node {
	recv, fn, isMethod := strings.Cut(name, ".")
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			want := name
			if isMethod {
				want = fn
			}
			if d.Name.Name != want || (d.Recv != nil) != isMethod {
				continue
			}
			if isMethod && receiverName(d.Recv.List[0].Type) != recv {
				continue
			}
			return withDoc(d, d.Doc)
		case *ast.GenDecl:
			if name == "imports" && d.Tok == token.IMPORT {
				return d
			}
			for _, s := range d.Specs {
				if ts, ok := s.(*ast.TypeSpec); ok && ts.Name.Name == name && !isMethod {
					return withDoc(d, d.Doc)
				}
			}
		}
	}
	return nil
}

func receiverName(e ast.Expr) string {
	if star, ok := e.(*ast.StarExpr); ok {
		e = star.X
	}
	if id, ok := e.(*ast.Ident); ok {
		return id.Name
	}
	return ""
}

// docNode is a declaration whose span starts at its doc comment.
type docNode struct {
	ast.Node
	from token.Pos
}

func (n docNode) Pos() token.Pos { return n.from }

func withDoc(d ast.Node, doc *ast.CommentGroup) ast.Node {
	if doc == nil {
		return d
	}
	return docNode{d, doc.Pos()}
}

package idemgen

import (
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// quoteMarker precedes every Go block of README.md and docs/*.md: the block is the named declarations
// of FILE, verbatim (with their doc comments), one blank line apart. FILE is a _test.go
// file whose Example functions `go vet` and `go test` compile, so the README's Go compiles.
//
// Names: "imports" (the import block), "go:generate" (the file's //go:generate lines),
// a function, a type, or TYPE.METHOD.
var quoteMarker = regexp.MustCompile(`^<!-- quoted from ([^:]+): (.+) -->$`)

// -update rewrites the quoted blocks of README.md and docs/*.md from their files.
var update = flag.Bool("update", false, "rewrite the quoted Go blocks of README.md and docs/*.md")

// markdownPages are README.md and the pages of docs/.
func markdownPages(t *testing.T) []string {
	docs, err := filepath.Glob("docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{"README.md"}, docs...)
}

// TestREADMEGoIsQuotedFromCompiledFiles checks every Go block of README.md and of the
// docs/ pages against the file it quotes (paths in the markers are from the repository's
// root, wherever the page is).
func TestREADMEGoIsQuotedFromCompiledFiles(t *testing.T) {
	for _, page := range markdownPages(t) {
		n := checkQuotes(t, page)
		if page == "README.md" && n == 0 {
			t.Error("README.md has no quoted Go block")
		}
	}
}

// checkQuotes checks the quoted Go blocks of one page (with -update, rewrites them) and
// returns how many it has.
func checkQuotes(t *testing.T, page string) int {
	t.Helper()
	readme, err := os.ReadFile(page)
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
				t.Fatalf("%s:%d: %v", page, i+1, err)
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
			t.Errorf("%s:%d: a Go block without a <!-- quoted from FILE: NAMES --> line above it", page, start)
			out = append(out, block...)
		case got != want && !*update:
			t.Errorf("%s:%d: the block differs from %s (go test . -run TestREADME -update rewrites it); want:\n%s", page, start, wantFrom, want)
			out = append(out, block...)
		default:
			out = append(out, want)
		}
		out = append(out, "```")
		quotes++
		want = ""
	}
	// Self-contained: what a quoted declaration refers to in its file is quoted too.
	for ref, line := range referenced {
		if !quoted[ref] {
			file, name, _ := strings.Cut(ref, " ")
			t.Errorf("%s:%d: the quote refers to %s, which it does not quote from %s", page, line, name, file)
		}
	}
	if *update {
		if err := os.WriteFile(page, []byte(strings.Join(out, "\n")), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return quotes
}

// mdLink is a Markdown link or image: [text](target).
var mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// TestREADMELinksResolve checks that every relative link of README.md and docs/*.md
// names a file or folder of the repository and, when it has a #fragment into a Markdown
// page, a heading of that page.
func TestREADMELinksResolve(t *testing.T) {
	for _, page := range markdownPages(t) {
		data, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		inFence := false
		for i, line := range strings.Split(string(data), "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "```") {
				inFence = !inFence
			}
			if inFence {
				continue
			}
			for _, m := range mdLink.FindAllStringSubmatch(line, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				path, fragment, _ := strings.Cut(target, "#")
				file := page
				if path != "" {
					file = filepath.Join(filepath.Dir(page), path)
					if _, err := os.Stat(file); err != nil {
						t.Errorf("%s:%d: link %s: no such file %s", page, i+1, target, file)
						continue
					}
				}
				if fragment != "" && strings.HasSuffix(file, ".md") && !anchors(t, file)[fragment] {
					t.Errorf("%s:%d: link %s: %s has no heading #%s", page, i+1, target, file, fragment)
				}
			}
		}
	}
}

// anchors returns the GitHub anchors of the headings of a Markdown file.
func anchors(t *testing.T, file string) map[string]bool {
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	inFence := false
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			inFence = !inFence
		}
		if inFence || !strings.HasPrefix(line, "#") {
			continue
		}
		heading := strings.TrimSpace(strings.TrimLeft(line, "#"))
		var b strings.Builder
		for _, r := range strings.ToLower(heading) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				b.WriteRune(r)
			}
		}
		anchor := b.String()
		for n := 1; seen[anchor]; n++ { // GitHub numbers repeated headings
			anchor = fmt.Sprintf("%s-%d", b.String(), n)
		}
		seen[anchor] = true
	}
	return seen
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

// The README is a newcomer's ten-minute read: the rest goes to docs/.
const maxREADMELines = 400

func TestREADMEIsShort(t *testing.T) {
	data, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(data), "\n"); n > maxREADMELines {
		t.Errorf("README.md has %d lines, more than %d: move a subject to a page of docs/ and link it", n, maxREADMELines)
	}
}

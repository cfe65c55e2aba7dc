package mutation

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
)

// The mutator types, as gremlins names them in its JSON output.
const (
	ArithmeticBase       = "ARITHMETIC_BASE"
	ConditionalsBoundary = "CONDITIONALS_BOUNDARY"
	ConditionalsNegation = "CONDITIONALS_NEGATION"
	IncrementDecrement   = "INCREMENT_DECREMENT"
	InvertNegatives      = "INVERT_NEGATIVES"
	InvertLogical        = "INVERT_LOGICAL"
	InvertLoopCtrl       = "INVERT_LOOPCTRL"
)

// replacements is, per mutator type, the token each original token becomes:
// gremlins' own table (internal/engine/mappings.go of v0.6.0) for the types
// podsafe enables. Applying it here rather than letting gremlins rewrite
// files keeps the tree untouched (see Apply).
var replacements = map[string]map[token.Token]token.Token{
	ArithmeticBase:       {token.ADD: token.SUB, token.MUL: token.QUO, token.QUO: token.MUL, token.REM: token.MUL, token.SUB: token.ADD},
	ConditionalsBoundary: {token.GEQ: token.GTR, token.GTR: token.GEQ, token.LEQ: token.LSS, token.LSS: token.LEQ},
	ConditionalsNegation: {token.EQL: token.NEQ, token.GEQ: token.LSS, token.GTR: token.LEQ, token.LEQ: token.GTR,
		token.LSS: token.GEQ, token.NEQ: token.EQL},
	IncrementDecrement: {token.DEC: token.INC, token.INC: token.DEC},
	InvertNegatives:    {token.SUB: token.ADD},
	InvertLogical:      {token.LAND: token.LOR, token.LOR: token.LAND},
	InvertLoopCtrl:     {token.BREAK: token.CONTINUE, token.CONTINUE: token.BREAK},
}

// Mutators are the mutator types a mutation run enumerates: gremlins'
// defaults and the logical and loop-control inversions, which change the
// decisions (&& for ||, break for continue) podsafe's guarantees rest on.
var Mutators = []string{ArithmeticBase, ConditionalsBoundary, ConditionalsNegation, IncrementDecrement, InvertNegatives, InvertLogical, InvertLoopCtrl}

// Mutant is one token change in one file of a package.
type Mutant struct {
	// Package is the package's directory relative to the module root
	// ("cluster/storage").
	Package string
	// File is the file relative to the module root.
	File   string
	Line   int
	Column int
	// Mutator is the mutator type (ConditionalsNegation, …).
	Mutator string
	// CoveredByUnit is gremlins' verdict: the package's unit tests execute
	// the line. It is recorded, not trusted: the unit tests run for every
	// mutant (see executor.prepare).
	CoveredByUnit bool

	// Filled in by Locate:
	Func        string
	Original    string
	Replacement string
	// Source is the original line, trimmed.
	Source string
	// InMarker: the operator is in the function a failpoint marker runs
	// (failpoint.Inject or InjectContext), the bug zoo's planted bugs,
	// which only a failpoint build makes live. Mutation runs use ordinary
	// builds, where such code never runs: the mutant is equivalent.
	InMarker bool
	offset   int
}

// ID names the mutant stably for a given tree.
func (m *Mutant) ID() string {
	return fmt.Sprintf("%s:%d:%d:%s", m.File, m.Line, m.Column, m.Mutator)
}

// Locate reads the mutant's file under root, finds the token at its line
// and column, checks that the mutator applies to it, and fills in Func,
// Original, Replacement and Source.
func (m *Mutant) Locate(root string) error {
	src, err := os.ReadFile(filepath.Join(root, m.File))
	if err != nil {
		return fmt.Errorf("locating mutant %s: %w", m.ID(), err)
	}
	table, ok := replacements[m.Mutator]
	if !ok {
		return fmt.Errorf("mutant %s: mutator %q is not one of %s", m.ID(), m.Mutator, strings.Join(Mutators, ", "))
	}
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, m.File, src, parser.SkipObjectResolution)
	if err != nil {
		return fmt.Errorf("locating mutant %s: %w", m.ID(), err)
	}
	var found token.Token
	var pos token.Pos
	ast.Inspect(f, func(n ast.Node) bool {
		tok, p, ok := nodeToken(n)
		if !ok || found != token.ILLEGAL {
			return true
		}
		at := fset.Position(p)
		if at.Line == m.Line && at.Column == m.Column {
			found, pos = tok, p
		}
		return true
	})
	if found == token.ILLEGAL {
		return fmt.Errorf("mutant %s: no operator at %s:%d:%d (the file changed since the mutants were listed?)", m.ID(), m.File, m.Line, m.Column)
	}
	to, ok := table[found]
	if !ok {
		return fmt.Errorf("mutant %s: %s does not change %q", m.ID(), m.Mutator, found)
	}
	m.Original, m.Replacement = found.String(), to.String()
	m.offset = fset.Position(pos).Offset
	m.Func = enclosingFunc(f, pos)
	m.InMarker = inFailpointMarker(f, pos)
	lines := bytes.Split(src, []byte("\n"))
	if m.Line-1 < len(lines) {
		m.Source = strings.TrimSpace(string(lines[m.Line-1]))
	}
	return nil
}

// inFailpointMarker reports whether pos lies in a function literal passed
// to a failpoint marker (failpoint.Inject, failpoint.InjectContext, …).
func inFailpointMarker(f *ast.File, pos token.Pos) bool {
	in := false
	ast.Inspect(f, func(n ast.Node) bool {
		if in {
			return false
		}
		call, ok := n.(*ast.CallExpr)
		if !ok || pos < call.Pos() || pos >= call.End() {
			return n == nil || (pos >= n.Pos() && pos < n.End())
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok {
			return true // a call of a plain function or a function value
		}
		if x, isIdent := sel.X.(*ast.Ident); !isIdent || x.Name != "failpoint" || !strings.HasPrefix(sel.Sel.Name, "Inject") {
			return true
		}
		for _, a := range call.Args {
			if lit, ok := a.(*ast.FuncLit); ok && pos >= lit.Pos() && pos < lit.End() {
				in = true
			}
		}
		return true
	})
	return in
}

// nodeToken is the operator gremlins would mutate in n, as its NewTokenNode
// picks it.
func nodeToken(n ast.Node) (token.Token, token.Pos, bool) {
	switch n := n.(type) {
	case *ast.AssignStmt:
		return n.Tok, n.TokPos, true
	case *ast.BinaryExpr:
		return n.Op, n.OpPos, true
	case *ast.BranchStmt:
		return n.Tok, n.TokPos, true
	case *ast.IncDecStmt:
		return n.Tok, n.TokPos, true
	case *ast.UnaryExpr:
		return n.Op, n.OpPos, true
	}
	return token.ILLEGAL, token.NoPos, false
}

// enclosingFunc names the function declaration holding pos: "Type.Method"
// for a method, the name for a function, "" at package level.
func enclosingFunc(f *ast.File, pos token.Pos) string {
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok || pos < fd.Pos() || pos >= fd.End() {
			continue
		}
		if fd.Recv == nil || len(fd.Recv.List) == 0 {
			return fd.Name.Name
		}
		return recvName(fd.Recv.List[0].Type) + "." + fd.Name.Name
	}
	return ""
}

func recvName(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.StarExpr:
		return recvName(e.X)
	case *ast.IndexExpr:
		return recvName(e.X)
	case *ast.IndexListExpr:
		return recvName(e.X)
	case *ast.Ident:
		return e.Name
	}
	return "?"
}

// Apply returns the mutated source of the mutant's file: the original with
// the one token replaced, byte for byte otherwise. Locate must have run.
func (m *Mutant) Apply(root string) ([]byte, error) {
	if m.Original == "" {
		return nil, fmt.Errorf("mutant %s: not located", m.ID())
	}
	src, err := os.ReadFile(filepath.Join(root, m.File))
	if err != nil {
		return nil, fmt.Errorf("applying mutant %s: %w", m.ID(), err)
	}
	end := m.offset + len(m.Original)
	if end > len(src) || string(src[m.offset:end]) != m.Original {
		return nil, fmt.Errorf("mutant %s: %q is no longer at %s:%d:%d", m.ID(), m.Original, m.File, m.Line, m.Column)
	}
	out := make([]byte, 0, len(src)+len(m.Replacement))
	out = append(out, src[:m.offset]...)
	out = append(out, m.Replacement...)
	return append(out, src[end:]...), nil
}

// WriteOverlay writes the mutated file into dir and the go command's
// -overlay file that puts it in place of the original, and returns the
// overlay file's path. The tree is never written.
func (m *Mutant) WriteOverlay(root, dir string) (string, error) {
	mutated, err := m.Apply(root)
	if err != nil {
		return "", err
	}
	absRoot, err := filepath.Abs(root)
	if err != nil {
		return "", fmt.Errorf("overlay of %s: %w", m.ID(), err)
	}
	absDir, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("overlay of %s: %w", m.ID(), err)
	}
	file := filepath.Join(absDir, filepath.Base(m.File))
	if err := os.WriteFile(file, mutated, 0o644); err != nil {
		return "", fmt.Errorf("overlay of %s: %w", m.ID(), err)
	}
	b, err := json.Marshal(map[string]map[string]string{"Replace": {filepath.Join(absRoot, m.File): file}})
	if err != nil {
		return "", fmt.Errorf("overlay of %s: %w", m.ID(), err)
	}
	ov := filepath.Join(absDir, "overlay.json")
	if err := os.WriteFile(ov, b, 0o644); err != nil {
		return "", fmt.Errorf("overlay of %s: %w", m.ID(), err)
	}
	return ov, nil
}

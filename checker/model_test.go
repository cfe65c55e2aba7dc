package checker

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/podsafe/podsafe/history"
)

// ops builds a history from lines "PROCESS INVOKE RETURN F KEY ARGS... -> RESULT".
// RETURN "inf" (or a RESULT of "?") means an unknown outcome. RESULT is "ok",
// "?", an error class or "fail:TEXT"; for a get it is the value read,
// "absent", "?" or an error class. ARGS are the value for create, expect and
// value for cas, and an optional expect for delete. IDs count from 1.
func ops(t testing.TB, lines ...string) []history.Op {
	t.Helper()
	var out []history.Op
	for i, line := range lines {
		lhs, result, ok := strings.Cut(line, " -> ")
		f := strings.Fields(lhs)
		if !ok || len(f) < 5 {
			t.Fatalf("bad op line %q", line)
		}
		p, err1 := strconv.Atoi(f[0])
		inv, err2 := strconv.ParseInt(f[1], 10, 64)
		if err1 != nil || err2 != nil {
			t.Fatalf("bad op line %q", line)
		}
		op := history.Op{ID: uint64(i + 1), Process: p, Func: f[3], Key: f[4], Invoke: inv}
		args := f[5:]
		switch op.Func {
		case FuncCreate:
			op.Value = args[0]
		case FuncCAS:
			op.Expect, op.Value = args[0], args[1]
		case FuncDelete:
			if len(args) > 0 {
				op.Expect = args[0]
			}
		}
		switch {
		case result == "?" || f[2] == "inf":
			op.Status = history.StatusUnknown
		case result == "ok":
			op.Status = history.StatusOK
		case strings.HasPrefix(result, "fail:"):
			op.Status, op.Error = history.StatusFail, strings.TrimPrefix(result, "fail:")
		case result == ErrorExists || result == ErrorConflict || result == ErrorNotFound || result == ErrorUnavailable:
			op.Status, op.Error = history.StatusFail, result
		case op.Func == FuncGet && result == "absent":
			op.Status = history.StatusOK
		case op.Func == FuncGet:
			op.Status, op.Output, op.Found = history.StatusOK, result, true
		default:
			t.Fatalf("bad result in op line %q", line)
		}
		if op.Status == history.StatusUnknown {
			op.Return = math.MaxInt64
		} else if op.Return, err1 = strconv.ParseInt(f[2], 10, 64); err1 != nil {
			t.Fatalf("bad return time in op line %q", line)
		}
		out = append(out, op)
	}
	return out
}

func TestClassify(t *testing.T) {
	tests := []struct {
		f      string
		expect string
		status history.Status
		err    string
		want   Outcome
	}{
		{FuncGet, "", history.StatusOK, "", OutcomeOK},
		{FuncCAS, "v", history.StatusOK, "conflict", OutcomeOK},
		{FuncCreate, "", history.StatusFail, "exists", OutcomeExists},
		{FuncCAS, "v", history.StatusFail, "conflict: the object has been modified", OutcomeConflict},
		{FuncCAS, "v", history.StatusFail, "notfound", OutcomeNotFound},
		{FuncDelete, "", history.StatusFail, "notfound", OutcomeNotFound},
		{FuncGet, "", history.StatusFail, "notfound", OutcomeNotFound},
		{FuncDelete, "v", history.StatusFail, "conflict", OutcomeConflict},
		{FuncCreate, "", history.StatusFail, "unavailable: no leader", OutcomeNoEffect},
		{FuncCAS, "v", history.StatusFail, "Conflict", OutcomeUnknown},
		{FuncCAS, "v", history.StatusFail, "internal error", OutcomeUnknown},
		{FuncCAS, "v", history.StatusFail, "", OutcomeUnknown},
		{FuncCAS, "v", history.StatusUnknown, "notfound", OutcomeUnknown},
		{FuncCAS, "v", "", "", OutcomeUnknown},
		// A class that cannot answer the op says nothing certain: unknown.
		{FuncCreate, "", history.StatusFail, "conflict", OutcomeUnknown},
		{FuncCreate, "", history.StatusFail, "notfound", OutcomeUnknown},
		{FuncDelete, "", history.StatusFail, "conflict", OutcomeUnknown},
		{FuncCAS, "v", history.StatusFail, "exists", OutcomeUnknown},
		{FuncGet, "", history.StatusFail, "exists", OutcomeUnknown},
	}
	for _, tt := range tests {
		op := history.Op{Func: tt.f, Expect: tt.expect, Status: tt.status, Error: tt.err}
		if got := Classify(op); got != tt.want {
			t.Errorf("Classify(%s expect %q, %s, %q) = %v, want %v", tt.f, tt.expect, tt.status, tt.err, got, tt.want)
		}
	}
}

func TestStep(t *testing.T) {
	absent := RegisterState{}
	a := RegisterState{Present: true, Value: "a"}
	b := RegisterState{Present: true, Value: "b"}
	empty := RegisterState{Present: true, Value: ""}
	get := RegisterInput{Func: FuncGet, Key: "k"}
	create := RegisterInput{Func: FuncCreate, Key: "k", Value: "a"}
	cas := RegisterInput{Func: FuncCAS, Key: "k", Expect: "a", Value: "b"}
	casEmpty := RegisterInput{Func: FuncCAS, Key: "k", Expect: "", Value: "b"}
	del := RegisterInput{Func: FuncDelete, Key: "k"}
	delIfA := RegisterInput{Func: FuncDelete, Key: "k", Expect: "a"}
	out := func(o Outcome) RegisterOutput { return RegisterOutput{Outcome: o} }
	read := func(v string) RegisterOutput { return RegisterOutput{Outcome: OutcomeOK, Found: true, Value: v} }
	readAbsent := RegisterOutput{Outcome: OutcomeOK}

	tests := []struct {
		name   string
		state  RegisterState
		in     RegisterInput
		out    RegisterOutput
		wantOK bool
		want   RegisterState
	}{
		{"get reads the value", a, get, read("a"), true, a},
		{"get reads another value", a, get, read("b"), false, a},
		{"get reads a value of an absent key", absent, get, read("a"), false, absent},
		{"get reads absent", absent, get, readAbsent, true, absent},
		{"get reads absent of a present key", a, get, readAbsent, false, a},
		{"get reads a present empty value", empty, get, read(""), true, empty},
		{"get of an empty value is not absent", empty, get, readAbsent, false, empty},
		{"get notfound of an absent key", absent, get, out(OutcomeNotFound), true, absent},
		{"get notfound of a present key", a, get, out(OutcomeNotFound), false, a},
		{"get unknown tells nothing", a, get, out(OutcomeUnknown), true, a},
		{"get unavailable tells nothing", absent, get, out(OutcomeNoEffect), true, absent},

		{"create ok on absent", absent, create, out(OutcomeOK), true, a},
		{"create ok on present", b, create, out(OutcomeOK), false, a},
		{"create exists on present", b, create, out(OutcomeExists), true, b},
		{"create exists on absent", absent, create, out(OutcomeExists), false, absent},
		{"create unknown on absent takes effect", absent, create, out(OutcomeUnknown), true, a},
		{"create unknown on present is a no-op", b, create, out(OutcomeUnknown), true, b},
		{"create unavailable never takes effect", absent, create, out(OutcomeNoEffect), true, absent},
		{"create with a foreign class is unknown", absent, create, out(OutcomeConflict), true, a},

		{"cas ok on match", a, cas, out(OutcomeOK), true, b},
		{"cas ok on mismatch", b, cas, out(OutcomeOK), false, b},
		{"cas ok on absent", absent, cas, out(OutcomeOK), false, b},
		{"cas conflict on mismatch", b, cas, out(OutcomeConflict), true, b},
		{"cas conflict on match", a, cas, out(OutcomeConflict), false, a},
		{"cas notfound on absent", absent, cas, out(OutcomeNotFound), true, absent},
		{"cas notfound on match", a, cas, out(OutcomeNotFound), false, a},
		{"cas conflict on absent is a mismatch", absent, cas, out(OutcomeConflict), true, absent},
		{"cas unknown on match takes effect", a, cas, out(OutcomeUnknown), true, b},
		{"cas unknown on mismatch is a no-op", b, cas, out(OutcomeUnknown), true, b},
		{"cas unknown on absent is a no-op", absent, cas, out(OutcomeUnknown), true, absent},
		{"cas unavailable never takes effect", a, cas, out(OutcomeNoEffect), true, a},
		{"cas with a foreign class is unknown", a, cas, out(OutcomeExists), true, b},
		{"cas expecting empty matches a present empty value", empty, casEmpty, out(OutcomeOK), true, b},
		{"cas expecting empty does not match absent", absent, casEmpty, out(OutcomeOK), false, b},

		{"delete ok on present", a, del, out(OutcomeOK), true, absent},
		{"delete ok on absent", absent, del, out(OutcomeOK), false, absent},
		{"delete notfound on absent", absent, del, out(OutcomeNotFound), true, absent},
		{"delete notfound on present", a, del, out(OutcomeNotFound), false, a},
		{"delete unknown on present takes effect", a, del, out(OutcomeUnknown), true, absent},
		{"delete unknown on absent is a no-op", absent, del, out(OutcomeUnknown), true, absent},
		{"delete unavailable never takes effect", a, del, out(OutcomeNoEffect), true, a},
		{"unconditional delete conflict is unknown", a, del, out(OutcomeConflict), true, absent},
		{"conditional delete ok on match", a, delIfA, out(OutcomeOK), true, absent},
		{"conditional delete ok on mismatch", b, delIfA, out(OutcomeOK), false, absent},
		{"conditional delete conflict on mismatch", b, delIfA, out(OutcomeConflict), true, b},
		{"conditional delete conflict on match", a, delIfA, out(OutcomeConflict), false, a},
		{"conditional delete notfound on present", b, delIfA, out(OutcomeNotFound), false, b},
		{"conditional delete unknown on mismatch is a no-op", b, delIfA, out(OutcomeUnknown), true, b},
		{"conditional delete unknown on match takes effect", a, delIfA, out(OutcomeUnknown), true, absent},

		{"a foreign operation is unconstrained", a, RegisterInput{Func: "scale", Key: "k"}, out(OutcomeOK), true, a},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ok, got := Step(tt.state, tt.in, tt.out)
			if ok != tt.wantOK {
				t.Errorf("Step(%s, %s) legal = %v, want %v", describeState(tt.state), describeOp(tt.in, tt.out), ok, tt.wantOK)
			}
			// The next state only matters for legal steps.
			if ok {
				if diff := cmp.Diff(tt.want, got); diff != "" {
					t.Errorf("Step(%s, %s) state (-want +got):\n%s", describeState(tt.state), describeOp(tt.in, tt.out), diff)
				}
			}
			// The porcupine model agrees with Step.
			mok, mstate := RegisterModel.Step(tt.state, tt.in, tt.out)
			if mok != ok || (ok && mstate.(RegisterState) != got) {
				t.Errorf("RegisterModel.Step disagrees with Step")
			}
		})
	}
}

func TestModelHashRespectsEqual(t *testing.T) {
	states := []RegisterState{{}, {Present: true}, {Present: true, Value: "a"}, {Present: true, Value: "b"}}
	for _, x := range states {
		for _, y := range states {
			if RegisterModel.Equal(x, y) && RegisterModel.Hash(x) != RegisterModel.Hash(y) {
				t.Errorf("equal states %v and %v hash differently", x, y)
			}
		}
	}
	if RegisterModel.Hash(RegisterState{}) == RegisterModel.Hash(RegisterState{Present: true}) {
		t.Errorf("absent and present-empty share a hash; allowed, but avoidable")
	}
}

func TestDescribe(t *testing.T) {
	tests := []struct {
		line string
		want string
	}{
		{"0 1 2 get k -> a", `get(k) → "a"`},
		{"0 1 2 get k -> absent", `get(k) → absent`},
		{"0 1 2 get k -> ?", `get(k) → unknown`},
		{"0 1 2 create k a -> exists", `create(k, "a") → exists`},
		{"0 1 2 cas k a b -> conflict", `cas(k, "a"→"b") → conflict`},
		{"0 1 2 delete k a -> ok", `delete(k, if "a") → ok`},
		{"0 1 2 delete k -> unavailable", `delete(k) → unavailable`},
	}
	for _, tt := range tests {
		in, out := registerIO(ops(t, tt.line)[0])
		if got := RegisterModel.DescribeOperation(in, out); got != tt.want {
			t.Errorf("DescribeOperation(%s) = %s, want %s", tt.line, got, tt.want)
		}
	}
	if got := RegisterModel.DescribeOperationMetadata(opMeta{id: 7, err: "conflict"}); got != "op 7: conflict" {
		t.Errorf("DescribeOperationMetadata = %q", got)
	}
	if got := fmt.Sprint(RegisterModel.DescribeState(RegisterState{Present: true, Value: "x"})); got != `"x"` {
		t.Errorf("DescribeState = %s", got)
	}
}

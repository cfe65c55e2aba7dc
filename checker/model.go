package checker

import (
	"fmt"
	"hash/fnv"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/anishathalye/porcupine"

	"github.com/podsafe/podsafe/history"
)

// The operations of the register workload, as history.Op.Func spells them.
const (
	FuncCreate = "create"
	FuncGet    = "get"
	FuncCAS    = "cas"
	FuncDelete = "delete"
)

// The error classes a register operation that failed (history.StatusFail)
// must carry in history.Op.Error, alone or as a prefix followed by ": " and
// free text ("conflict: the object has been modified"). A failed operation
// whose Error is none of these, or that does not fit its operation (a create
// with "conflict"), is treated as unknown: it may or may not have taken
// effect.
const (
	// ErrorExists: a create found the key present.
	ErrorExists = "exists"
	// ErrorConflict: a cas, or a delete with Expect, found a value other
	// than Expect.
	ErrorConflict = "conflict"
	// ErrorNotFound: a get, cas or delete found the key absent. For a cas
	// it only tells that the value was not Expect.
	ErrorNotFound = "notfound"
	// ErrorUnavailable: the operation certainly did not take effect and
	// tells nothing about the state (a 503, no leader, refused before
	// sending).
	ErrorUnavailable = "unavailable"
)

// Outcome is what the completion of a register operation tells the model.
type Outcome uint8

// The outcomes, from history.Op.Status and the error class in Op.Error.
const (
	// OutcomeUnknown: the operation may or may not have taken effect.
	OutcomeUnknown Outcome = iota
	// OutcomeOK: the operation took effect (or, for a get, read Output).
	OutcomeOK
	// OutcomeExists, OutcomeConflict and OutcomeNotFound are definite
	// failures that tell something about the state (see the Error* classes).
	OutcomeExists
	OutcomeConflict
	OutcomeNotFound
	// OutcomeNoEffect: a definite failure that tells nothing about the state.
	OutcomeNoEffect
)

var outcomeNames = [...]string{"unknown", "ok", ErrorExists, ErrorConflict, ErrorNotFound, ErrorUnavailable}

// String names the outcome as the error class it came from.
func (o Outcome) String() string {
	if int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return "Outcome(" + strconv.Itoa(int(o)) + ")"
}

// Classify maps an operation's status and error to an Outcome.
func Classify(op history.Op) Outcome {
	switch op.Status {
	case history.StatusOK:
		return OutcomeOK
	case history.StatusFail:
		class, _, _ := strings.Cut(op.Error, ":")
		switch o := failOutcome(strings.TrimSpace(class)); {
		case o == OutcomeNoEffect:
			return o
		case o != OutcomeUnknown && fits(op, o):
			return o
		}
	}
	return OutcomeUnknown
}

func failOutcome(class string) Outcome {
	switch class {
	case ErrorExists:
		return OutcomeExists
	case ErrorConflict:
		return OutcomeConflict
	case ErrorNotFound:
		return OutcomeNotFound
	case ErrorUnavailable:
		return OutcomeNoEffect
	}
	return OutcomeUnknown
}

// fits reports whether a failure class can answer op at all. One that cannot
// (a create refused with "conflict", an unconditional delete with "conflict"
// after the server gave up retrying) says nothing certain about the state, so
// the op is treated as unknown rather than as a definite failure.
func fits(op history.Op, o Outcome) bool {
	switch op.Func {
	case FuncCreate:
		return o == OutcomeExists
	case FuncCAS:
		return o == OutcomeConflict || o == OutcomeNotFound
	case FuncDelete:
		return o == OutcomeNotFound || (o == OutcomeConflict && op.Expect != "")
	case FuncGet:
		return o == OutcomeNotFound
	}
	return false
}

// RegisterInput is the porcupine input of a register operation. For a cas,
// Expect is always compared (a present "" is a value); for a delete, an empty
// Expect makes it unconditional.
type RegisterInput struct {
	Func   string
	Key    string
	Value  string
	Expect string
}

// RegisterOutput is the porcupine output of a register operation: its
// outcome and, for a get, what it read.
type RegisterOutput struct {
	Outcome Outcome
	Found   bool
	Value   string
}

// RegisterState is the state of one key: absent, or present with a value.
type RegisterState struct {
	Present bool
	Value   string
}

// opMeta rides along in porcupine.Operation.Metadata for the visualization
// and the evidence.
type opMeta struct {
	index int // into the operations handed to the checker
	id    uint64
	err   string
}

// RegisterModel is the porcupine model of a per-key register, partitioned by
// key. Its state is a RegisterState, inputs are RegisterInput and outputs
// RegisterOutput. It is a pure value; do not modify it.
//
// An operation of unknown outcome is always a legal step: it applies its
// write when the precondition holds and changes nothing otherwise. That is
// sound and complete: porcupine may linearize it where it took effect, or
// last, after every other operation, where it is a harmless no-op because its
// return time is infinite.
var RegisterModel = porcupine.Model{
	Partition: partitionByKey,
	Init:      func() any { return RegisterState{} },
	Step: func(state, input, output any) (bool, any) {
		return Step(state.(RegisterState), input.(RegisterInput), output.(RegisterOutput))
	},
	Equal: func(a, b any) bool { return a.(RegisterState) == b.(RegisterState) },
	Hash:  func(state any) uint64 { return registerHash(state.(RegisterState)) },
	DescribeOperation: func(input, output any) string {
		return describeOp(input.(RegisterInput), output.(RegisterOutput))
	},
	DescribeState: func(state any) string { return describeState(state.(RegisterState)) },
	DescribeOperationMetadata: func(meta any) string {
		m, ok := meta.(opMeta)
		if !ok {
			return ""
		}
		if m.err == "" {
			return fmt.Sprintf("op %d", m.id)
		}
		return fmt.Sprintf("op %d: %s", m.id, m.err)
	},
}

// registerHash hashes a register state (for porcupine's cache of states).
func registerHash(s RegisterState) uint64 {
	if !s.Present {
		return 0
	}
	h := fnv.New64a()
	h.Write([]byte(s.Value))
	return h.Sum64() | 1
}

// registerPtrModel is RegisterModel over the register checker's own
// porcupine operations, whose inputs, outputs and metadata are pointers
// (*RegisterInput, *RegisterOutput, *opMeta) into arrays allocated once for
// all the operations, rather than values boxed one by one.
var registerPtrModel = porcupine.Model{
	Partition: partitionByKey,
	Init:      RegisterModel.Init,
	Step: func(state, input, output any) (bool, any) {
		return Step(state.(RegisterState), *input.(*RegisterInput), *output.(*RegisterOutput))
	},
	Equal: RegisterModel.Equal,
	Hash:  RegisterModel.Hash,
	DescribeOperation: func(input, output any) string {
		return describeOp(*input.(*RegisterInput), *output.(*RegisterOutput))
	},
	DescribeState: RegisterModel.DescribeState,
	DescribeOperationMetadata: func(meta any) string {
		if m, ok := meta.(*opMeta); ok {
			return RegisterModel.DescribeOperationMetadata(*m)
		}
		return ""
	},
}

// opInput, opOutput and opMetadata read an operation of the register
// checker (see registerPtrModel).
func opInput(p porcupine.Operation) RegisterInput   { return *p.Input.(*RegisterInput) }
func opOutput(p porcupine.Operation) RegisterOutput { return *p.Output.(*RegisterOutput) }
func opMetadata(p porcupine.Operation) opMeta       { return *p.Metadata.(*opMeta) }

// registerKey is the key of a porcupine input of a register operation, a
// RegisterInput or a pointer to one.
func registerKey(input any) string {
	if in, ok := input.(*RegisterInput); ok {
		return in.Key
	}
	return input.(RegisterInput).Key
}

// Step is the register's sequential specification: whether the operation
// may take effect in state s, and the state after it. It is pure.
func Step(s RegisterState, in RegisterInput, out RegisterOutput) (bool, RegisterState) {
	switch in.Func {
	case FuncGet:
		switch out.Outcome {
		case OutcomeOK:
			if !out.Found {
				return !s.Present, s
			}
			return s.Present && s.Value == out.Value, s
		case OutcomeNotFound:
			return !s.Present, s
		}
		return true, s // a read that returned nothing tells nothing

	case FuncCreate:
		switch out.Outcome {
		case OutcomeOK:
			return !s.Present, RegisterState{Present: true, Value: in.Value}
		case OutcomeExists:
			return s.Present, s
		case OutcomeNoEffect:
			return true, s
		}
		if !s.Present {
			return true, RegisterState{Present: true, Value: in.Value}
		}
		return true, s

	case FuncCAS:
		match := s.Present && s.Value == in.Expect
		switch out.Outcome {
		case OutcomeOK:
			return match, RegisterState{Present: true, Value: in.Value}
		case OutcomeConflict, OutcomeNotFound:
			return !match, s
		case OutcomeNoEffect:
			return true, s
		}
		if match {
			return true, RegisterState{Present: true, Value: in.Value}
		}
		return true, s

	case FuncDelete:
		conditional := in.Expect != ""
		match := s.Present && (!conditional || s.Value == in.Expect)
		switch {
		case out.Outcome == OutcomeOK:
			return match, RegisterState{}
		case out.Outcome == OutcomeNotFound:
			return !s.Present, s
		case out.Outcome == OutcomeConflict && conditional:
			return !match, s
		case out.Outcome == OutcomeNoEffect:
			return true, s
		}
		if match {
			return true, RegisterState{}
		}
		return true, s
	}
	return true, s // not a register operation: no constraint
}

// informative reports whether an operation can constrain or change the
// state. Those that cannot are accepted by Step in every state without
// change, so dropping them leaves the verdict unchanged and spares porcupine
// their (often infinite) intervals.
func informative(in RegisterInput, out RegisterOutput) bool {
	switch in.Func {
	case FuncGet:
		return out.Outcome == OutcomeOK || out.Outcome == OutcomeNotFound
	case FuncCreate, FuncCAS, FuncDelete:
		return out.Outcome != OutcomeNoEffect
	}
	return false
}

// IsRegisterOp reports whether op belongs to the register workload.
func IsRegisterOp(op history.Op) bool {
	switch op.Func {
	case FuncCreate, FuncGet, FuncCAS, FuncDelete:
		return true
	}
	return false
}

// registerIO converts a history operation to porcupine's input and output.
func registerIO(op history.Op) (RegisterInput, RegisterOutput) {
	in := RegisterInput{Func: op.Func, Key: op.Key, Value: op.Value, Expect: op.Expect}
	out := RegisterOutput{Outcome: Classify(op), Found: op.Found, Value: op.Output}
	return in, out
}

// partitionByKey splits a history into one partition per key, in key order
// so that partition indices are reproducible; each keeps the history's
// order. The partitions share one array.
func partitionByKey(ops []porcupine.Operation) [][]porcupine.Operation {
	idx := partitionIndices(ops)
	all := make([]porcupine.Operation, len(ops))
	parts := make([][]porcupine.Operation, len(idx))
	at := 0
	for p, part := range idx {
		for k, i := range part {
			all[at+k] = ops[i]
		}
		parts[p] = all[at : at+len(part) : at+len(part)]
		at += len(part)
	}
	return parts
}

// partitionIndices is partitionByKey by index into ops.
func partitionIndices(ops []porcupine.Operation) [][]int32 {
	index := map[string]int{}
	var keys []string
	var counts []int
	of := make([]int32, len(ops))
	for i, op := range ops {
		k := registerKey(op.Input)
		j, ok := index[k]
		if !ok {
			j = len(keys)
			index[k] = j
			keys = append(keys, k)
			counts = append(counts, 0)
		}
		counts[j]++
		of[i] = int32(j)
	}
	order := make([]int, len(keys))
	for i := range order {
		order[i] = i
	}
	sort.Slice(order, func(a, b int) bool { return keys[order[a]] < keys[order[b]] })
	start := make([]int, len(keys))
	at := 0
	for _, j := range order {
		start[j] = at
		at += counts[j]
	}
	all := make([]int32, len(ops))
	next := slices.Clone(start)
	for i := range ops {
		j := of[i]
		all[next[j]] = int32(i)
		next[j]++
	}
	parts := make([][]int32, len(keys))
	for p, j := range order {
		parts[p] = all[start[j] : start[j]+counts[j] : start[j]+counts[j]]
	}
	return parts
}

func describeState(s RegisterState) string {
	if !s.Present {
		return "absent"
	}
	return strconv.Quote(s.Value)
}

func describeOp(in RegisterInput, out RegisterOutput) string {
	var call string
	switch in.Func {
	case FuncCreate:
		call = fmt.Sprintf("create(%s, %q)", in.Key, in.Value)
	case FuncCAS:
		call = fmt.Sprintf("cas(%s, %q→%q)", in.Key, in.Expect, in.Value)
	case FuncDelete:
		if in.Expect != "" {
			call = fmt.Sprintf("delete(%s, if %q)", in.Key, in.Expect)
		} else {
			call = fmt.Sprintf("delete(%s)", in.Key)
		}
	default:
		call = fmt.Sprintf("%s(%s)", in.Func, in.Key)
	}
	result := out.Outcome.String()
	if in.Func == FuncGet && out.Outcome == OutcomeOK {
		result = describeState(RegisterState{Present: out.Found, Value: out.Value})
	}
	return call + " → " + result
}

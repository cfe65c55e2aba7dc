package history

import (
	"bytes"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// A recorded history, encoded and read again, is the same history, its
// closing record included.
func TestEncodeRoundTrip(t *testing.T) {
	r := mustCreate(t)
	op := &Op{Process: 1, Func: "create", Key: "k", Value: "v"}
	r.Invoke(op)
	op.Status = StatusOK
	r.Complete(op)
	r.Invoke(&Op{Process: 2, Func: "get", Key: "k"})
	r.Log("note", map[string]string{"a": "b"})
	if err := r.CloseWith(End{Error: "boom"}); err != nil {
		t.Fatal(err)
	}
	h := mustLoad(t, r.Path())
	b, err := Encode(h)
	if err != nil {
		t.Fatal(err)
	}
	again, err := Read(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("reading the encoded history: %v\n%s", err, b)
	}
	if diff := cmp.Diff(h, again, ignoreTimes); diff != "" {
		t.Errorf("encoded and read again (-recorded +again):\n%s", diff)
	}
	if !again.Complete || again.Closing.Error != "boom" || again.End != h.End {
		t.Errorf("complete %v, closing %+v, end %d (want %d)", again.Complete, again.Closing, again.End, h.End)
	}
}

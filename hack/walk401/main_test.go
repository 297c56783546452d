package main

import (
	"os"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// A walk from RoundTrip (a.go) into b.go, back to a helper of a.go (a
// return in the sequence), into c.go which calls b.go, then a.go again (a
// cycle on the stack), to the second send.
func TestWalkCountsReturnsAndCycles(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("package vault\n\n"+body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("a.go", "func (t *roundTripper) RoundTrip(r int) {}\nfunc helper() {}\n")
	write("b.go", "func (p *pooled) RoundTrip(r int) {}\nfunc (v *Vault) inB() {}\n")
	write("c.go", "func inC[T any]() {}\n")
	write("a_test.go", "func testOnly() {}\n")
	trace := filepath.Join(dir, "trace.txt")
	lines := []string{
		"> goroutine(1): " + pkg + "(*Vault).inB()", // before the walk
		"> goroutine(7): " + pkg + "(*roundTripper).RoundTrip(0x1)",
		"> goroutine(7): " + pkg + "(*pooled).RoundTrip(0x1)",
		">> goroutine(7): " + pkg + "(*pooled).RoundTrip => ()",
		"> goroutine(9): " + pkg + "helper()", // another goroutine
		"> goroutine(7): " + pkg + "helper()",
		">> goroutine(7): " + pkg + "helper => ()",
		"> goroutine(7): " + pkg + "testOnly()",
		">> goroutine(7): " + pkg + "testOnly => ()",
		"> goroutine(7): " + pkg + "inC[go.shape.int]()",
		"> goroutine(7): " + pkg + "(*Vault).inB.func1()",
		">> goroutine(7): " + pkg + "(*Vault).inB.func1 => ()",
		"> goroutine(7): " + pkg + "helper()", // back into a.go, below c.go
		">> goroutine(7): " + pkg + "helper => ()",
		">> goroutine(7): " + pkg + "inC[go.shape.int] => ()",
		"> goroutine(7): " + pkg + "(*pooled).RoundTrip(0x1)",
		"> goroutine(7): " + pkg + "helper()", // after the replay's send
	}
	var text string
	for _, l := range lines {
		text += l + "\n"
	}
	if err := os.WriteFile(trace, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	files, err := declarations(dir)
	if err != nil {
		t.Fatal(err)
	}
	calls, cycles, err := walk(trace, files)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range calls {
		got = append(got, c.file+" "+c.fn)
	}
	want := []string{
		"a.go (*roundTripper).RoundTrip", "b.go (*pooled).RoundTrip", "a.go helper",
		"c.go inC[go.shape.int]", "b.go (*Vault).inB.func1", "a.go helper", "b.go (*pooled).RoundTrip",
	}
	if len(got) != len(want) {
		t.Fatalf("calls = %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("calls = %q, want %q", got, want)
		}
	}
	if cycles != 1 {
		// helper (a.go) from c.go, with RoundTrip (a.go) below; not
		// inB.func1 (b.go): pooled.RoundTrip's frame had returned.
		t.Errorf("cycles = %d, want 1", cycles)
	}
	if r := returns(calls); r != 4 {
		t.Errorf("returns = %d, want 4 (a.go, b.go, a.go, b.go)", r)
	}
}

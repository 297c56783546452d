// Command walk401 measures the walk of a request that meets a 401: the
// vault's own functions it calls, from the transport's RoundTrip to the
// replay's send, and how often it comes back to a file it had left. Its
// input is a `dlv trace` of the vault's functions during
// TestPostBodyIsReplayedAfter401 (see docs/benchmarks.md, issue 23):
//
//	dlv trace --test ./vault 'github.com/authvault/authvault/vault\.' \
//	    -- -test.run '^TestPostBodyIsReplayedAfter401$' > walk.txt
//	go run ./hack/walk401 walk.txt vault
//
// Only the request's goroutine is followed (the login it waits for runs in
// another). Two counts: in the sequence of calls, each entry into a file the
// walk had left before (a helper called back in the caller's file counts);
// and on the call stack, each call into a file below the caller's own (a
// cycle between files).
package main

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

const pkg = "github.com/authvault/authvault/vault."

var (
	// traced is a line of dlv's trace: a call (">") or a return (">>").
	traced = regexp.MustCompile(`^(>>?) goroutine\((\d+)\): (` + regexp.QuoteMeta(pkg) +
		`(?:\(\*?\w+(?:\[[^\]]*\])?\)\.)?[\w.\-]+(?:\[[^\]]*\])?[\w.\-]*)\(?`)
	// declared is a function's declaration in a source file.
	declared = regexp.MustCompile(`^func (?:\((?:\w+ )?\*?(\w+)(?:\[[^\]]*\])?\) )?(\w+)[\[(]`)
	closure  = regexp.MustCompile(`\.func\d+(\.\d+)*$|-fm$|\[[^\]]*\]`)
	method   = regexp.MustCompile(`^\(\*?(\w+)\)\.(\w+)$|^(\w+)\.(\w+)$`)
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: walk401 TRACE VAULT-DIR")
		os.Exit(2)
	}
	files, err := declarations(os.Args[2])
	if err != nil {
		fmt.Fprintln(os.Stderr, "walk401:", err)
		os.Exit(1)
	}
	calls, cycles, err := walk(os.Args[1], files)
	if err != nil {
		fmt.Fprintln(os.Stderr, "walk401:", err)
		os.Exit(1)
	}
	distinct := map[string]bool{}
	for _, c := range calls {
		distinct[c.file] = true
	}
	fmt.Printf("%d calls, %d files; %d returns to a file left; %d calls into a file below on the stack\n",
		len(calls), len(distinct), returns(calls), cycles)
	for _, c := range calls {
		fmt.Printf("  %-16s %s\n", c.file, c.fn)
	}
}

type call struct{ fn, file string }

// returns counts the calls that enter a file the walk had left before.
func returns(calls []call) int {
	left, n := map[string]bool{}, 0
	for i, c := range calls {
		if i == 0 || c.file == calls[i-1].file {
			continue
		}
		left[calls[i-1].file] = true
		if left[c.file] {
			n++
		}
	}
	return n
}

// declarations maps "Recv.Name" (or ".Name") to the file declaring it.
func declarations(dir string) (map[string]string, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	files := map[string]string{}
	for _, p := range paths {
		if strings.HasSuffix(p, "_test.go") {
			continue
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		for _, line := range strings.Split(string(data), "\n") {
			if m := declared.FindStringSubmatch(line); m != nil {
				files[m[1]+"."+m[2]] = filepath.Base(p)
			}
		}
	}
	return files, nil
}

// fileOf is the file declaring fn, a traced name without the package.
func fileOf(fn string, files map[string]string) string {
	base := closure.ReplaceAllString(fn, "")
	if m := method.FindStringSubmatch(base); m != nil {
		if m[1] != "" {
			return files[m[1]+"."+m[2]]
		}
		return files[m[3]+"."+m[4]]
	}
	return files["."+base]
}

// walk reads the trace from the first RoundTrip of the transport to the
// second send through a pooled transport, on that RoundTrip's goroutine.
func walk(path string, files map[string]string) (calls []call, cycles int, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	var stack []string // files of the frames, "" for a function of a test
	g, sends := "", 0
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		m := traced.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		kind, gid, fn := m[1], m[2], strings.TrimPrefix(m[3], pkg)
		if g == "" && kind == ">" && fn == "(*roundTripper).RoundTrip" {
			g = gid
		}
		if g == "" || gid != g {
			continue
		}
		if kind == ">>" {
			if len(stack) > 0 {
				stack = stack[:len(stack)-1]
			}
			continue
		}
		file := fileOf(fn, files)
		if file != "" {
			var below []string
			for _, s := range stack {
				if s != "" {
					below = append(below, s)
				}
			}
			if n := len(below); n > 0 && file != below[n-1] && slices.Contains(below[:n-1], file) {
				cycles++
			}
			calls = append(calls, call{fn, file})
			if fn == "(*pooled).RoundTrip" {
				if sends++; sends == 2 {
					break
				}
			}
		}
		stack = append(stack, file)
	}
	return calls, cycles, sc.Err()
}

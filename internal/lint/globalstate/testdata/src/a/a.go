// Package a holds every kind of package-level variable the rule allows, and
// every kind it refuses.
package a

import (
	"errors"
	"fmt"
	"os"
	"regexp"
	"sync"
	"sync/atomic"
)

// Allowed declarations.
var (
	ErrGone  = errors.New("gone")
	pattern  = regexp.MustCompile(`^a+$`)
	limit    = 3
	greeting = "hello"
	pair     = struct{ a, b string }{"x", "y"}
	double   = func(n int) int { return 2 * n }
	Table    = map[string]int{"a": 1}
	names    = []string{"a", "b"}
	nested   = map[string][]string{"a": {"b"}}
	filled   = map[string]int{}
)

func init() {
	filled["x"] = 1 // init fills its package's variables
}

// Refused declarations.
var (
	reg      = &registry{}         // want `package-level variable reg holds mutable state: it points to`
	once     sync.Once             // want `package-level variable once holds mutable state: its type sync.Once changes through its methods`
	count    atomic.Int64          // want `package-level variable count holds mutable state: its type sync/atomic.Int64 changes`
	events   = make(chan int, 1)   // want `package-level variable events holds mutable state: it is a channel`
	anything any                   // want `package-level variable anything holds mutable state: its interface type any may hold anything`
	Cache    = map[string]*entry{} // want `package-level variable Cache holds mutable state: its type map\[string\]\*a.entry holds a reference`
)

type registry struct{ items []string }

func (r *registry) Add(s string) { r.items = append(r.items, s) }

type entry struct{ n int }

// Reads are fine.
func Reads() (int, string, bool) {
	n := Table["a"] + limit + double(len(names)) + len(nested["a"])
	for k, v := range Table {
		_, _ = k, v
	}
	_ = pattern.MatchString(greeting)
	_ = errors.Is(nil, ErrGone)
	_ = pair.a
	var copied [2]string
	copy(copied[:], names)
	return n, names[0], ErrGone == nil
}

// Writes are refused.
func Writes(m map[string]int) {
	limit = 4           // want `package-level variable limit: assigned`
	limit++             // want `package-level variable limit: incremented or decremented`
	Table["b"] = 2      // want `package-level variable Table: assigned`
	names[0] = "c"      // want `package-level variable names: assigned`
	nested["a"][0] = "" // want `package-level variable nested: assigned`
	pair.a = "z"        // want `package-level variable pair: assigned`
	delete(Table, "a")  // want `package-level variable Table: delete changes it`
	clear(names)        // want `package-level variable names: clear changes it`
	reg.Add("x")        // want `package-level variable reg: its method Add has a pointer receiver`
	fill(Table)         // want `package-level variable Table: passing it to fill, which may change it`
	p := &limit         // want `package-level variable limit: its address is taken`
	*p = 5
	alias := names // want `package-level variable names: assigning it to another variable shares it`
	alias[1] = "d"
	_ = append(names, "e")   // want `package-level variable names: appending to it may write its backing array`
	for greeting = range m { // want `package-level variable greeting: ranged into`
	}
	once.Do(func() {}) // want `package-level variable once: its method Do has a pointer receiver`
}

// Leaks let a caller change a table.
func Leaks() []string {
	return names // want `package-level variable names: returning it shares it`
}

func fill(m map[string]int) { m["filled"] = 1 }

// Other modules' variables may be read and passed on; only changing them
// directly is this module's doing.
func Library() {
	os.Stdout.WriteString("x")
	fmt.Fprintln(os.Stderr, "y")
	os.Args = nil // want `package-level variable os.Args: assigned`
}

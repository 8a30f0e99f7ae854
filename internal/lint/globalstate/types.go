package globalstate

import (
	"go/types"
	"strings"
)

// safeTypes are types whose values are safe to share: concurrency-safe by
// design, or filled before main runs and only read after. Keyed by
// "package path.Name"; a package path ending in "/" admits every type of
// that package.
var safeTypes = map[string]bool{
	"regexp.Regexp":                                      true,
	"k8s.io/component-base/metrics/":                     true,
	"k8s.io/apimachinery/pkg/runtime.Scheme":             true,
	"k8s.io/apimachinery/pkg/runtime.SchemeBuilder":      true,
	"k8s.io/apimachinery/pkg/util/validation/field.Path": true,
	"embed.FS":                                           true,
	"github.com/google/cel-go/cel.Env":                   true,
	"k8s.io/apiserver/pkg/cel/environment.EnvSet":        true,
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath.Set": true,
}

// schemeWriters are the prefixes of a Scheme's methods that fill it:
// allowed only in the variable's initializer or in init.
var schemeWriters = []string{"Add", "Register", "Set"}

// readOnlyFuncs only read the table they are given. Keyed by "package
// path.Func".
var readOnlyFuncs = map[string]bool{
	"slices.Contains": true, "slices.ContainsFunc": true, "slices.Index": true, "slices.IndexFunc": true,
	"slices.Clone": true, "slices.Equal": true, "slices.Max": true, "slices.Min": true, "slices.Values": true, "slices.All": true,
	"maps.Clone": true, "maps.Keys": true, "maps.Values": true, "maps.Equal": true, "maps.All": true,
	"strings.Join": true, "bytes.Clone": true, "bytes.Equal": true, "bytes.Contains": true,
	"reflect.DeepEqual":                     true,
	"encoding/json.Marshal":                 true,
	"k8s.io/apimachinery/pkg/util/sets.New": true, "k8s.io/apimachinery/pkg/util/sets.List": true,
	"k8s.io/apimachinery/pkg/util/sets.KeySet": true,
}

// readOnlyPackages: every function of these packages only reads its
// arguments (formatting).
var readOnlyPackages = map[string]bool{"fmt": true, "log": true}

// readOnlyMethods are the methods of a table's named type (a sets.Set, a
// named slice) that only read it.
var readOnlyMethods = map[string]bool{
	"Has": true, "HasAll": true, "HasAny": true, "Len": true, "UnsortedList": true, "Clone": true, "Equal": true,
	"IsSuperset": true, "Difference": true, "Intersection": true, "Union": true, "SymmetricDifference": true,
	"String": true, "Contains": true,
}

// typeKey is "package path.Name" of a named type, or "".
func typeKey(t types.Type) (pkg, name string) {
	switch x := types.Unalias(t).(type) {
	case *types.Named:
		if x.Obj().Pkg() == nil {
			return "", x.Obj().Name()
		}
		return x.Obj().Pkg().Path(), x.Obj().Name()
	}
	return "", ""
}

// isSafe reports whether t (or what it points to) is a safe type.
func isSafe(t types.Type) bool {
	if isError(t) {
		return true // a sentinel error is compared, wrapped and returned, never changed
	}
	if p, ok := types.Unalias(t).(*types.Pointer); ok {
		t = p.Elem()
	}
	pkg, name := typeKey(t)
	if pkg == "" {
		return false
	}
	return safeTypes[pkg+"."+name] || safeTypes[pkg+"/"] || strings.HasPrefix(pkg, "k8s.io/component-base/metrics")
}

func isError(t types.Type) bool {
	return types.Identical(t, types.Universe.Lookup("error").Type())
}

// fromSync: the types of sync and sync/atomic change through their
// methods, without an assignment anyone could see.
func fromSync(t types.Type) bool {
	pkg, _ := typeKey(t)
	return pkg == "sync" || pkg == "sync/atomic"
}

// isPlain reports whether t is plain data: copied whole by an assignment,
// with no reference inside.
func isPlain(t types.Type) bool {
	if fromSync(t) {
		return false
	}
	switch u := t.Underlying().(type) {
	case *types.Basic:
		return u.Kind() != types.UnsafePointer
	case *types.Signature:
		return true
	case *types.Array:
		return isPlain(u.Elem())
	case *types.Struct:
		for i := range u.NumFields() {
			if !isPlain(u.Field(i).Type()) {
				return false
			}
		}
		return true
	}
	return false
}

// isTable reports whether t is a read-only table: a map or slice of plain
// data, safe values or tables (or a struct or array holding tables).
func isTable(t types.Type) bool {
	if fromSync(t) {
		return false
	}
	elemOK := func(e types.Type) bool { return isPlain(e) || isTable(e) || isSafe(e) || isError(e) }
	switch u := t.Underlying().(type) {
	case *types.Map:
		return elemOK(u.Key()) && elemOK(u.Elem())
	case *types.Slice:
		return elemOK(u.Elem())
	case *types.Array:
		return elemOK(u.Elem())
	case *types.Struct:
		for i := range u.NumFields() {
			if !elemOK(u.Field(i).Type()) {
				return false
			}
		}
		return true
	}
	return false
}

// refusedType says why a package-level variable of type t is refused, or
// "" when the type is allowed.
func refusedType(t types.Type) string {
	switch {
	case isError(t), isSafe(t), isPlain(t), isTable(t):
		return ""
	case fromSync(t):
		return "its type " + t.String() + " changes through its methods"
	}
	switch t.Underlying().(type) {
	case *types.Pointer:
		return "it points to a " + t.String() + " anyone can change through it"
	case *types.Chan:
		return "it is a channel"
	case *types.Interface:
		return "its interface type " + t.String() + " may hold anything"
	}
	return "its type " + t.String() + " holds a reference to mutable data"
}

// hasReference reports whether copying a value of type t shares something
// a writer could change: a map, slice, pointer or channel, directly or in a
// struct or array.
func hasReference(t types.Type) bool {
	switch u := t.Underlying().(type) {
	case *types.Map, *types.Slice, *types.Pointer, *types.Chan, *types.Interface:
		return true
	case *types.Array:
		return hasReference(u.Elem())
	case *types.Struct:
		for i := range u.NumFields() {
			if hasReference(u.Field(i).Type()) {
				return true
			}
		}
	}
	return false
}

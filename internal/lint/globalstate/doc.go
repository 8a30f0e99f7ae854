// Package globalstate is a go/analysis analyzer for the rule "no
// package-level mutable state" (docs/architecture.md): everything a replica
// owns is reachable from the value that runs it, so two engines, servers or
// tests in one process never share what one of them changes.
//
// A package-level variable is allowed when its type is one of:
//   - error (a sentinel error);
//   - a safe type, concurrency-safe or filled before main runs: a compiled
//     *regexp.Regexp, a metrics collector of k8s.io/component-base/metrics,
//     a *runtime.Scheme or runtime.SchemeBuilder filled in its initializer or
//     init, a *field.Path, an embed.FS, a *cel.Env;
//   - plain data: booleans, numbers, strings, functions, and structs and
//     arrays of plain data;
//   - a read-only table: a map or slice of plain data or of tables.
//
// Pointers to anything else, channels, interfaces, and the types of sync
// and sync/atomic are refused at the declaration.
//
// Every use of a package-level variable, in any package (the analyzer
// reports writes from other packages where they are), outside the declaring
// package's init functions, must be a read: assigning it or anything
// reached through it, ++/--, ranging into it, delete or clear on it, taking
// its address, calling a mutating method on it, passing a table to a
// function that could change it, or letting a table escape into another
// variable, a composite literal or a return value is reported.
//
// Tests and generated files (ast.IsGenerated) are not checked: the typed
// clients of pkg/client keep client-go's package-level scheme and codecs.
//
// Run it with `go vet -vettool=$(go build -o /tmp/globalstate ./hack/globalstate && echo /tmp/globalstate) ./...`;
// internal/layout's TestNoPackageLevelMutableState runs it over the module.
package globalstate

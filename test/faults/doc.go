// Package faults runs a steady load of governed writes over every replica
// of a quotaplane cluster while one fault at a time is injected, records
// what each client saw, and checks the histories against the final stored
// state (docs/reliability.md).
package faults

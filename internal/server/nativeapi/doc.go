// Package nativeapi serves quotaplane's own API groups, quota.miloapis.com
// and resourcemanager.miloapis.com, natively in serve: typed registry
// storage (protobuf in etcd, JSON and protobuf on the wire), strategies,
// table convertors, OpenAPI and field selectors, instead of
// CustomResourceDefinitions (docs/native-storage.md).
//
// Every rule of a kind comes from the CustomResourceDefinition generated
// from the same Go types (config/crd): the strategy validates with the
// definition's OpenAPI schema and CEL rules through the same validator the
// CRD server uses, the printer columns and selectable fields are the
// definition's, and the OpenAPI served is its schema. A cluster that runs
// `quotaplane controller` installs those definitions, so the two refuse the
// same objects with the same messages.
//
// It never decides quota and never writes: the registry stores what the
// API server is asked to store.
package nativeapi

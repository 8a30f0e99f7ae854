// Package delegation is the admission plugin that keeps quota in a hierarchy
// safe from its tenants:
//
//   - Where a ResourceGrant lives decides whom it may name. A platform
//     namespace (the system namespace, those --platform-namespaces names, and
//     namespaces labelled quota.miloapis.com/platform=true) may name anyone,
//     and only the platform writes there. A grant in organization-<name> may
//     name only that organization's projects, and the organization itself
//     only when the platform writes it. A grant anywhere else is refused.
//   - A grant an organization's owners write for one of its projects is
//     delegated: it is labelled with the organization and must fit the
//     organization's budget, decided by the engine with its other decisions.
//     Tenants may change or delete only such grants.
//   - Labels under the reserved prefix on Organizations and Projects are the
//     platform's: groups select on them, so tenants may not set, change or
//     remove them. Group grants select only on such labels.
//
// "The platform" is whoever may create ResourceGrants in the system
// namespace (the quotaplane-platform-admin ClusterRole, cluster admins, and
// quotaplane's own controllers).
//
// It reads Namespaces and Projects and asks the authorizer and the engine; it
// never writes anything itself but the budget label of the grant under
// admission, and never decides a budget (the engine does).
package delegation

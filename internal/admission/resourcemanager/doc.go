// Package resourcemanager is the admission plugin of quotaplane serve for
// Organizations and Projects (resourcemanager.miloapis.com):
//
//   - an Organization's creator is recorded in the annotation
//     resourcemanager.miloapis.com/created-by at create; no client may set it
//     to anyone else or change it, and an update that omits it keeps it (the
//     organization controller binds that user as the organization's owner);
//   - a Project may be created only under an Organization that exists, is not
//     being deleted, and for which its creator may create projects (verb
//     "create" on organizations/projects named after the organization, in the
//     organization's namespace: docs/authorization.md); it is given the label
//     resourcemanager.miloapis.com/organization-name and an ownerReference to
//     its organization, and the label cannot be changed.
//
// It only reads Organizations; it never writes anything but the object under
// admission.
package resourcemanager

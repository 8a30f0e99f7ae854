package v1alpha1

// Labels, annotations, finalizers, names and conditions of the tenancy kinds.
// docs/tenancy.md and docs/conditions.md say what each means.
const (
	// OrganizationNameLabel names the organization an object belongs to: set
	// on an organization's namespace and on each of its projects.
	OrganizationNameLabel = "resourcemanager.miloapis.com/organization-name"
	// ProjectNameLabel names the project a namespace at the root belongs to
	// (project-<name>, where its control plane's quota objects are kept).
	ProjectNameLabel = "resourcemanager.miloapis.com/project-name"
	// CreatorAnnotation records, on an Organization, the user who created it
	// (set by admission at create; clients cannot set or change it). The
	// organization controller binds that user as the organization's owner.
	CreatorAnnotation = "resourcemanager.miloapis.com/created-by"
	// OrganizationFinalizer holds a deleted organization until its projects
	// and its namespace are gone.
	OrganizationFinalizer = "resourcemanager.miloapis.com/organization"
	// ProjectFinalizer holds a deleted project until no object is charged to
	// it any more, so that a project created later under its name inherits
	// nothing of it.
	ProjectFinalizer = "resourcemanager.miloapis.com/project"

	// OrganizationNamespacePrefix prefixes an organization's name to name its
	// namespace.
	OrganizationNamespacePrefix = "organization-"
	// OrganizationNameMaxLength is the longest organization name whose
	// namespace name is still a DNS label (63 characters).
	OrganizationNameMaxLength = 63 - len(OrganizationNamespacePrefix)
	// OrganizationOwnerRole is the ClusterRole an organization's creator is
	// bound to in the organization's namespace.
	OrganizationOwnerRole = "quotaplane-organization-owner"
	// OrganizationOwnerBinding is the RoleBinding, in an organization's
	// namespace, that binds its creator to OrganizationOwnerRole.
	OrganizationOwnerBinding = "quotaplane-organization-owner"
)

// OrganizationNamespace is the namespace of the organization named name.
func OrganizationNamespace(name string) string { return OrganizationNamespacePrefix + name }

const (
	// ConditionReady is True when an Organization or a Project has everything
	// it is given (docs/tenancy.md).
	ConditionReady = "Ready"

	// OrganizationReasonReady: Ready=True; the namespace and the owner's
	// RoleBinding exist.
	OrganizationReasonReady = "OrganizationReady"
	// OrganizationReasonProvisioning: Ready=False; the namespace or the
	// binding could not be made yet (the message says which and why).
	OrganizationReasonProvisioning = "Provisioning"
	// OrganizationReasonNamespaceConflict: Ready=False; a namespace of the
	// organization's name exists and belongs to something else. Delete it or
	// choose another name.
	OrganizationReasonNamespaceConflict = "NamespaceConflict"
	// OrganizationReasonDeleting: Ready=False; the organization is being
	// deleted and waits for its projects and namespace to be gone.
	OrganizationReasonDeleting = "Deleting"

	// ProjectReasonReady: Ready=True; the project's organization exists.
	ProjectReasonReady = "ProjectReady"
	// ProjectReasonOrganizationNotFound: Ready=False; spec.ownerRef names an
	// organization that does not exist.
	ProjectReasonOrganizationNotFound = "OrganizationNotFound"
	// ProjectReasonOrganizationDeleting: Ready=False; the project's
	// organization is being deleted, and the project with it.
	ProjectReasonOrganizationDeleting = "OrganizationDeleting"
	// ProjectReasonDeleting: Ready=False; the project is being deleted and
	// waits until no object is charged to it (the message names them).
	ProjectReasonDeleting = "Deleting"
)

package manifests

import "fmt"

// Registration is an Entity registration of resourceType for Organizations, claimed by Projects.
func Registration(name, resourceType string) string {
	return fmt.Sprintf(`
apiVersion: quota.miloapis.com/v1alpha1
kind: ResourceRegistration
metadata:
  name: %s
spec:
  consumerType:
    apiGroup: resourcemanager.miloapis.com
    kind: Organization
  type: Entity
  resourceType: %s
  description: Projects an organization may create
  baseUnit: project
  displayUnit: project
  unitConversionFactor: 1
  claimingResources:
  - apiGroup: resourcemanager.miloapis.com
    kind: Project
`, name, resourceType)
}

// Grant gives acme-corp 50 projects overall and 5 in dfw.
func Grant(ns, name string) string {
	return fmt.Sprintf(`
apiVersion: quota.miloapis.com/v1alpha1
kind: ResourceGrant
metadata:
  name: %s
  namespace: %s
spec:
  consumerRef:
    apiGroup: resourcemanager.miloapis.com
    kind: Organization
    name: acme-corp
  allowances:
  - resourceType: resourcemanager.miloapis.com/projects
    buckets:
    - amount: 50
    - amount: 5
      dimensions:
      - key: networking.datumapis.com/location
        value: dfw
`, name, ns)
}

// Claim asks for one project in dfw for acme-corp.
func Claim(ns, name string) string {
	return fmt.Sprintf(`
apiVersion: quota.miloapis.com/v1alpha1
kind: ResourceClaim
metadata:
  name: %s
  namespace: %s
spec:
  consumerRef:
    apiGroup: resourcemanager.miloapis.com
    kind: Organization
    name: acme-corp
  requests:
  - resourceType: resourcemanager.miloapis.com/projects
    amount: 1
    dimensions:
    - key: networking.datumapis.com/location
      value: dfw
  resourceRef:
    apiGroup: resourcemanager.miloapis.com
    kind: Project
    name: web-app-project
`, name, ns)
}

// Bucket is an AllowanceBucket of acme-corp for projects.
func Bucket(ns, name string) string {
	return fmt.Sprintf(`
apiVersion: quota.miloapis.com/v1alpha1
kind: AllowanceBucket
metadata:
  name: %s
  namespace: %s
spec:
  consumerRef:
    apiGroup: resourcemanager.miloapis.com
    kind: Organization
    name: acme-corp
  resourceType: resourcemanager.miloapis.com/projects
`, name, ns)
}

// ClaimPolicy is the seed's ClaimCreationPolicy for Projects.
func ClaimPolicy(name string) string {
	return fmt.Sprintf(`
apiVersion: quota.miloapis.com/v1alpha1
kind: ClaimCreationPolicy
metadata:
  name: %s
spec:
  trigger:
    resource:
      apiVersion: resourcemanager.miloapis.com/v1alpha1
      kind: Project
    constraints:
    - expression: 'trigger.spec.type == "application"'
  target:
    resourceClaimTemplate:
      spec:
        consumerRef:
          apiGroup: resourcemanager.miloapis.com
          kind: Organization
          name: '{{ trigger.spec.ownerRef.name }}'
        requests:
        - resourceType: resourcemanager.miloapis.com/projects
          amount: 1
`, name)
}

// GrantPolicy is the seed's GrantCreationPolicy for Organizations.
func GrantPolicy(name string) string {
	return fmt.Sprintf(`
apiVersion: quota.miloapis.com/v1alpha1
kind: GrantCreationPolicy
metadata:
  name: %s
spec:
  trigger:
    resource:
      apiVersion: resourcemanager.miloapis.com/v1alpha1
      kind: Organization
    constraints:
    - expression: 'trigger.status.phase == "Active"'
  target:
    resourceGrantTemplate:
      spec:
        consumerRef:
          apiGroup: resourcemanager.miloapis.com
          kind: Organization
          name: '{{ trigger.metadata.name}}'
        allowances:
        - resourceType: resourcemanager.miloapis.com/projects
          buckets:
          - amount: 50
`, name)
}

package deploy

import (
	"bytes"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/common/util"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/engine"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"
)

// Root is the repository's root, seen from this package's directory (where
// go test runs).
var Root = filepath.Join("..", "..")

// ChartDir is the chart's directory.
var ChartDir = filepath.Join(Root, "deploy", "chart", "quotaplane")

// Release names a release: where and as what the chart is rendered.
type Release struct {
	Name, Namespace string
}

// Object is one rendered document.
type Object struct {
	// Source is the template it came from (quotaplane/templates/...).
	Source string
	// Text is the document as rendered, comments included.
	Text string
	*unstructured.Unstructured
}

// LoadChart loads the chart from ChartDir.
func LoadChart() (*chart.Chart, error) {
	c, err := loader.Load(ChartDir)
	if err != nil {
		return nil, fmt.Errorf("loading the chart from %s: %w", ChartDir, err)
	}
	return c, nil
}

// Render renders the chart's templates with values as an install of rel
// would, the way `helm template` does. With config, lookup reads that
// server (as install and upgrade do); without, it finds nothing. The
// objects come in the order Helm installs them.
func Render(c *chart.Chart, rel Release, values map[string]any, config *rest.Config) ([]Object, error) {
	vals, err := util.ToRenderValues(c, values, common.ReleaseOptions{Name: rel.Name, Namespace: rel.Namespace, IsInstall: true, Revision: 1}, nil)
	if err != nil {
		return nil, fmt.Errorf("values: %w", err)
	}
	var files map[string]string
	if config != nil {
		files, err = engine.RenderWithClient(c, vals, config)
	} else {
		files, err = engine.Render(c, vals)
	}
	if err != nil {
		return nil, err
	}
	var objs []Object
	for _, name := range slices.Sorted(maps.Keys(files)) {
		if !strings.HasSuffix(name, ".yaml") {
			continue // NOTES.txt
		}
		for _, doc := range splitDocuments(files[name]) {
			u := &unstructured.Unstructured{}
			if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
				return nil, fmt.Errorf("%s renders YAML that does not parse: %w\n%s", name, err, doc)
			}
			if len(u.Object) == 0 {
				continue // only comments
			}
			objs = append(objs, Object{Source: name, Text: doc, Unstructured: u})
		}
	}
	slices.SortStableFunc(objs, func(a, b Object) int { return installRank(a.GetKind()) - installRank(b.GetKind()) })
	return objs, nil
}

// CRDs are the chart's crds/ files, which Helm installs before the templates.
func CRDs(c *chart.Chart) ([]Object, error) {
	var objs []Object
	for _, f := range c.CRDObjects() {
		for _, doc := range splitDocuments(string(f.File.Data)) {
			u := &unstructured.Unstructured{}
			if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
				return nil, fmt.Errorf("%s: %w", f.Filename, err)
			}
			if len(u.Object) != 0 {
				objs = append(objs, Object{Source: f.Filename, Text: doc, Unstructured: u})
			}
		}
	}
	return objs, nil
}

// splitDocuments splits a YAML stream at its "---" lines.
func splitDocuments(s string) []string {
	var docs []string
	for _, d := range strings.Split("\n"+s, "\n---") {
		if d = strings.TrimSpace(d); d != "" {
			docs = append(docs, d)
		}
	}
	return docs
}

// installOrder is the order Helm installs kinds in (its InstallOrder, for
// the kinds this chart renders); unknown kinds go last.
var installOrder = []string{"Namespace", "ServiceAccount", "Secret", "ConfigMap", "ClusterRole", "ClusterRoleBinding",
	"Role", "RoleBinding", "Service", "Deployment", "StatefulSet", "PodDisruptionBudget", "Issuer", "Certificate",
	"ValidatingWebhookConfiguration"}

func installRank(kind string) int {
	if i := slices.Index(installOrder, kind); i >= 0 {
		return i
	}
	return len(installOrder)
}

// Manifests is deploy/manifests/quotaplane.yaml: the chart rendered for a
// member cluster with ManifestValues into ManifestRelease's namespace, the
// Namespace first, without certificates (see ManifestValues).
func Manifests(c *chart.Chart) ([]byte, error) {
	objs, err := Render(c, ManifestRelease, ManifestValues(), nil)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.WriteString(manifestsHeader)
	fmt.Fprintf(&b, "---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: %s\n", ManifestRelease.Namespace)
	for _, o := range objs {
		fmt.Fprintf(&b, "---\n# Source: %s\n%s\n", o.Source, o.Text)
	}
	return b.Bytes(), nil
}

// ManifestRelease is the release the plain manifests are rendered as.
var ManifestRelease = Release{Name: "quotaplane", Namespace: "quotaplane-system"}

// ManifestValues are the plain manifests' values: the sample cluster name
// and kubeconfig Secret, and certificates.generate false, since a Helm-made
// certificate would differ on every render and be shared by everyone who
// applies the file. The user creates the TLS Secret and sets caBundle.
func ManifestValues() map[string]any {
	return map[string]any{
		"clusterName":  "member",
		"quotaPlane":   map[string]any{"kubeconfigSecret": "quota-plane-kubeconfig"},
		"certificates": map[string]any{"generate": false},
	}
}

const manifestsHeader = `# quotaplane for a member cluster, without Helm: deploy/chart/quotaplane
# rendered with clusterName=member, quotaPlane.kubeconfigSecret=
# quota-plane-kubeconfig and certificates.generate=false into the namespace
# quotaplane-system. Generated: do not edit; regenerate with
#   go test ./test/deploy -run TestGenerated -update
#
# In namespace quotaplane-system, before the pods can start:
#   1. the Secret quota-plane-kubeconfig: the quota plane's kubeconfig under
#      the key "kubeconfig";
#   2. the Secret quotaplane-webhook-tls (type kubernetes.io/tls): a serving
#      certificate for quotaplane-webhook.quotaplane-system.svc.
# After applying: the CA of that certificate (caBundle) and the rules in the
# webhook configuration quotaplane-member, both from
#   quotaplane webhook print-config --cluster-name=member --ca-file=ca.crt ... | kubectl apply -f -
# deploy/chart/quotaplane/README.md shows every command. For another cluster
# name, change quotaplane-member and --cluster-name (or use the chart).
#
# The image, localhost/quotaplane:0.1.0, is not published: build it with
#   go run ./hack/image -o quotaplane-image.tar
# and load it into the nodes, or push it to your registry and change image:.
`

package server_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// TestWorkloadsApps stores apps/v1 workloads on serve: the group is in
// discovery, a Deployment is created, read back and scaled through its scale
// subresource (kubectl scale), and the other three kinds are accepted. Nothing
// runs them: the Deployment's status stays empty and no ReplicaSet appears.
func TestWorkloadsApps(t *testing.T) {
	client := startServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// Ready means discoverable: the post-start hook waits for it.
	resources, err := client.Discovery().ServerResourcesForGroupVersion("apps/v1")
	if err != nil {
		t.Fatalf("apps/v1 discovery: %v", err)
	}
	var names []string
	for _, r := range resources.APIResources {
		names = append(names, r.Name)
	}
	for _, want := range []string{"deployments", "deployments/scale", "deployments/status", "replicasets", "replicasets/scale", "statefulsets", "statefulsets/scale", "daemonsets"} {
		if !slices.Contains(names, want) {
			t.Errorf("apps/v1 serves %v; want %s among them", names, want)
		}
	}
	// Both discovery documents: aggregated (client-go's default) and the
	// plain /apis list older clients read, which needs the APIService.
	groups, err := client.Discovery().ServerGroups()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(groups.Groups, func(g metav1.APIGroup) bool { return g.Name == "apps" }) {
		t.Errorf("the apps group is not in aggregated discovery; groups: %v", groups.Groups)
	}
	raw, err := client.Discovery().RESTClient().Get().AbsPath("/apis").SetHeader("Accept", "application/json").DoRaw(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var plain metav1.APIGroupList
	if err := json.Unmarshal(raw, &plain); err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(plain.Groups, func(g metav1.APIGroup) bool { return g.Name == "apps" }) {
		t.Errorf("the apps group is not in the plain /apis list; groups: %v", plain.Groups)
	}

	const ns = "default"
	labels := map[string]string{"app": "web"}
	template := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: labels},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "example.com/web:1"}}},
	}
	selector := &metav1.LabelSelector{MatchLabels: labels}
	deployments := client.AppsV1().Deployments(ns)
	if _, err := deployments.Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec:       appsv1.DeploymentSpec{Replicas: ptr.To[int32](1), Selector: selector, Template: template},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating a Deployment: %v", err)
	}
	got, err := deployments.Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("reading the Deployment back: %v", err)
	}
	if got.Spec.Strategy.Type != appsv1.RollingUpdateDeploymentStrategyType {
		t.Errorf("strategy %q; want upstream's default %q", got.Spec.Strategy.Type, appsv1.RollingUpdateDeploymentStrategyType)
	}

	scale, err := deployments.GetScale(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("reading the Deployment's scale: %v", err)
	}
	scale.Spec.Replicas = 3
	if _, err := deployments.UpdateScale(ctx, "web", scale, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("scaling the Deployment: %v", err)
	}
	if got, err = deployments.Get(ctx, "web", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	if got.Spec.Replicas == nil || *got.Spec.Replicas != 3 {
		t.Errorf("replicas after scaling: %v; want 3", got.Spec.Replicas)
	}
	if got.Status.Replicas != 0 {
		t.Errorf("status replicas %d: nothing should run Deployments on serve", got.Status.Replicas)
	}

	if _, err := client.AppsV1().ReplicaSets(ns).Create(ctx, &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web-rs"},
		Spec:       appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](1), Selector: selector, Template: template},
	}, metav1.CreateOptions{}); err != nil {
		t.Errorf("creating a ReplicaSet: %v", err)
	}
	if _, err := client.AppsV1().StatefulSets(ns).Create(ctx, &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "db"},
		Spec:       appsv1.StatefulSetSpec{Replicas: ptr.To[int32](1), Selector: selector, Template: template},
	}, metav1.CreateOptions{}); err != nil {
		t.Errorf("creating a StatefulSet: %v", err)
	}
	if _, err := client.AppsV1().DaemonSets(ns).Create(ctx, &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "agent"},
		Spec:       appsv1.DaemonSetSpec{Selector: selector, Template: template},
	}, metav1.CreateOptions{}); err != nil {
		t.Errorf("creating a DaemonSet: %v", err)
	}

	// Records only: give a controller, were there one, a moment to act.
	time.Sleep(time.Second)
	pods, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != 0 {
		t.Errorf("%d Pods appeared; nothing should run the workloads on serve", len(pods.Items))
	}
	sets, err := client.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(sets.Items) != 1 {
		t.Errorf("%d ReplicaSets; want only the one created (nothing runs the Deployment)", len(sets.Items))
	}
}

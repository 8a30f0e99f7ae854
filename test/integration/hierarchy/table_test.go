package hierarchy

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/planes"
	"github.com/quotaplane/quotaplane/internal/quota"
)

// table is the Table the server answers kubectl get with: every column,
// those -o wide adds (priority 1) too.
type table struct {
	metav1.Table
}

// serverTable lists a resource of the quota API as kubectl get asks for
// it (Accept: application/json;as=Table;g=meta.k8s.io;v=v1), in namespace
// ns, or in every namespace when ns is "" (-A).
func serverTable(t *testing.T, gvr schema.GroupVersionResource, ns string) table {
	t.Helper()
	path := "/apis/" + gvr.Group + "/" + gvr.Version + "/" + gvr.Resource
	if ns != "" {
		path = "/apis/" + gvr.Group + "/" + gvr.Version + "/namespaces/" + ns + "/" + gvr.Resource
	}
	raw, err := kubernetes.NewForConfigOrDie(srv.Config).Discovery().RESTClient().Get().AbsPath(path).Param("includeObject", "Metadata").
		SetHeader("Accept", "application/json;as=Table;g=meta.k8s.io;v=v1").DoRaw(context.Background())
	if err != nil {
		t.Fatalf("GET %s as a Table: %v", path, err)
	}
	var out table
	if err := json.Unmarshal(raw, &out.Table); err != nil {
		t.Fatalf("GET %s as a Table: %v\n%s", path, err, raw)
	}
	if out.Kind != "Table" {
		t.Fatalf("GET %s as a Table answered kind %q", path, out.Kind)
	}
	return out
}

// Rows are the table's rows, each cell by its column's name, with the
// object's namespace under "Namespace" (the column kubectl get -A adds).
func (tb table) Rows(t *testing.T) []map[string]any {
	t.Helper()
	var rows []map[string]any
	for _, r := range tb.Table.Rows {
		row := map[string]any{}
		for i, c := range tb.ColumnDefinitions {
			if i < len(r.Cells) {
				row[c.Name] = r.Cells[i]
			}
		}
		var m metav1.PartialObjectMetadata
		if err := json.Unmarshal(r.Object.Raw, &m); err != nil {
			t.Fatalf("a row's object %s: %v", r.Object.Raw, err)
		}
		row["Namespace"] = m.Namespace
		rows = append(rows, row)
	}
	return rows
}

// Row is the row of the object named name; the test fails without one.
func (tb table) Row(t *testing.T, name string) map[string]any {
	t.Helper()
	for _, r := range tb.Rows(t) {
		if r["Name"] == name {
			return r
		}
	}
	t.Fatalf("no row named %s in %v", name, tb.Table.Rows)
	return nil
}

// Priority is the priority of the column named name (-1 when absent):
// kubectl get shows priority 0, -o wide the rest.
func (tb table) Priority(name string) int32 {
	for _, c := range tb.ColumnDefinitions {
		if c.Name == name {
			return c.Priority
		}
	}
	return -1
}

// TestABucketsCopiesSayWhichIsWhich: a project's bucket is stored in its
// organization's namespace and copied into the project's plane namespace,
// under one bucket-<sha256> name. kubectl get allowancebuckets -A lists
// both; the server's Table tells them apart (PLACEMENT Own or Projection)
// and, with -o wide, names the consumer (CONSUMER KIND, CONSUMER) beside
// the RESOURCE TYPE.
func TestABucketsCopiesSayWhichIsWhich(t *testing.T) {
	w := newWorld(t, "web")
	web := w.projects[0]
	g := w.grant(w.ns, "web", w.consumer("Project", web), 8)
	w.create(g)
	w.waitActive(g)
	name := quota.BucketName(quota.BucketID{Consumer: projectID(web), ResourceType: w.rt})
	plane := planes.ProjectNamespace(web)
	w.poll("the project's bucket in "+w.ns+" and its copy in "+plane, func() bool {
		var own, copied quotav1alpha1.AllowanceBucket
		return w.admin.Get(context.Background(), client.ObjectKey{Namespace: w.ns, Name: name}, &own) == nil &&
			w.admin.Get(context.Background(), client.ObjectKey{Namespace: plane, Name: name}, &copied) == nil &&
			own.Status.Limit == 8 && copied.Status.Limit == 8 && own.Status.Placement != "" && copied.Status.Placement != ""
	})

	tb := serverTable(t, quotav1alpha1.SchemeGroupVersion.WithResource("allowancebuckets"), "")
	placement := map[string]any{}
	for _, row := range tb.Rows(t) {
		if row["Name"] != name {
			continue
		}
		if row["Resource Type"] != w.rt || row["Consumer Kind"] != "Project" || row["Consumer"] != web {
			t.Errorf("the row of bucket %s in %s: %v; want RESOURCE TYPE %s, CONSUMER KIND Project, CONSUMER %s", name, row["Namespace"], row, w.rt, web)
		}
		placement[row["Namespace"].(string)] = row["Placement"]
	}
	want := map[string]any{w.ns: string(quotav1alpha1.BucketPlacementOwn), plane: string(quotav1alpha1.BucketPlacementProjection)}
	if diff := cmp.Diff(want, placement); diff != "" {
		t.Errorf("kubectl get allowancebuckets -A, PLACEMENT of the rows of bucket %s by namespace (-want +got):\n%s", name, diff)
	}
	for col, prio := range map[string]int32{"Resource Type": 0, "Placement": 0, "Consumer Kind": 1, "Consumer": 1} {
		if got := tb.Priority(col); got != prio {
			t.Errorf("column %s has priority %d; want %d (0: kubectl get, 1: -o wide)", col, got, prio)
		}
	}
}

package planes

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quotaplane/quotaplane/internal/engine"
	"github.com/quotaplane/quotaplane/internal/engine/formats"
	"github.com/quotaplane/quotaplane/internal/history"
	"github.com/quotaplane/quotaplane/internal/verify"
)

// audit runs quotaplane verify's audit against the test server, judging
// the objects of plane ("" every plane and the root).
func audit(t *testing.T, plane string) *verify.Report {
	t.Helper()
	o := *verify.NewOptions()
	o.Kubeconfig = srv.Kubeconfig
	o.RecheckAfter = 500 * time.Millisecond
	o.ControlPlane = plane
	loc, err := formats.ReadEtcdFile(srv.DataDir)
	must(t, err, "reading the etcd location")
	o.EtcdServers, o.EtcdCAFile, o.EtcdCertFile, o.EtcdKeyFile = srv.EtcdServers, loc.CAFile, loc.CertFile, loc.KeyFile
	r, err := verify.Run(context.Background(), o)
	must(t, err, "running verify")
	return r
}

// verify judges the objects of every plane (or of the one asked), and
// history lists the decisions about a plane's objects.
func TestVerifyAndHistoryAcrossPlanes(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t, "ver", "Secret", "a", "b")
	w.grant("Project", w.projects[0], 5)
	w.grant("Project", w.projects[1], 5)
	for i, p := range []string{w.projects[0], w.projects[0], w.projects[1]} {
		_, err := w.planeKube(p).CoreV1().Secrets("default").Create(ctx, w.secret(fmt.Sprintf("s%d", i)), metav1.CreateOptions{})
		must(t, err, "creating a Secret in %s's plane", p)
	}
	stats := func(r *verify.Report) *verify.PolicyStats {
		for _, p := range r.Policies {
			if p.Name == w.id {
				return p
			}
		}
		t.Fatalf("verify reports no ClaimCreationPolicy %s", w.id)
		return nil
	}
	eventually(t, 30*time.Second, "verify finds the three Secrets of the planes charged", func(context.Context) error {
		r := audit(t, "")
		if len(r.Discrepancies) > 0 {
			var out strings.Builder
			r.Print(&out)
			return fmt.Errorf("discrepancies:\n%s", out.String())
		}
		if st := stats(r); st.Governed != 3 || st.Claimed != 3 {
			return fmt.Errorf("policy %s: %d governed, %d claimed; want 3 and 3", w.id, st.Governed, st.Claimed)
		}
		return nil
	})
	r := audit(t, projectPlane(w.projects[0]).String())
	if st := stats(r); st.Governed != 2 || st.Claimed != 2 || len(r.Discrepancies) != 0 {
		var out strings.Builder
		r.Print(&out)
		t.Errorf("verify --control-plane %s: %d governed, %d claimed, %d discrepancies; want 2, 2, 0:\n%s", projectPlane(w.projects[0]), st.Governed, st.Claimed, len(r.Discrepancies), out.String())
	}
	if st := stats(audit(t, "root")); st.Governed != 0 {
		t.Errorf("verify --control-plane root judged %d of the planes' Secrets", st.Governed)
	}

	// history: the decisions about plane a's objects, and only those.
	// The history is written in batches, after the decisions: poll.
	ns := projectPlane(w.projects[0]).QuotaNamespace()
	var rows []history.Row
	eventually(t, 30*time.Second, "history lists the plane's two grants", func(ctx context.Context) error {
		list := &corev1.ConfigMapList{}
		if err := w.admin.List(ctx, list, client.InNamespace(engine.DefaultOptions().SystemNamespace), client.MatchingLabels{history.LabelHistory: "true"}); err != nil {
			return err
		}
		var err error
		if rows, err = history.Select(list.Items, history.Query{Namespace: ns}); err != nil {
			return err
		}
		if len(rows) < 2 {
			return fmt.Errorf("history of control plane %s: %d decisions, want at least the 2 grants", projectPlane(w.projects[0]), len(rows))
		}
		return nil
	})
	for _, row := range rows {
		if row.Object.Namespace != ns || row.Consumer.Name != w.projects[0] {
			t.Errorf("history of %s lists %+v of %s", projectPlane(w.projects[0]), row.Object, row.Consumer.Name)
		}
	}
}

package policy

import (
	"errors"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
)

// checkWindow refuses a template window that could not give a grant a
// window (the CRD's rules say the same; a policy stored before them, or
// read from another store, is checked here too).
func checkWindow(w *quotav1alpha1.GrantTemplateWindow, path *field.Path) error {
	var start, end time.Duration
	if w.StartsAfter != nil {
		start = w.StartsAfter.Duration
	}
	if w.ExpiresAfter != nil {
		end = w.ExpiresAfter.Duration
	}
	switch {
	case w.StartsAfter == nil && w.ExpiresAfter == nil:
		return invalid(CauseTemplateInvalid, path.String(), errors.New("a window needs startsAfter, expiresAfter or both; remove window for a grant that always counts"))
	case start < 0:
		return invalid(CauseTemplateInvalid, path.Child("startsAfter").String(), fmt.Errorf("%s is negative: a grant's start is at or after its trigger's creation", start))
	case w.ExpiresAfter != nil && end <= start:
		return invalid(CauseTemplateInvalid, path.Child("expiresAfter").String(), fmt.Errorf("%s is not later than startsAfter %s: a window ends after it starts", end, start))
	}
	return nil
}

// renderWindow is the window of the grant for trigger: the template's
// durations after the trigger's metadata.creationTimestamp, so the same
// trigger always renders the same window, whenever it is reconciled.
func renderWindow(w *quotav1alpha1.GrantTemplateWindow, trigger map[string]any) (from, until *metav1.Time, err error) {
	md, _ := trigger["metadata"].(map[string]any)
	created, _ := md["creationTimestamp"].(string)
	at, err := time.Parse(time.RFC3339, created)
	if err != nil {
		return nil, nil, fmt.Errorf("the trigger has no metadata.creationTimestamp (%q) to measure spec.target.resourceGrantTemplate.spec.window from", created)
	}
	if w.StartsAfter != nil {
		t := metav1.NewTime(at.Add(w.StartsAfter.Duration).Truncate(time.Second)) // as stored
		from = &t
	}
	if w.ExpiresAfter != nil {
		t := metav1.NewTime(at.Add(w.ExpiresAfter.Duration).Truncate(time.Second))
		until = &t
	}
	return from, until, nil
}

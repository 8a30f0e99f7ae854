package planeserve

import (
	"net/http"
	"strconv"

	"k8s.io/apiserver/pkg/endpoints/responsewriter"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

// Metrics of the control planes. Labels are the owner kind and the status
// code, never a plane's name: a series per project would not scale.
var (
	requests = metrics.NewCounterVec(&metrics.CounterOpts{
		Name:           "milo_quota_control_plane_requests_total",
		Help:           "Requests to control planes, by owner kind (projects, organizations) and HTTP status code.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"kind", "code"})
	inUse = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Name:           "milo_quota_control_planes_in_use",
		Help:           "Control planes this server has prepared since it started (used at least once), by owner kind.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"kind"})
)

func init() {
	legacyregistry.MustRegister(requests, inUse)
}

// codeRecorder remembers the status code a handler answered.
type codeRecorder struct {
	http.ResponseWriter
	code int
}

func (c *codeRecorder) WriteHeader(code int) {
	if c.code == 0 {
		c.code = code
	}
	c.ResponseWriter.WriteHeader(code)
}

func (c *codeRecorder) Write(b []byte) (int, error) {
	if c.code == 0 {
		c.code = http.StatusOK
	}
	return c.ResponseWriter.Write(b)
}

var _ responsewriter.UserProvidedDecorator = &codeRecorder{}

func (c *codeRecorder) Unwrap() http.ResponseWriter { return c.ResponseWriter }

func (c *codeRecorder) status() string {
	if c.code == 0 {
		return strconv.Itoa(http.StatusOK)
	}
	return strconv.Itoa(c.code)
}

package quota

import (
	"fmt"
	"math"
	"time"
)

// UsageSample is a bucket's allocated amount at one moment, from the
// decision history.
type UsageSample struct {
	At        time.Time
	Allocated int64
	Limit     int64
}

// Forecast is where a bucket is heading.
type Forecast struct {
	// Known is false when there is too little history to tell.
	Known bool
	// PerDay is the allocated amount's rate of change, per day.
	PerDay float64
	// Window is the span of history the rate was taken over.
	Window time.Duration
	// FullAt is when, at that rate, allocated reaches the limit; zero when
	// the bucket is not filling (or is already full).
	FullAt time.Time
	// Full is true when allocated is already at or over the limit.
	Full bool
}

// Forecast windows: the rate is taken over at most ForecastWindow of
// history, and needs at least ForecastMinSpan of it and two samples.
const (
	ForecastWindow  = 7 * 24 * time.Hour
	ForecastMinSpan = time.Hour
)

// EstimateExhaustion takes the rate of a bucket's allocated amount over the
// last ForecastWindow of samples (ending now, at current) and says when, at
// that rate, it reaches limit. Samples may be in any order; those after now
// are ignored. The rate is the least-squares slope over the window, so one
// burst does not swing it as a first-to-last difference would.
func EstimateExhaustion(samples []UsageSample, now time.Time, allocated, limit int64) Forecast {
	from := now.Add(-ForecastWindow)
	var xs, ys []float64
	oldest := now
	for _, s := range samples {
		if s.At.Before(from) || s.At.After(now) {
			continue
		}
		if s.At.Before(oldest) {
			oldest = s.At
		}
		xs = append(xs, now.Sub(s.At).Hours()/-24)
		ys = append(ys, float64(s.Allocated))
	}
	// The present is a sample too.
	xs, ys = append(xs, 0), append(ys, float64(allocated))
	span := now.Sub(oldest)
	f := Forecast{Window: span, Full: limit > 0 && allocated >= limit}
	if len(xs) < 3 || span < ForecastMinSpan {
		return f
	}
	var mx, my float64
	for i := range xs {
		mx += xs[i]
		my += ys[i]
	}
	n := float64(len(xs))
	mx, my = mx/n, my/n
	var sxy, sxx float64
	for i := range xs {
		sxy += (xs[i] - mx) * (ys[i] - my)
		sxx += (xs[i] - mx) * (xs[i] - mx)
	}
	if sxx == 0 {
		return f
	}
	f.Known = true
	f.PerDay = sxy / sxx
	if f.PerDay > 0 && !f.Full {
		days := float64(limit-allocated) / f.PerDay
		if days < 3650 {
			f.FullAt = now.Add(time.Duration(days * float64(24*time.Hour)))
		}
	}
	return f
}

// Trend is the rate in words, for example "+3/day over 7d".
func (f Forecast) Trend() string {
	if !f.Known {
		return ""
	}
	return fmt.Sprintf("%s/day over %s", signed(f.PerDay), span(f.Window))
}

// FullIn says when the bucket is full, in words, from now.
func (f Forecast) FullIn(now time.Time) string {
	switch {
	case f.Full:
		return "full now"
	case !f.Known:
		return "too little history to tell"
	case f.FullAt.IsZero():
		return "not filling"
	}
	return "about " + span(f.FullAt.Sub(now))
}

// Sentence is the estimate as the portal says it: "at the last 7 days'
// rate, full in about 9 days".
func (f Forecast) Sentence(now time.Time) string {
	if !f.Known || f.Full {
		return f.FullIn(now)
	}
	if f.FullAt.IsZero() {
		return fmt.Sprintf("at the last %s rate (%s/day), not filling", possessive(span(f.Window)), signed(f.PerDay))
	}
	return fmt.Sprintf("at the last %s rate, full in %s", possessive(span(f.Window)), f.FullIn(now))
}

func possessive(s string) string {
	if len(s) > 0 && s[len(s)-1] == 's' {
		return s + "'"
	}
	return s + "'s"
}

func signed(v float64) string {
	r := math.Round(v*10) / 10
	if r == math.Trunc(r) {
		return fmt.Sprintf("%+.0f", r)
	}
	return fmt.Sprintf("%+.1f", r)
}

// span is a duration in the largest whole unit: "9 days", "5 hours".
func span(d time.Duration) string {
	switch {
	case d >= 48*time.Hour:
		return fmt.Sprintf("%d days", int(math.Round(d.Hours()/24)))
	case d >= 24*time.Hour:
		return "1 day"
	case d >= 2*time.Hour:
		return fmt.Sprintf("%d hours", int(math.Round(d.Hours())))
	case d >= time.Hour:
		return "1 hour"
	default:
		return fmt.Sprintf("%d minutes", max(1, int(math.Round(d.Minutes()))))
	}
}

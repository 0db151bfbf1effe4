package main

import (
	"fmt"
	"io"
	"runtime"
	"slices"
	"strings"
	"time"
)

// report is everything one run of the bench measured.
type report struct {
	Date        string          `json:"date"`
	CPU         string          `json:"cpu"`
	CPUs        int             `json:"cpus"`
	Go          string          `json:"go"`
	N           int             `json:"n"`
	Runs        int             `json:"runs"`
	Pickups     int             `json:"pickups"`
	PickupGap   string          `json:"pickupGap"`
	Probes      int             `json:"probes"`
	ProbeLead   string          `json:"probeLead"`
	ProbeWindow string          `json:"probeWindow"`
	Systems     []*systemReport `json:"systems"`
	Ratios      []ratio         `json:"ratios"`
}

// systemReport is one system's figures.
type systemReport struct {
	Name string `json:"name"`
	description
	Sweep []processResult `json:"sweep"` // processing at each concurrency tried
	Best  int             `json:"bestConcurrency"`
	// At the best concurrency, one per run:
	Process []processResult `json:"process"`
	E2E     []e2eResult     `json:"endToEnd"`

	EnqueueStats stats       `json:"enqueueStats"` // jobs/s, the bulk enqueues before processing
	ProcessStats stats       `json:"processStats"` // jobs/s
	HandlerStats stats       `json:"handlerStats"` // jobs/s, first → last handler return
	E2EStats     stats       `json:"endToEndStats"`
	E2EEnqueue   stats       `json:"endToEndEnqueueStats"` // jobs/s, the bulk enqueue while workers ran
	ConfirmLagMs stats       `json:"confirmLagMs"`
	FirstDoneMs  stats       `json:"firstCompletionMs"`
	PickupMs     []float64   `json:"pickupMs"`
	PickupMedian float64     `json:"pickupMedianMs"`
	PickupP90    float64     `json:"pickupP90Ms"`
	Late         *lateResult `json:"scheduled,omitempty"`
}

// ratio compares usher with an anchor: throughputs usher ÷ anchor (above 1:
// usher faster), latencies usher ÷ anchor (below 1: usher faster).
type ratio struct {
	Of           string  `json:"of"`
	Enqueue      float64 `json:"enqueue"`
	Process      float64 `json:"process"`
	E2E          float64 `json:"endToEnd"`
	PickupMedian float64 `json:"pickupMedian"`
	PickupP90    float64 `json:"pickupP90"`
}

func newReport(cfg config) *report {
	return &report{
		Date: time.Now().Format("2006-01-02 15:04"), CPU: cpuModel(), CPUs: runtime.NumCPU(), Go: runtime.Version(),
		N: cfg.n, Runs: cfg.runs, Pickups: cfg.pickups, PickupGap: cfg.pickupGap.String(),
		Probes: cfg.late.probes, ProbeLead: cfg.late.lead.String(), ProbeWindow: cfg.late.window.String(),
	}
}

func (s *systemReport) bestSweep() processResult {
	for _, r := range s.Sweep {
		if r.Concurrency == s.Best {
			return r
		}
	}
	return processResult{}
}

func (s *systemReport) setPickups(lat []time.Duration) {
	for _, d := range lat {
		s.PickupMs = append(s.PickupMs, ms(d))
	}
	sorted := slices.Clone(lat)
	slices.Sort(sorted)
	s.PickupMedian = ms(quantile(sorted, 0.5))
	s.PickupP90 = ms(quantile(sorted, 0.9))
}

// finish computes the statistics and the ratios.
func (r *report) finish() {
	pick := func(s *systemReport, f func(processResult) float64) stats {
		var xs []float64
		for _, p := range s.Process {
			xs = append(xs, f(p))
		}
		return summarize(xs)
	}
	var usher *systemReport
	for _, s := range r.Systems {
		s.EnqueueStats = pick(s, func(p processResult) float64 { return p.Enqueue })
		s.ProcessStats = pick(s, func(p processResult) float64 { return p.Process })
		s.HandlerStats = pick(s, func(p processResult) float64 { return p.Handlers })
		s.ConfirmLagMs = pick(s, func(p processResult) float64 { return p.Confirm })
		s.FirstDoneMs = pick(s, func(p processResult) float64 { return p.Startup })
		var e, ee []float64
		for _, x := range s.E2E {
			e, ee = append(e, x.Rate), append(ee, x.Enqueue)
		}
		s.E2EStats, s.E2EEnqueue = summarize(e), summarize(ee)
		if s.Name == "usher" {
			usher = s
		}
	}
	if usher == nil {
		return
	}
	div := func(a, b float64) float64 {
		if b == 0 {
			return 0
		}
		return a / b
	}
	for _, s := range r.Systems {
		if s == usher {
			continue
		}
		r.Ratios = append(r.Ratios, ratio{
			Of:           "usher/" + s.Name,
			Enqueue:      div(usher.EnqueueStats.Median, s.EnqueueStats.Median),
			Process:      div(usher.ProcessStats.Median, s.ProcessStats.Median),
			E2E:          div(usher.E2EStats.Median, s.E2EStats.Median),
			PickupMedian: div(usher.PickupMedian, s.PickupMedian),
			PickupP90:    div(usher.PickupP90, s.PickupP90),
		})
	}
}

// print writes the report as Markdown tables.
func (r *report) print(w io.Writer) {
	fmt.Fprintf(w, "# jobsbench %s: %s no-op jobs, %d run(s) per system at its best concurrency, %d pickups (random gap < %s)\n",
		r.Date, thousands(float64(r.N)), r.Runs, r.Pickups, r.PickupGap)
	fmt.Fprintf(w, "# %d × %s, %s\n", r.CPUs, r.CPU, r.Go)
	for _, s := range r.Systems {
		fmt.Fprintf(w, "\n## %s — %s", s.Name, s.Version)
		if s.Server != "" {
			fmt.Fprintf(w, " on %s", s.Server)
		}
		fmt.Fprintf(w, "\n\n- durability: %s\n- tuning: %s\n", s.Durability, s.Tuning)
		if len(s.Sweep) > 0 {
			var parts []string
			for _, p := range s.Sweep {
				parts = append(parts, fmt.Sprintf("%d → %s", p.Concurrency, thousands(p.Process)))
			}
			fmt.Fprintf(w, "- concurrency sweep (processing jobs/s): %s; best %d\n", strings.Join(parts, ", "), s.Best)
		}
		fmt.Fprintf(w, "\n| measure | median | min–max |\n|---|---|---|\n")
		row := func(what string, st stats, unit string) {
			if len(st.Runs) == 0 {
				return
			}
			fmt.Fprintf(w, "| %s | %s %s | %s–%s |\n", what, thousands(st.Median), unit, thousands(st.Min), thousands(st.Max))
		}
		row("bulk enqueue", s.EnqueueStats, "jobs/s")
		row(fmt.Sprintf("processing (concurrency %d)", s.Best), s.ProcessStats, "jobs/s")
		row("  handlers only (first → last return)", s.HandlerStats, "jobs/s")
		row(fmt.Sprintf("end to end (concurrency %d)", s.Best), s.E2EStats, "jobs/s")
		row("  its bulk enqueue, workers running", s.E2EEnqueue, "jobs/s")
		if len(s.PickupMs) > 0 {
			sorted := slices.Clone(s.PickupMs)
			slices.Sort(sorted)
			fmt.Fprintf(w, "| pickup latency, median / p90 | %s / %s ms | %s–%s ms |\n",
				dec(s.PickupMedian), dec(s.PickupP90), dec(sorted[0]), dec(sorted[len(sorted)-1]))
		}
	}
	r.printLateness(w)
	if len(r.Ratios) > 0 {
		fmt.Fprintf(w, "\n## ratios (medians; throughput: above 1 is usher faster; latency: below 1 is usher faster)\n\n")
		fmt.Fprintf(w, "| | bulk enqueue | processing | end to end | pickup median | pickup p90 |\n|---|---|---|---|---|---|\n")
		for _, x := range r.Ratios {
			fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s |\n", x.Of, times(x.Enqueue), times(x.Process), times(x.E2E), times(x.PickupMedian), times(x.PickupP90))
		}
	}
}

// times formats a ratio: two decimals, two significant digits below 0.1.
func times(v float64) string {
	if v != 0 && v < 0.1 {
		return fmt.Sprintf("%.2g", v)
	}
	return fmt.Sprintf("%.2f", v)
}

// thousands formats a rate with thousands separators, no decimals.
func thousands(v float64) string {
	s := fmt.Sprintf("%.0f", v)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// dec formats milliseconds: one decimal below 100, none above.
func dec(v float64) string {
	if v < 100 {
		return fmt.Sprintf("%.1f", v)
	}
	return thousands(v)
}

// printLateness writes the scheduled-job table: one row per scheduler
// setting of each system.
func (r *report) printLateness(w io.Writer) {
	if r.Probes == 0 {
		return
	}
	fmt.Fprintf(w, "\n## scheduled jobs: lateness on idle workers with jobs waiting (due in 1–2 h), %d probes due at random times over %s, from %s after their enqueue\n\n",
		r.Probes, r.ProbeWindow, r.ProbeLead)
	fmt.Fprintf(w, "| system | scheduler setting | jobs waiting | bulk enqueue, immediate | bulk enqueue, scheduled | lateness p50 | p99 | max | earliest |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, s := range r.Systems {
		l := s.Late
		if l == nil {
			continue
		}
		enq := func(v float64) string {
			if v == 0 {
				return "—"
			}
			return thousands(v) + " jobs/s"
		}
		if l.Error != "" {
			fmt.Fprintf(w, "| %s | | %s | %s | %s | error: %s | | | |\n", s.Name, thousands(float64(l.Waiting)),
				enq(l.EnqueueImmediate), enq(l.EnqueueScheduled), l.Error)
			continue
		}
		for i, v := range l.Variants {
			name, waiting, imm, sch := "", "", "", ""
			if i == 0 {
				name, waiting, imm, sch = s.Name, thousands(float64(l.Waiting)), enq(l.EnqueueImmediate), enq(l.EnqueueScheduled)
			}
			if v.Error != "" {
				fmt.Fprintf(w, "| %s | %s | %s | %s | %s | error: %s | | | |\n", name, v.Name, waiting, imm, sch, v.Error)
				continue
			}
			fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s ms | %s ms | %s ms | %s ms |\n", name, v.Name, waiting, imm, sch,
				signedDec(v.P50), signedDec(v.P99), signedDec(v.Max), signedDec(v.Min))
		}
	}
}

// signedDec is dec for a value that may be negative.
func signedDec(v float64) string {
	if v < 0 {
		return "−" + dec(-v)
	}
	return dec(v)
}

// lateErrors joins the lateness measurement's errors, "" when none.
func (r *report) lateErrors() string {
	var errs []string
	for _, s := range r.Systems {
		if s.Late == nil {
			continue
		}
		if s.Late.Error != "" {
			errs = append(errs, s.Name+": "+s.Late.Error)
		}
		for _, v := range s.Late.Variants {
			if v.Error != "" {
				errs = append(errs, s.Name+" ("+v.Name+"): "+v.Error)
			}
		}
	}
	return strings.Join(errs, "; ")
}

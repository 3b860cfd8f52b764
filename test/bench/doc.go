// Package bench measures trainstep on the real test cluster against a plain
// client-go baseline: how fast a job's replicas are created and running, how
// soon a job's end reaches its outputs, how fast a stopped job is torn down,
// what a run costs the API server and how much memory trainstep uses.
//
// The measurements run from TestBench (`make bench`), which prints a table and
// regenerates BENCHMARKS.md and its plots. This package only observes: it
// starts the trainstep binary like a user would and watches the cluster with
// its own client. It must not import trainstep's executor or reconcile code,
// so what it measures is the shipped command, and the product binary must not
// import this package (it links the plotting library).
package bench

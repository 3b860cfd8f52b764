// Package v1alpha1 is the TrainJob API: the job spec a trainstep step runs,
// as plain data — its types, the label keys trainstep writes and reads, and
// accessors that read a field with its default.
//
// What a field means for a framework, its defaults and its validation are
// pkg/frameworks' (one folder per framework, asked through one table): this
// package must know no framework, talk to no cluster and read no files.
package v1alpha1

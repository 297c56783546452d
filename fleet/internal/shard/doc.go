// Package shard is the ownership protocol of a sharded fleet: which
// replica of a group owns each cluster, agreed on coordination.k8s.io/v1
// Leases. The fleet package's doc ("Shards") says what it promises; the
// core's doc (core.go) what it rests on.
//
// # Layout
//
//   - core.go: the protocol as a state machine without I/O, driven by
//     the tests on a fake clock (core_test.go, schedule_test.go and the
//     randomized model, model_test.go).
//   - driver.go: the loop that runs the core's lists, writes and deletes,
//     and gives clusters up and takes them through the fleet (Host).
//   - lease.go: the Leases on the hub, as written and read.
//   - rendezvous.go: the placement of a cluster over a view of replicas.
//   - metrics.go: what a replica exports.
//   - config.go, host.go, errors.go: what the fleet gives the driver (its
//     settings, its seats) and the errors it gets back.
//
// The fleet imports this package, never the reverse: the driver sees the
// fleet's seats only through Host.
package shard

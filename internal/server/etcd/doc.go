// Package etcd runs etcd embedded in the quotaplane process, under the data
// directory, listening on loopback only. It is ready before the API server
// starts and is stopped after the API server has stopped.
//
// It never listens beyond loopback and never reads or writes keys itself.
package etcd

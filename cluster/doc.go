// Package cluster spreads a run's rollouts over worker processes through
// NATS JetStream: the learner (a loop.Run with a cluster section)
// publishes work — ranges of episode indices with their league casts and
// the adapter to play them with — and collects the played episodes;
// workers (`omar worker`, or goroutines in the learner's process) pull
// work, play it and publish the results. The model, the adapters and the
// league's snapshots travel through a JetStream object store.
//
// Delivery is at least once and counted once: a work item is
// acknowledged after its results are published, so a worker that dies
// mid-episode leaves it to be redelivered after ack_wait; results carry
// a message id (run incarnation, episode, adapter) that the stream
// deduplicates, and the learner keeps the first result of each episode.
// An episode is a function of the run seed, its index and the adapter, so
// a redelivered episode is the same episode.
//
// Workers keep no state: a learner that resumes purges the run's streams
// and publishes the work from its checkpoint's cursor again, under a new
// incarnation whose results alone it accepts.
package cluster

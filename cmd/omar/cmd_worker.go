package main

import (
	"context"
	"fmt"
	"strconv"

	"github.com/omar-selfplay/omar/cluster"
	"github.com/omar-selfplay/omar/internal/cliflag"
)

func init() {
	register(command{name: "worker", summary: "a rollout worker of a cluster run: plays its episodes, taken from a NATS server (docs/scale.md)", run: runWorker})
}

func runWorker(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlags(env, "worker")
	o := cluster.WorkerOptions{LlamaLib: llamaLibEnv(), Log: env.stderr}
	fs.StringVar(&o.URL, "nats", "", "the run's NATS server, as the learner prints it (nats://HOST:4222)")
	fs.StringVar(&o.Name, "name", "omar", "the run's cluster.name")
	fs.StringVar(&o.Model, "model", "", "this machine's copy of the run's model, checked by SHA-256 (default: downloaded once into --cache)")
	fs.StringVar(&o.Cache, "cache", "", "directory for downloaded models and adapters (default: the user cache directory's omar/cluster)")
	fs.IntVar(&o.Threads, "threads", 0, "llama.cpp threads of each of the run's rollout.contexts (default: the run's rollout.threads)")
	fs.StringVar(&o.ID, "id", "", "the worker's name in logs (default: host-pid)")
	fs.Func("gpu-layers", "layers offloaded to this machine's GPU, -1 all (default: the run's rollout.gpu_layers)", func(v string) error {
		n, err := strconv.Atoi(v)
		if err == nil && n < -1 {
			err = fmt.Errorf("%d: want -1 (all), 0 (none) or a layer count", n)
		}
		o.GPULayers = &n
		return err
	})
	if err := fs.Parse(args); err != nil {
		return err
	}
	if o.URL == "" || fs.NArg() > 0 {
		return cliflag.Usagef("omar worker --nats URL [--name NAME]: a server URL and no arguments")
	}
	err := cluster.Work(ctx, o)
	if ctx.Err() != nil {
		fmt.Fprintln(env.stderr, "worker: stopped (its work item, if any, goes back to the queue)")
		return nil
	}
	return err
}

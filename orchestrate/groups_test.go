package orchestrate

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/sealbench/sealbench/engine"
	"github.com/sealbench/sealbench/manifests"
	"github.com/sealbench/sealbench/provision/remote"
	"github.com/sealbench/sealbench/runner"
)

// Targets are grouped by the machine that samples them: this machine's
// (a Kubernetes node that is this machine included: its boot id is
// ours), each remote host's, and each other node's, however many names
// it has. Each group but this machine's has an order and, for a node, a
// lock of its own; this machine's keeps the run's seed and the host-wide
// lock.
func TestGroupsByMachine(t *testing.T) {
	const here, w1, w2 = "11111111-aaaa", "22222222-bbbb", "33333333-cccc"
	ids := []*engine.Identity{
		{PlanTarget: manifests.PlanTarget{TargetPins: manifests.TargetPins{Name: "local"}}},
		{PlanTarget: manifests.PlanTarget{TargetPins: manifests.TargetPins{Name: "docker"}}},
		{PlanTarget: manifests.PlanTarget{TargetPins: manifests.TargetPins{Name: "kubernetes", Node: "this-one"}}, NodeBootID: here},
		{PlanTarget: manifests.PlanTarget{TargetPins: manifests.TargetPins{Name: "kubernetes-w1", Node: "w1"}}, NodeBootID: w1},
		{PlanTarget: manifests.PlanTarget{TargetPins: manifests.TargetPins{Name: "docker-h", Engine: "dockerd"}}},
		{PlanTarget: manifests.PlanTarget{TargetPins: manifests.TargetPins{Name: "kgv", Node: "w1"}}, NodeBootID: w1},
		{PlanTarget: manifests.PlanTarget{TargetPins: manifests.TargetPins{Name: "kubernetes-w2", Node: "w2"}}, NodeBootID: w2},
	}
	h, err := remote.ParseSpec("docker@ssh://root@10.0.0.7")
	if err != nil {
		t.Fatal(err)
	}
	h.Name = "docker-h"
	groups := groupTargets(ids, map[string]remote.Spec{"docker-h": h}, here)
	type want struct {
		key, name, label string
		here             bool // its runner runs on this machine
		targets          []string
	}
	wants := []want{
		{"", "local", "", true, []string{"local", "docker", "kubernetes"}},
		{"node " + w1, "node-w1", "node w1", true, []string{"kubernetes-w1", "kgv"}},
		{"node " + w2, "node-w2", "node w2", true, []string{"kubernetes-w2"}},
		{"ssh://root@10.0.0.7:22", "local", "ssh://root@10.0.0.7:22", false, []string{"docker-h"}},
	}
	if len(groups) != len(wants) {
		t.Fatalf("%d groups, want %d", len(groups), len(wants))
	}
	o := RunOptions{Seed: 42, Cells: []string{"c01", "c02"}, Samples: 3}
	seeds := map[uint64]string{}
	for i, g := range groups {
		var names []string
		for _, id := range g.ids {
			names = append(names, id.Name)
		}
		w := wants[i]
		if g.key() != w.key || g.name() != w.name || g.label() != w.label || !slices.Equal(names, w.targets) {
			t.Errorf("group %d: key %q name %q label %q targets %v; want %q %q %q %v", i, g.key(), g.name(), g.label(), names, w.key, w.name, w.label, w.targets)
		}
		if g.here() != w.here {
			t.Errorf("group %s: here %v, want %v", g.key(), g.here(), w.here)
		}
		plan := &manifests.RunPlan{Seed: o.Seed, Lock: runner.DefaultLockPath}
		if g.here() {
			g.placeHere(plan, o)
		} else {
			plan.Seed = groupSeed(o.Seed, g.key())
		}
		if other, dup := seeds[plan.Seed]; dup {
			t.Errorf("groups %s and %s have one seed", other, g.key())
		}
		seeds[plan.Seed] = g.key()
		switch {
		case g.key() == "":
			if plan.Seed != o.Seed || plan.Lock != runner.DefaultLockPath {
				t.Errorf("this machine's group: seed %d lock %s, want the run's %d and %s", plan.Seed, plan.Lock, o.Seed, runner.DefaultLockPath)
			}
		case g.node != "":
			if want := filepath.Join(filepath.Dir(runner.DefaultLockPath), "sealbench-node-"+g.nodeBoot+".lock"); plan.Lock != want {
				t.Errorf("node %s's lock: %s, want %s", g.node, plan.Lock, want)
			}
		}
		// Every slot of the group's targets, once.
		if got := len(g.order(o)); got != len(g.ids)*len(o.Cells)*o.Samples {
			t.Errorf("group %s: %d slots", g.key(), got)
		}
	}

	// Without nodes elsewhere, one group: the run as it always was.
	if gs := groupTargets(ids[:3], nil, here); len(gs) != 1 || gs[0].key() != "" {
		t.Errorf("this machine's targets alone: %d groups", len(gs))
	}
	if id := thisBootID(); len(id) != 36 {
		t.Errorf("this machine's boot id %q", id)
	}
}

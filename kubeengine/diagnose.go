package kubeengine

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// noise are warnings a kubelet may repeat for every pod and about itself
// that never keep a pod from starting: WhyNotRunning leaves them out.
var noise = []string{
	"MissingClusterDNS", // no cluster DNS: the pod gets the node's resolver
	"CgroupV1",          // cgroup v1 is in maintenance mode
}

// How much of the cluster's own account WhyNotRunning quotes.
const (
	whyEvents  = 5   // the newest distinct events of the pod, and of its node
	whyMessage = 300 // characters of one message
)

// WhyNotRunning says why a pod is not running, in the cluster's own
// words: its phase and reason, its conditions that are not True, its
// containers' waiting or terminated states, its events (the warnings, or
// the newest events when there is none: a pull that never ends is
// Normal; noise left out), and, for the node it is bound to, the node's conditions that
// are not healthy (a network that is not ready, pressure) and its warning
// events. A pod that never starts is often fine in every field but these:
// the kubelet says why only in events. Lookups that fail are named in the
// text, not returned: this is already an error's explanation.
func WhyNotRunning(ctx context.Context, cl kubernetes.Interface, pod *corev1.Pod) string {
	var parts []string
	st := fmt.Sprintf("pod %s/%s: phase %s", pod.Namespace, pod.Name, orNone(string(pod.Status.Phase)))
	if pod.Status.Reason != "" || pod.Status.Message != "" {
		st += fmt.Sprintf(" (%s: %s)", pod.Status.Reason, clip(pod.Status.Message, whyMessage))
	}
	parts = append(parts, st)
	var conds []string
	for _, c := range pod.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			conds = append(conds, condition(string(c.Type), string(c.Status), c.Reason, c.Message))
		}
	}
	if len(conds) > 0 {
		parts = append(parts, "conditions "+strings.Join(conds, ", "))
	}
	for _, cs := range slices.Concat(pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses) {
		switch {
		case cs.State.Waiting != nil:
			parts = append(parts, fmt.Sprintf("container %s waiting: %s", cs.Name, reasonMessage(cs.State.Waiting.Reason, cs.State.Waiting.Message)))
		case cs.State.Terminated != nil:
			t := cs.State.Terminated
			parts = append(parts, fmt.Sprintf("container %s terminated (exit %d): %s", cs.Name, t.ExitCode, reasonMessage(t.Reason, t.Message)))
		}
	}
	sel := "involvedObject.kind=Pod,involvedObject.name=" + pod.Name
	if pod.UID != "" {
		sel += ",involvedObject.uid=" + string(pod.UID)
	}
	parts = append(parts, "events "+eventsOf(ctx, cl, pod.Namespace, sel, false))
	node := pod.Spec.NodeName
	if node == "" {
		return strings.Join(parts, "; ") + "; no node: the pod is not scheduled"
	}
	n, err := cl.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		return strings.Join(append(parts, fmt.Sprintf("node %s: %v", node, err)), "; ")
	}
	var bad []string
	for _, c := range n.Status.Conditions {
		healthy := c.Status == corev1.ConditionFalse
		if c.Type == corev1.NodeReady {
			healthy = c.Status == corev1.ConditionTrue
		}
		if !healthy {
			bad = append(bad, condition(string(c.Type), string(c.Status), c.Reason, c.Message))
		}
	}
	if n.Spec.Unschedulable {
		bad = append(bad, "cordoned (spec.unschedulable)")
	}
	ns := "node " + node + ": "
	if len(bad) == 0 {
		ns += "healthy"
	} else {
		ns += strings.Join(bad, ", ")
	}
	// The kubelet records a node's events in the default namespace.
	ns += "; node events " + eventsOf(ctx, cl, metav1.NamespaceDefault, "involvedObject.kind=Node,involvedObject.name="+node, true)
	return strings.Join(append(parts, ns), "; ")
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

func condition(typ, status, reason, message string) string {
	s := typ + "=" + status
	if reason != "" || message != "" {
		s += " (" + reasonMessage(reason, message) + ")"
	}
	return s
}

func reasonMessage(reason, message string) string {
	switch {
	case message == "":
		return reason
	case reason == "":
		return clip(message, whyMessage)
	}
	return reason + ": " + clip(message, whyMessage)
}

// eventsOf renders the events the field selector picks, newest first,
// each distinct reason and message once with how often it was seen: the
// warnings, or, when there are none and !warningsOnly, the newest of the
// rest.
func eventsOf(ctx context.Context, cl kubernetes.Interface, namespace, selector string, warningsOnly bool) string {
	list, err := cl.CoreV1().Events(namespace).List(ctx, metav1.ListOptions{FieldSelector: selector})
	if err != nil {
		return fmt.Sprintf("unknown (listing them: %v)", err)
	}
	type seen struct {
		text  string
		count int32
		last  time.Time
	}
	var warn, normal []*seen
	by := map[string]*seen{}
	for _, e := range list.Items {
		if slices.Contains(noise, e.Reason) {
			continue
		}
		text := reasonMessage(e.Reason, strings.TrimSpace(e.Message))
		count := max(e.Count, 1)
		if e.Series != nil {
			count = max(e.Series.Count, count)
		}
		last := slices.MaxFunc([]time.Time{e.LastTimestamp.Time, e.EventTime.Time, e.FirstTimestamp.Time, e.CreationTimestamp.Time},
			func(a, b time.Time) int { return a.Compare(b) })
		key := e.Type + "\x00" + text
		if s, ok := by[key]; ok {
			s.count += count
			if last.After(s.last) {
				s.last = last
			}
			continue
		}
		s := &seen{text: text, count: count, last: last}
		by[key] = s
		if e.Type == corev1.EventTypeNormal {
			normal = append(normal, s)
		} else {
			warn = append(warn, s)
		}
	}
	pick := warn
	if len(pick) == 0 && !warningsOnly {
		pick = normal
	}
	if len(pick) == 0 {
		return "none"
	}
	slices.SortStableFunc(pick, func(a, b *seen) int { return b.last.Compare(a.last) })
	var out []string
	for _, s := range pick[:min(len(pick), whyEvents)] {
		if s.count > 1 {
			out = append(out, fmt.Sprintf("%s (x%d)", s.text, s.count))
		} else {
			out = append(out, s.text)
		}
	}
	if len(pick) > whyEvents {
		out = append(out, fmt.Sprintf("and %d more", len(pick)-whyEvents))
	}
	return strings.Join(out, " | ")
}

package kube

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"runtime"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// SimulatedLabel marks the Node objects a SimulatedNode registers.
const SimulatedLabel = "flotilla.dev/simulated"

// SimulatedNode stands in for a kubelet on a member that has none, the way KWOK does: it
// registers a Ready Node with some capacity, binds pods that no scheduler would bind to it,
// reports them Running and Ready without running any container, and completes their graceful
// deletion. Deployments then become available, and a member's heartbeat reports a node, as on
// a real cluster. It is for the quick start and for tests that need available workloads.
type SimulatedNode struct {
	// Name of the Node object.
	Name string
	// CPU and Memory are the node's capacity, as quantities; default "4" and "8Gi".
	CPU, Memory string
}

// Run registers the node and handles pods until ctx ends.
func (n SimulatedNode) Run(ctx context.Context, rc *rest.Config) error {
	if n.Name == "" {
		return errors.New("simulated node: a name is required")
	}
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return fmt.Errorf("simulated node %s: %w", n.Name, err)
	}
	if err := n.register(ctx, client); err != nil {
		return fmt.Errorf("simulated node %s: %w", n.Name, err)
	}
	factory := informers.NewSharedInformerFactory(client, 0)
	pods := factory.Core().V1().Pods()
	queue := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[cache.ObjectName]())
	defer queue.ShutDown()
	enqueue := func(obj any) {
		if name, err := cache.ObjectToName(obj); err == nil {
			queue.Add(name)
		}
	}
	if _, err := pods.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
	}); err != nil {
		return fmt.Errorf("simulated node %s: %w", n.Name, err)
	}
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), pods.Informer().HasSynced) {
		return nil // ctx ended
	}
	go func() {
		<-ctx.Done()
		queue.ShutDown()
	}()
	for {
		key, quit := queue.Get()
		if quit {
			return nil
		}
		pod, err := pods.Lister().Pods(key.Namespace).Get(key.Name)
		if err == nil {
			err = n.handle(ctx, client, pod)
		}
		if err != nil && !apierrors.IsNotFound(err) && ctx.Err() == nil {
			queue.AddRateLimited(key)
		} else {
			queue.Forget(key)
		}
		queue.Done(key)
	}
}

func (n SimulatedNode) register(ctx context.Context, client kubernetes.Interface) error {
	cpu, mem := n.CPU, n.Memory
	if cpu == "" {
		cpu = "4"
	}
	if mem == "" {
		mem = "8Gi"
	}
	capacity := corev1.ResourceList{}
	for name, q := range map[corev1.ResourceName]string{corev1.ResourceCPU: cpu, corev1.ResourceMemory: mem, corev1.ResourcePods: "110"} {
		v, err := resource.ParseQuantity(q)
		if err != nil {
			return fmt.Errorf("%s capacity %q: %w", name, q, err)
		}
		capacity[name] = v
	}
	now := metav1.Now()
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: map[string]string{
			"kubernetes.io/hostname": n.Name, "kubernetes.io/os": "linux", SimulatedLabel: "true",
		}},
		Status: corev1.NodeStatus{
			Capacity:    capacity,
			Allocatable: capacity,
			Conditions: []corev1.NodeCondition{{
				Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
				Message: "simulated: pods are reported running, no container runs", LastHeartbeatTime: now, LastTransitionTime: now,
			}},
			Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.0.0.1"}, {Type: corev1.NodeHostName, Address: n.Name}},
			NodeInfo: corev1.NodeSystemInfo{KubeletVersion: KubeVersion, OperatingSystem: "linux", Architecture: runtime.GOARCH,
				OSImage: "simulated by Flotilla", KernelVersion: "none", ContainerRuntimeVersion: "simulated://none"},
		},
	}
	// A Node's status may be set on create; an existing node (a restart) keeps its own.
	if _, err := client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("register node: %w", err)
	}
	return nil
}

// handle brings one pod along: bind it, report it running, or finish its deletion.
func (n SimulatedNode) handle(ctx context.Context, client kubernetes.Interface, pod *corev1.Pod) error {
	pods := client.CoreV1().Pods(pod.Namespace)
	switch {
	case pod.DeletionTimestamp != nil:
		if pod.Spec.NodeName != n.Name {
			return nil
		}
		// What a kubelet does once the containers have stopped.
		zero := int64(0)
		return pods.Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero, Preconditions: &metav1.Preconditions{UID: &pod.UID}})
	case pod.Spec.NodeName == "":
		return pods.Bind(ctx, &corev1.Binding{
			ObjectMeta: metav1.ObjectMeta{Name: pod.Name, UID: pod.UID},
			Target:     corev1.ObjectReference{Kind: "Node", Name: n.Name},
		}, metav1.CreateOptions{})
	case pod.Spec.NodeName != n.Name || pod.Status.Phase == corev1.PodRunning:
		return nil
	}
	now := metav1.NewTime(time.Now())
	running := pod.DeepCopy()
	running.Status.Phase = corev1.PodRunning
	running.Status.HostIP = "127.0.0.1"
	running.Status.PodIP = podIP(pod)
	running.Status.PodIPs = []corev1.PodIP{{IP: running.Status.PodIP}}
	running.Status.StartTime = &now
	running.Status.Conditions = nil
	for _, t := range []corev1.PodConditionType{corev1.PodScheduled, corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady} {
		running.Status.Conditions = append(running.Status.Conditions, corev1.PodCondition{Type: t, Status: corev1.ConditionTrue, LastTransitionTime: now})
	}
	running.Status.ContainerStatuses = nil
	started := true
	for _, c := range pod.Spec.Containers {
		running.Status.ContainerStatuses = append(running.Status.ContainerStatuses, corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, ImageID: c.Image, Ready: true, Started: &started,
			ContainerID: "simulated://" + string(pod.UID) + "/" + c.Name,
			State:       corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
		})
	}
	_, err := pods.UpdateStatus(ctx, running, metav1.UpdateOptions{})
	return err
}

// podIP makes up a stable address for a pod in 10.244.0.0/16.
func podIP(pod *corev1.Pod) string {
	h := fnv.New32a()
	h.Write([]byte(pod.UID))
	v := h.Sum32()
	return fmt.Sprintf("10.244.%d.%d", (v>>8)%256, v%254+1)
}

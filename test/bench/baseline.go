package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"

	"github.com/trainstep/trainstep/pkg/timeline"
)

// BaselineWorkers is how many goroutines the baseline creates objects with.
const BaselineWorkers = 64

// Objects are what `trainstep render -o json` prints for a job, in its order
// (the NetworkPolicy, the PodDisruptionBudget of a job whose ranks restart as
// a whole, ConfigMaps, Services, then Pods).
type Objects struct {
	NetworkPolicies []*networkingv1.NetworkPolicy
	Budgets         []*policyv1.PodDisruptionBudget
	ConfigMaps      []*corev1.ConfigMap
	Services        []*corev1.Service
	Pods            []*corev1.Pod
}

// Render runs `trainstep render -o json` for the job in namespace ns.
func Render(ctx context.Context, binary, jobFile, ns string) (Objects, error) {
	out, err := exec.CommandContext(ctx, binary, "render", "-f", jobFile, "-n", ns, "-o", "json").Output()
	if err != nil {
		var exitErr *exec.ExitError
		if errors.As(err, &exitErr) {
			return Objects{}, fmt.Errorf("rendering %s: %w\n%s", jobFile, err, exitErr.Stderr)
		}
		return Objects{}, fmt.Errorf("rendering %s: %w", jobFile, err)
	}
	var list struct {
		Items []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(out, &list); err != nil {
		return Objects{}, fmt.Errorf("decoding the rendered list: %w", err)
	}
	var objs Objects
	for i, raw := range list.Items {
		var meta metav1.TypeMeta
		if err := json.Unmarshal(raw, &meta); err != nil {
			return Objects{}, fmt.Errorf("decoding rendered item %d: %w", i, err)
		}
		switch meta.Kind {
		case "NetworkPolicy":
			np := &networkingv1.NetworkPolicy{}
			if err := json.Unmarshal(raw, np); err != nil {
				return Objects{}, fmt.Errorf("decoding rendered NetworkPolicy %d: %w", i, err)
			}
			objs.NetworkPolicies = append(objs.NetworkPolicies, np)
		case "PodDisruptionBudget":
			pdb := &policyv1.PodDisruptionBudget{}
			if err := json.Unmarshal(raw, pdb); err != nil {
				return Objects{}, fmt.Errorf("decoding rendered PodDisruptionBudget %d: %w", i, err)
			}
			objs.Budgets = append(objs.Budgets, pdb)
		case "ConfigMap":
			cm := &corev1.ConfigMap{}
			if err := json.Unmarshal(raw, cm); err != nil {
				return Objects{}, fmt.Errorf("decoding rendered ConfigMap %d: %w", i, err)
			}
			objs.ConfigMaps = append(objs.ConfigMaps, cm)
		case "Service":
			svc := &corev1.Service{}
			if err := json.Unmarshal(raw, svc); err != nil {
				return Objects{}, fmt.Errorf("decoding rendered Service %d: %w", i, err)
			}
			objs.Services = append(objs.Services, svc)
		case "Pod":
			pod := &corev1.Pod{}
			if err := json.Unmarshal(raw, pod); err != nil {
				return Objects{}, fmt.Errorf("decoding rendered Pod %d: %w", i, err)
			}
			objs.Pods = append(objs.Pods, pod)
		default:
			return Objects{}, fmt.Errorf("rendered item %d is a %s; the baseline creates only NetworkPolicies, PodDisruptionBudgets, ConfigMaps, Services and Pods", i, meta.Kind)
		}
	}
	return objs, nil
}

// UnlimitedClient is a clientset without client-side rate limiting (a
// negative QPS leaves client-go without a rate limiter), otherwise built like
// any client-go program's.
func UnlimitedClient(cfg *rest.Config) (kubernetes.Interface, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst, cfg.RateLimiter = -1, 0, nil
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("building the baseline client: %w", err)
	}
	return client, nil
}

// CreateBaselineTimed creates every object once, in order, from
// BaselineWorkers goroutines through a client without a rate limit built on
// cfg: the plainest fast client-go program. It records the loop's requests
// as trainstep's --timeline records its own, up to "last create"; started is
// the moment just before the first request.
func CreateBaselineTimed(ctx context.Context, cfg *rest.Config, objs Objects) (loop *timeline.Timeline, started time.Time, err error) {
	loop = timeline.New(time.Now())
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(loop.Wrap)
	client, err := UnlimitedClient(cfg)
	if err != nil {
		return nil, time.Time{}, err
	}
	started = time.Now()
	if err := createBaseline(ctx, client, objs, loop.Created); err != nil {
		return nil, started, fmt.Errorf("baseline creates: %w", err)
	}
	loop.Mark("last create")
	return loop, started, nil
}

// createBaseline creates every object once, in order, from BaselineWorkers
// goroutines, calling created after each create the API server accepted.
func createBaseline(ctx context.Context, client kubernetes.Interface, objs Objects, created func()) error {
	// The pods read the ConfigMaps (TF_CONFIG's cluster), and the
	// NetworkPolicy must hold before any pod exists: like trainstep, the
	// loop has them answered before it sends a Service or a pod, and the
	// PodDisruptionBudget too, which trainstep creates before the pods.
	sources := make([]func() error, 0, len(objs.NetworkPolicies)+len(objs.Budgets)+len(objs.ConfigMaps))
	for _, np := range objs.NetworkPolicies {
		sources = append(sources, func() error {
			_, err := client.NetworkingV1().NetworkPolicies(np.Namespace).Create(ctx, np, metav1.CreateOptions{})
			return err
		})
	}
	for _, pdb := range objs.Budgets {
		sources = append(sources, func() error {
			_, err := client.PolicyV1().PodDisruptionBudgets(pdb.Namespace).Create(ctx, pdb, metav1.CreateOptions{})
			return err
		})
	}
	for _, cm := range objs.ConfigMaps {
		sources = append(sources, func() error {
			_, err := client.CoreV1().ConfigMaps(cm.Namespace).Create(ctx, cm, metav1.CreateOptions{})
			return err
		})
	}
	rest := make([]func() error, 0, len(objs.Services)+len(objs.Pods))
	for _, svc := range objs.Services {
		rest = append(rest, func() error {
			_, err := client.CoreV1().Services(svc.Namespace).Create(ctx, svc, metav1.CreateOptions{})
			return err
		})
	}
	for _, pod := range objs.Pods {
		rest = append(rest, func() error {
			_, err := client.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{})
			return err
		})
	}
	for _, wave := range [][]func() error{sources, rest} {
		err := forEach(len(wave), func(i int) error {
			err := wave[i]()
			if err == nil {
				created()
			}
			return err
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// DeleteAll deletes every pod and Service of namespace ns from
// BaselineWorkers goroutines. Graceful deletes are what trainstep sends (the
// node, here KWOK, completes them); otherwise pods go at once.
func DeleteAll(ctx context.Context, client kubernetes.Interface, ns string, graceful bool) error {
	options := metav1.DeleteOptions{}
	if !graceful {
		now := int64(0)
		options.GracePeriodSeconds = &now
	}
	pods, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing pods to delete: %w", err)
	}
	services, err := client.CoreV1().Services(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing services to delete: %w", err)
	}
	var remove []func() error
	for _, pod := range pods.Items {
		remove = append(remove, func() error { return client.CoreV1().Pods(ns).Delete(ctx, pod.Name, options) })
	}
	for _, svc := range services.Items {
		remove = append(remove, func() error { return client.CoreV1().Services(ns).Delete(ctx, svc.Name, metav1.DeleteOptions{}) })
	}
	return forEach(len(remove), func(i int) error {
		if err := remove[i](); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		return nil
	})
}

// DeleteWay is how the baseline deletes a job's objects.
type DeleteWay string

// The two ways the baseline tears a job down, each measured.
const (
	// DeleteLoop deletes every pod and Service by name from BaselineWorkers goroutines.
	DeleteLoop DeleteWay = "parallel deletes"
	// DeleteByLabel sends one DeleteCollection of the job's pods by label and
	// one of its Services (or, where the API server does not offer
	// deletecollection on Services, deletes them by name in parallel).
	DeleteByLabel DeleteWay = "DeleteCollection"
)

// CanDeleteServiceCollection says whether the API server offers the
// deletecollection verb on Services.
func CanDeleteServiceCollection(client kubernetes.Interface) (bool, error) {
	resources, err := client.Discovery().ServerResourcesForGroupVersion("v1")
	if err != nil {
		return false, fmt.Errorf("discovering the core API's verbs: %w", err)
	}
	for _, r := range resources.APIResources {
		if r.Name == "services" {
			return slices.Contains(r.Verbs, "deletecollection"), nil
		}
	}
	return false, errors.New("the core API lists no services resource")
}

// collectionAttempts bounds the DeleteCollection requests for one kind of
// object. The API server deletes a collection one object after another
// (--delete-collection-workers defaults to 1) and ends any request after 60 s
// (--request-timeout): at thousands of pods a client repeats the request
// until one completes.
const collectionAttempts = 5

// DeleteCollections deletes the pods and Services of namespace ns that match
// selector with DeleteCollection, the two side by side, each repeated until
// one request completes; the pods' deletes are graceful, as trainstep's.
// Without serviceCollection the Services are deleted by name from
// BaselineWorkers goroutines instead. It returns how many DeleteCollection
// requests it sent.
func DeleteCollections(ctx context.Context, client kubernetes.Interface, ns, selector string, serviceCollection bool) (int, error) {
	list := metav1.ListOptions{LabelSelector: selector}
	var wg sync.WaitGroup
	var podRequests, serviceRequests int
	var podErr, serviceErr error
	wg.Add(2)
	go func() {
		defer wg.Done()
		podRequests, podErr = repeat(ctx, func() error {
			return client.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, list)
		})
		if podErr != nil {
			podErr = fmt.Errorf("deleting the pod collection: %w", podErr)
		}
	}()
	go func() {
		defer wg.Done()
		if serviceCollection {
			serviceRequests, serviceErr = repeat(ctx, func() error {
				// client-go's typed Services client has no DeleteCollection: the
				// same request through its REST client.
				return client.CoreV1().RESTClient().Delete().Namespace(ns).Resource("services").
					VersionedParams(&list, scheme.ParameterCodec).Body(&metav1.DeleteOptions{}).Do(ctx).Error()
			})
			if serviceErr != nil {
				serviceErr = fmt.Errorf("deleting the service collection: %w", serviceErr)
			}
			return
		}
		services, err := client.CoreV1().Services(ns).List(ctx, list)
		if err != nil {
			serviceErr = fmt.Errorf("listing services to delete: %w", err)
			return
		}
		serviceErr = forEach(len(services.Items), func(i int) error {
			err := client.CoreV1().Services(ns).Delete(ctx, services.Items[i].Name, metav1.DeleteOptions{})
			if apierrors.IsNotFound(err) {
				return nil
			}
			return err
		})
	}()
	wg.Wait()
	return podRequests + serviceRequests, errors.Join(podErr, serviceErr)
}

// repeat calls request until it succeeds, collectionAttempts times at most
// or until ctx ends, and returns how often it called it and its last error.
func repeat(ctx context.Context, request func() error) (int, error) {
	var err error
	for n := 1; ; n++ {
		if err = request(); err == nil || n == collectionAttempts || ctx.Err() != nil {
			return n, err
		}
	}
}

// forEach runs work(0..n-1) on BaselineWorkers goroutines and returns the
// first errors joined.
func forEach(n int, work func(i int) error) error {
	next := make(chan int)
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	for range min(BaselineWorkers, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := work(i); err != nil {
					mu.Lock()
					if len(errs) < 5 {
						errs = append(errs, err)
					}
					mu.Unlock()
				}
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	return errors.Join(errs...)
}

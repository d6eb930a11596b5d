package hubsync

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensions "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/flotilla-dev/flotilla/services/hubsync/crds"
)

// fieldManager owns what hubsync writes on the hub.
const fieldManager = crds.FieldManager

// hub holds the clients of the hub cluster.
type hub struct {
	kube kubernetes.Interface
	dyn  dynamic.Interface
	ext  apiextensions.Interface
}

func connectHub(rc *rest.Config) (*hub, error) {
	rc = rest.CopyConfig(rc)
	// Status writes and informers' lists come in bursts at start; the hub's own flow control
	// protects it, client-side throttling would only delay them.
	if rc.QPS == 0 {
		rc.QPS, rc.Burst = 50, 100
	}
	kube, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("hub client: %w", err)
	}
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("hub client: %w", err)
	}
	ext, err := apiextensions.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("hub client: %w", err)
	}
	return &hub{kube: kube, dyn: dyn, ext: ext}, nil
}

// installCRDs applies the Fleet CRDs (server-side, so a CRD changed by a newer hubsync is
// brought to this version's, and fields others own are left alone) and waits until the hub
// serves them.
func (h *hub) installCRDs(ctx context.Context) error {
	all, err := crds.All()
	if err != nil {
		return err
	}
	for _, crd := range all {
		data, err := json.Marshal(crd)
		if err != nil {
			return fmt.Errorf("encode CRD %s: %w", crd.Name, err)
		}
		force := true
		if _, err := h.ext.ApiextensionsV1().CustomResourceDefinitions().Patch(ctx, crd.Name, types.ApplyPatchType, data,
			metav1.PatchOptions{FieldManager: fieldManager, Force: &force}); err != nil {
			return fmt.Errorf("install CRD %s: %w", crd.Name, err)
		}
	}
	for _, crd := range all {
		if err := h.waitEstablished(ctx, crd.Name); err != nil {
			return err
		}
	}
	return nil
}

func (h *hub) waitEstablished(ctx context.Context, name string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		crd, err := h.ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			for _, c := range crd.Status.Conditions {
				if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
					return nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("CRD %s is not established after a minute: %v", name, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// ensureNamespace creates hubsync's namespace on the hub when it is missing.
func (h *hub) ensureNamespace(ctx context.Context, name string) error {
	_, err := h.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}},
		metav1.CreateOptions{FieldManager: fieldManager})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace %s on the hub: %w", name, err)
	}
	return nil
}

// webhookConfiguration names the ValidatingWebhookConfiguration hubsync keeps on the hub.
const webhookConfiguration = "flotilla-hubsync"

// registerWebhook points the hub's admission at the webhook for every Fleet kind hubsync
// installs. A request fails when the webhook cannot be reached (failurePolicy Fail): an
// object the webhook never judged could be one hubsync then refuses to publish.
func (h *hub) registerWebhook(ctx context.Context, client admissionregistrationv1.WebhookClientConfig) error {
	groups, resources := map[string]bool{}, []string{}
	for _, k := range crds.Kinds {
		groups[k.GVK.Group] = true
		resources = append(resources, k.Plural)
	}
	groupList := slices.Sorted(maps.Keys(groups))
	fail, none, scope := admissionregistrationv1.Fail, admissionregistrationv1.SideEffectClassNone, admissionregistrationv1.AllScopes
	timeout := int32(10)
	cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{
		TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingWebhookConfiguration"},
		ObjectMeta: metav1.ObjectMeta{Name: webhookConfiguration},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name:         "validate.hubsync.flotilla.dev",
			ClientConfig: client,
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
				Rule:       admissionregistrationv1.Rule{APIGroups: groupList, APIVersions: []string{"*"}, Resources: resources, Scope: &scope},
			}},
			FailurePolicy: &fail, SideEffects: &none, TimeoutSeconds: &timeout,
			AdmissionReviewVersions: []string{"v1"},
		}},
	}
	data, err := json.Marshal(cfg)
	if err != nil {
		return fmt.Errorf("encode webhook configuration: %w", err)
	}
	force := true
	_, err = h.kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Patch(ctx, webhookConfiguration, types.ApplyPatchType, data,
		metav1.PatchOptions{FieldManager: fieldManager, Force: &force})
	if err != nil {
		return fmt.Errorf("register the admission webhook on the hub: %w", err)
	}
	return nil
}

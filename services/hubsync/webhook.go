package hubsync

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/services/fleetctl/change"
	"github.com/flotilla-dev/flotilla/services/fleetctl/input"
)

// WebhookPath is where the admission webhook answers.
const WebhookPath = "/validate"

// maxReviewBytes bounds an AdmissionReview read: an object is at most about 1.5 MiB, and a
// review holds it twice on update.
const maxReviewBytes = 8 << 20

// webhook is the validating admission webhook: it judges the Fleet objects applied to the
// hub as fleetctl apply judges them, so kubectl refuses an invalid one at once with the
// field paths and words fleetctl uses, instead of hubsync finding it later.
type webhook struct {
	log *slog.Logger
}

func (wh *webhook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "POST an AdmissionReview", http.StatusMethodNotAllowed)
		return
	}
	var review admissionv1.AdmissionReview
	if err := json.NewDecoder(io.LimitReader(r.Body, maxReviewBytes)).Decode(&review); err != nil || review.Request == nil {
		http.Error(w, "the body is not an admission.k8s.io/v1 AdmissionReview with a request", http.StatusBadRequest)
		return
	}
	resp := Review(review.Request)
	if !resp.Allowed {
		wh.log.Info("refused at admission", "kind", review.Request.Kind.Kind, "name", review.Request.Name,
			"operation", review.Request.Operation, "reason", resp.Result.Message)
	}
	out := admissionv1.AdmissionReview{TypeMeta: review.TypeMeta, Response: resp}
	w.Header().Set("Content-Type", "application/json")
	if err := json.NewEncoder(w).Encode(out); err != nil {
		wh.log.Warn("write admission response", "error", err)
	}
}

// Review judges one admission request: the object must decode, and validate, as fleetctl
// apply would take it from a file; an update of a placement must keep Fleet's update rules.
// A refusal is 422 Invalid with every problem as a cause at its field path.
func Review(req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	resp := &admissionv1.AdmissionResponse{UID: req.UID, Allowed: true}
	if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update {
		return resp
	}
	doc, errs := judge(req.Object.Raw)
	if doc != nil {
		resp.Warnings = doc.Warnings
	}
	if len(errs) == 0 && req.Operation == admissionv1.Update && doc != nil {
		errs = judgeUpdate(req.OldObject.Raw, doc.Object)
	}
	if len(errs) == 0 {
		return resp
	}
	resp.Allowed = false
	resp.Result = invalid(req, errs)
	return resp
}

// judge decodes and validates an object, as fleetctl apply does; a propagation policy must
// also convert into placements.
func judge(raw []byte) (*api.Document, api.ErrorList) {
	docs, err := api.DecodeAll(bytes.NewReader(raw))
	if err != nil {
		return nil, decodeErrors(err)
	}
	if len(docs) != 1 {
		return nil, api.ErrorList{{Type: api.ErrorTypeInvalid, Detail: fmt.Sprintf("expected one object, found %d", len(docs))}}
	}
	doc := docs[0]
	api.Default(doc.Object)
	if errs := api.Validate(doc.Object); len(errs) > 0 {
		return &doc, errs
	}
	_, problems := change.ForApply([]input.Document{{Source: "hub", Document: doc}}, change.Options{NamespaceAsGiven: true})
	var errs api.ErrorList
	for _, p := range problems {
		errs = append(errs, &api.FieldError{Type: api.ErrorTypeInvalid, Field: p.Field, Detail: p.Detail})
	}
	return &doc, errs
}

// judgeUpdate applies Fleet's update rules to a placement's new spec (a
// ClusterResourcePlacement's or a ResourcePlacement's: the same rules).
func judgeUpdate(oldRaw []byte, obj api.Object) api.ErrorList {
	next, ok := obj.(*api.ClusterResourcePlacement)
	if !ok || len(oldRaw) == 0 {
		return nil
	}
	old, err := api.Decode(oldRaw)
	if err != nil {
		return nil // an old object fleetctl could not read: nothing to hold the update to
	}
	prev, ok := old.(*api.ClusterResourcePlacement)
	if !ok {
		return nil
	}
	api.Default(prev)
	return api.ValidatePlacementUpdate(prev, next)
}

// decodeErrors flattens DecodeAll's errors (one *api.DocumentError per document, each
// usually an api.ErrorList) into field errors.
func decodeErrors(err error) api.ErrorList {
	errs := []error{err}
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		errs = joined.Unwrap()
	}
	var out api.ErrorList
	for _, e := range errs {
		var de *api.DocumentError
		var list api.ErrorList
		switch {
		case errors.As(e, &de) && errors.As(de.Err, &list):
			out = append(out, list...)
		case de != nil:
			out = append(out, &api.FieldError{Type: api.ErrorTypeInvalid, Detail: de.Err.Error()})
		default:
			out = append(out, &api.FieldError{Type: api.ErrorTypeInvalid, Detail: e.Error()})
		}
	}
	return out
}

// invalid is the refusal kubectl shows: 422 Invalid, each problem a cause at its field.
func invalid(req *admissionv1.AdmissionRequest, errs api.ErrorList) *metav1.Status {
	var lines []string
	causes := make([]metav1.StatusCause, 0, len(errs))
	for _, e := range errs {
		e := *e
		e.Line = 0 // lines of the JSON the API server sent, not of the user's file
		lines = append(lines, e.Error())
		causes = append(causes, metav1.StatusCause{Type: causeType(e.Type), Field: e.Field, Message: e.Detail})
	}
	return &metav1.Status{
		Status: metav1.StatusFailure, Code: http.StatusUnprocessableEntity, Reason: metav1.StatusReasonInvalid,
		Message: fmt.Sprintf("%s %q is invalid: %s", req.Kind.Kind, req.Name, strings.Join(lines, "; ")),
		Details: &metav1.StatusDetails{Name: req.Name, Group: req.Kind.Group, Kind: req.Kind.Kind, Causes: causes},
	}
}

func causeType(t api.ErrorType) metav1.CauseType {
	switch t {
	case api.ErrorTypeRequired:
		return metav1.CauseTypeFieldValueRequired
	case api.ErrorTypeNotSupported:
		return metav1.CauseTypeFieldValueNotSupported
	case api.ErrorTypeDuplicate:
		return metav1.CauseTypeFieldValueDuplicate
	case api.ErrorTypeTooMany:
		return metav1.CauseTypeTooMany
	case api.ErrorTypeUnknownField:
		return metav1.CauseTypeFieldValueNotFound
	}
	return metav1.CauseTypeFieldValueInvalid
}

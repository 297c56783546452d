package main

import (
	"bytes"
	"context"
	"errors"
	"html/template"
	"log"
	"net/http"
	"slices"
	"time"

	authzv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apiserver/pkg/authentication/user"
)

// listWithin bounds a list of ConfigMaps: a page that waits longer tells
// the person the cluster did not answer.
const listWithin = 10 * time.Second

// maxListed is the most ConfigMaps a page lists; it says when there are
// more.
const maxListed = 500

// impersonationKinds are the resources an impersonation check names when
// the API server refuses to let the dashboard act as someone: that refusal
// is the dashboard's RBAC, not the person's.
var impersonationKinds = []string{"users", "groups", "uids", "userextras", "serviceaccounts", "nodes"}

// configMapsView is what the page GET /configmaps shows.
type configMapsView struct {
	identity
	Namespace string
	Names     []string
	More      bool   // the list had more than maxListed
	Refused   string // why the cluster refused, in its words; "" when it listed
	Dashboard bool   // the refusal was of the dashboard acting as the person
	Masters   bool   // the person is in system:masters, whom no service may act as
}

// configMapsHTML is GET /configmaps. Its ids (user, namespace, configmaps,
// none, more, forbidden, reason) are for tests and scripts.
var configMapsHTML = template.Must(template.New("configmaps").Parse(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>authvault dashboard: ConfigMaps</title>
</head>
<body>
<h1>ConfigMaps in <span id="namespace">{{.Namespace}}</span></h1>
<p>as the cluster lets <strong id="user">{{.User}}</strong> see them: the dashboard asks the API server as you, and its RBAC decides.</p>
{{- if .Refused}}
{{- if .Masters}}
<p id="forbidden">This cluster does not let the dashboard act as a member of system:masters (constrained impersonation never does, whatever RBAC grants): use kubectl as yourself, or a user outside that group.</p>
{{- else if .Dashboard}}
<p id="forbidden">The cluster does not let the dashboard act as you: its own RBAC lacks a permission to impersonate (see deploy/dashboard).</p>
{{- else}}
<p id="forbidden">You may not list ConfigMaps in {{.Namespace}}.</p>
{{- end}}
<p>The API server said: <q id="reason">{{.Refused}}</q></p>
{{- else if .Names}}
<ul id="configmaps">
{{- range .Names}}
<li>{{.}}</li>
{{- end}}
</ul>
{{- if .More}}
<p id="more">and more: only the first {{len .Names}} are listed.</p>
{{- end}}
{{- else}}
<p id="none">There are no ConfigMaps in {{.Namespace}}.</p>
{{- end}}
<form method="get" action="configmaps">
<input name="namespace" value="{{.Namespace}}" aria-label="namespace">
<button type="submit">Show</button>
</form>
<p><a href="notes">Notes</a></p>
</body>
</html>
`))

// configMaps is GET /configmaps?namespace=NS: the names of the ConfigMaps
// in NS (the dashboard's --namespace when not given), listed as the
// caller. Nothing is cached: each page is the API server's answer of the
// moment, so a person whose access is revoked sees it at their next click.
func (d *dashboard) configMaps(w http.ResponseWriter, r *http.Request, who identity) {
	ns := r.URL.Query().Get("namespace")
	if ns == "" {
		ns = d.namespace
	}
	if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
		http.Error(w, "dashboard: namespace "+ns+" is not a namespace's name: "+errs[0], http.StatusBadRequest)
		return
	}
	if d.cluster == nil {
		http.Error(w, "dashboard: not connected to a cluster", http.StatusServiceUnavailable)
		return
	}
	view := configMapsView{identity: who, Namespace: ns}
	status := http.StatusOK
	ctx, cancel := context.WithTimeout(r.Context(), listWithin)
	defer cancel()
	// r's context carries the caller the middleware verified: the client
	// acts as them (addonauth.ActAsCaller).
	list, err := d.cluster.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{Limit: maxListed})
	var refusal apierrors.APIStatus
	switch {
	case err == nil:
		for _, cm := range list.Items {
			view.Names = append(view.Names, cm.Name)
		}
		view.More = list.Continue != ""
	case errors.As(err, &refusal) && refusal.Status().Reason == metav1.StatusReasonForbidden:
		// The API server's own words, which name the person (or the
		// dashboard) and what was refused: no secret is in them.
		status = http.StatusForbidden
		view.Refused = refusal.Status().Message
		details := refusal.Status().Details
		view.Dashboard = details != nil && slices.Contains(impersonationKinds, details.Kind) || !d.personRefused(ctx, ns)
		// Constrained impersonation refuses system:masters whatever RBAC
		// says: no permission of the dashboard's would change it. The
		// API server names the first impersonation mode it tried, which
		// may be another's, so the person's groups say it too.
		view.Masters = details != nil && details.Kind == "groups" && details.Name == user.SystemPrivilegedGroup ||
			view.Dashboard && slices.Contains(who.Groups, user.SystemPrivilegedGroup)
	default:
		log.Printf("dashboard: listing ConfigMaps in %s as %s: %v", ns, who.User, err)
		http.Error(w, "dashboard: the cluster did not answer: try again", http.StatusBadGateway)
		return
	}
	var buf bytes.Buffer
	if err := configMapsHTML.Execute(&buf, view); err != nil {
		log.Printf("dashboard: rendering the ConfigMaps page: %v", err)
		http.Error(w, "dashboard: could not render the page", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = buf.WriteTo(w)
}

// personRefused tells whether a refused list was the person's own: it asks
// the API server, as them, whether they may list ConfigMaps in ns. When
// they may, or when the dashboard may not even ask as them, the refusal
// was of the dashboard acting as them (constrained impersonation names the
// resource requested, not an impersonation, when it lacks impersonate-on).
// When the question goes unanswered, the refusal is taken as theirs, and
// the page shows the API server's words either way.
func (d *dashboard) personRefused(ctx context.Context, ns string) bool {
	review, err := d.cluster.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authzv1.SelfSubjectAccessReview{
		Spec: authzv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authzv1.ResourceAttributes{Namespace: ns, Verb: "list", Resource: "configmaps"}},
	}, metav1.CreateOptions{})
	switch {
	case apierrors.IsForbidden(err):
		return false
	case err != nil:
		log.Printf("dashboard: asking whether the caller may list ConfigMaps in %s: %v", ns, err)
		return true
	}
	return !review.Status.Allowed
}

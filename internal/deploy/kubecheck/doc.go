// Package kubecheck holds the tests that decode devicesim deploy's
// manifests strictly into the Kubernetes API's own types (k8s.io/api), and
// that check every pod in them against the restricted Pod Security
// Standard, field by field and with Kubernetes' own admission check
// (k8s.io/pod-security-admission). It is a module of its own: k8s.io/api
// needs a newer Go than the firmware does, and neither the firmware nor
// devicesim should carry it.
package kubecheck

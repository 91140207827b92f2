// Package kubecheck holds the test that decodes devicesim deploy's
// manifests strictly into the Kubernetes API's own types (k8s.io/api). It
// is a module of its own: k8s.io/api needs a newer Go than the firmware
// does, and neither the firmware nor devicesim should carry it.
package kubecheck

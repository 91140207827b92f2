package kubecheck_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	psa "k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"
	"sigs.k8s.io/yaml"

	"github.com/herdguard/herdguard/internal/deploy"
)

// The restricted Pod Security Standard, baseline included, field by field,
// as Kubernetes 1.37 enforces it (k8s.io/pod-security-admission/policy,
// whose evaluator the tests also run, so that a field missed here is still
// caught there). Where the standard exempts a pod in a user namespace
// (hostUsers: false), this check does not: it is stricter, never looser.

// podOf is a pod a manifest would make: the object it is in, and its
// metadata and spec (a Job's are its template's).
type podOf struct {
	object string
	meta   metav1.ObjectMeta
	spec   corev1.PodSpec
}

// podsIn decodes a manifest strictly and returns the pods it makes. A kind
// it does not know fails the test, so that no pod escapes the check.
func podsIn(t *testing.T, f deploy.File) []podOf {
	t.Helper()
	var head struct {
		Kind     string `json:"kind"`
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
	}
	require.NoError(t, yaml.Unmarshal(f.Data, &head), f.Name)
	object := fmt.Sprintf("%s (%s %s)", f.Name, head.Kind, head.Metadata.Name)
	switch head.Kind {
	case "Pod":
		var p corev1.Pod
		strict(t, f, &p)
		return []podOf{{object, p.ObjectMeta, p.Spec}}
	case "Job":
		var j batchv1.Job
		strict(t, f, &j)
		return []podOf{{object, j.Spec.Template.ObjectMeta, j.Spec.Template.Spec}}
	case "ConfigMap", "PersistentVolumeClaim", "Kustomization":
		return nil
	}
	t.Fatalf("%s: kind %q: teach podsIn whether, and where, it holds a pod", f.Name, head.Kind)
	return nil
}

// findings collects what a pod breaks, each naming the object, the pod or
// container, and the field.
type findings struct {
	object string
	list   []string
}

func (f *findings) add(where, field, why string, args ...any) {
	f.list = append(f.list, fmt.Sprintf("%s: %s: %s: %s", f.object, where, field, fmt.Sprintf(why, args...)))
}

// restricted lists every field of p that the restricted profile refuses.
func restricted(p podOf) []string {
	f := &findings{object: p.object}
	pod := p.spec.SecurityContext
	if pod == nil {
		pod = &corev1.PodSecurityContext{}
	}
	podLevel(f, p.meta, p.spec, pod)
	for _, c := range containersOf(p.spec) {
		containerLevel(f, c.where, c.Container, pod)
	}
	return f.list
}

// podLevel checks the pod's own fields.
func podLevel(f *findings, meta metav1.ObjectMeta, spec corev1.PodSpec, sc *corev1.PodSecurityContext) {
	for _, host := range []struct {
		field string
		on    bool
	}{{"spec.hostNetwork", spec.HostNetwork}, {"spec.hostPID", spec.HostPID}, {"spec.hostIPC", spec.HostIPC}} {
		if host.on {
			f.add("pod", host.field, "true: the host's namespace is shared")
		}
	}
	if sc.RunAsNonRoot != nil && !*sc.RunAsNonRoot {
		f.add("pod", "spec.securityContext.runAsNonRoot", "false: want true")
	}
	if sc.RunAsUser != nil && *sc.RunAsUser == 0 {
		f.add("pod", "spec.securityContext.runAsUser", "0 (root): want another uid, or unset")
	}
	if sc.SeccompProfile != nil && !confined(sc.SeccompProfile.Type) {
		f.add("pod", "spec.securityContext.seccompProfile.type", "%q: want RuntimeDefault or Localhost", sc.SeccompProfile.Type)
	}
	checkAppArmor(f, "pod", "spec.securityContext", sc.AppArmorProfile)
	checkSELinux(f, "pod", "spec.securityContext", sc.SELinuxOptions)
	if w := sc.WindowsOptions; w != nil && w.HostProcess != nil && *w.HostProcess {
		f.add("pod", "spec.securityContext.windowsOptions.hostProcess", "true: want false or unset")
	}
	for _, s := range sc.Sysctls {
		if !slices.Contains(safeSysctls, s.Name) {
			f.add("pod", "spec.securityContext.sysctls", "%s is not one of the safe sysctls", s.Name)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(meta.Annotations)) {
		if c, ok := strings.CutPrefix(k, "container.apparmor.security.beta.kubernetes.io/"); ok {
			if v := meta.Annotations[k]; v != "" && v != "runtime/default" && !strings.HasPrefix(v, "localhost/") {
				f.add("container "+c, "metadata.annotations['"+k+"']", "%q: want runtime/default or localhost/*", v)
			}
		}
	}
	for _, v := range spec.Volumes {
		for _, kind := range volumeKinds(v.VolumeSource) {
			if !slices.Contains(allowedVolumes, kind) {
				f.add("pod", "spec.volumes["+v.Name+"]."+kind, "not a volume type the restricted profile allows (%s)",
					strings.Join(allowedVolumes, ", "))
			}
		}
	}
}

// named is a container and what kind it is ("container", "init
// container", "ephemeral container") and its name.
type named struct {
	where string
	corev1.Container
}

// containersOf is every container of a pod: the check covers them all.
func containersOf(spec corev1.PodSpec) []named {
	var out []named
	for _, c := range spec.InitContainers {
		out = append(out, named{"init container " + c.Name, c})
	}
	for _, c := range spec.Containers {
		out = append(out, named{"container " + c.Name, c})
	}
	for _, c := range spec.EphemeralContainers {
		out = append(out, named{"ephemeral container " + c.Name, corev1.Container(c.EphemeralContainerCommon)})
	}
	return out
}

// containerLevel checks one container's fields, against the pod's where a
// container may leave a field to the pod.
func containerLevel(f *findings, where string, c corev1.Container, pod *corev1.PodSecurityContext) {
	const field = "securityContext."
	sc := c.SecurityContext
	if sc == nil {
		sc = &corev1.SecurityContext{}
	}
	if sc.Privileged != nil && *sc.Privileged {
		f.add(where, field+"privileged", "true: want false or unset")
	}
	if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		f.add(where, field+"allowPrivilegeEscalation", "%s: want false", setOrNot(sc.AllowPrivilegeEscalation))
	}
	if sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") {
		f.add(where, field+"capabilities.drop", "does not hold ALL")
	}
	if sc.Capabilities != nil {
		for _, c := range sc.Capabilities.Add {
			if c != "NET_BIND_SERVICE" {
				f.add(where, field+"capabilities.add", "%s: only NET_BIND_SERVICE may be added", c)
			}
		}
	}
	switch {
	case sc.RunAsNonRoot != nil && !*sc.RunAsNonRoot:
		f.add(where, field+"runAsNonRoot", "false: want true")
	case sc.RunAsNonRoot == nil && (pod.RunAsNonRoot == nil || !*pod.RunAsNonRoot):
		f.add(where, field+"runAsNonRoot", "unset here and not true for the pod: want true")
	}
	if sc.RunAsUser != nil && *sc.RunAsUser == 0 {
		f.add(where, field+"runAsUser", "0 (root): want another uid, or unset")
	}
	switch {
	case sc.SeccompProfile != nil && !confined(sc.SeccompProfile.Type):
		f.add(where, field+"seccompProfile.type", "%q: want RuntimeDefault or Localhost", sc.SeccompProfile.Type)
	case sc.SeccompProfile == nil && pod.SeccompProfile == nil:
		f.add(where, field+"seccompProfile.type", "unset here and for the pod: want RuntimeDefault or Localhost")
	}
	checkAppArmor(f, where, "securityContext", sc.AppArmorProfile)
	checkSELinux(f, where, "securityContext", sc.SELinuxOptions)
	if sc.ProcMount != nil && *sc.ProcMount != corev1.DefaultProcMount {
		f.add(where, field+"procMount", "%q: want Default or unset", *sc.ProcMount)
	}
	if w := sc.WindowsOptions; w != nil && w.HostProcess != nil && *w.HostProcess {
		f.add(where, field+"windowsOptions.hostProcess", "true: want false or unset")
	}
	for _, p := range c.Ports {
		if p.HostPort != 0 {
			f.add(where, "ports["+p.Name+"].hostPort", "%d: want 0 or unset", p.HostPort)
		}
	}
	hosts := hostsOf(c)
	for _, field := range slices.Sorted(maps.Keys(hosts)) {
		f.add(where, field, "%q: a probe or hook may only reach its own pod", hosts[field])
	}
}

// hostsOf is every host a container's probes and lifecycle hooks name.
func hostsOf(c corev1.Container) map[string]string {
	hosts := map[string]string{}
	handler := func(field string, get *corev1.HTTPGetAction, tcp *corev1.TCPSocketAction) {
		if get != nil && get.Host != "" {
			hosts[field+".httpGet.host"] = get.Host
		}
		if tcp != nil && tcp.Host != "" {
			hosts[field+".tcpSocket.host"] = tcp.Host
		}
	}
	for name, p := range map[string]*corev1.Probe{"livenessProbe": c.LivenessProbe, "readinessProbe": c.ReadinessProbe,
		"startupProbe": c.StartupProbe} {
		if p != nil {
			handler(name, p.HTTPGet, p.TCPSocket)
		}
	}
	if l := c.Lifecycle; l != nil {
		for name, h := range map[string]*corev1.LifecycleHandler{"lifecycle.postStart": l.PostStart, "lifecycle.preStop": l.PreStop} {
			if h != nil {
				handler(name, h.HTTPGet, h.TCPSocket)
			}
		}
	}
	return hosts
}

func setOrNot(b *bool) string {
	if b == nil {
		return "unset"
	}
	return fmt.Sprint(*b)
}

// confined says whether a seccomp profile type is one the profile allows.
func confined(t corev1.SeccompProfileType) bool {
	return t == corev1.SeccompProfileTypeRuntimeDefault || t == corev1.SeccompProfileTypeLocalhost
}

func checkAppArmor(f *findings, where, field string, p *corev1.AppArmorProfile) {
	if p != nil && p.Type != corev1.AppArmorProfileTypeRuntimeDefault && p.Type != corev1.AppArmorProfileTypeLocalhost {
		f.add(where, field+".appArmorProfile.type", "%q: want RuntimeDefault, Localhost or unset", p.Type)
	}
}

func checkSELinux(f *findings, where, field string, o *corev1.SELinuxOptions) {
	if o == nil {
		return
	}
	if !slices.Contains([]string{"", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"}, o.Type) {
		f.add(where, field+".seLinuxOptions.type", "%q: want container_t, container_init_t, container_kvm_t, container_engine_t or unset", o.Type)
	}
	if o.User != "" {
		f.add(where, field+".seLinuxOptions.user", "%q: want unset", o.User)
	}
	if o.Role != "" {
		f.add(where, field+".seLinuxOptions.role", "%q: want unset", o.Role)
	}
}

// volumeKinds is the volume types a volume source sets, by their API names:
// read from its JSON, so that a type added to the API is refused unless
// allowedVolumes names it.
func volumeKinds(v corev1.VolumeSource) []string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	var set map[string]json.RawMessage
	if err := json.Unmarshal(b, &set); err != nil {
		panic(err)
	}
	return slices.Sorted(maps.Keys(set))
}

// allowedVolumes are the volume types the restricted profile allows.
var allowedVolumes = []string{"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "image", "persistentVolumeClaim",
	"projected", "secret"}

// safeSysctls are the sysctls the baseline profile allows.
var safeSysctls = []string{"kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range", "net.ipv4.tcp_syncookies",
	"net.ipv4.ping_group_range", "net.ipv4.ip_unprivileged_port_start", "net.ipv4.ip_local_reserved_ports",
	"net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_fin_timeout", "net.ipv4.tcp_keepalive_intvl", "net.ipv4.tcp_keepalive_probes",
	"net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem", "net.ipv4.tcp_slow_start_after_idle", "net.ipv4.tcp_notsent_lowat"}

// admission is what Kubernetes' own Pod Security admission says of p in a
// namespace enforcing restricted at the latest version: "" if it admits it.
func admission(t *testing.T, p podOf) string {
	t.Helper()
	e, err := policy.NewEvaluator(policy.DefaultChecks(), nil)
	require.NoError(t, err)
	r := policy.AggregateCheckResults(e.EvaluatePod(psa.LevelVersion{Level: psa.LevelRestricted, Version: psa.LatestVersion()},
		&p.meta, &p.spec))
	if r.Allowed {
		return ""
	}
	return fmt.Sprintf("%s: Pod Security admission (restricted:latest) refuses it: %s", p.object, r.ForbiddenDetail())
}

// Every pod devicesim deploy renders, and every container in it, meets the
// restricted Pod Security Standard field by field, and Kubernetes' own
// admission check agrees: a namespace that enforces restricted runs the
// storm and the reports reader.
func TestEveryPodMeetsTheRestrictedPodSecurityStandard(t *testing.T) {
	for _, file := range []string{"../../../deploy/storm.yaml", "../testdata/three-shards.yaml"} {
		t.Run(filepath.Base(file), func(t *testing.T) {
			var pods []string
			for _, f := range render(t, file) {
				for _, p := range podsIn(t, f) {
					pods = append(pods, p.object)
					for _, v := range restricted(p) {
						t.Error(v)
					}
					if refusal := admission(t, p); refusal != "" {
						t.Error(refusal)
					}
				}
			}
			assert.Equal(t, []string{"job.yaml (Job storm-a)", "reports-reader.yaml (Pod storm-a-reports)"}, pods, "every pod was checked")
		})
	}
}

// render renders the manifests of a storm file as the other tests do.
func render(t *testing.T, stormPath string) []deploy.File {
	t.Helper()
	stormFile, err := os.ReadFile(stormPath)
	require.NoError(t, err)
	files, err := deploy.Render(stormFile, deploy.Options{Name: "storm-a", Image: "registry.example.com/devicesim:v1",
		Storage: "10Gi", StorageClass: "nfs"})
	require.NoError(t, err)
	return files
}

// The check refuses each field the profile names, and names it, where
// Kubernetes' own admission refuses it too; and it allows what the
// profile allows. Each case changes one field of the rendered reports
// reader, which passes as rendered.
func TestTheRestrictedCheckNamesEachField(t *testing.T) {
	var reader podOf
	for _, f := range render(t, "../testdata/three-shards.yaml") {
		if f.Name == "reports-reader.yaml" {
			reader = podsIn(t, f)[0]
		}
	}
	require.Empty(t, restricted(reader), "the rendered reader passes")
	for _, c := range fieldCases() {
		t.Run(c.name, func(t *testing.T) {
			p := podOf{object: reader.object, meta: *reader.meta.DeepCopy(), spec: *reader.spec.DeepCopy()}
			c.change(&p)
			found, refusal := restricted(p), admission(t, p)
			if c.field == "" {
				assert.Empty(t, found, "the profile allows it")
				assert.Empty(t, refusal, "Kubernetes admits it")
				return
			}
			require.NotEmpty(t, found, "not refused")
			assert.Contains(t, strings.Join(found, "\n"), c.field, "the finding names the field")
			assert.True(t, strings.HasPrefix(found[0], "reports-reader.yaml (Pod storm-a-reports): "), "the finding names the object: %s", found[0])
			assert.NotEmpty(t, refusal, "Kubernetes' own admission refuses it too")
		})
	}
}

// fieldCase changes one field of a pod that passes; field is what the
// finding must name, "" where the profile allows the change.
type fieldCase struct {
	name, field string
	change      func(p *podOf)
}

// fieldCases are the restricted profile's fields, each changed in turn.
func fieldCases() []fieldCase {
	yes, no, zero := ptr(true), ptr(false), ptr(int64(0))
	ctr := func(p *podOf) *corev1.SecurityContext { return p.spec.Containers[0].SecurityContext }
	return []fieldCase{
		{"host network", "spec.hostNetwork", func(p *podOf) { p.spec.HostNetwork = true }},
		{"host PID", "spec.hostPID", func(p *podOf) { p.spec.HostPID = true }},
		{"host IPC", "spec.hostIPC", func(p *podOf) { p.spec.HostIPC = true }},
		{"privileged", "securityContext.privileged", func(p *podOf) { ctr(p).Privileged = yes }},
		{"escalation unset", "securityContext.allowPrivilegeEscalation", func(p *podOf) { ctr(p).AllowPrivilegeEscalation = nil }},
		{"escalation allowed", "securityContext.allowPrivilegeEscalation", func(p *podOf) { ctr(p).AllowPrivilegeEscalation = yes }},
		{"ALL not dropped", "securityContext.capabilities.drop", func(p *podOf) { ctr(p).Capabilities.Drop = []corev1.Capability{"NET_RAW"} }},
		{"a capability added", "securityContext.capabilities.add", func(p *podOf) { ctr(p).Capabilities.Add = []corev1.Capability{"CHOWN"} }},
		{"NET_BIND_SERVICE added", "", func(p *podOf) { ctr(p).Capabilities.Add = []corev1.Capability{"NET_BIND_SERVICE"} }},
		{"root allowed for the pod", "spec.securityContext.runAsNonRoot", func(p *podOf) { p.spec.SecurityContext.RunAsNonRoot = no }},
		{"root allowed for the container", "securityContext.runAsNonRoot", func(p *podOf) { ctr(p).RunAsNonRoot = no }},
		{"non-root said nowhere", "securityContext.runAsNonRoot", func(p *podOf) { p.spec.SecurityContext.RunAsNonRoot = nil }},
		{"non-root said by the container", "", func(p *podOf) { p.spec.SecurityContext.RunAsNonRoot, ctr(p).RunAsNonRoot = nil, yes }},
		{"uid 0 for the pod", "spec.securityContext.runAsUser", func(p *podOf) { p.spec.SecurityContext.RunAsUser = zero }},
		{"uid 0 for the container", "securityContext.runAsUser", func(p *podOf) { ctr(p).RunAsUser = zero }},
		{"seccomp said nowhere", "securityContext.seccompProfile.type", func(p *podOf) { p.spec.SecurityContext.SeccompProfile = nil }},
		{"seccomp said by the container", "", func(p *podOf) {
			p.spec.SecurityContext.SeccompProfile, ctr(p).SeccompProfile = nil, &corev1.SeccompProfile{Type: "RuntimeDefault"}
		}},
		{"seccomp unconfined for the pod", "spec.securityContext.seccompProfile.type", func(p *podOf) {
			p.spec.SecurityContext.SeccompProfile.Type = corev1.SeccompProfileTypeUnconfined
		}},
		{"seccomp unconfined for the container", "securityContext.seccompProfile.type", func(p *podOf) {
			ctr(p).SeccompProfile = &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined}
		}},
		{"AppArmor unconfined", "securityContext.appArmorProfile.type", func(p *podOf) {
			ctr(p).AppArmorProfile = &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeUnconfined}
		}},
		{"AppArmor unconfined by annotation", "metadata.annotations", func(p *podOf) {
			p.meta.Annotations = map[string]string{"container.apparmor.security.beta.kubernetes.io/reports": "unconfined"}
		}},
		{"an SELinux type", "spec.securityContext.seLinuxOptions.type", func(p *podOf) {
			p.spec.SecurityContext.SELinuxOptions = &corev1.SELinuxOptions{Type: "spc_t"}
		}},
		{"an SELinux user", "securityContext.seLinuxOptions.user", func(p *podOf) { ctr(p).SELinuxOptions = &corev1.SELinuxOptions{User: "root"} }},
		{"an unmasked /proc", "securityContext.procMount", func(p *podOf) { ctr(p).ProcMount = ptr(corev1.UnmaskedProcMount) }},
		{"a Windows host process", "securityContext.windowsOptions.hostProcess", func(p *podOf) {
			ctr(p).WindowsOptions = &corev1.WindowsSecurityContextOptions{HostProcess: yes}
		}},
		{"an unsafe sysctl", "spec.securityContext.sysctls", func(p *podOf) {
			p.spec.SecurityContext.Sysctls = []corev1.Sysctl{{Name: "kernel.msgmax", Value: "65536"}}
		}},
		{"a safe sysctl", "", func(p *podOf) {
			p.spec.SecurityContext.Sysctls = []corev1.Sysctl{{Name: "net.ipv4.tcp_syncookies", Value: "1"}}
		}},
		{"a host port", "ports[http].hostPort", func(p *podOf) {
			p.spec.Containers[0].Ports = []corev1.ContainerPort{{Name: "http", ContainerPort: 8080, HostPort: 8080}}
		}},
		{"a probe of another host", "livenessProbe.httpGet.host", func(p *podOf) {
			p.spec.Containers[0].LivenessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{
				HTTPGet: &corev1.HTTPGetAction{Host: "169.254.169.254", Path: "/"}}}
		}},
		{"a hostPath volume", "spec.volumes[host].hostPath", func(p *podOf) {
			p.spec.Volumes = append(p.spec.Volumes, corev1.Volume{Name: "host",
				VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}})
		}},
		{"an NFS volume", "spec.volumes[share].nfs", func(p *podOf) {
			p.spec.Volumes = append(p.spec.Volumes, corev1.Volume{Name: "share",
				VolumeSource: corev1.VolumeSource{NFS: &corev1.NFSVolumeSource{Server: "nfs", Path: "/"}}})
		}},
		{"a secret volume", "", func(p *podOf) {
			p.spec.Volumes = append(p.spec.Volumes, corev1.Volume{Name: "key",
				VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "key"}}})
		}},
		{"a bare init container", "init container setup: securityContext.allowPrivilegeEscalation", func(p *podOf) {
			p.spec.InitContainers = []corev1.Container{{Name: "setup", Image: "busybox:1.37"}}
		}},
		{"a privileged ephemeral container", "ephemeral container debug: securityContext.privileged", func(p *podOf) {
			p.spec.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{
				Name: "debug", Image: "busybox:1.37", SecurityContext: ctr(p).DeepCopy()}}}
			p.spec.EphemeralContainers[0].SecurityContext.Privileged = yes
		}},
	}
}

func ptr[T any](v T) *T { return &v }

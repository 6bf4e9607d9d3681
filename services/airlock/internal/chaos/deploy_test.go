package chaos

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"gopkg.in/yaml.v3"

	"github.com/airlock-gate/airlock/services/shared/config"
	"github.com/airlock-gate/airlock/services/shared/natsauth"
)

// deployDir is the repository's deploy/.
var deployDir = filepath.Join("..", "..", "..", "..", "deploy")

// held is what one service process is given: the NATS user it connects
// as, the secret files it can read, and which secret settings it gets.
type held struct {
	Role     string
	Files    []string
	Settings []string
	Replicas int
}

// expected is what Topology says a service holds.
func expected(s Service) held {
	h := held{Role: s.Role, Files: []string{SeedFile(s.Role)}, Replicas: s.Replicas}
	add := func(on bool, setting string) {
		if on {
			h.Settings = append(h.Settings, setting)
		}
	}
	add(s.DecisionKey, "decision_key")
	add(s.FrontendKey, "frontend_key")
	add(s.AuditKey, "audit_key")
	add(s.ClickHouse, "clickhouse")
	add(s.SlackBot, "slack_bot")
	add(s.SlackSigning, "slack_signing")
	add(s.ToolSecrets, "tool_secrets")
	if s.DecisionKey {
		h.Files = append(h.Files, DecisionKeyFile)
	}
	if s.FrontendKey {
		h.Files = append(h.Files, FrontendKeyFile)
	}
	if s.AuditKey {
		h.Files = append(h.Files, AuditKeyFile)
	}
	return h.sorted()
}

func (h held) sorted() held {
	sort.Strings(h.Files)
	sort.Strings(h.Settings)
	return h
}

// settingsOf names the secret settings among environment variable names.
func settingsOf(env []string) []string {
	names := map[string]string{
		"AIRLOCK_SECURITY_DECISION_KEY_FILE": "decision_key", "AIRLOCK_SECURITY_FRONTEND_KEY_FILE": "frontend_key",
		"AIRLOCK_AUDIT_KEY_FILE": "audit_key", "AIRLOCK_AUDIT_KEY": "audit_key",
		"AIRLOCK_CLICKHOUSE_DSN": "clickhouse", "AIRLOCK_SLACK_BOT_TOKEN": "slack_bot", "AIRLOCK_SLACK_SIGNING_SECRET": "slack_signing",
		toolSecretEnv: "tool_secrets",
	}
	var out []string
	for _, e := range env {
		if s, ok := names[e]; ok && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// roleOfSeed reads the role from a seed file path (".../<role>.nk").
func roleOfSeed(path string) string { return strings.TrimSuffix(filepath.Base(path), ".nk") }

// --- Kubernetes ---

type k8sEnv struct {
	Name      string `yaml:"name"`
	Value     string `yaml:"value"`
	ValueFrom any    `yaml:"valueFrom"`
}

// k8sProbe is an HTTP probe.
type k8sProbe struct {
	HTTPGet *struct {
		Path string `yaml:"path"`
		Port int    `yaml:"port"`
	} `yaml:"httpGet"`
}

// k8sPeer is one source or destination of a NetworkPolicy rule.
type k8sPeer struct {
	PodSelector *struct {
		MatchLabels map[string]string `yaml:"matchLabels"`
	} `yaml:"podSelector"`
	NamespaceSelector *struct {
		MatchLabels map[string]string `yaml:"matchLabels"`
	} `yaml:"namespaceSelector"`
}

// k8sPort is a port of a NetworkPolicy rule.
type k8sPort struct {
	Port     int    `yaml:"port"`
	Protocol string `yaml:"protocol"`
}

type k8sPod struct {
	Containers []struct {
		Args           []string  `yaml:"args"`
		Env            []k8sEnv  `yaml:"env"`
		ReadinessProbe *k8sProbe `yaml:"readinessProbe"`
		LivenessProbe  *k8sProbe `yaml:"livenessProbe"`
		Resources      struct {
			Requests map[string]string `yaml:"requests"`
			Limits   map[string]string `yaml:"limits"`
		} `yaml:"resources"`
		Ports []struct {
			ContainerPort int    `yaml:"containerPort"`
			Name          string `yaml:"name"`
		} `yaml:"ports"`
		VolumeMounts []struct {
			Name      string `yaml:"name"`
			MountPath string `yaml:"mountPath"`
		} `yaml:"volumeMounts"`
		EnvFrom []struct {
			SecretRef struct {
				Name string `yaml:"name"`
			} `yaml:"secretRef"`
		} `yaml:"envFrom"`
	} `yaml:"containers"`
	Volumes []struct {
		Name   string `yaml:"name"`
		Secret *struct {
			SecretName  string `yaml:"secretName"`
			DefaultMode *int   `yaml:"defaultMode"`
			Optional    bool   `yaml:"optional"`
			Items       []struct {
				Key  string `yaml:"key"`
				Mode *int   `yaml:"mode"`
			} `yaml:"items"`
		} `yaml:"secret"`
	} `yaml:"volumes"`
}

type k8sObject struct {
	Kind     string `yaml:"kind"`
	Metadata struct {
		Name string `yaml:"name"`
	} `yaml:"metadata"`
	Data map[string]string `yaml:"data"`
	Spec struct {
		Replicas int `yaml:"replicas"`
		Template struct {
			Metadata struct {
				Labels map[string]string `yaml:"labels"`
			} `yaml:"metadata"`
			Spec k8sPod `yaml:"spec"`
		} `yaml:"template"`
		PodSelector struct {
			MatchLabels map[string]string `yaml:"matchLabels"`
		} `yaml:"podSelector"`
		PolicyTypes []string `yaml:"policyTypes"`
		Ingress     []struct {
			From  []k8sPeer `yaml:"from"`
			Ports []k8sPort `yaml:"ports"`
		} `yaml:"ingress"`
		Egress []struct {
			To    []k8sPeer `yaml:"to"`
			Ports []k8sPort `yaml:"ports"`
		} `yaml:"egress"`
		Ports []struct {
			Port       int    `yaml:"port"`
			TargetPort any    `yaml:"targetPort"`
			Name       string `yaml:"name"`
		} `yaml:"ports"`
		// Selector: a Service's labels (a Deployment's is matchLabels).
		Selector              map[string]any `yaml:"selector"`
		SessionAffinity       string         `yaml:"sessionAffinity"`
		SessionAffinityConfig struct {
			ClientIP struct {
				TimeoutSeconds int `yaml:"timeoutSeconds"`
			} `yaml:"clientIP"`
		} `yaml:"sessionAffinityConfig"`
	} `yaml:"spec"`
}

func readK8s(t *testing.T, name string) []k8sObject {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(deployDir, "k8s", name))
	if err != nil {
		t.Fatal(err)
	}
	var out []k8sObject
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	for {
		var o k8sObject
		if err := dec.Decode(&o); errors.Is(err, io.EOF) {
			return out
		} else if err != nil {
			t.Fatalf("deploy/k8s/%s: %v", name, err)
		}
		out = append(out, o)
	}
}

// heldByPod is what a pod's first container is given.
func heldByPod(p k8sPod, replicas int) held {
	h := held{Replicas: replicas}
	c := p.Containers[0]
	var env []string
	for _, e := range c.Env {
		env = append(env, e.Name)
		if e.Name == "AIRLOCK_NATS_NKEY_SEED_FILE" {
			h.Role = roleOfSeed(e.Value)
		}
	}
	for _, ef := range c.EnvFrom {
		if ef.SecretRef.Name == "airlock-tool-secrets" {
			env = append(env, toolSecretEnv)
		}
	}
	h.Settings = settingsOf(env)
	for _, v := range p.Volumes {
		// The NATS CA is public and every pod holds it; the gateway's
		// tokens and the optional one-tap key are the configuration's
		// (each checked on its own).
		if v.Secret != nil && v.Secret.SecretName != natsTLSSecret && v.Secret.SecretName != gatewayTokensSecret && v.Secret.SecretName != oneTapKeySecret {
			for _, it := range v.Secret.Items {
				h.Files = append(h.Files, it.Key)
			}
		}
	}
	return h.sorted()
}

func TestKubernetesManifestsMatchTheChaosLayout(t *testing.T) {
	objs := append(readK8s(t, "airlock.yaml"), readK8s(t, "nats.yaml")...)
	byName := map[string]k8sObject{}
	deployments := map[string]bool{}
	for _, o := range objs {
		byName[o.Kind+"/"+o.Metadata.Name] = o
		if o.Kind == "Deployment" {
			deployments[o.Metadata.Name] = true
		}
	}
	for _, s := range Topology() {
		t.Run(s.Name+"_holds_its_own_user_and_keys", func(t *testing.T) {
			d, ok := byName["Deployment/airlock-"+s.Name]
			if !ok {
				t.Fatalf("no Deployment airlock-%s in deploy/k8s/airlock.yaml", s.Name)
			}
			delete(deployments, "airlock-"+s.Name)
			if args := d.Spec.Template.Spec.Containers[0].Args; len(args) < 2 || args[0] != "serve" || args[1] != s.Name {
				t.Fatalf("airlock-%s runs %v, want serve %s", s.Name, args, s.Name)
			}
			got, want := heldByPod(d.Spec.Template.Spec, d.Spec.Replicas), expected(s)
			if !equalHeld(got, want) {
				t.Fatalf("airlock-%s holds %+v, the chaos layout runs it with %+v", s.Name, got, want)
			}
		})
	}
	// The audit service refuses a key file others can read (audit.LoadKey);
	// a secret volume's files are 0644 unless the manifest says otherwise.
	t.Run("the_audit_key_is_readable_by_its_owner_alone", func(t *testing.T) {
		found := false
		for _, o := range objs {
			for _, v := range o.Spec.Template.Spec.Volumes {
				if v.Secret == nil {
					continue
				}
				for _, it := range v.Secret.Items {
					if it.Key != AuditKeyFile {
						continue
					}
					found = true
					mode := 0o644
					if v.Secret.DefaultMode != nil {
						mode = *v.Secret.DefaultMode
					}
					if it.Mode != nil {
						mode = *it.Mode
					}
					if mode&0o077 != 0 {
						t.Fatalf("%s %s mounts %s with mode %04o: the audit service refuses a key others can read", o.Kind, o.Metadata.Name, AuditKeyFile, mode)
					}
				}
			}
		}
		if !found {
			t.Fatalf("no pod mounts %s", AuditKeyFile)
		}
	})
	t.Run("every_pod_verifies_nats_with_the_private_ca_and_may_reach_it", func(t *testing.T) {
		cm := byName["ConfigMap/airlock-config"]
		var file struct {
			NATS config.NATS `yaml:"nats"`
		}
		if err := yaml.Unmarshal([]byte(cm.Data["airlock.yaml"]), &file); err != nil {
			t.Fatal(err)
		}
		dir, ok := strings.CutSuffix(file.NATS.TLS.CAFile, "/ca.crt")
		if !ok || !strings.HasPrefix(file.NATS.URL, "tls://") {
			t.Fatalf("the ConfigMap's nats: url %q, tls.ca_file %q; want tls:// and the nats-tls Secret's ca.crt", file.NATS.URL, file.NATS.TLS.CAFile)
		}
		for _, o := range objs {
			if o.Kind != "Deployment" && o.Kind != "Job" {
				continue
			}
			p := o.Spec.Template.Spec
			if o.Spec.Template.Metadata.Labels[natsClientLabel] != "true" {
				t.Errorf("%s %s is not labelled %s: the NetworkPolicy keeps it from NATS", o.Kind, o.Metadata.Name, natsClientLabel)
			}
			mounted := ""
			for _, v := range p.Volumes {
				if v.Secret == nil || v.Secret.SecretName != natsTLSSecret {
					continue
				}
				if len(v.Secret.Items) != 1 || v.Secret.Items[0].Key != "ca.crt" {
					t.Errorf("%s %s mounts %+v of %s; want its ca.crt alone (the key is the nodes')", o.Kind, o.Metadata.Name, v.Secret.Items, natsTLSSecret)
				}
				for _, m := range p.Containers[0].VolumeMounts {
					if m.Name == v.Name {
						mounted = m.MountPath
					}
				}
			}
			if mounted != dir {
				t.Errorf("%s %s mounts %s's ca.crt at %q; the configuration reads it from %q", o.Kind, o.Metadata.Name, natsTLSSecret, mounted, dir)
			}
		}
	})
	t.Run("only_airlock_reaches_the_client_port_and_only_nats_the_routes", func(t *testing.T) {
		np, ok := byName["NetworkPolicy/nats"]
		if !ok {
			t.Fatal("no NetworkPolicy nats in deploy/k8s/nats.yaml")
		}
		if np.Spec.PodSelector.MatchLabels["app"] != "nats" {
			t.Fatalf("the NetworkPolicy selects %v, want the NATS pods", np.Spec.PodSelector.MatchLabels)
		}
		from := map[int]string{}
		for _, in := range np.Spec.Ingress {
			if len(in.From) != 1 || len(in.Ports) != 1 {
				t.Fatalf("an ingress rule of the NetworkPolicy is not one source to one port: %+v", in)
			}
			if in.From[0].PodSelector == nil || in.From[0].NamespaceSelector != nil {
				t.Fatalf("an ingress rule of the NetworkPolicy is not one pod selector of this namespace: %+v", in)
			}
			sel := in.From[0].PodSelector.MatchLabels
			switch {
			case sel[natsClientLabel] == "true" && len(sel) == 1:
				from[in.Ports[0].Port] = "clients"
			case sel["app"] == "nats" && len(sel) == 1:
				from[in.Ports[0].Port] = "nats"
			default:
				t.Fatalf("the NetworkPolicy lets %v in", sel)
			}
		}
		if want := map[int]string{4222: "clients", 6222: "nats"}; !maps.Equal(from, want) {
			t.Fatalf("the NetworkPolicy lets in %v; want %v (monitoring, 8222, never)", from, want)
		}
		for _, p := range byName["Service/nats"].Spec.Ports {
			if p.Port == 8222 {
				t.Fatal("the nats Service exposes monitoring (8222), which has no authentication")
			}
		}
	})
	t.Run("every_deployment_is_probed_on_what_it_serves_and_sized", func(t *testing.T) {
		for _, o := range objs {
			if o.Kind != "Deployment" {
				continue
			}
			c := o.Spec.Template.Spec.Containers[0]
			port := httpPort(t, c.Args)
			for _, p := range []struct {
				kind, path string
				probe      *k8sProbe
			}{{"readiness", "/healthz", c.ReadinessProbe}, {"liveness", "/livez", c.LivenessProbe}} {
				got := "none"
				if p.probe != nil && p.probe.HTTPGet != nil {
					got = fmt.Sprintf("GET %s on %d", p.probe.HTTPGet.Path, p.probe.HTTPGet.Port)
				}
				if want := fmt.Sprintf("GET %s on %d", p.path, port); got != want {
					t.Errorf("%s's %s probe is %s; want %s, where `airlock serve --http` answers it", o.Metadata.Name, p.kind, got, want)
				}
			}
			r := c.Resources
			if r.Requests["cpu"] == "" || r.Requests["memory"] == "" || r.Limits["memory"] == "" {
				t.Errorf("%s requests %v and limits %v; want a CPU and memory request and a memory limit", o.Metadata.Name, r.Requests, r.Limits)
			}
		}
	})
	t.Run("the_gateway_serves_the_example_endpoints_with_tokens_only_it_holds", func(t *testing.T) {
		gw := configMapConfig(t, byName["ConfigMap/airlock-config"]).Gateway
		if want := exampleConfig(t).Gateway; !reflect.DeepEqual(gw, want) {
			t.Fatalf("the ConfigMap's gateway section is %+v; deploy/airlock.example.yaml's is %+v", gw, want)
		}
		mounted := false
		for _, o := range objs {
			p := o.Spec.Template.Spec
			for _, v := range p.Volumes {
				if v.Secret == nil || v.Secret.SecretName != gatewayTokensSecret {
					continue
				}
				if o.Metadata.Name != "airlock-gateway" {
					t.Fatalf("%s %s mounts the gateway's tokens (%s)", o.Kind, o.Metadata.Name, gatewayTokensSecret)
				}
				if v.Secret.DefaultMode == nil || *v.Secret.DefaultMode&0o077 != 0 || len(v.Secret.Items) > 0 {
					t.Errorf("%s mounts %s with mode %v and items %+v; want all its tokens, readable by their owner alone", o.Metadata.Name, gatewayTokensSecret, v.Secret.DefaultMode, v.Secret.Items)
				}
				for _, m := range p.Containers[0].VolumeMounts {
					if m.Name != v.Name {
						continue
					}
					for _, e := range gw.Endpoints {
						if filepath.Dir(e.TokenFile) != m.MountPath {
							t.Errorf("endpoint %s reads its token from %s; %s is mounted at %s", e.Name, e.TokenFile, gatewayTokensSecret, m.MountPath)
						}
					}
					mounted = true
				}
			}
		}
		if !mounted {
			t.Fatalf("no Deployment mounts %s", gatewayTokensSecret)
		}
	})
	// email.one_tap is off by default; whoever turns it on needs its key
	// where both the mailer (approval) and the console read it, and
	// nowhere else: it makes the links that pre-bind a decision.
	t.Run("the_one_tap_key_is_mounted_where_the_mailer_and_the_console_read_it_and_nowhere_else", func(t *testing.T) {
		keyDir := filepath.Dir(exampleConfig(t).Email.OneTap.KeyFile)
		var holders []string
		for _, o := range objs {
			p := o.Spec.Template.Spec
			for _, v := range p.Volumes {
				if v.Secret == nil || v.Secret.SecretName != oneTapKeySecret {
					continue
				}
				holders = append(holders, o.Metadata.Name)
				if v.Secret.DefaultMode == nil || *v.Secret.DefaultMode&0o077 != 0 || !v.Secret.Optional {
					t.Errorf("%s mounts %s with mode %v, optional %v; want it readable by its owner alone, and optional (the links are off by default)", o.Metadata.Name, oneTapKeySecret, v.Secret.DefaultMode, v.Secret.Optional)
				}
				at := ""
				for _, m := range p.Containers[0].VolumeMounts {
					if m.Name == v.Name {
						at = m.MountPath
					}
				}
				if at != keyDir {
					t.Errorf("%s mounts %s at %q; email.one_tap.key_file is in %s", o.Metadata.Name, oneTapKeySecret, at, keyDir)
				}
			}
		}
		sort.Strings(holders)
		if want := []string{"airlock-approval", "airlock-console"}; !slices.Equal(holders, want) {
			t.Errorf("%s is mounted by %v; want %v", oneTapKeySecret, holders, want)
		}
	})
	t.Run("the_gateway_service_keeps_a_client_on_the_replica_holding_its_session", func(t *testing.T) {
		svc, ok := byName["Service/airlock-gateway"]
		if !ok {
			t.Fatal("no Service airlock-gateway")
		}
		if svc.Spec.Selector["app"] != "airlock-gateway" || len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].TargetPort != "http" {
			t.Fatalf("the gateway Service selects %v on ports %+v; want the gateway pods' http port", svc.Spec.Selector, svc.Spec.Ports)
		}
		session := configMapConfig(t, byName["ConfigMap/airlock-config"]).Gateway.SessionTimeout
		if svc.Spec.SessionAffinity != "ClientIP" || time.Duration(svc.Spec.SessionAffinityConfig.ClientIP.TimeoutSeconds)*time.Second < session {
			t.Fatalf("the gateway Service's affinity is %q for %ds; want ClientIP for at least gateway.session_timeout (%s): a session lives in one replica",
				svc.Spec.SessionAffinity, svc.Spec.SessionAffinityConfig.ClientIP.TimeoutSeconds, session)
		}
	})
	t.Run("agents_reach_the_gateway_and_it_reaches_nats_only", func(t *testing.T) {
		np, ok := byName["NetworkPolicy/airlock-gateway"]
		if !ok {
			t.Fatal("no NetworkPolicy airlock-gateway")
		}
		if np.Spec.PodSelector.MatchLabels["app"] != "airlock-gateway" || !slices.Contains(np.Spec.PolicyTypes, "Ingress") || !slices.Contains(np.Spec.PolicyTypes, "Egress") {
			t.Fatalf("the NetworkPolicy selects %v for %v; want the gateway pods, ingress and egress", np.Spec.PodSelector.MatchLabels, np.Spec.PolicyTypes)
		}
		var in, out []string
		for _, r := range np.Spec.Ingress {
			in = append(in, peersToPorts(r.From, r.Ports)...)
		}
		for _, r := range np.Spec.Egress {
			out = append(out, peersToPorts(r.To, r.Ports)...)
		}
		sort.Strings(in)
		sort.Strings(out)
		if want := []string{"pods airlock-mcp-client=true: TCP 8080"}; !slices.Equal(in, want) {
			t.Errorf("the gateway lets in %q; want %q", in, want)
		}
		if want := []string{"any namespace, pods k8s-app=kube-dns: TCP 53", "any namespace, pods k8s-app=kube-dns: UDP 53", "pods app=nats: TCP 4222"}; !slices.Equal(out, want) {
			t.Errorf("the gateway may reach %q; want %q (NATS's client port and DNS)", out, want)
		}
	})
	t.Run("no_service_beyond_the_chaos_layout", func(t *testing.T) {
		if len(deployments) > 0 {
			t.Fatalf("Deployments %v are not in chaos.Topology", deployments)
		}
	})
	t.Run("provisioning_is_the_admins_init_step", func(t *testing.T) {
		j, ok := byName["Job/airlock-provision"]
		if !ok {
			t.Fatal("no Job airlock-provision")
		}
		if args := j.Spec.Template.Spec.Containers[0].Args; len(args) == 0 || args[0] != "provision" {
			t.Fatalf("the provision job runs %v", args)
		}
		want := held{Role: natsauth.RoleAdmin, Files: []string{SeedFile(natsauth.RoleAdmin)}}
		if got := heldByPod(j.Spec.Template.Spec, 0); !equalHeld(got, want) {
			t.Fatalf("the provision job holds %+v, want only the admin's seed", got)
		}
	})
	t.Run("streams_and_buckets_are_R3_on_a_3_node_cluster", func(t *testing.T) {
		cfg := configMapConfig(t, byName["ConfigMap/airlock-config"])
		if cfg.Stream.Replicas != NATSNodes || cfg.Buckets.Replicas != NATSNodes {
			t.Fatalf("stream replicas %d, bucket replicas %d, want %d", cfg.Stream.Replicas, cfg.Buckets.Replicas, NATSNodes)
		}
		if n := byName["StatefulSet/nats"].Spec.Replicas; n != NATSNodes {
			t.Fatalf("the NATS StatefulSet has %d replicas, want %d", n, NATSNodes)
		}
	})
}

// gatewayTokensSecret holds the gateway endpoints' bearer tokens.
const gatewayTokensSecret = "airlock-gateway-tokens"

// oneTapKeySecret holds email.one_tap's key (optional).
const oneTapKeySecret = "airlock-onetap-key"

// configMapConfig loads the ConfigMap's airlock.yaml as the services do.
func configMapConfig(t *testing.T, cm k8sObject) config.Config {
	t.Helper()
	file := filepath.Join(t.TempDir(), "airlock.yaml")
	if err := os.WriteFile(file, []byte(cm.Data["airlock.yaml"]), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(file, nil)
	if err != nil {
		t.Fatalf("the ConfigMap's airlock.yaml: %v", err)
	}
	return cfg
}

// exampleConfig is deploy/airlock.example.yaml, loaded.
func exampleConfig(t *testing.T) config.Config {
	t.Helper()
	cfg, err := config.Load(filepath.Join(deployDir, "airlock.example.yaml"), nil)
	if err != nil {
		t.Fatalf("deploy/airlock.example.yaml: %v", err)
	}
	return cfg
}

// httpPort is the port of `--http ADDR` in a service's arguments.
func httpPort(t *testing.T, args []string) int {
	t.Helper()
	i := slices.Index(args, "--http")
	if i < 0 || i+1 >= len(args) {
		t.Fatalf("%v names no --http address", args)
	}
	_, port, err := net.SplitHostPort(args[i+1])
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(port)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// peersToPorts reads a NetworkPolicy rule as "who: PROTO port" lines.
func peersToPorts(peers []k8sPeer, ports []k8sPort) []string {
	var out []string
	for _, p := range peers {
		who := ""
		if p.NamespaceSelector != nil {
			who = "namespace " + labels(p.NamespaceSelector.MatchLabels) + ", "
			if len(p.NamespaceSelector.MatchLabels) == 0 {
				who = "any namespace, "
			}
		}
		if p.PodSelector != nil {
			who += "pods " + labels(p.PodSelector.MatchLabels)
		}
		for _, pt := range ports {
			out = append(out, fmt.Sprintf("%s: %s %d", who, cmp.Or(pt.Protocol, "TCP"), pt.Port))
		}
	}
	return out
}

func labels(m map[string]string) string {
	var out []string
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return strings.Join(out, ",")
}

// --- compose ---

type composeService struct {
	Command     []string          `yaml:"command"`
	Environment map[string]string `yaml:"environment"`
	EnvFile     any               `yaml:"env_file"`
	Secrets     []composeSecret   `yaml:"secrets"`
	Deploy      struct {
		Replicas int `yaml:"replicas"`
	} `yaml:"deploy"`
	DependsOn any             `yaml:"depends_on"`
	Configs   []composeConfig `yaml:"configs"`
}

// composeConfig is a file a compose service is given (a config).
type composeConfig struct {
	Source string `yaml:"source"`
	Target string `yaml:"target"`
}

// composeSecret is a secret a compose service is given: its name (short
// syntax, mounted at /run/secrets/<name>) or a source and target.
type composeSecret composeConfig

func (c *composeSecret) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		c.Source, c.Target = n.Value, "/run/secrets/"+n.Value
		return nil
	}
	return n.Decode((*composeConfig)(c))
}

func TestComposeFileMatchesTheChaosLayout(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(deployDir, "compose.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Services map[string]composeService `yaml:"services"`
		Secrets  map[string]struct {
			File string `yaml:"file"`
		} `yaml:"secrets"`
		Configs map[string]struct {
			File string `yaml:"file"`
		} `yaml:"configs"`
	}
	if err := yaml.Unmarshal(raw, &f); err != nil {
		t.Fatalf("deploy/compose.yaml: %v", err)
	}
	others := map[string]bool{}
	for name := range f.Services {
		others[name] = true
	}
	// The gateway's configuration (compose gives it to policy and gateway).
	gwConfig, err := config.Load(filepath.Join(deployDir, "gateway.yaml"), nil)
	if err != nil {
		t.Fatalf("deploy/gateway.yaml: %v", err)
	}
	tokenFiles := map[string]bool{}
	for _, e := range gwConfig.Gateway.Endpoints {
		tokenFiles[e.TokenFile] = true
	}
	heldBy := func(s composeService) held {
		h := held{Replicas: s.Deploy.Replicas}
		for _, sec := range s.Secrets {
			if !tokenFiles[sec.Target] { // the configuration's, checked on their own
				h.Files = append(h.Files, sec.Source)
			}
		}
		var env []string
		for k, v := range s.Environment {
			env = append(env, k)
			if k == "AIRLOCK_NATS_NKEY_SEED_FILE" {
				h.Role = roleOfSeed(v)
			}
		}
		if strings.Contains(strings.Join(asStrings(s.EnvFile), ","), "tools.env") {
			env = append(env, toolSecretEnv)
		}
		h.Settings = settingsOf(env)
		return h.sorted()
	}
	for _, s := range Topology() {
		t.Run(s.Name+"_holds_its_own_user_and_keys", func(t *testing.T) {
			cs, ok := f.Services[s.Name]
			if !ok {
				t.Fatalf("no service %s in deploy/compose.yaml", s.Name)
			}
			delete(others, s.Name)
			if len(cs.Command) < 2 || cs.Command[0] != "serve" || cs.Command[1] != s.Name {
				t.Fatalf("%s runs %v, want serve %s", s.Name, cs.Command, s.Name)
			}
			if got, want := heldBy(cs), expected(s); !equalHeld(got, want) {
				t.Fatalf("%s holds %+v, the chaos layout runs it with %+v", s.Name, got, want)
			}
			if !strings.Contains(strings.Join(asStrings(cs.DependsOn), ","), "provision") {
				t.Fatalf("%s does not wait for provision: depends_on %v", s.Name, cs.DependsOn)
			}
			if cs.Environment["AIRLOCK_STREAM_REPLICAS"] != "3" || cs.Environment["AIRLOCK_BUCKETS_REPLICAS"] != "3" {
				t.Fatalf("%s does not run with R3 stream and buckets", s.Name)
			}
		})
	}
	t.Run("provisioning_is_the_admins_init_step", func(t *testing.T) {
		p := f.Services["provision"]
		delete(others, "provision")
		if len(p.Command) == 0 || p.Command[0] != "provision" {
			t.Fatalf("provision runs %v", p.Command)
		}
		want := held{Role: natsauth.RoleAdmin, Files: []string{SeedFile(natsauth.RoleAdmin)}}
		if got := heldBy(p); !equalHeld(got, want) {
			t.Fatalf("provision holds %+v, want only the admin's seed", got)
		}
	})
	t.Run("a_3_node_cluster_and_clickhouse", func(t *testing.T) {
		delete(others, "clickhouse")
		for i := range NATSNodes {
			name := "nats-" + string(rune('0'+i))
			if _, ok := f.Services[name]; !ok {
				t.Fatalf("no %s", name)
			}
			delete(others, name)
		}
		if len(others) > 0 {
			t.Fatalf("services %v are not in the chaos layout", others)
		}
	})
	t.Run("every_service_verifies_nats_with_the_private_ca", func(t *testing.T) {
		for _, name := range append(serviceNamesOf(Topology()), "provision") {
			s := f.Services[name]
			ca := s.Environment["AIRLOCK_NATS_TLS_CA_FILE"]
			if !strings.HasPrefix(s.Environment["AIRLOCK_NATS_URL"], "tls://") || ca == "" {
				t.Fatalf("%s reaches NATS at %q with CA %q; want tls:// and the nodes' CA", name, s.Environment["AIRLOCK_NATS_URL"], ca)
			}
			if !slices.ContainsFunc(s.Configs, func(c composeConfig) bool {
				return c.Target == ca && f.Configs[c.Source].File == "./secrets/nats-tls/ca.crt"
			}) {
				t.Fatalf("%s is not given the nodes' ca.crt at %s: configs %+v", name, ca, s.Configs)
			}
		}
	})
	t.Run("policy_and_gateway_read_the_example_endpoints_and_only_the_gateway_holds_their_tokens", func(t *testing.T) {
		if want := exampleConfig(t).Gateway; !reflect.DeepEqual(gwConfig.Gateway, want) {
			t.Fatalf("deploy/gateway.yaml's gateway section is %+v; deploy/airlock.example.yaml's is %+v", gwConfig.Gateway, want)
		}
		for _, name := range []string{"policy", "gateway"} {
			s := f.Services[name]
			file := s.Environment["AIRLOCK_CONFIG"]
			if !slices.ContainsFunc(s.Configs, func(c composeConfig) bool { return c.Target == file && f.Configs[c.Source].File == "./gateway.yaml" }) {
				t.Errorf("%s reads the configuration %q, not deploy/gateway.yaml (configs %+v): the policy binds the endpoints' profiles, the gateway serves them", name, file, s.Configs)
			}
		}
		for e := range tokenFiles {
			for name, s := range f.Services {
				has := slices.ContainsFunc(s.Secrets, func(c composeSecret) bool { return c.Target == e })
				if has != (name == "gateway") {
					t.Errorf("%s is given the token file %s: %v; want the gateway alone", name, e, has)
				}
			}
		}
	})
	t.Run("every_secret_is_a_file_the_operators_commands_write", func(t *testing.T) {
		for name, s := range f.Secrets {
			if filepath.Base(s.File) != name {
				t.Fatalf("secret %s is read from %s", name, s.File)
			}
		}
	})
}

// The chaos run renders the NATS accounts with the function that renders
// deploy/nats/airlock.conf, and each node's file is shaped like
// deploy/nats/cluster.conf: the same users and permissions, fsync on every
// write, one cluster of NATSNodes routes.
func TestChaosNATSConfigIsTheShippedOne(t *testing.T) {
	shipped, err := natsauth.ShippedFor(config.Default(), "bot")
	if err != nil {
		t.Fatal(err)
	}
	onDisk, err := os.ReadFile(filepath.Join(deployDir, "nats", "airlock.conf"))
	if err != nil {
		t.Fatal(err)
	}
	if string(onDisk) != shipped {
		t.Fatal("deploy/nats/airlock.conf is not what the chaos run renders: run `go tool task generate`")
	}
	dir := shippedNATSDir(t, shipped)
	routes := []string{"nats://127.0.0.1:1", "nats://127.0.0.1:2", "nats://127.0.0.1:3"}
	tlsDir := clusterTLSDir(t)
	if err := os.WriteFile(filepath.Join(dir, "n1.conf"), []byte(nodeConfig("n1", 4222, 8222, 6222, filepath.Join(dir, "n1"), routes, tlsDir)), 0o600); err != nil {
		t.Fatal(err)
	}
	load := func(file string) *server.Options {
		t.Helper()
		o, err := server.ProcessConfigFile(file)
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		return o
	}
	deployed, chaos := load(shippedClusterConf(t, dir, tlsDir)), load(filepath.Join(dir, "n1.conf"))
	tests := []struct {
		name           string
		deployed, runs any
	}{
		{"users", len(deployed.Nkeys), len(chaos.Nkeys)},
		{"fsync_on_every_write", deployed.SyncAlways, chaos.SyncAlways},
		{"cluster_name", deployed.Cluster.Name, chaos.Cluster.Name},
		{"routes", len(deployed.Routes), len(chaos.Routes)},
		{"jetstream", deployed.JetStream, chaos.JetStream},
		{"max_file_store", deployed.JetStreamMaxStore, chaos.JetStreamMaxStore},
		{"client_tls", deployed.TLSConfig != nil, chaos.TLSConfig != nil},
		{"route_tls", deployed.Cluster.TLSConfig != nil, chaos.Cluster.TLSConfig != nil},
		{"routes_authorised_by_certificate", deployed.Cluster.TLSCheckKnownURLs, chaos.Cluster.TLSCheckKnownURLs},
		{"monitoring_host", deployed.HTTPHost, chaos.HTTPHost},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.deployed != tt.runs {
				t.Fatalf("deploy/nats/cluster.conf has %v, the chaos nodes run with %v", tt.deployed, tt.runs)
			}
		})
	}
	if len(chaos.Routes) != NATSNodes || !chaos.SyncAlways {
		t.Fatalf("the chaos nodes run %d routes, fsync always %v", len(chaos.Routes), chaos.SyncAlways)
	}
	// The chaos run has them because production must (and
	// TestShippedClusterTLSKeepsOutsiders runs them).
	t.Run("clients_and_routes_are_tls_and_routes_authorised_by_certificate", func(t *testing.T) {
		if deployed.TLSConfig == nil || deployed.Cluster.TLSConfig == nil {
			t.Fatalf("deploy/nats/cluster.conf: client TLS %v, route TLS %v; want both", deployed.TLSConfig != nil, deployed.Cluster.TLSConfig != nil)
		}
		if !deployed.Cluster.TLSCheckKnownURLs {
			t.Fatal("deploy/nats/cluster.conf: a route is not authorised by its certificate (verify_cert_and_check_known_urls)")
		}
	})
	t.Run("monitoring_answers_inside_the_pod_only", func(t *testing.T) {
		if deployed.HTTPHost != "127.0.0.1" || deployed.HTTPPort == 0 {
			t.Fatalf("deploy/nats/cluster.conf serves monitoring on %s:%d; want 127.0.0.1 (it has no authentication)", deployed.HTTPHost, deployed.HTTPPort)
		}
	})
}

// shippedNATSDir writes the shipped accounts (deploy/nats/airlock.conf's
// text) into a temp dir and sets the environment a node reads them with:
// the services' and agent bot's public keys, SERVER_NAME nats-0.
func shippedNATSDir(t *testing.T, shipped string) string {
	t.Helper()
	keys := t.TempDir()
	env, err := natsauth.WriteServiceKeys(keys)
	if err != nil {
		t.Fatal(err)
	}
	c, err := natsauth.NewCredential(filepath.Join(keys, "bot.creds.json"), "bot", "")
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := c.PublicKey()
	env = append(env, strings.TrimPrefix(natsauth.AgentEnvVar("bot"), "$")+"="+pub, "SERVER_NAME=nats-0")
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "airlock.conf"), []byte(shipped), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

// natsTLSDir is where the NATS nodes mount the nats-tls Secret.
const natsTLSDir = "/etc/nats-tls/"

// natsTLSSecret holds the NATS nodes' certificate, its key and the CA;
// natsClientLabel marks the pods the NetworkPolicy lets reach NATS.
const natsTLSSecret, natsClientLabel = "nats-tls", "airlock-nats-client"

// clusterTLSDir is what `airlock nats certs` writes (the nats-tls Secret)
// for nodes on loopback (localhost, 127.0.0.1), with a client certificate
// "client" that names no host.
func clusterTLSDir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "nats-tls")
	if err := natsauth.WriteClusterTLS(dir, []string{"localhost", "127.0.0.1"}, []string{"client"}, time.Hour); err != nil {
		t.Fatal(err)
	}
	return dir
}

// shippedClusterConf writes deploy/nats/cluster.conf into dir (beside the
// shipped airlock.conf it includes) reading the nats-tls Secret's files
// from tlsDir instead of where the nodes mount them; it returns its path.
func shippedClusterConf(t *testing.T, dir, tlsDir string) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(deployDir, "nats", "cluster.conf"))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range strings.Split(string(raw), natsTLSDir)[1:] {
		if f, _, _ := strings.Cut(name, "\n"); f != natsauth.TLSCAFile && f != natsauth.TLSCertFile && f != natsauth.TLSKeyFile {
			t.Fatalf("deploy/nats/cluster.conf reads %s%s, which is not in the nats-tls Secret (%s, %s, %s)", natsTLSDir, f,
				natsauth.TLSCAFile, natsauth.TLSCertFile, natsauth.TLSKeyFile)
		}
	}
	text := strings.ReplaceAll(string(raw), natsTLSDir, tlsDir+"/")
	file := filepath.Join(dir, "cluster.conf")
	if err := os.WriteFile(file, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

// The run's own services are started with what Topology says they hold.
func TestChaosServicesHoldOnlyTheirOwnSecrets(t *testing.T) {
	l := &layout{dir: "/run", keysDir: "/run/keys", urls: "nats://x", dsn: "clickhouse://x", slackURL: "http://slack", slackSecret: "s"}
	for _, s := range Topology() {
		t.Run(s.Name, func(t *testing.T) {
			h := held{Replicas: s.Replicas}
			var names []string
			for _, kv := range l.serviceEnv(s, "tool-secret") {
				k, v, _ := strings.Cut(kv, "=")
				names = append(names, k)
				switch {
				case k == "AIRLOCK_NATS_NKEY_SEED_FILE":
					h.Role = roleOfSeed(v)
					h.Files = append(h.Files, filepath.Base(v))
				case strings.HasSuffix(k, "_KEY_FILE"):
					h.Files = append(h.Files, filepath.Base(v))
				}
			}
			h.Settings = settingsOf(names)
			if got, want := h.sorted(), expected(s); !equalHeld(got, want) {
				t.Fatalf("the chaos run gives %s %+v, Topology says %+v", s.Name, got, want)
			}
		})
	}
}

func serviceNamesOf(services []Service) []string {
	var out []string
	for _, s := range services {
		out = append(out, s.Name)
	}
	return out
}

func equalHeld(a, b held) bool {
	return a.Role == b.Role && a.Replicas == b.Replicas && slices.Equal(a.Files, b.Files) && slices.Equal(a.Settings, b.Settings)
}

// asStrings flattens a compose value that may be a string, a list or a map.
func asStrings(v any) []string {
	switch x := v.(type) {
	case string:
		return []string{x}
	case []any:
		var out []string
		for _, e := range x {
			out = append(out, asStrings(e)...)
		}
		return out
	case map[string]any:
		var out []string
		for k := range x {
			out = append(out, k)
		}
		return out
	}
	return nil
}

// The example configuration names only settings that exist, and R3.
func TestExampleConfigurationLoads(t *testing.T) {
	cfg, err := config.Load(filepath.Join(deployDir, "airlock.example.yaml"), nil)
	if err != nil {
		t.Fatalf("deploy/airlock.example.yaml: %v", err)
	}
	if cfg.Stream.Replicas != NATSNodes || cfg.Buckets.Replicas != NATSNodes {
		t.Fatalf("the example runs stream replicas %d, bucket replicas %d, want %d", cfg.Stream.Replicas, cfg.Buckets.Replicas, NATSNodes)
	}
}

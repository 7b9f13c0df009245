//! kubelet 1.36's `/metrics/cadvisor` from podscope (KEP-2371,
//! `PodAndContainerStatsFromCRI`) against the same kubelet's cAdvisor, for
//! the same running pods (issue 44).
//!
//! kubelet 1.36 runs the scenario's first half with the gate on: its
//! `/metrics/cadvisor` is then podscope's ListPodSandboxMetrics (t1). At
//! the scenario's kubelet restart it comes back with the gate off and
//! cAdvisor answers (t2); then podscope is asked directly (t3). (One
//! restart, as before: each restart makes kubelet rotate the logger's log
//! again, and more would outrun its 10 files.) For
//! every family both have for a container, a counter must lie in the
//! bracket the reads' order explains, t1 ≤ cAdvisor ≤ t3 (+ 1 for the
//! seconds the CRI's whole numbers floor), and a gauge of a steady
//! container near both reads. No timing assumption: only the order.
//!
//! Compared: each container's cgroup families and each pod's (kubelet's
//! pod slice, which cAdvisor labels with the pod's name and namespace as
//! podscope does). What cAdvisor cannot say here, and why: kubelet's
//! cAdvisor knows Docker's, containerd's and CRI-O's containers by their
//! own APIs, not podscope's, so it sees podscope's containers as raw
//! cgroups (their systemd units below the pods' slices): with `id` (the
//! cgroup's path) but no `container`, `image`, `namespace` or `pod`; with
//! no network (cAdvisor reads a raw cgroup's network only for the root
//! cgroup); with no PSI (cAdvisor reads pressure on cgroup v2 only, and
//! the harness is v1 hybrid, where podscope reads it from the unified
//! hierarchy). Those the comparison names and skips.

use super::{elapsed, sh_c, NS};
use cri_api::v1 as cri;
use podscope_test_support::harness::Client;
use podscope_test_support::kubelet_client::{Kubelet, NODE};
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;
use std::time::{Duration, Instant};

pub const GATE: &str = "PodAndContainerStatsFromCRI=true";
const CRI_SOCKET: &str = "/run/podscope/cri.sock";

/// A container burning CPU within a CFS quota (so its counters, the
/// throttling's among them, move) and holding steady memory.
pub fn burner() -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": { "name": "burn", "namespace": NS },
        "spec": {
            "terminationGracePeriodSeconds": 1,
            "containers": [{
                "name": "burn",
                "image": super::IMAGE,
                "command": sh_c("while :; do :; done"),
                "resources": { "limits": { "cpu": "200m", "memory": "32Mi" } }
            }]
        }
    })
}

/// One sample of Prometheus' text format.
#[derive(Debug, Clone)]
pub struct Sample {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub value: f64,
}

/// Parse the text format: `name{k="v",...} value [timestamp]`.
pub fn parse(text: &str) -> Vec<Sample> {
    let mut out = Vec::new();
    for line in text.lines() {
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let (name, rest) = match line.find(['{', ' ']) {
            Some(i) => line.split_at(i),
            None => continue,
        };
        let mut labels = BTreeMap::new();
        let rest = if let Some(body) = rest.strip_prefix('{') {
            let mut end = body.len();
            let (mut key, mut val, mut in_val, mut esc) =
                (String::new(), String::new(), false, false);
            for (i, ch) in body.char_indices() {
                if in_val {
                    match (esc, ch) {
                        (true, 'n') => {
                            val.push('\n');
                            esc = false
                        }
                        (true, c) => {
                            val.push(c);
                            esc = false
                        }
                        (false, '\\') => esc = true,
                        (false, '"') => {
                            labels.insert(std::mem::take(&mut key), std::mem::take(&mut val));
                            in_val = false;
                        }
                        (false, c) => val.push(c),
                    }
                } else {
                    match ch {
                        '}' => {
                            end = i + 1;
                            break;
                        }
                        '"' => in_val = true,
                        '=' | ',' | ' ' => {}
                        c => key.push(c),
                    }
                }
            }
            &body[end..]
        } else {
            rest
        };
        let Some(value) = rest.split_whitespace().next().and_then(|v| v.parse().ok()) else {
            continue;
        };
        out.push(Sample {
            name: name.to_owned(),
            labels,
            value,
        });
    }
    out
}

async fn cri_client() -> cri::runtime_service_client::RuntimeServiceClient<tonic::transport::Channel>
{
    let ch = cri_api::channel(Path::new(CRI_SOCKET))
        .await
        .unwrap_or_else(|e| panic!("connect to {CRI_SOCKET}: {e}"));
    cri::runtime_service_client::RuntimeServiceClient::new(ch)
}

/// podscope's own answer, as kubelet would serve it: (family, id, the
/// label values past the base's) -> value; and the descriptors' keys.
async fn cri_values() -> (
    HashMap<(String, String, Vec<String>), u64>,
    HashMap<String, Vec<String>>,
) {
    let mut c = cri_client().await;
    let keys: HashMap<String, Vec<String>> = c
        .list_metric_descriptors(cri::ListMetricDescriptorsRequest {})
        .await
        .expect("ListMetricDescriptors")
        .into_inner()
        .descriptors
        .into_iter()
        .map(|d| (d.name, d.label_keys))
        .collect();
    let pods = c
        .list_pod_sandbox_metrics(cri::ListPodSandboxMetricsRequest {})
        .await
        .expect("ListPodSandboxMetrics")
        .into_inner()
        .pod_metrics;
    let mut out = HashMap::new();
    for m in pods.iter().flat_map(|p| {
        p.metrics
            .iter()
            .chain(p.container_metrics.iter().flat_map(|c| c.metrics.iter()))
    }) {
        // id is the second base label; the family's own follow the five.
        out.insert(
            (
                m.name.clone(),
                m.label_values[1].clone(),
                m.label_values[5..].to_vec(),
            ),
            m.value.as_ref().unwrap().value,
        );
    }
    (out, keys)
}

/// A container kubelet runs (or a pod as a whole: `name` empty, `id` its
/// sandbox's, `cgroup` its slice): its pod, its name, its CRI id and
/// cgroup.
struct Watched {
    pod: String,
    name: String,
    id: String,
    cgroup: String,
}

async fn watched(k: &Kubelet, m: &Client) -> Vec<Watched> {
    let mut out = Vec::new();
    for pod in ["burn", "web", "logger"] {
        let p = k.pod(pod).await.unwrap_or_else(|| panic!("{pod}: gone"));
        // The pod as a whole: kubelet's slice for it, which cAdvisor
        // labels with the pod's name and namespace.
        let sb = super::ready_sandbox(m, &p.metadata.uid).await;
        out.push(Watched {
            pod: format!("{pod}-{NODE}"),
            name: String::new(),
            id: sb.id.clone(),
            cgroup: sb
                .cgroup
                .rsplit_once('/')
                .map(|(slice, _)| slice.to_owned())
                .unwrap(),
        });
        for c in &p.status.container_statuses {
            let id = c.id().unwrap().to_owned();
            let st = m.container_status(&id).await.unwrap();
            out.push(Watched {
                pod: format!("{pod}-{NODE}"),
                name: c.name.clone(),
                id,
                cgroup: st.cgroup,
            });
        }
    }
    out
}

/// What kubelet served with the gate on, for the comparison after its
/// restart without it.
pub struct Served {
    ws: Vec<Watched>,
    keys: HashMap<String, Vec<String>>,
    t1: Vec<Sample>,
    families: BTreeSet<String>,
}

/// kubelet (started with the gate) serves podscope's families, with
/// kubelet's labels, for every running container and web's network (t1).
pub async fn served(k: &Kubelet, m: &Client, t0: Instant) -> Served {
    let ws = watched(k, m).await;
    let (_, keys) = cri_values().await;
    // t1: kubelet's /metrics/cadvisor, served from ListPodSandboxMetrics.
    let t1 = parse(&k.cadvisor_metrics().await);
    let families: BTreeSet<String> = t1
        .iter()
        .map(|s| s.name.clone())
        .filter(|n| n.starts_with("container_"))
        .collect();
    for f in &families {
        assert!(
            keys.contains_key(f),
            "with {GATE}, /metrics/cadvisor has {f}, which is not podscope's: cAdvisor answered"
        );
    }
    let find = |samples: &[Sample], name: &str, w: &Watched| -> Option<f64> {
        samples
            .iter()
            .find(|s| {
                s.name == name
                    && s.labels.get("id") == Some(&w.id)
                    && s.labels.get("container") == Some(&w.name)
                    && s.labels.get("pod") == Some(&w.pod)
                    && s.labels.get("namespace").map(String::as_str) == Some(NS)
            })
            .map(|s| s.value)
    };
    for w in &ws {
        // (A pod's processes are its containers'.)
        let processes = (!w.name.is_empty()).then_some("container_processes");
        for f in [
            "container_cpu_usage_seconds_total",
            "container_memory_working_set_bytes",
        ]
        .into_iter()
        .chain(processes)
        {
            assert!(
                find(&t1, f, w).is_some(),
                "kubelet's /metrics/cadvisor (CRI) lacks {f} of {}/{} (id {})",
                w.pod,
                w.name,
                w.id
            );
        }
    }
    let web_rx = t1.iter().find(|s| {
        s.name == "container_network_receive_bytes_total"
            && s.labels.get("pod").map(String::as_str) == Some(&format!("web-{NODE}"))
            && s.labels.get("interface").map(String::as_str) == Some("eth0")
            && s.labels.get("container").map(String::as_str) == Some("")
    });
    assert!(
        web_rx.is_some_and(|s| s.value > 0.0),
        "no network for web's eth0 in /metrics/cadvisor (CRI): {web_rx:?}"
    );
    println!(
        "e2e: [{}] ok: kubelet 1.36 with {GATE}: /metrics/cadvisor is podscope's ({} families; {} containers and pods with kubelet's labels, web's eth0)",
        elapsed(t0),
        families.len(),
        ws.len()
    );
    Served {
        ws,
        keys,
        t1,
        families,
    }
}

/// The same kubelet restarted without the gate (by the caller): cAdvisor
/// agrees with what it served (t1) and podscope's answer now (t3).
pub async fn compare(k: &Kubelet, served: Served, t0: Instant) {
    let t_start = Instant::now();
    let Served {
        ws,
        keys,
        t1,
        families,
    } = served;
    // A family's own labels (cpu, interface) as (key, value).
    let t1_of = |f: &str, w: &Watched, extra: &[(&String, &String)]| -> Option<f64> {
        t1.iter()
            .find(|s| {
                s.name == f
                    && s.labels.get("id") == Some(&w.id)
                    && extra.iter().all(|(k, v)| s.labels.get(*k) == Some(*v))
            })
            .map(|s| s.value)
    };

    // t2: the same kubelet, the gate off: cAdvisor. Its first
    // housekeeping of a cgroup comes after its start, so every sample it
    // gives is later than t1.
    let deadline = Instant::now() + Duration::from_secs(60);
    let by_cgroup = loop {
        let t2 = parse(&k.cadvisor_metrics().await);
        let by_cgroup: BTreeMap<String, Vec<Sample>> =
            t2.iter().fold(BTreeMap::new(), |mut acc, s| {
                if let Some(id) = s.labels.get("id") {
                    acc.entry(id.clone()).or_default().push(s.clone());
                }
                acc
            });
        let seen = ws.iter().all(|w| {
            by_cgroup.get(&w.cgroup).is_some_and(|v| {
                v.iter()
                    .any(|s| s.name == "container_cpu_usage_seconds_total")
            })
        });
        if seen {
            break by_cgroup;
        }
        assert!(
            Instant::now() < deadline,
            "cAdvisor (kubelet without {GATE}) does not show podscope's container cgroups {:?}; its ids: {:?}",
            ws.iter().map(|w| &w.cgroup).collect::<Vec<_>>(),
            by_cgroup.keys().filter(|k| k.contains("kubepods")).collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    // t3: podscope directly.
    let (t3, _) = cri_values().await;

    // Families both have for the watched containers, compared.
    let mut compared: BTreeMap<String, usize> = BTreeMap::new();
    // Times are not compared: cAdvisor's start is the cgroup's and its
    // last-seen its housekeeping's, ours the container's creation and
    // the call's.
    let times = ["container_start_time_seconds", "container_last_seen"];
    let mut only_cadvisor: BTreeSet<String> = BTreeSet::new();
    let mut only_ours = families;
    for w in &ws {
        let theirs = &by_cgroup[&w.cgroup];
        for s in theirs {
            if !s.name.starts_with("container_") {
                continue;
            }
            let Some(our_keys) = keys.get(&s.name) else {
                only_cadvisor.insert(s.name.clone());
                continue;
            };
            only_ours.remove(&s.name);
            // Labels alike: ours are cAdvisor's keys but its `name`.
            let their_keys: BTreeSet<&str> = s
                .labels
                .keys()
                .map(String::as_str)
                .filter(|k| *k != "name")
                .collect();
            let ours: BTreeSet<&str> = our_keys.iter().map(String::as_str).collect();
            assert_eq!(ours, their_keys, "{}: label keys differ", s.name);
            if w.name.is_empty() {
                // A pod's slice: cAdvisor names its pod as podscope does.
                assert_eq!(
                    (
                        s.labels["pod"].as_str(),
                        s.labels["namespace"].as_str(),
                        s.labels["container"].as_str()
                    ),
                    (w.pod.as_str(), NS, ""),
                    "{}: cAdvisor's labels of {}'s slice",
                    s.name,
                    w.pod
                );
            }
            if times.contains(&s.name.as_str()) {
                continue;
            }
            let extra_kv: Vec<(&String, &String)> =
                our_keys[5..].iter().map(|k| (k, &s.labels[k])).collect();
            let extra: Vec<String> = extra_kv.iter().map(|(_, v)| (*v).clone()).collect();
            let Some(v1) = t1_of(&s.name, w, &extra_kv) else {
                continue;
            };
            let Some(&v3) = t3.get(&(s.name.clone(), w.id.clone(), extra.clone())) else {
                continue;
            };
            let (v2, v3) = (s.value, v3 as f64);
            let counter = s.name.ends_with("_total");
            let ok = if counter {
                // Floored whole units on our side: cAdvisor's may be up to
                // one more than our later read.
                v1 <= v2.floor() + 1e-9 && v2 < v3 + 1.0
            } else {
                // A steady container's gauge: near both our reads (bytes
                // within 10% or 1 MiB, counts within one).
                let (lo, hi) = (v1.min(v3), v1.max(v3));
                let bytes = s.name.contains("memory") || s.name.ends_with("_bytes");
                let slack = if bytes {
                    (hi * 0.1).max(1024.0 * 1024.0)
                } else {
                    1.0
                };
                v2 >= lo - slack && v2 <= hi + slack
            };
            assert!(
                ok,
                "{} of {}/{}: podscope {v1} (t1) and {v3} (t3), cAdvisor {v2} (t2)",
                s.name, w.pod, w.name
            );
            *compared.entry(s.name.clone()).or_default() += 1;
        }
    }
    assert!(
        compared.contains_key("container_cpu_usage_seconds_total")
            && compared.contains_key("container_memory_working_set_bytes"),
        "nothing compared: {compared:?}"
    );
    let burn = ws.iter().find(|w| w.name == "burn").unwrap();
    let burned = t3[&(
        "container_cpu_usage_seconds_total".to_owned(),
        burn.id.clone(),
        vec!["total".to_owned()],
    )];
    assert!(
        burned >= 1,
        "the burner's CPU counter did not move: {burned}"
    );
    println!(
        "e2e: [{}] ok: kubelet 1.36 without the gate (cAdvisor) agrees for {} families ({} series; burn at {burned} s): {:?}; \
         cAdvisor alone: {:?}; podscope alone (cAdvisor has no pod labels, network or PSI for raw cgroups): {:?}; {:.1} s",
        elapsed(t0),
        compared.len(),
        compared.values().sum::<usize>(),
        compared.keys().collect::<Vec<_>>(),
        only_cadvisor,
        only_ours,
        t_start.elapsed().as_secs_f64()
    );
}

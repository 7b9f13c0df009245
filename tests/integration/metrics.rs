//! The metrics endpoint, scraped by a real Prometheus (Debian's) at a
//! one-second interval: the test's own actions (CRI calls, bus calls, a
//! denied one, pulls, a pod with CNI, an OOM kill) are read back from
//! Prometheus' HTTP API as the deltas they caused, each read waiting for a
//! scrape newer than the action. Then bad input: an address another
//! listener holds keeps podscoped from starting, naming the key; a flood
//! of scrapers holding connections open, and scrapers hanging up
//! mid-answer, cost the daemon a bounded number of descriptors and other
//! callers nothing.

use crate::containers::*;
use cri_api::v1 as cri;
use cri_api::v1::runtime_service_client::RuntimeServiceClient;
use podscope_api::container::{ContainerOptions, Resources};
use podscope_api::domain::container::ContainerState;
use podscope_api::image::PullOptions;
use podscope_metrics::catalog::{self, Family};
use podscope_test_support::harness::*;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

const CONFIG: &str = "/etc/podscope/podscope.toml";
const ADDRESS: &str = "127.0.0.1:9101";
const PROMETHEUS: &str = "127.0.0.1:9190";
const PROMETHEUS_UNIT: &str = "podscope-test-prometheus";
const PROMETHEUS_DIR: &str = "/run/podscope-test/prometheus";
/// podscoped's bound on scrapes served at once (its
/// `metrics::endpoint::MAX_SCRAPES`).
const MAX_SCRAPES: usize = 4;

/// podscope-cri stopped when dropped: the next CRI call starts it again
/// on the config then in place (it reads it when it starts).
struct CriAgain;

impl Drop for CriAgain {
    fn drop(&mut self) {
        let _ = sh_status("systemctl stop podscope-cri.service");
    }
}

/// The harness's config with the metrics endpoint on `address`.
fn config_with_metrics(address: &str) -> String {
    let base = std::fs::read_to_string(HARNESS_CONFIG)
        .or_else(|_| std::fs::read_to_string(CONFIG))
        .unwrap_or_default();
    format!("{base}\nmetrics_address = \"{address}\"\n")
}

/// Prometheus as a transient unit, scraping podscoped every second;
/// stopped (and its data removed) when dropped.
struct Prometheus;

impl Prometheus {
    fn start() -> Self {
        let _ = std::fs::remove_dir_all(PROMETHEUS_DIR);
        std::fs::create_dir_all(PROMETHEUS_DIR).unwrap();
        // The scrape config OPERATIONS.md gives a node, at a test's pace.
        std::fs::write(
            format!("{PROMETHEUS_DIR}/prometheus.yml"),
            format!(
                "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n\
                 scrape_configs:\n  - job_name: podscope\n    static_configs:\n      - targets: ['{ADDRESS}']\n"
            ),
        )
        .unwrap();
        sh(&format!(
            "systemctl stop {PROMETHEUS_UNIT} 2>/dev/null; systemctl reset-failed {PROMETHEUS_UNIT} 2>/dev/null; \
             systemd-run --quiet --unit={PROMETHEUS_UNIT} /usr/bin/prometheus \
             --config.file={PROMETHEUS_DIR}/prometheus.yml --storage.tsdb.path={PROMETHEUS_DIR}/data \
             --web.listen-address={PROMETHEUS} --log.level=warn"
        ));
        let t0 = Instant::now();
        while sh_status(&format!(
            "curl -sf -o /dev/null http://{PROMETHEUS}/-/ready"
        )) != 0
        {
            assert!(
                t0.elapsed() < Duration::from_secs(30),
                "Prometheus not ready within 30 s: {}",
                sh(&format!(
                    "journalctl -u {PROMETHEUS_UNIT} -o cat --no-pager -n 30"
                ))
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        Prometheus
    }

    /// An instant query's result vector.
    fn query(&self, q: &str) -> Vec<serde_json::Value> {
        let (rc, out, err) = sh_out(&format!(
            "curl -sf --data-urlencode 'query={q}' http://{PROMETHEUS}/api/v1/query"
        ));
        assert_eq!(rc, 0, "query {q}: {err}");
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["status"], "success", "{q}: {out}");
        v["data"]["result"].as_array().cloned().unwrap_or_default()
    }

    /// The query's one value; a query with no series yet is 0 (a
    /// counter not yet counted).
    fn value(&self, q: &str) -> f64 {
        let r = self.query(q);
        assert!(r.len() <= 1, "{q}: {r:?}");
        r.first()
            .map(|s| s["value"][1].as_str().unwrap().parse().unwrap())
            .unwrap_or(0.0)
    }

    /// Wait for a scrape that began after now, so what was done before
    /// this call is in what the next queries read.
    fn scraped_after_now(&self) {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        let t0 = Instant::now();
        loop {
            let last = self.value("timestamp(up{job=\"podscope\"})");
            if last > now {
                assert_eq!(
                    self.value("up{job=\"podscope\"}"),
                    1.0,
                    "the last scrape failed"
                );
                return;
            }
            assert!(
                t0.elapsed() < Duration::from_secs(20),
                "no scrape of podscoped within 20 s (last at {last}, now {now}): {:?}",
                self.query("up")
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = sh_status(&format!("systemctl stop {PROMETHEUS_UNIT}"));
        let _ = std::fs::remove_dir_all(PROMETHEUS_DIR);
    }
}

/// `sum(family{labels})` as a query.
fn sum(f: &Family, labels: &str) -> String {
    format!("sum({}{{{labels}}})", f.name)
}

/// Each query's value now.
fn read(p: &Prometheus, queries: &[String]) -> Vec<f64> {
    p.scraped_after_now();
    queries.iter().map(|q| p.value(q)).collect()
}

async fn cri_runtime() -> RuntimeServiceClient<tonic::transport::Channel> {
    let ch = cri_api::channel(std::path::Path::new("/run/podscope/cri.sock"))
        .await
        .expect("connect to the CRI socket");
    RuntimeServiceClient::new(ch)
}

fn busctl(verb_args: &str) -> String {
    format!(
        "busctl call org.podscope.Sandbox1 /org/podscope/Sandbox1 org.podscope.Sandbox1.Manager {verb_args}"
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn prometheus_reads_the_counts_and_sums_of_the_tests_own_actions() {
    let _cleanup = Cleanup::new();
    let _cri = CriAgain;
    with_config(&config_with_metrics(ADDRESS), || async {
        // podscope-cri reads the config when it starts: again, now.
        sh("systemctl restart podscope-cri.service");
        let (m, _c) = manager().await;
        let prom = Prometheus::start();
        let queries = [
            sum(&catalog::CRI_CALLS, "method=\"Version\",code=\"OK\""),
            sum(
                &catalog::CRI_CALLS,
                "method=\"ContainerStatus\",code=\"InvalidArgument\"",
            ),
            format!(
                "sum({}_count{{method=\"Version\"}})",
                catalog::CRI_CALL_DURATION.name
            ),
            sum(&catalog::BUS_CALLS, "method=\"Platform\""),
            sum(
                &catalog::BUS_CALL_ERRORS,
                "method=\"Stop\",error=\"AccessDenied\"",
            ),
            sum(&catalog::IMAGE_PULLS, "registry=\"docker.io\""),
            sum(&catalog::IMAGE_PULL_FAILURES, "registry=\"127.0.0.1:5000\""),
            sum(&catalog::IMAGE_PULL_BYTES, "registry=\"docker.io\""),
            format!(
                "sum({}_count{{registry=\"docker.io\"}})",
                catalog::IMAGE_PULL_DURATION.name
            ),
            format!(
                "sum({}_count{{operation=\"ADD\"}})",
                catalog::CNI_DURATION.name
            ),
            format!(
                "sum({}_count{{operation=\"DEL\"}})",
                catalog::CNI_DURATION.name
            ),
            sum(&catalog::OOM_KILLS, "kind=\"kernel\""),
            sum(&catalog::SYSTEMD_CALLS, ""),
        ];
        let before = read(&prom, &queries);
        assert_eq!(
            prom.value(catalog::CRI_UP.name),
            1.0,
            "podscope-cri answered the scrape"
        );
        for p in ["podscoped", "podscope-cri"] {
            for f in [
                &catalog::PROCESS_RSS,
                &catalog::PROCESS_OPEN_FDS,
                &catalog::PROCESS_START_TIME,
            ] {
                let v = prom.value(&format!("{}{{process=\"{p}\"}}", f.name));
                assert!(v > 0.0, "{} of {p}: {v}", f.name);
            }
            assert!(
                prom.value(&format!(
                    "{}{{process=\"{p}\"}}",
                    catalog::BUS_GATE_SLOTS.name
                )) > 0.0
            );
        }

        // CRI: three Versions, one call refused before the bus.
        let mut rt = cri_runtime().await;
        for _ in 0..3 {
            rt.version(cri::VersionRequest::default()).await.unwrap();
        }
        let e = rt
            .container_status(cri::ContainerStatusRequest {
                container_id: "not an id!".into(),
                verbose: false,
            })
            .await
            .unwrap_err();
        assert_eq!(e.code(), tonic::Code::InvalidArgument);
        // Bus: two Platforms; nobody's Stop of a pod, denied by polkit.
        for _ in 0..2 {
            m.platform().await.unwrap();
        }
        // Images: busybox pulled cold (its registry docker.io, mirrored by
        // the harness's), and one that is not there.
        let _ = m.remove_image(BUSYBOX).await;
        pull_busybox(&m).await;
        let missing = "127.0.0.1:5000/podscope-test/no-such-image:latest";
        assert!(m
            .pull_image(missing, &PullOptions::default())
            .await
            .is_err());
        // A pod on the pod network (CNI ADD), a container in it killed by
        // the kernel over its memory limit, the pod removed (CNI DEL).
        let (pod, _logs) = log_pod(&m, "metrics", "crun").await;
        let (rc, _, err) = as_nobody(&busctl(&format!("Stop s {pod}")));
        assert_ne!(rc, 0, "nobody's Stop must be denied");
        assert!(
            err.contains("ccess") || err.contains("denied") || err.contains("uthoriz"),
            "{err}"
        );
        let hog = ContainerOptions {
            resources: Resources {
                memory_limit_in_bytes: 32 << 20,
                ..Default::default()
            },
            ..sh_cmd("x=$(head -c 100663296 /dev/zero | tr '\\0' a); echo \"held ${#x}\"")
        };
        let ctr = run(&m, &pod, "hog", hog).await;
        wait_container(&m, &ctr, ContainerState::Exited, Duration::from_secs(30)).await;
        assert!(m.container_status(&ctr).await.unwrap().oom_killed);
        // The pod is counted while it is there.
        let ready = format!("{}{{state=\"ready\",handler=\"crun\"}}", catalog::PODS.name);
        prom.scraped_after_now();
        assert!(prom.value(&ready) >= 1.0, "{ready}");
        m.remove(&pod).await.unwrap();

        let after = read(&prom, &queries);
        let delta: Vec<f64> = after.iter().zip(&before).map(|(a, b)| a - b).collect();
        let named = |i: usize| format!("{}: {} -> {}", queries[i], before[i], after[i]);
        assert_eq!(delta[0], 3.0, "{}", named(0));
        assert_eq!(delta[1], 1.0, "{}", named(1));
        assert_eq!(delta[2], 3.0, "{}", named(2));
        assert_eq!(delta[3], 2.0, "{}", named(3));
        assert_eq!(delta[4], 1.0, "{}", named(4));
        assert_eq!(delta[5], 1.0, "{}", named(5));
        assert_eq!(delta[6], 1.0, "{}", named(6));
        assert!(delta[7] > 0.0, "a cold pull fetched bytes: {}", named(7));
        assert_eq!(delta[8], 1.0, "{}", named(8));
        assert_eq!(delta[9], 1.0, "{}", named(9));
        assert_eq!(delta[10], 1.0, "{}", named(10));
        assert_eq!(delta[11], 1.0, "{}", named(11));
        assert!(
            delta[12] > 0.0,
            "the pod's and container's units: {}",
            named(12)
        );

        // Idle now: scrapes alone make no call to systemd.
        let systemd = &queries[12];
        let idle = read(&prom, std::slice::from_ref(systemd))[0];
        for _ in 0..3 {
            assert_eq!(
                read(&prom, std::slice::from_ref(systemd))[0],
                idle,
                "a scrape called systemd"
            );
        }
    })
    .await;
}

/// podscoped's descriptors now.
fn daemon_fds() -> usize {
    let pid = sh("systemctl show -P MainPID podscoped").trim().to_owned();
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .count()
}

/// GET `path` from the endpoint: the status line and the body.
fn get(path: &str) -> (String, String) {
    let mut s = TcpStream::connect(ADDRESS).expect("connect to the metrics endpoint");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(s, "GET {path} HTTP/1.1\r\nHost: {ADDRESS}\r\n\r\n").unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let (head, body) = out.split_once("\r\n\r\n").unwrap_or((&out, ""));
    (
        head.lines().next().unwrap_or("").to_owned(),
        body.to_owned(),
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn hostile_scrapers_cost_other_callers_nothing() {
    with_config(&config_with_metrics(ADDRESS), || async {
        let (m, _c) = manager().await;
        let (status, body) = get("/metrics");
        assert_eq!(status, "HTTP/1.1 200 OK");
        assert!(
            body.contains(&format!("# TYPE {} counter", catalog::BUS_CALLS.name)),
            "{body}"
        );
        assert_eq!(get("/").0, "HTTP/1.1 404 Not Found");
        let idle = daemon_fds();

        // A head past 8 KiB: refused, not read on.
        let mut big = TcpStream::connect(ADDRESS).unwrap();
        let _ = big.write_all(
            format!("GET /metrics HTTP/1.1\r\nX: {}\r\n", "a".repeat(16 << 10)).as_bytes(),
        );
        // Scrapers that hang up without reading the answer.
        for _ in 0..50 {
            let mut s = TcpStream::connect(ADDRESS).unwrap();
            let _ = s.write_all(b"GET /metrics HTTP/1.1\r\n\r\n");
        }
        // 200 connections that send nothing and stay open.
        let flood: Vec<TcpStream> = (0..200)
            .map(|_| TcpStream::connect(ADDRESS).expect("connect"))
            .collect();
        // The daemon closes all but the few it serves at once...
        let t0 = Instant::now();
        while daemon_fds() > idle + MAX_SCRAPES + 2 {
            assert!(
                t0.elapsed() < Duration::from_secs(5),
                "podscoped holds {} descriptors, {idle} idle",
                daemon_fds()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        // ...and the bus answers meanwhile.
        m.version().await.unwrap();
        m.list(&Default::default()).await.unwrap();
        // Those few go at the request head's deadline (3 s).
        let t0 = Instant::now();
        while daemon_fds() > idle + 1 {
            assert!(
                t0.elapsed() < Duration::from_secs(10),
                "podscoped still holds {} descriptors, {idle} idle",
                daemon_fds()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        drop(flood);
        drop(big);
        let (status, body) = get("/metrics");
        assert_eq!(status, "HTTP/1.1 200 OK", "a scrape after the flood");
        assert!(body.contains(catalog::PODS.name));
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_metrics_address_another_listener_holds_keeps_podscoped_from_starting() {
    let taken = std::net::TcpListener::bind("127.0.0.1:9102").expect("hold 127.0.0.1:9102");
    daemon("stop");
    let _back = DaemonBack;
    std::fs::write(CONFIG, config_with_metrics("127.0.0.1:9102")).unwrap();
    let rc = sh_status("systemctl reset-failed podscoped; systemctl start podscoped");
    restore_config();
    assert_ne!(
        rc, 0,
        "podscoped must not start without its metrics address"
    );
    let show = sh("systemctl show -p ExecMainStatus -p NRestarts podscoped");
    assert!(
        show.contains("ExecMainStatus=78"),
        "EX_CONFIG, not retried: {show}"
    );
    assert!(show.contains("NRestarts=0"), "{show}");
    wait_until(Duration::from_secs(5), || {
        sh("journalctl -u podscoped -o cat --no-pager -n 50")
            .contains("metrics_address 127.0.0.1:9102: cannot listen there")
    });
    drop(taken);
}

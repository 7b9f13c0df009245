//! podscopectl and the journal, as an operator reads them.

use crate::containers::{pull_busybox, BUSYBOX};
use podscope_test_support::harness::*;
use std::time::{Duration, Instant};

#[tokio::test(flavor = "multi_thread")]
async fn readiness_status_line_and_journal_fields() {
    let (m, _) = manager().await;
    let id = create_started(&m, "journal", CreateOptions::default()).await;
    wait_until(Duration::from_secs(8), || {
        sh("systemctl show -P StatusText podscoped").contains("ready")
    });
    assert!(sh("systemctl show -P StatusText podscoped").contains("sandboxes"));
    assert_eq!(sh("systemctl show -P Type podscoped").trim(), "notify");
    let j = sh(&format!(
        "journalctl -u podscoped SANDBOX_ID={id} -o json --no-pager"
    ));
    assert!(
        j.contains(&format!("sandbox {id} started in podscope-{id}.scope")),
        "journal has SANDBOX_ID entries: {j}"
    );
    assert!(
        j.contains(&format!("\"UNIT\":\"podscope-{id}.scope\"")),
        "{j}"
    );
    // Tools match the stable EVENT field, never the wording: one entry per
    // step event, each with its timing fields.
    for (event, field) in [
        (podscope_sys::logging::event::CREATED, "ELAPSED_US"),
        (podscope_sys::logging::event::NETWORK_ATTACHED, "PLUGIN_US"),
        (podscope_sys::logging::event::STARTED, "TOTAL_US"),
    ] {
        let entries = sh(&format!(
            "journalctl -u podscoped SANDBOX_ID={id} EVENT={event} -o json --no-pager"
        ));
        assert_eq!(entries.lines().count(), 1, "one {event} entry: {entries}");
        let entry: serde_json::Value = serde_json::from_str(entries.trim()).unwrap();
        let us: u64 = entry[field].as_str().unwrap().parse().unwrap();
        assert!(us > 0, "{event} has {field}: {entry}");
    }
    let v = m.version().await.unwrap();
    assert_eq!(
        (v.runtime_name.as_str(), v.api_version.as_str()),
        ("podscope", "v1")
    );
    assert!(!v.runtime_version.is_empty());
    let (conds, _, _) = m.runtime_status().await.unwrap();
    assert!(conds.iter().any(|c| c.kind == "RuntimeReady" && c.status));
    m.remove(&id).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn podscopectl_shows_readable_tables() {
    let id = sh(&format!(
        "podscopectl create {} --label app=ctl --hostname ctl --start",
        uniq("ctl")
    ))
    .trim()
    .to_owned();
    let list = sh("podscopectl list --label app=ctl");
    let header = list.lines().next().unwrap();
    for col in ["ID", "POD", "STATE", "CREATED", "UNIT"] {
        assert!(header.contains(col), "{list}");
    }
    assert!(list.contains(&id[..12]) && list.contains("ready"), "{list}");
    assert!(list.contains("1 sandboxes listed."), "{list}");
    let status = sh(&format!("podscopectl status {}", &id[..12]));
    assert!(
        status.contains("State: ready") && status.contains("app=ctl"),
        "{status}"
    );
    assert!(
        status.contains(&format!("systemctl status podscope-{id}.scope")),
        "{status}"
    );
    let (rc, _, err) = sh_out("podscopectl status ffffffffffff");
    assert_eq!(rc, 1);
    assert!(err.contains("no sandbox with id ffffffffffff"), "{err}");
    sh(&format!("podscopectl stop {id} && podscopectl rm {id}"));
    assert!(!sh("podscopectl list").contains(&id[..12]));
}

#[tokio::test(flavor = "multi_thread")]
async fn podscopectl_pulls_lists_inspects_and_removes_images() {
    let name = "127.0.0.1:5000/podscope-test/zstd";
    let _ = sh_status(&format!("podscopectl rmi {name} 2>/dev/null"));
    let id = sh(&format!("podscopectl pull {name}")).trim().to_owned();
    assert!(id.starts_with("sha256:") && id.len() == 71, "{id}");
    let table = sh("podscopectl images");
    let header: Vec<&str> = table.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(header, ["IMAGE", "TAG", "IMAGE", "ID", "SIZE"]);
    let row = table
        .lines()
        .find(|l| l.starts_with("127.0.0.1:5000/podscope-test/zstd "))
        .unwrap_or_else(|| panic!("{table}"));
    let cells: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(cells[1], "latest");
    assert_eq!(cells[2], &id["sha256:".len().."sha256:".len() + 13]);
    assert!(sh("podscopectl images -q").lines().any(|l| l == id));
    let json: serde_json::Value =
        serde_json::from_str(&sh(&format!("podscopectl inspecti {name}"))).unwrap();
    assert_eq!(json["id"], id.as_str());
    assert_eq!(json["platform"], "linux/amd64");
    assert_eq!(json["repoTags"][0], format!("{name}:latest"));
    assert!(sh("podscopectl imagefsinfo").contains("/var/lib/podscope/images"));
    sh(&format!("podscopectl rmi {}", &id[..20]));
    assert!(!sh("podscopectl images -q").lines().any(|l| l == id));
    let (rc, _, err) = sh_out("podscopectl pull Bad/Name");
    assert_eq!(rc, 1);
    assert!(err.contains("must be lowercase"), "{err}");
    let (rc, _, err) = sh_out(&format!("podscopectl rmi {name}"));
    assert_eq!(rc, 1);
    assert!(err.contains("not in the store"), "{err}");
}

/// `--version` and the usage need no bus: with the system bus pointed
/// nowhere, the version prints (exit 0), no command prints the usage (exit
/// 2), and a command that needs the daemon fails naming the bus (exit 1).
#[test]
fn podscopectl_version_and_usage_need_no_bus() {
    let nowhere = "DBUS_SYSTEM_BUS_ADDRESS=unix:path=/nonexistent/bus";
    let (rc, out, err) = sh_out(&format!("env {nowhere} podscopectl --version"));
    assert_eq!(
        (rc, out.as_str()),
        (
            0,
            format!("podscopectl {}\n", env!("CARGO_PKG_VERSION")).as_str()
        ),
        "{err}"
    );
    assert_eq!(sh_out(&format!("env {nowhere} podscopectl -V")).1, out);
    for args in ["", "--no-ask-password"] {
        let (rc, out, _) = sh_out(&format!("env {nowhere} podscopectl {args}"));
        assert_eq!(rc, 2, "podscopectl {args}");
        assert!(out.contains("usage: podscopectl"), "{out}");
    }
    let (rc, _, err) = sh_out(&format!("env {nowhere} podscopectl list"));
    assert_eq!(rc, 1);
    assert!(err.contains("system bus"), "{err}");
}

/// One of `podscopectl info`'s recovery counts: the number after `title`
/// and the indented records below it.
fn info_count(out: &str, title: &str) -> (usize, Vec<String>) {
    let mut lines = out.lines().skip_while(|l| !l.starts_with(title));
    let head = lines
        .next()
        .unwrap_or_else(|| panic!("no {title:?} line: {out}"));
    let n = head[title.len()..]
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("{head:?}: no count"));
    let records = lines
        .take_while(|l| l.starts_with("  "))
        .map(|l| l.trim().to_owned())
        .collect();
    (n, records)
}

/// `podscopectl info` shows what recovery found (RuntimeStatus'
/// quarantined, orphans_stopped, network_teardowns_owed): a corrupt
/// checkpoint's record, and on the next start counts of 0, printed all the
/// same.
#[tokio::test(flavor = "multi_thread")]
async fn podscopectl_info_shows_what_recovery_found() {
    let _back = DaemonBack;
    let (m, _) = manager().await;
    let (bad, _) = m
        .create(&pod(&uniq("info-q")), &CreateOptions::default())
        .await
        .unwrap();
    daemon("stop");
    let ck = format!("/var/lib/podscope/sandboxes/{bad}/checkpoint");
    let mut bytes = std::fs::read(&ck).unwrap();
    let n = bytes.len();
    bytes[n - 5] ^= 0x20;
    std::fs::write(&ck, bytes).unwrap();
    daemon("start");

    let (m, _) = manager().await;
    let (_, info, _) = m.runtime_status().await.unwrap();
    let out = sh("podscopectl info");
    let (n, records) = info_count(&out, "Quarantined at start:");
    assert_eq!((n, records.len()), (info.quarantined.len(), n), "{out}");
    for q in &info.quarantined {
        let line = format!("{} -> {}: {}", q.dir, q.moved_to, q.reason);
        assert!(records.contains(&line), "{line:?} in {out}");
    }
    assert!(
        records
            .iter()
            .any(|r| r.starts_with(&format!("{bad} -> ")) && r.contains("sha256 mismatch")),
        "{out}"
    );
    let (n, records) = info_count(&out, "Orphans stopped at start:");
    assert_eq!(
        (n, &records),
        (info.orphans_stopped.len(), &info.orphans_stopped),
        "{out}"
    );
    // Owed teardowns change as retries run: a count, not a record.
    info_count(&out, "Network teardowns owed:");
    // The node's layout as RuntimeStatus has it (this machine's: the
    // harness runs on the host's cgroups), advice where it is not v2, and
    // systemd-oomd off as shipped.
    assert!(
        out.contains(&format!("cgroup layout: {}\n", info.cgroup_layout)),
        "{out}"
    );
    assert_eq!(
        info.cgroup_advice.is_empty(),
        info.cgroup_layout == "v2",
        "{info:?}"
    );
    if info.cgroup_layout != "v2" {
        assert!(
            info.cgroup_advice.contains("failCgroupV1: false"),
            "{info:?}"
        );
        assert!(out.contains(&info.cgroup_advice), "{out}");
    }
    assert!(out.contains("systemd-oomd for pod slices: off\n"), "{out}");

    // Nothing left to find: the counts say 0.
    daemon("restart");
    let _answers = manager().await;
    let out = sh("podscopectl info");
    assert_eq!(
        info_count(&out, "Quarantined at start:"),
        (0, vec![]),
        "{out}"
    );
    assert_eq!(
        info_count(&out, "Orphans stopped at start:"),
        (0, vec![]),
        "{out}"
    );
    info_count(&out, "Network teardowns owed:");
    // Looked at: the next start cleans up what the record left.
    sh(&format!("rm -rf /var/lib/podscope/quarantine/{bad}.*"));
    daemon("restart");
    let _answers = manager().await;
    wait_until(Duration::from_secs(10), || {
        !std::path::Path::new(&format!("/run/podscope/sandboxes/{bad}")).exists()
            && !std::path::Path::new(&attachment_path(&bad)).exists()
    });
}

/// `podscopectl journal PREFIX -o json` until an entry `want` accepts
/// comes (journald may take a moment); every entry, parsed.
fn journal_until(
    prefix: &str,
    want: impl Fn(&serde_json::Value) -> bool,
) -> Vec<serde_json::Value> {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let (rc, out, err) = sh_out(&format!("podscopectl journal {prefix} -o json --no-pager"));
        let entries: Vec<serde_json::Value> = out
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
            .collect();
        if rc == 0 && entries.iter().any(&want) {
            return entries;
        }
        assert!(
            Instant::now() < deadline,
            "podscopectl journal {prefix}: exit {rc}: {err}{out}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// `podscopectl journal ID [OPTIONS]`: a pod's or a container's journal by
/// a 12-digit prefix, journalctl's options passed on; an unknown prefix is
/// the daemon's error.
#[tokio::test(flavor = "multi_thread")]
async fn podscopectl_journal_reads_a_pods_and_a_containers_entries() {
    let _cleanup = Cleanup::new();
    let (m, _) = manager().await;
    let id = sh(&format!("podscopectl create {} --start", uniq("jrnl")))
        .trim()
        .to_owned();
    assert_eq!(id.len(), 64, "{id:?}");
    let created = podscope_sys::logging::event::CREATED;
    let entries = journal_until(&id[..12], |e| {
        e["EVENT"] == created && e["SANDBOX_ID"] == id.as_str()
    });
    // Only the pod's: podscoped's entries about it, or its units'.
    let units = [
        format!("podscope-{id}.scope"),
        format!("podscope-netns@{id}.service"),
    ];
    for e in &entries {
        let its = e["SANDBOX_ID"] == id.as_str()
            || units
                .iter()
                .any(|u| e["_SYSTEMD_UNIT"] == u.as_str() || e["UNIT"] == u.as_str());
        assert!(its, "not {id}'s: {e}");
    }
    let cat = sh(&format!(
        "podscopectl journal {} -o cat --no-pager",
        &id[..12]
    ));
    assert!(cat.contains(&format!("sandbox {id} created")), "{cat}");

    // A container, by its prefix.
    pull_busybox(&m).await;
    let ctr = sh(&format!(
        "podscopectl container create {id} j {BUSYBOX} --start -- true"
    ))
    .trim()
    .to_owned();
    let ctr_created = podscope_sys::logging::event::CONTAINER_CREATED;
    let unit = format!("podscope-ctr-{ctr}.service");
    let entries = journal_until(&ctr[..12], |e| {
        e["EVENT"] == ctr_created && e["CONTAINER_ID"] == ctr.as_str()
    });
    for e in &entries {
        let its = e["CONTAINER_ID"] == ctr.as_str()
            || e["_SYSTEMD_UNIT"] == unit.as_str()
            || e["UNIT"] == unit.as_str();
        assert!(its, "not {ctr}'s: {e}");
    }
    // The pod's journal has its containers' entries.
    journal_until(&id[..12], |e| e["CONTAINER_ID"] == ctr.as_str());

    let (rc, _, err) = sh_out("podscopectl journal ffffffffffff --no-pager");
    assert_eq!(rc, 1, "{err}");
    assert!(
        err.contains("no sandbox with id ffffffffffff")
            && err.contains("no container with id ffffffffffff"),
        "{err}"
    );
    sh(&format!("podscopectl rm {id}"));
}

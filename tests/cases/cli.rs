//! podscopectl and the journal, as an operator reads them.

use crate::common::*;
use std::time::Duration;

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
        (podscope::logging::event::CREATED, "ELAPSED_US"),
        (podscope::logging::event::NETWORK_ATTACHED, "PLUGIN_US"),
        (podscope::logging::event::STARTED, "TOTAL_US"),
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

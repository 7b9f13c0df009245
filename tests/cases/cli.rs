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

//! Who may do what: polkit on the mutating methods (real polkitd), the bus
//! policy in front of them (real dbus-daemon), and polkitd going away.

use podscope_test_support::harness::*;
use std::time::Duration;

/// A polkit rules file, in place until dropped (polkitd reloads on its own).
pub struct PolkitRule(std::path::PathBuf);

impl PolkitRule {
    pub fn install(name: &str, js: &str) -> Self {
        let path = std::path::Path::new("/etc/polkit-1/rules.d").join(name);
        std::fs::write(&path, js).unwrap();
        PolkitRule(path)
    }
}

impl Drop for PolkitRule {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// dbus-send prints the error name and the bus's own message, which busctl
/// replaces by "Access denied".
fn send_as_nobody(dest: &str, path: &str, member: &str, args: &str) -> (i32, String, String) {
    as_nobody(&format!(
        "dbus-send --system --print-reply --dest={dest} {path} {member} {args}"
    ))
}

#[tokio::test(flavor = "multi_thread")]
async fn polkitd_gone_denies_non_root_callers_saying_why_and_root_still_works() {
    let (m, _) = manager().await;
    let id = create_started(&m, "nopolkit", CreateOptions::default()).await;
    // Put polkitd back even when an assertion fails.
    struct Restore;
    impl Drop for Restore {
        fn drop(&mut self) {
            sh_status("systemctl unmask --runtime polkit.service; systemctl start polkit.service");
        }
    }
    let _restore = Restore;
    sh("systemctl mask --runtime polkit.service && systemctl stop polkit.service");

    let (rc, _, err) = as_nobody(&format!("podscopectl stop {id}"));
    assert_ne!(rc, 0, "a non-root Stop without polkitd succeeded");
    assert!(
        err.contains("Stop denied") && err.contains("polkit is unavailable"),
        "the denial says why: {err}"
    );
    assert_eq!(m.status(&id).await.unwrap().state, State::Ready);
    let (rc, out, err) = as_nobody(&format!("podscopectl status {id}"));
    assert_eq!(rc, 0, "reading needs no polkit: {err}");
    assert!(out.contains("ready"), "{out}");

    // Root does not depend on polkitd.
    m.stop(&id).await.unwrap();
    assert_eq!(m.status(&id).await.unwrap().state, State::NotReady);

    // polkitd back: the same caller gets polkit's own answer again.
    sh("systemctl unmask --runtime polkit.service && systemctl start polkit.service");
    let (rc, _, err) = as_nobody(&format!("podscopectl rm {id}"));
    assert_ne!(rc, 0);
    assert!(
        err.contains("not authorized for org.podscope.Sandbox1.manage"),
        "{err}"
    );
    m.remove(&id).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn the_bus_policy_lets_anyone_call_only_what_podscoped_exports() {
    let (m, _) = manager().await;
    let id = create_started(&m, "buspolicy", CreateOptions::default()).await;
    let dest = "org.podscope.Sandbox1";
    let root = "/org/podscope/Sandbox1";
    let pod = format!("/org/podscope/Sandbox1/sandbox/{id}");

    // Exported and open: methods, properties, introspection, ObjectManager.
    for (path, member, args) in [
        (root, "org.podscope.Sandbox1.Manager.Version", String::new()),
        (
            root,
            "org.podscope.Sandbox1.Manager.Status",
            format!("string:{id}"),
        ),
        (
            root,
            "org.freedesktop.DBus.Introspectable.Introspect",
            String::new(),
        ),
        (
            root,
            "org.freedesktop.DBus.ObjectManager.GetManagedObjects",
            String::new(),
        ),
        (
            pod.as_str(),
            "org.freedesktop.DBus.Properties.Get",
            "string:org.podscope.Sandbox1.Sandbox string:State".into(),
        ),
    ] {
        let (rc, out, err) = send_as_nobody(dest, path, member, &args);
        assert_eq!(rc, 0, "{member} as nobody: {err}");
        assert!(!out.is_empty(), "{member}");
    }

    // Not exported: refused by dbus-daemon itself, before podscoped.
    for (path, member, args) in [
        (
            pod.as_str(),
            "org.freedesktop.DBus.Properties.Set",
            "string:org.podscope.Sandbox1.Sandbox string:State variant:string:ready",
        ),
        (root, "org.podscope.Sandbox1.Evil.Do", ""),
        (root, "org.freedesktop.DBus.Debug.Stats.GetStats", ""),
    ] {
        let (rc, _, err) = send_as_nobody(dest, path, member, args);
        assert_ne!(rc, 0, "{member} as nobody went through");
        assert!(
            err.contains("org.freedesktop.DBus.Error.AccessDenied")
                && err.contains("Rejected send message"),
            "{member}: the bus refuses it: {err}"
        );
    }

    // Only root may own the name.
    let (rc, _, err) = send_as_nobody(
        "org.freedesktop.DBus",
        "/org/freedesktop/DBus",
        "org.freedesktop.DBus.RequestName",
        "string:org.podscope.Sandbox1 uint32:0",
    );
    assert_ne!(rc, 0, "nobody took the name");
    assert!(
        err.contains("AccessDenied") && err.contains("not allowed to own"),
        "{err}"
    );

    // A mutating method reaches podscoped, whose polkit check refuses it:
    // the error is AccessDenied from the daemon, not the bus.
    let (rc, _, err) = send_as_nobody(
        dest,
        root,
        "org.podscope.Sandbox1.Manager.Stop",
        &format!("string:{id}"),
    );
    assert_ne!(rc, 0);
    assert!(
        err.contains("org.freedesktop.DBus.Error.AccessDenied")
            && err.contains("not authorized for org.podscope.Sandbox1.manage"),
        "{err}"
    );
    assert_eq!(m.status(&id).await.unwrap().state, State::Ready);
    m.remove(&id).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn polkit_rules_see_which_pod_a_call_is_about() {
    // The narrower example of polkit/50-podscope.rules.example, for nobody:
    // one Kubernetes namespace only, decided from the call's details.
    let _rule = PolkitRule::install(
        "40-podscope-test.rules",
        r#"polkit.addRule(function(action, subject) {
    if (action.id == "org.podscope.Sandbox1.manage" && subject.user == "nobody" &&
        action.lookup("sandbox").indexOf("polkit-ns/") == 0 &&
        (action.lookup("verb") == "Create" || action.lookup("sandbox_id").length == 64)) {
        return polkit.Result.YES;
    }
});
"#,
    );
    // polkitd picks rules up by itself; poll until this one answers.
    let name = uniq("scoped");
    let mut created = (1, String::new(), String::new());
    wait_until(Duration::from_secs(15), || {
        created = as_nobody(&format!(
            "podscopectl create {name} --namespace polkit-ns --start"
        ));
        created.0 == 0
    });
    assert_eq!(created.0, 0, "allowed in polkit-ns: {}", created.2);
    let id = created.1.trim().to_owned();

    let (rc, _, err) = as_nobody("podscopectl create other --namespace default");
    assert_ne!(rc, 0, "nobody created a pod outside polkit-ns");
    assert!(err.contains("not authorized"), "{err}");
    // Namespaces are opaque and may hold '/': "polkit-ns/x" is another
    // namespace, which the escaped "sandbox" detail keeps out of the prefix.
    let (rc, _, err) = as_nobody("podscopectl create other --namespace polkit-ns/x");
    assert_ne!(rc, 0, "nobody created a pod in namespace polkit-ns/x");
    assert!(err.contains("not authorized"), "{err}");

    // Host access is another action, which the namespace rule does not
    // grant: host network, host IPC/PID, a published host port, a chosen
    // slice. polkit's rules see what it takes.
    for extra in [
        "--host-network",
        "--pid-namespace node",
        "--port 80:8080",
        "--cgroup-parent system.slice",
    ] {
        let (rc, _, err) = as_nobody(&format!(
            "podscopectl create priv --namespace polkit-ns {extra}"
        ));
        assert_ne!(rc, 0, "nobody created a pod with {extra}");
        assert!(
            err.contains("not authorized for org.podscope.Sandbox1.manage-privileged"),
            "{extra}: {err}"
        );
    }

    // Bad input is named before polkit is asked (validate, then authorize).
    let (rc, _, err) =
        as_nobody("podscopectl create other --namespace default --hostname 'not valid!'");
    assert_ne!(rc, 0);
    assert!(err.contains("hostname: "), "{err}");

    // Stop and Remove name the pod by id, or a prefix of it; the daemon
    // resolves it once and tells polkit which pod, by its full id.
    let (rc, _, err) = as_nobody(&format!("podscopectl stop {}", &id[..12]));
    assert_eq!(rc, 0, "stop in polkit-ns: {err}");
    let (rc, _, err) = as_nobody(&format!("podscopectl rm {id}"));
    assert_eq!(rc, 0, "rm in polkit-ns: {err}");
    let (m, _) = manager().await;
    assert!(m.status(&id).await.is_err(), "removed");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_callers_interactive_authorization_flag_reaches_polkit() {
    // A rule that asks for authentication instead of answering yes or no.
    let (m, _) = manager().await;
    let id = create_started(&m, "challenge", CreateOptions::default()).await;
    let _rule = PolkitRule::install(
        "40-podscope-challenge.rules",
        r#"polkit.addRule(function(action, subject) {
    if (action.id == "org.podscope.Sandbox1.manage" && subject.user == "nobody") {
        return polkit.Result.AUTH_ADMIN;
    }
});
"#,
    );
    // Without the flag: refused at once, saying how to get a prompt.
    let mut out = (0, String::new(), String::new());
    wait_until(Duration::from_secs(15), || {
        out = as_nobody(&format!("podscopectl --no-ask-password stop {id}"));
        out.2
            .contains("requires authentication (call with interactive")
    });
    assert_ne!(out.0, 0);
    assert!(
        out.2
            .contains("requires authentication (call with interactive"),
        "{}",
        out.2
    );
    // With it (podscopectl's default), polkit looks for an agent to ask;
    // there is none for this caller, and the answer says so.
    let (rc, _, err) = as_nobody(&format!("podscopectl stop {id}"));
    assert_ne!(rc, 0);
    assert!(
        err.contains("requires authentication and no authentication agent completed it"),
        "{err}"
    );
    assert_eq!(m.status(&id).await.unwrap().state, State::Ready);
    m.remove(&id).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn unprivileged_callers_may_read_but_not_manage() {
    let (m, _) = manager().await;
    let id = create_started(&m, "polkit", CreateOptions::default()).await;
    let as_nobody = |args: &str| as_nobody(&format!("busctl {args}"));
    let (rc, _, err) = as_nobody(&format!(
        "call org.podscope.Sandbox1 /org/podscope/Sandbox1 org.podscope.Sandbox1.Manager Stop s {id}"
    ));
    assert_ne!(rc, 0);
    assert!(err.contains("denied") || err.contains("Access"), "{err}");
    assert_eq!(
        m.status(&id).await.unwrap().state,
        State::Ready,
        "denied call changed nothing"
    );
    let (rc, _, err) = as_nobody(
        "call org.podscope.Sandbox1 /org/podscope/Sandbox1 org.podscope.Sandbox1.Manager Create sssua{sv} evil default u 0 0",
    );
    assert_ne!(rc, 0, "{err}");
    let (rc, out, err) = as_nobody(&format!(
        "call org.podscope.Sandbox1 /org/podscope/Sandbox1 org.podscope.Sandbox1.Manager Status s {id}"
    ));
    assert_eq!(rc, 0, "{err}");
    assert!(out.contains("ready"));
    let (rc, out, _) = as_nobody(&format!(
        "get-property org.podscope.Sandbox1 /org/podscope/Sandbox1/sandbox/{id} org.podscope.Sandbox1.Sandbox State"
    ));
    assert_eq!(rc, 0);
    assert!(out.contains("ready"));
    m.remove(&id).await.unwrap();
}

/// Checkpoints and attachments carry annotations and copies of network
/// configs: root's alone (0600 files in 0700 directories).
#[tokio::test(flavor = "multi_thread")]
async fn state_files_are_root_only() {
    let (m, _) = manager().await;
    let id = create_started(&m, "private", CreateOptions::default()).await;
    let checkpoint = format!("/var/lib/podscope/sandboxes/{id}/checkpoint");
    for (path, want) in [
        ("/var/lib/podscope".to_owned(), "700"),
        ("/var/lib/podscope/sandboxes".to_owned(), "700"),
        (format!("/var/lib/podscope/sandboxes/{id}"), "700"),
        (checkpoint.clone(), "600"),
        ("/var/lib/podscope/networks".to_owned(), "700"),
        (attachment_path(&id), "600"),
    ] {
        assert_eq!(sh(&format!("stat -c %a {path}")).trim(), want, "{path}");
    }
    let (rc, _, err) = as_nobody(&format!("cat {checkpoint}"));
    assert_ne!(rc, 0, "nobody reads a checkpoint: {err}");
    m.remove(&id).await.unwrap();
}

/// A stalled polkitd (or agent) keeps no call pending in podscoped: past
/// `polkit_timeout_ms` the call is denied, and says why.
#[tokio::test(flavor = "multi_thread")]
async fn a_stalled_polkit_denies_in_time() {
    with_config("polkit_timeout_ms = 1000\n", || async {
        let (m, _) = manager().await;
        let id = create_started(&m, "stall", CreateOptions::default()).await;
        let stalled = StalledPolkit::new();
        // podscopectl waits up to 120 s for an answer: the denial comes
        // from podscoped's own limit.
        let (rc, _, err) = as_nobody(&format!("podscopectl --no-ask-password stop {id}"));
        drop(stalled);
        assert_ne!(rc, 0);
        assert!(
            err.contains("polkit did not answer within 1000 ms"),
            "denied in time, saying why: {err}"
        );
        assert_eq!(m.status(&id).await.unwrap().state, State::Ready);
        m.remove(&id).await.unwrap();
    })
    .await;
}

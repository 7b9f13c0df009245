//! Images against real registries: Debian's docker-registry on
//! 127.0.0.1:5000 (anonymous) and :5001 (htpasswd), filled with the
//! images tests/images/build.sh makes (tests/harness/registry/start.sh),
//! and tests/fixtures/registry-proxy.py in front of :5000 where a test
//! needs a registry that hangs, resets, or counts what it is asked.

use podscope_api::image::{ImageFilter, PullOptions};
use podscope_api::ErrorKind;
use podscope_test_support::harness::*;
use std::time::Duration;

const REG: &str = "127.0.0.1:5000";
const STORE: &str = "/var/lib/podscope/images";

fn creds(user: &str, password: &str) -> PullOptions {
    PullOptions {
        username: Some(user.into()),
        password: Some(password.into()),
        ..Default::default()
    }
}

async fn pull(m: &Client, name: &str) -> podscope_api::image::ImageSummary {
    m.pull_image(name, &PullOptions::default())
        .await
        .unwrap_or_else(|e| panic!("pull {name}: {e}"))
}

async fn pull_err(m: &Client, name: &str, o: &PullOptions) -> (ErrorKind, String) {
    match m.pull_image(name, o).await {
        Ok(s) => panic!("pull {name} succeeded: {s:?}"),
        Err(e) => classify(&e),
    }
}

/// Remove whatever image `name` is, if any.
async fn forget(m: &Client, name: &str) {
    if let Ok((s, _)) = m.image_status(name).await {
        m.remove_image(&s.id).await.unwrap();
    }
}

/// Remove `name` and wait for the garbage collection to take its layers,
/// so that the next pull of it is a cold one.
async fn forget_cold(m: &Client, name: &str) {
    let Ok((s, info)) = m.image_status(name).await else {
        return;
    };
    m.remove_image(&s.id).await.unwrap();
    wait_until(Duration::from_secs(10), || {
        info.layer_dirs
            .iter()
            .all(|d| !std::path::Path::new(d).exists())
    });
}

/// The registry proxy on `port`, in front of :5000, its state in a fresh dir.
struct Proxy {
    registry: FixtureRegistry,
    dir: String,
}

impl Proxy {
    fn start(port: u16) -> Proxy {
        let dir = format!("/run/podscope-test/proxy-{port}");
        sh(&format!("rm -rf {dir} && mkdir -p {dir}"));
        let registry = FixtureRegistry::start(
            &format!("podscope-test-proxy-{port}"),
            port,
            "registry-proxy.py",
            &format!("{port} 5000 {dir}"),
            Duration::from_secs(10),
        );
        // Not the readiness probes.
        sh(&format!(": > {dir}/requests"));
        Proxy { registry, dir }
    }

    fn mode(&self, m: &str) {
        std::fs::write(format!("{}/mode", self.dir), m).unwrap();
    }

    /// GETs of blobs since the last `clear`.
    fn blob_gets(&self) -> Vec<String> {
        std::fs::read_to_string(format!("{}/requests", self.dir))
            .unwrap_or_default()
            .lines()
            .filter(|l| l.starts_with("GET ") && l.contains("/blobs/"))
            .map(|l| l.rsplit('/').next().unwrap().to_owned())
            .collect()
    }

    fn requests(&self) -> usize {
        std::fs::read_to_string(format!("{}/requests", self.dir))
            .unwrap_or_default()
            .lines()
            .count()
    }

    fn clear(&self) {
        std::fs::write(format!("{}/requests", self.dir), "").unwrap();
    }

    fn name(&self, repo: &str) -> String {
        format!("127.0.0.1:{}/{repo}", self.registry.port)
    }
}

/// The layer digests of a manifest in the harness registry.
fn layer_digests(repo: &str, tag: &str) -> Vec<String> {
    sh(&format!(
        "curl -sf -H 'Accept: application/vnd.oci.image.manifest.v1+json' \
         http://{REG}/v2/{repo}/manifests/{tag} | jq -r '.layers[].digest'"
    ))
    .lines()
    .map(|l| l.trim_start_matches("sha256:").to_owned())
    .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn pull_keeps_layers_as_overlay_lower_dirs() {
    let _cleanup = Cleanup::new();
    let (m, _) = manager().await;
    let name = format!("{REG}/podscope-test/multilayer");
    forget(&m, &name).await;
    let s = pull(&m, &name).await;
    assert!(s.id.starts_with("sha256:"), "{s:?}");
    assert_eq!(s.repo_tags, vec![format!("{name}:latest")]);
    assert_eq!(s.repo_digests.len(), 1);
    assert!(s.repo_digests[0].starts_with(&format!("{name}@sha256:")));
    assert!(s.size > 1_000_000, "{s:?}");

    // Status by id, id prefix, tag and digest: the same image.
    let (by_id, info) = m.image_status(&s.id).await.unwrap();
    assert_eq!(by_id, s);
    let short = &s.id["sha256:".len().."sha256:".len() + 12];
    for n in [short, &format!("{name}:latest"), &s.repo_digests[0], &name] {
        assert_eq!(m.image_status(n).await.unwrap().0, s, "{n}");
    }
    assert_eq!(info.platform, "linux/amd64");
    assert_eq!(info.layers.len(), 3);
    assert_eq!(info.index, "");
    let dirs = &info.layer_dirs;
    for d in dirs {
        assert!(d.starts_with(&format!("{STORE}/layers/")), "{d}");
    }
    // Layer 2: the whiteout as overlayfs's 0/0 device, the opaque
    // directory as its xattr.
    assert_eq!(
        sh(&format!("stat -c '%F %t:%T' {}/etc/remove-me", dirs[1])).trim(),
        "character special file 0:0"
    );
    assert!(!std::path::Path::new(&format!("{}/etc/.wh.remove-me", dirs[1])).exists());
    let opq = xattr_of(&format!("{}/opaque", dirs[1]), "trusted.overlay.opaque");
    assert_eq!(opq.as_deref(), Some("y"));
    assert_eq!(
        std::fs::read_to_string(format!("{}/opaque/from-upper", dirs[1])).unwrap(),
        "upper\n"
    );
    // Layer 3 (uncompressed): setuid, a hardlink, an owner kept.
    assert_eq!(
        sh(&format!("stat -c %a {}/bin/setuid-tool", dirs[2])).trim(),
        "4755"
    );
    assert_eq!(
        sh(&format!(
            "stat -c %i {0}/bin/setuid-tool {0}/bin/setuid-link | uniq | wc -l",
            dirs[2]
        ))
        .trim(),
        "1",
        "one inode"
    );
    assert_eq!(
        sh(&format!("stat -c %u:%g {}/home/user/file", dirs[2])).trim(),
        "1000:1000"
    );
    // Layer 1: busybox, executable.
    assert!(sh(&format!("{}/bin/busybox echo hi", dirs[0])).contains("hi"));

    // An overlay mount of the three shows what a container will see.
    let mnt = "/run/podscope-test/overlay-check";
    sh(&format!(
        "mkdir -p {mnt} && mount -t overlay overlay -o lowerdir={}:{}:{} {mnt}",
        dirs[2], dirs[1], dirs[0]
    ));
    let seen = sh(&format!(
        "test ! -e {mnt}/etc/remove-me && ls {mnt}/opaque && test -x {mnt}/bin/sh && echo ok; umount {mnt}"
    ));
    assert_eq!(
        seen.split_whitespace().collect::<Vec<_>>(),
        ["from-upper", "ok"]
    );

    // Listed, then removed by tag; its layers go with it.
    let listed = m.list_images(&ImageFilter::default()).await.unwrap();
    assert!(listed.iter().any(|i| i.id == s.id));
    let only = m
        .list_images(&ImageFilter {
            image: Some(name.clone()),
        })
        .await
        .unwrap();
    assert_eq!(only, vec![s.clone()]);
    m.remove_image(&format!("{name}:latest")).await.unwrap();
    let (k, msg) = classify(&m.image_status(&s.id).await.unwrap_err());
    assert_eq!(k, ErrorKind::NotFound, "{msg}");
    wait_until(Duration::from_secs(10), || {
        dirs.iter().all(|d| !std::path::Path::new(d).exists())
    });
    let (k, _) = classify(&m.remove_image(&s.id).await.unwrap_err());
    assert_eq!(k, ErrorKind::NotFound);
}

fn xattr_of(path: &str, name: &str) -> Option<String> {
    let p = std::ffi::CString::new(path).unwrap();
    let n = std::ffi::CString::new(name).unwrap();
    let mut buf = [0u8; 64];
    // SAFETY: valid C strings and buffer.
    let r = unsafe { libc::lgetxattr(p.as_ptr(), n.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
    (r >= 0).then(|| String::from_utf8_lossy(&buf[..r as usize]).into_owned())
}

#[tokio::test(flavor = "multi_thread")]
async fn an_index_gives_the_hosts_platform_and_zstd_layers_unpack() {
    let _cleanup = Cleanup::new();
    let (m, _) = manager().await;
    let name = format!("{REG}/podscope-test/multiarch");
    forget(&m, &name).await;
    let s = pull(&m, &name).await;
    let (_, info) = m.image_status(&s.id).await.unwrap();
    assert_eq!(
        info.platform, "linux/amd64",
        "the arm64 entry comes first and is not chosen"
    );
    assert!(info.index.starts_with("sha256:"));
    assert_eq!(
        s.repo_digests,
        vec![format!("{name}@{}", info.index)],
        "the repo digest is the index's, as pulled"
    );
    let label: serde_json::Value = serde_json::from_str(&info.config).unwrap();
    assert_eq!(
        label["config"]["Labels"]["org.podscope.test"],
        "multiarch-amd64"
    );

    let z = format!("{REG}/podscope-test/zstd");
    forget(&m, &z).await;
    let s2 = pull(&m, &z).await;
    let (_, info) = m.image_status(&s2.id).await.unwrap();
    assert!(sh(&format!(
        "{}/bin/busybox true && echo ok",
        info.layer_dirs[0]
    ))
    .contains("ok"));
    forget(&m, &name).await;
    forget(&m, &z).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn names_are_normalised_and_mirrors_serve_them() {
    let _cleanup = Cleanup::new();
    let (m, _) = manager().await;
    // registries.conf mirrors docker.io to the harness registry.
    forget(&m, "busybox").await;
    let s = pull(&m, "busybox").await;
    assert_eq!(s.repo_tags, vec!["docker.io/library/busybox:latest"]);
    assert!(s.repo_digests[0].starts_with("docker.io/library/busybox@sha256:"));
    for n in [
        "busybox",
        "busybox:latest",
        "library/busybox",
        "docker.io/library/busybox:latest",
    ] {
        assert_eq!(m.image_status(n).await.unwrap().0.id, s.id, "{n}");
    }
    forget(&m, "busybox").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn credentials_from_the_caller_or_an_auth_file() {
    let _cleanup = Cleanup::new();
    let (m, _) = manager().await;
    let name = "127.0.0.1:5001/podscope-test/private";
    forget(&m, name).await;
    let (k, msg) = pull_err(&m, name, &PullOptions::default()).await;
    assert_eq!(k, ErrorKind::RegistryUnauthorized, "{msg}");
    assert!(
        msg.contains("127.0.0.1:5001") && msg.contains("401"),
        "{msg}"
    );
    let (k, msg) = pull_err(&m, name, &creds("podscope", "wrong")).await;
    assert_eq!(k, ErrorKind::RegistryUnauthorized, "{msg}");
    assert!(msg.contains("refused"), "{msg}");
    let s = m
        .pull_image(name, &creds("podscope", "podscope-s3cret"))
        .await
        .unwrap();
    m.remove_image(&s.id).await.unwrap();
    // `auth` (base64 of user:password), as kubelet passes it.
    let auth = PullOptions {
        auth: Some("cG9kc2NvcGU6cG9kc2NvcGUtczNjcmV0".into()),
        ..Default::default()
    };
    let s = m.pull_image(name, &auth).await.unwrap();
    m.remove_image(&s.id).await.unwrap();
    // An auth file where containers-auth.json(5) and CRI-O look.
    std::fs::write(
        "/etc/containers/auth.json",
        r#"{"auths":{"127.0.0.1:5001":{"auth":"cG9kc2NvcGU6cG9kc2NvcGUtczNjcmV0"}}}"#,
    )
    .unwrap();
    let r = m.pull_image(name, &PullOptions::default()).await;
    std::fs::remove_file("/etc/containers/auth.json").unwrap();
    let s = r.unwrap();
    m.remove_image(&s.id).await.unwrap();
    // Docker's file under /root, which the unit's ProtectHome=tmpfs hides
    // but for the credential directories it binds back, read-only. Made
    // after podscoped started, so seen after a restart.
    sh("rm -rf /root/.docker && mkdir -p /root/.docker");
    std::fs::write(
        "/root/.docker/config.json",
        r#"{"auths":{"127.0.0.1:5001":{"auth":"cG9kc2NvcGU6cG9kc2NvcGUtczNjcmV0"}}}"#,
    )
    .unwrap();
    std::fs::write("/root/podscope-test-hidden", "").unwrap();
    daemon("restart");
    let (m, _) = manager().await;
    let r = m.pull_image(name, &PullOptions::default()).await;
    // The rest of root's home stays hidden from the daemon (and its CNI
    // plugins): its /root is a tmpfs with the one directory bound in.
    let pid = sh("systemctl show -p MainPID --value podscoped");
    let seen = sh(&format!("ls -A /proc/{}/root/root", pid.trim()));
    sh("rm -rf /root/.docker /root/podscope-test-hidden");
    let s = r.expect("credentials from /root/.docker/config.json");
    m.remove_image(&s.id).await.unwrap();
    let seen: Vec<&str> = seen.lines().collect();
    assert!(
        seen.contains(&".docker") && !seen.contains(&"podscope-test-hidden"),
        "the daemon's view of /root: {seen:?}"
    );
    let bad = PullOptions {
        auth: Some("not base64!".into()),
        ..Default::default()
    };
    let (k, msg) = pull_err(&m, name, &bad).await;
    assert_eq!(k, ErrorKind::InvalidArgument, "{msg}");
    assert!(msg.starts_with("options.auth"), "{msg}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_moved_tag_names_the_new_image_only() {
    let _cleanup = Cleanup::new();
    let (m, _) = manager().await;
    let name = format!("{REG}/podscope-test/moving");
    let copy = |from: &str| {
        sh(&format!(
            "skopeo copy --quiet --src-tls-verify=false --dest-tls-verify=false \
             docker://{REG}/podscope-test/{from}:latest docker://{name}:latest"
        ))
    };
    copy("moving-first");
    let first = pull(&m, &name).await;
    copy("moving-second");
    let second = pull(&m, &name).await;
    assert_ne!(first.id, second.id);
    assert_eq!(second.repo_tags, vec![format!("{name}:latest")]);
    let (old, _) = m.image_status(&first.id).await.unwrap();
    assert!(old.repo_tags.is_empty(), "{old:?}");
    assert_eq!(
        old.repo_digests, first.repo_digests,
        "still named by its digest"
    );
    assert_eq!(m.image_status(&name).await.unwrap().0.id, second.id);
    m.remove_image(&first.id).await.unwrap();
    m.remove_image(&second.id).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_names_missing_images_and_unreachable_registries_are_named() {
    let (m, _) = manager().await;
    let none = PullOptions::default();
    let (k, msg) = pull_err(&m, "Bad/Name", &none).await;
    assert_eq!(k, ErrorKind::InvalidArgument, "{msg}");
    assert!(msg.contains("lowercase"), "{msg}");
    let (k, msg) = pull_err(&m, &format!("{REG}/podscope-test/no-such"), &none).await;
    assert_eq!(k, ErrorKind::NotFound, "{msg}");
    assert!(
        msg.contains("registry 127.0.0.1:5000") && msg.contains("404"),
        "{msg}"
    );
    let (k, msg) = pull_err(&m, &format!("{REG}/podscope-test/multilayer:nope"), &none).await;
    assert_eq!(k, ErrorKind::NotFound, "{msg}");
    // Nothing listens on :5999.
    let (k, msg) = pull_err(&m, "127.0.0.1:5999/x/y", &none).await;
    assert_eq!(k, ErrorKind::RegistryUnavailable, "{msg}");
    assert!(
        msg.contains("127.0.0.1:5999") && msg.contains("cannot connect"),
        "{msg}"
    );
    // Status of a name nothing has.
    let (k, _) = classify(
        &m.image_status("docker.io/library/none:1")
            .await
            .unwrap_err(),
    );
    assert_eq!(k, ErrorKind::NotFound);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_digest_present_needs_no_registry_and_pulls_share_layers() {
    let _cleanup = Cleanup::new();
    let (m, _) = manager().await;
    let proxy = Proxy::start(5002);
    let name = proxy.name("podscope-test/multilayer");
    forget_cold(&m, &name).await;
    forget_cold(&m, &format!("{REG}/podscope-test/multilayer")).await;
    // Two pulls at once: each layer is fetched once.
    let none = PullOptions::default();
    let (a, b) = tokio::join!(m.pull_image(&name, &none), m.pull_image(&name, &none));
    let (a, b) = (a.unwrap(), b.unwrap());
    assert_eq!(a.id, b.id);
    let layers = layer_digests("podscope-test/multilayer", "latest");
    assert_eq!(layers.len(), 3);
    let gets = proxy.blob_gets();
    for l in &layers {
        assert_eq!(
            gets.iter().filter(|g| g.ends_with(l.as_str())).count(),
            1,
            "{l}: {gets:?}"
        );
    }
    // Again by tag: the manifest is asked for, no layer.
    proxy.clear();
    pull(&m, &name).await;
    assert!(proxy
        .blob_gets()
        .iter()
        .all(|g| !layers.iter().any(|l| g.ends_with(l.as_str()))));
    // By its digest: nothing at all.
    proxy.clear();
    let by_digest = pull(&m, &a.repo_digests[0]).await;
    assert_eq!(by_digest.id, a.id);
    assert_eq!(proxy.requests(), 0, "the store had it");
    m.remove_image(&a.id).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_registry_that_hangs_or_resets_mid_blob_is_named_and_a_retry_works() {
    let _cleanup = Cleanup::new();
    with_config("pull_stall_timeout_ms = 1500\n", || async {
        let (m, _) = manager().await;
        let proxy = Proxy::start(5003);
        let name = proxy.name("podscope-test/zstd");
        forget_cold(&m, &name).await;
        forget_cold(&m, &format!("{REG}/podscope-test/zstd")).await;

        proxy.mode("hang");
        let (k, msg) = pull_err(&m, &name, &PullOptions::default()).await;
        assert_eq!(k, ErrorKind::RegistryUnavailable, "{msg}");
        assert!(
            msg.contains("127.0.0.1:5003") && msg.contains("hangs"),
            "{msg}"
        );
        assert!(msg.contains("of 1"), "names how far it got: {msg}");

        proxy.mode("reset");
        let (k, msg) = pull_err(&m, &name, &PullOptions::default()).await;
        assert_eq!(k, ErrorKind::RegistryUnavailable, "{msg}");
        assert!(
            msg.contains("127.0.0.1:5003") && msg.contains("layer sha256:"),
            "{msg}"
        );
        // Nothing half-made stays: no record, nothing in tmp/.
        assert!(m.image_status(&name).await.is_err());
        assert_eq!(sh(&format!("ls {STORE}/tmp | wc -l")).trim(), "0");

        proxy.mode("pass");
        let s = pull(&m, &name).await;
        m.remove_image(&s.id).await.unwrap();
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn kill_during_a_pull_leaves_no_half_image() {
    let _cleanup = Cleanup::new();
    let (m, conn) = manager().await;
    let proxy = Proxy::start(5004);
    let name = proxy.name("podscope-test/multilayer");
    forget_cold(&m, &name).await;
    forget_cold(&m, &format!("{REG}/podscope-test/multilayer")).await;
    proxy.mode("hang");
    // The pull, from another connection, left hanging mid-blob.
    let c2 = podscope_api::Client::new(&conn).await.unwrap();
    let n2 = name.clone();
    let pulling = tokio::spawn(async move { c2.pull_image(&n2, &PullOptions::default()).await });
    wait_until(Duration::from_secs(10), || !proxy.blob_gets().is_empty());
    tokio::time::sleep(Duration::from_millis(300)).await;
    sh("systemctl kill -s KILL podscoped");
    let r = pulling.await.unwrap();
    assert!(r.is_err(), "the pull died with the daemon");
    let (m, _) = manager().await;
    let (k, _) = classify(&m.image_status(&name).await.unwrap_err());
    assert_eq!(k, ErrorKind::NotFound, "no record of the half pull");
    assert_eq!(
        sh(&format!("ls {STORE}/tmp | wc -l")).trim(),
        "0",
        "tmp/ emptied at start"
    );
    proxy.mode("pass");
    let s = pull(&m, &name).await;
    let (_, info) = m.image_status(&s.id).await.unwrap();
    assert_eq!(info.layer_dirs.len(), 3);
    m.remove_image(&s.id).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn pull_and_remove_ask_polkit_reading_is_open() {
    let _cleanup = Cleanup::new();
    let (m, _) = manager().await;
    let s = pull(&m, &format!("{REG}/podscope-test/zstd")).await;
    let (rc, _, err) = as_nobody(&format!(
        "podscopectl --no-ask-password pull {REG}/podscope-test/zstd"
    ));
    assert_ne!(rc, 0);
    assert!(
        err.contains("not authorized for org.podscope.Sandbox1.manage"),
        "{err}"
    );
    let (rc, _, err) = as_nobody(&format!("podscopectl --no-ask-password rmi {}", s.id));
    assert_ne!(rc, 0);
    assert!(err.contains("not authorized"), "{err}");
    let (rc, out, err) = as_nobody("podscopectl images");
    assert_eq!(rc, 0, "{err}");
    assert!(out.contains("podscope-test/zstd"), "{out}");
    let (rc, out, err) = as_nobody(&format!("podscopectl inspecti {}", s.id));
    assert_eq!(rc, 0, "{err}");
    assert!(out.contains(&s.id), "{out}");
    m.remove_image(&s.id).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn bearer_tokens_from_the_registrys_realm() {
    let _cleanup = Cleanup::new();
    // :5005 answers 401 with a Bearer challenge naming the token service on
    // :5006 (as Docker Hub does); podscope asks it for a token.
    let (m, _) = manager().await;
    let name = "127.0.0.1:5005/podscope-test/private";
    forget(&m, name).await;
    let (k, msg) = pull_err(&m, name, &PullOptions::default()).await;
    assert_eq!(k, ErrorKind::RegistryUnauthorized, "{msg}");
    assert!(
        msg.contains("token from http://127.0.0.1:5006/token") && msg.contains("401"),
        "{msg}"
    );
    let (k, msg) = pull_err(&m, name, &creds("podscope", "wrong")).await;
    assert_eq!(k, ErrorKind::RegistryUnauthorized, "{msg}");

    let s = m
        .pull_image(name, &creds("podscope", "podscope-s3cret"))
        .await
        .unwrap();
    m.remove_image(&s.id).await.unwrap();
    // An identity token: exchanged for an access token (OAuth2 refresh).
    let refresh = PullOptions {
        identity_token: Some("podscope-refresh".into()),
        ..Default::default()
    };
    let s = m.pull_image(name, &refresh).await.unwrap();
    m.remove_image(&s.id).await.unwrap();
    let bad_refresh = PullOptions {
        identity_token: Some("stale".into()),
        ..Default::default()
    };
    let (k, msg) = pull_err(&m, name, &bad_refresh).await;
    assert_eq!(k, ErrorKind::RegistryUnauthorized, "{msg}");
    // A registry token, used as it is.
    let token = sh("curl -sf -u podscope:podscope-s3cret \
        'http://127.0.0.1:5006/token?service=podscope-test-registry&scope=repository:podscope-test/private:pull' \
        | jq -r .token");
    let given = PullOptions {
        registry_token: Some(token.trim().to_owned()),
        ..Default::default()
    };
    let s = m.pull_image(name, &given).await.unwrap();
    m.remove_image(&s.id).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn podscopectl_draws_pull_progress_on_a_terminal() {
    let _cleanup = Cleanup::new();
    // A registry that hangs mid-layer: the pull stays in progress long
    // enough for PullProgress to tick, then fails by name.
    with_config("pull_stall_timeout_ms = 2500\n", || async {
        let (m, _) = manager().await;
        let proxy = Proxy::start(5007);
        let name = proxy.name("podscope-test/zstd");
        forget_cold(&m, &name).await;
        forget_cold(&m, &format!("{REG}/podscope-test/zstd")).await;
        proxy.mode("hang");
        // script(1) gives podscopectl a terminal.
        let (rc, out, _) = sh_out(&format!("script -qec 'podscopectl pull {name}' /dev/null"));
        assert_ne!(rc, 0, "{out}");
        assert!(out.contains(&format!("\r{name}: ")), "{out:?}");
        assert!(out.contains("0/1 layers"), "{out:?}");
        assert!(
            out.contains("KiB of 1.0 MiB"),
            "progress names bytes: {out:?}"
        );
        assert!(out.contains("hangs"), "{out:?}");
        // Not on a terminal: no progress, only the error.
        let (rc, out, err) = sh_out(&format!("podscopectl pull {name} </dev/null"));
        assert_ne!(rc, 0);
        assert!(
            !out.contains("layers") && !err.contains("layers"),
            "{out}{err}"
        );
        proxy.mode("pass");
    })
    .await;
}

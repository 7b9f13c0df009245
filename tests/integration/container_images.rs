//! RemoveImage of an image containers use: its record goes at once, its
//! layers stay for the containers (one made before the removal still
//! starts from them) until the last of them is removed.

use crate::containers::*;
use podscope_api::container::ContainerOptions;
use podscope_api::domain::container::ContainerState;
use podscope_api::image::PullOptions;
use podscope_api::ErrorKind;
use podscope_test_support::harness::*;
use std::path::Path;
use std::time::Duration;

/// An image of one layer of its own (tests/images/build.sh): no other
/// image shares it, so its going can be seen.
const INUSE_IMAGE: &str = "127.0.0.1:5000/podscope-test/inuse:latest";

#[tokio::test(flavor = "multi_thread")]
async fn remove_image_keeps_the_layers_its_containers_use_until_they_are_removed() {
    let _cleanup = Cleanup::new();
    let (m, _c) = manager().await;
    let pulled = m
        .pull_image(INUSE_IMAGE, &PullOptions::default())
        .await
        .unwrap_or_else(|e| panic!("pull {INUSE_IMAGE}: {e}"));
    let (_, info) = m.image_status(INUSE_IMAGE).await.unwrap();
    assert!(!info.layer_dirs.is_empty());
    let layers_there = || info.layer_dirs.iter().all(|d| Path::new(d).exists());
    let layers_gone = || info.layer_dirs.iter().all(|d| !Path::new(d).exists());
    assert!(layers_there());

    let (pod, logs) = log_pod(&m, "ctr-rmi", "").await;
    let running = run_image(
        &m,
        &pod,
        "running",
        INUSE_IMAGE,
        sh_cmd("trap 'exit 0' TERM; while :; do sleep 0.1; done"),
    )
    .await;
    let (waiting, _) = m
        .create_container(
            &pod,
            "waiting",
            0,
            INUSE_IMAGE,
            &ContainerOptions {
                log_path: "waiting.log".into(),
                ..sh_cmd("cat /etc/podscope-test-image")
            },
        )
        .await
        .unwrap();

    m.remove_image(INUSE_IMAGE).await.unwrap();
    // The record is gone...
    assert!(
        !m.list_images(&Default::default())
            .await
            .unwrap()
            .iter()
            .any(|i| i.id == pulled.id),
        "the image is still listed"
    );
    assert_eq!(
        kind(m.image_status(INUSE_IMAGE).await.unwrap_err()),
        ErrorKind::NotFound
    );
    // ...its layers are not.
    assert!(layers_there(), "layers removed under running containers");
    let r = m
        .exec_sync(
            &running,
            &["cat".into(), "/etc/podscope-test-image".into()],
            10_000,
        )
        .await
        .unwrap();
    assert_eq!(
        (r.exit_code, String::from_utf8_lossy(&r.stdout).as_ref()),
        (0, "inuse\n")
    );
    // The container made before the removal starts from them.
    m.start_container(&waiting).await.unwrap();
    wait_container(
        &m,
        &waiting,
        ContainerState::Exited,
        Duration::from_secs(20),
    )
    .await;
    let s = m.container_status(&waiting).await.unwrap();
    assert_eq!(s.exit_code, 0, "{s:?}");
    assert_eq!(
        whole_lines(&strict_records(&format!("{logs}/waiting.log")), "stdout"),
        ["inuse"]
    );
    // No new container can be made from the image.
    assert_eq!(
        kind(
            m.create_container(&pod, "late", 0, INUSE_IMAGE, &sh_cmd("true"))
                .await
                .unwrap_err()
        ),
        ErrorKind::NotFound
    );

    m.remove_container(&running).await.unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        layers_there(),
        "layers removed while a container still holds them"
    );
    m.remove_container(&waiting).await.unwrap();
    let t0 = std::time::Instant::now();
    while !layers_gone() {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "the layers stay after their last container went: {:?}",
            info.layer_dirs
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    m.remove(&pod).await.unwrap();
}

/// The layers a removed image leaves to its containers are theirs across a
/// daemon restart too: a garbage collection after it (another image
/// removed) keeps them, and a container made before the removal starts.
#[tokio::test(flavor = "multi_thread")]
async fn layers_held_by_containers_survive_a_daemon_restart_and_a_collection() {
    let _cleanup = Cleanup::new();
    let _back = DaemonBack;
    let (m, _c) = manager().await;
    m.pull_image(INUSE_IMAGE, &PullOptions::default())
        .await
        .unwrap_or_else(|e| panic!("pull {INUSE_IMAGE}: {e}"));
    let (_, info) = m.image_status(INUSE_IMAGE).await.unwrap();
    let layers_there = || info.layer_dirs.iter().all(|d| Path::new(d).exists());
    let (pod, logs) = log_pod(&m, "ctr-rmi-restart", "").await;
    let (waiting, _) = m
        .create_container(
            &pod,
            "waiting",
            0,
            INUSE_IMAGE,
            &ContainerOptions {
                log_path: "waiting.log".into(),
                ..sh_cmd("cat /etc/podscope-test-image")
            },
        )
        .await
        .unwrap();
    m.remove_image(INUSE_IMAGE).await.unwrap();
    drop(m);
    daemon("restart");
    let (m, _c) = manager().await;
    // A collection: removing another image runs one.
    let other = "127.0.0.1:5000/podscope-test/zstd:latest";
    m.pull_image(other, &PullOptions::default()).await.unwrap();
    m.remove_image(other).await.unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        layers_there(),
        "a collection after the restart removed layers a container holds"
    );
    m.start_container(&waiting).await.unwrap();
    wait_container(
        &m,
        &waiting,
        ContainerState::Exited,
        Duration::from_secs(20),
    )
    .await;
    assert_eq!(
        whole_lines(&strict_records(&format!("{logs}/waiting.log")), "stdout"),
        ["inuse"]
    );
    m.remove(&pod).await.unwrap();
    let t0 = std::time::Instant::now();
    while info.layer_dirs.iter().any(|d| Path::new(d).exists()) {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "the layers stay after their last container went: {:?}",
            info.layer_dirs
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

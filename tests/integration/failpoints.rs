//! Kill at every step (issue 14): the daemon dies by SIGKILL at each
//! failpoint of Create, Start, Stop, Remove and the reconciliation, comes
//! back, and the node must hold nothing that no record accounts for; and
//! at each of a pull and an image's removal (issue 15), after which the
//! store holds the whole image or none of it. The
//! driver is shared with `make bench` (its failpoints row).

use podscope_test_support::failpoints as driver;
use podscope_test_support::harness::built;

use podscope_sys::failpoint;

#[tokio::test(flavor = "multi_thread")]
async fn a_kill_at_every_step_leaves_nothing_unaccounted_for() {
    let report = driver::run(&built("podscoped"), 1).await;
    let missed: Vec<&&str> = failpoint::ALL
        .iter()
        .filter(|f| !report.covered.contains(*f))
        .collect();
    assert!(missed.is_empty(), "failpoints never reached: {missed:?}");
    assert!(report.leaks.is_empty(), "leaks: {:#?}", report.leaks);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_kill_at_every_step_of_a_pull_leaves_the_whole_image_or_none() {
    let report = driver::run_images(
        &built("podscoped"),
        "127.0.0.1:5000/podscope-test/multilayer",
    )
    .await;
    let missed: Vec<&&str> = failpoint::IMAGES
        .iter()
        .filter(|f| !report.covered.contains(*f))
        .collect();
    assert!(missed.is_empty(), "failpoints never reached: {missed:?}");
    assert!(report.leaks.is_empty(), "leaks: {:#?}", report.leaks);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_kill_at_every_container_step_leaves_nothing_unaccounted_for() {
    let report =
        driver::run_containers(&built("podscoped"), "docker.io/library/busybox:latest").await;
    let missed: Vec<&&str> = failpoint::CONTAINERS
        .iter()
        .filter(|f| !report.covered.contains(*f))
        .collect();
    assert!(missed.is_empty(), "failpoints never reached: {missed:?}");
    assert!(report.leaks.is_empty(), "leaks: {:#?}", report.leaks);
}

/// The installed daemon (built as the packages build it) has no
/// failpoint in it, nor even reads the variable.
#[test]
fn the_installed_daemon_has_no_failpoints() {
    let path = driver::installed_podscoped();
    let bytes = std::fs::read(&path).unwrap();
    let needle = failpoint::ENV.as_bytes();
    assert!(
        !bytes.windows(needle.len()).any(|w| w == needle),
        "{path} mentions {}",
        failpoint::ENV
    );
}

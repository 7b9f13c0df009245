//! Container events: the bus signals of create, start, exit and remove in
//! their order; CRI's GetContainerEvents stream; who may do what.

use crate::containers::*;
use cri_api::v1 as cri;
use futures_util::StreamExt;
use podscope_api::container::ContainerFilter;
use podscope_api::domain::container::ContainerState;
use podscope_test_support::harness::*;
use std::time::Duration;

/// Every signal of the Manager, in the order it arrives (one stream: the
/// order between kinds of signals is kept).
async fn container_signals(conn: &zbus::Connection) -> zbus::MessageStream {
    let rule = zbus::MatchRule::builder()
        .msg_type(zbus::message::Type::Signal)
        .sender("org.podscope.Sandbox1")
        .unwrap()
        .interface("org.podscope.Sandbox1.Manager")
        .unwrap()
        .path("/org/podscope/Sandbox1")
        .unwrap()
        .build();
    zbus::MessageStream::for_match_rule(rule, conn, Some(64))
        .await
        .unwrap()
}

/// A container signal as (member, id, state; "" but for
/// ContainerStateChanged); None for other signals.
fn decode(msg: &zbus::Message) -> Option<(String, String, String)> {
    let h = msg.header();
    let member = h.member()?.to_string();
    let body = msg.body();
    match member.as_str() {
        "ContainerCreated" | "ContainerRemoved" => {
            let (id, _path): (String, zbus::zvariant::OwnedObjectPath) = body.deserialize().ok()?;
            Some((member, id, String::new()))
        }
        "ContainerStateChanged" => {
            let (id, _path, state): (String, zbus::zvariant::OwnedObjectPath, String) =
                body.deserialize().ok()?;
            Some((member, id, state))
        }
        _ => None,
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn signals_follow_create_start_exit_and_remove_in_order() {
    let _cleanup = Cleanup::new();
    let (m, conn) = manager().await;
    pull_busybox(&m).await;
    let (pod, _) = log_pod(&m, "ctr-sig", "").await;
    let mut signals = container_signals(&conn).await;
    let (id, _) = m
        .create_container(&pod, "sig", 0, BUSYBOX, &sh_cmd("sleep 2; exit 0"))
        .await
        .unwrap();
    m.start_container(&id).await.unwrap();
    wait_container(&m, &id, ContainerState::Exited, Duration::from_secs(20)).await;
    m.remove_container(&id).await.unwrap();
    let mut seen = Vec::new();
    let got = tokio::time::timeout(Duration::from_secs(10), async {
        while let Some(msg) = signals.next().await {
            let Some((member, sid, state)) = msg.ok().as_ref().and_then(decode) else {
                continue;
            };
            if sid != id {
                continue;
            }
            let removed = member == "ContainerRemoved";
            seen.push(if state.is_empty() {
                member
            } else {
                format!("{member}:{state}")
            });
            if removed {
                return;
            }
        }
    })
    .await;
    assert!(got.is_ok(), "no ContainerRemoved within 10 s: {seen:?}");
    assert_eq!(
        seen,
        [
            "ContainerCreated",
            "ContainerStateChanged:running",
            "ContainerStateChanged:exited",
            "ContainerRemoved"
        ]
    );
    m.remove(&pod).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn cri_get_container_events_streams_created_started_stopped_deleted() {
    let _cleanup = Cleanup::new();
    let (m, _c) = manager().await;
    pull_busybox(&m).await;
    let (pod, _) = log_pod(&m, "ctr-cri-ev", "").await;
    let ch = cri_api::channel(std::path::Path::new("/run/podscope/cri.sock"))
        .await
        .expect("connect to /run/podscope/cri.sock");
    let mut rt = cri::runtime_service_client::RuntimeServiceClient::new(ch);
    let mut events = rt
        .get_container_events(cri::GetEventsRequest {})
        .await
        .unwrap()
        .into_inner();
    // The frontend subscribes to the daemon's signals after it answered:
    // give it a moment, or the first events would have no subscriber yet.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let (id, _) = m
        .create_container(&pod, "ev", 0, BUSYBOX, &sh_cmd("sleep 2; exit 0"))
        .await
        .unwrap();
    m.start_container(&id).await.unwrap();
    wait_container(&m, &id, ContainerState::Exited, Duration::from_secs(20)).await;
    m.remove_container(&id).await.unwrap();
    let mut seen = Vec::new();
    let got = tokio::time::timeout(Duration::from_secs(10), async {
        while let Some(ev) = events.next().await {
            let ev = ev.expect("the event stream fails");
            if ev.container_id != id {
                continue;
            }
            let kind = cri::ContainerEventType::try_from(ev.container_event_type).unwrap();
            if kind != cri::ContainerEventType::ContainerDeletedEvent {
                let pod_status = ev.pod_sandbox_status.as_ref().expect("the pod's status");
                assert_eq!(pod_status.id, pod);
                assert!(
                    ev.containers_statuses.iter().any(|s| s.id == id),
                    "{kind:?} carries the container's status"
                );
            }
            seen.push(kind);
            if kind == cri::ContainerEventType::ContainerDeletedEvent {
                return;
            }
        }
    })
    .await;
    assert!(got.is_ok(), "no deleted event within 10 s: {seen:?}");
    assert_eq!(
        seen,
        [
            cri::ContainerEventType::ContainerCreatedEvent,
            cri::ContainerEventType::ContainerStartedEvent,
            cri::ContainerEventType::ContainerStoppedEvent,
            cri::ContainerEventType::ContainerDeletedEvent,
        ]
    );
    m.remove(&pod).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn nobody_may_list_containers_but_not_create_one() {
    let _cleanup = Cleanup::new();
    let (m, _c) = manager().await;
    pull_busybox(&m).await;
    let (pod, _) = log_pod(&m, "ctr-nobody", "").await;
    let mine = run(
        &m,
        &pod,
        "mine",
        sh_cmd("trap 'exit 0' TERM; while :; do sleep 0.1; done"),
    )
    .await;
    let before = all_container_traces();
    let (rc, out, err) = as_nobody(&format!(
        "podscopectl --no-ask-password container create {pod} intruder {BUSYBOX} -- true"
    ));
    assert_ne!(rc, 0, "nobody created a container: {out}");
    assert!(
        err.contains("not authorized") && err.contains("org.podscope.Sandbox1.manage"),
        "{err}"
    );
    let listed = m
        .list_containers(&ContainerFilter {
            pod_id: Some(pod.clone()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(
        listed.iter().map(|c| c.id.as_str()).collect::<Vec<_>>(),
        [mine.as_str()],
        "the denied call made nothing"
    );
    assert_eq!(all_container_traces(), before);

    let (rc, out, err) = as_nobody(&format!("podscopectl ps -a -q --pod {pod}"));
    assert_eq!(rc, 0, "nobody may list: {err}");
    assert_eq!(out.lines().collect::<Vec<_>>(), [mine.as_str()]);
    let (rc, out, err) = as_nobody(&format!("podscopectl inspect {mine}"));
    assert_eq!(rc, 0, "nobody may read a status: {err}");
    assert!(out.contains(&mine), "{out}");
    m.remove(&pod).await.unwrap();
}

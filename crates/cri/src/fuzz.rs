//! Property-based fuzzing of what a CRI client sends podscope-cri: CRI
//! requests through their conversion, HTTP/2 header blocks through the
//! authority rewrite, `grpc-timeout`, and the streaming server's HTTP
//! heads, SPDY frames and header blocks, WebSocket frames and
//! subprotocols. No input may panic.
//!
//! `cargo test --lib fuzz` runs each target FUZZ_CASES times (256 when
//! unset); `make check` runs a few minutes' worth, `make fuzz` longer.

use podscope_api::{to_dict, CreateOptions};
use podscope_test_support::fuzz::{config, text};
use proptest::prelude::*;

proptest! {
    #![proptest_config(config())]

    /// RunPodSandbox requests with any field values (protobuf strings may
    /// hold NUL, D-Bus strings may not): a validated config that can be
    /// sent to podscoped, or an InvalidArgument; never a panic.
    #[test]
    fn cri_request_conversion(req in cri_request()) {
        match crate::convert::sandbox::config_from_request(&req) {
            Ok(c) => {
                prop_assert!(c.validate().is_ok());
                let (_, o) = CreateOptions::from_config(&c);
                prop_assert!(to_dict(&o).is_ok(), "{:?}", to_dict(&o).err());
            }
            Err(s) => prop_assert_eq!(s.code(), tonic::Code::InvalidArgument),
        }
    }
}

fn cri_request() -> impl Strategy<Value = cri_api::v1::RunPodSandboxRequest> {
    use cri_api::v1 as cri;
    let strings = || prop::collection::hash_map(text(), text(), 0..4);
    let ns = || prop_oneof![0..4i32, any::<i32>()];
    let port = (any::<i32>(), any::<i32>(), any::<i32>(), text()).prop_map(|(p, c, h, ip)| {
        cri::PortMapping {
            protocol: p % 4,
            container_port: c,
            host_port: h,
            host_ip: ip,
        }
    });
    let resources = (any::<i64>(), any::<i64>(), any::<i64>(), any::<i64>()).prop_map(
        |(period, quota, shares, mem)| cri::LinuxContainerResources {
            cpu_period: period,
            cpu_quota: quota,
            cpu_shares: shares,
            memory_limit_in_bytes: mem,
            ..Default::default()
        },
    );
    let linux = (
        text(),
        strings(),
        proptest::option::of(resources.clone()),
        proptest::option::of(resources),
        (ns(), ns(), ns(), proptest::option::of(ns())),
    )
        .prop_map(
            |(cgroup_parent, sysctls, resources, overhead, (n, p, i, u))| {
                cri::LinuxPodSandboxConfig {
                    cgroup_parent,
                    sysctls,
                    resources,
                    overhead,
                    security_context: Some(cri::LinuxSandboxSecurityContext {
                        namespace_options: Some(cri::NamespaceOption {
                            network: n,
                            pid: p,
                            ipc: i,
                            userns_options: u.map(|mode| cri::UserNamespace {
                                mode,
                                ..Default::default()
                            }),
                            ..Default::default()
                        }),
                        ..Default::default()
                    }),
                }
            },
        );
    let meta =
        (text(), text(), text(), any::<u32>()).prop_map(|(name, namespace, uid, attempt)| {
            cri::PodSandboxMetadata {
                name,
                namespace,
                uid,
                attempt,
            }
        });
    let dns = (
        prop::collection::vec(text(), 0..4),
        prop::collection::vec(text(), 0..4),
        prop::collection::vec(text(), 0..4),
    )
        .prop_map(|(servers, searches, options)| cri::DnsConfig {
            servers,
            searches,
            options,
        });
    (
        proptest::option::of(meta),
        (text(), text()),
        (strings(), strings()),
        prop::collection::vec(port, 0..3),
        proptest::option::of(dns),
        proptest::option::of(linux),
        text(),
    )
        .prop_map(
            |(
                metadata,
                (hostname, log_directory),
                (labels, annotations),
                port_mappings,
                dns_config,
                linux,
                handler,
            )| {
                cri::RunPodSandboxRequest {
                    config: Some(cri::PodSandboxConfig {
                        metadata,
                        hostname,
                        log_directory,
                        labels,
                        annotations,
                        port_mappings,
                        dns_config,
                        linux,
                        ..Default::default()
                    }),
                    runtime_handler: handler,
                }
            },
        )
}

/// One runtime for the async parsers' cases (each a few reads of a slice).
fn block_on<F: std::future::Future>(f: F) -> F::Output {
    thread_local! {
        static RT: tokio::runtime::Runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a runtime");
    }
    RT.with(|rt| rt.block_on(f))
}

/// HTTP/2 frames as a client might send them: well-formed heads around
/// any payload, HEADERS and CONTINUATION most of all.
fn h2_frames() -> impl Strategy<Value = Vec<u8>> {
    let frame = (
        prop_oneof![Just(0x1u8), Just(0x9u8), 0u8..12],
        any::<u8>(),
        0u32..4,
        prop::collection::vec(any::<u8>(), 0..64),
    )
        .prop_map(|(kind, flags, stream, payload)| {
            let mut f = (payload.len() as u32).to_be_bytes()[1..].to_vec();
            f.extend([kind, flags]);
            f.extend(stream.to_be_bytes());
            f.extend(payload);
            f
        });
    prop::collection::vec(frame, 0..6).prop_map(|frames| {
        let mut b = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
        b.extend(frames.concat());
        b
    })
}

proptest! {
    #![proptest_config(config())]

    /// Whatever a client sends on the CRI socket, the header rewrite
    /// answers with bytes or an error, fed at once or a byte at a time.
    #[test]
    fn cri_header_rewrite(b in prop_oneof![h2_frames(), prop::collection::vec(any::<u8>(), 0..128)]) {
        let mut whole = crate::authority::Rewriter::default();
        let mut out = Vec::new();
        let at_once = whole.feed(&b, &mut out);
        let mut bytewise = crate::authority::Rewriter::default();
        let mut out2 = Vec::new();
        let mut pending: Vec<u8> = Vec::new();
        let mut failed = false;
        for byte in &b {
            pending.push(*byte);
            match bytewise.feed(&pending, &mut out2) {
                Ok(n) => { pending.drain(..n); }
                Err(_) => { failed = true; break; }
            }
        }
        // The same verdict, and the same bytes for hyper, however it came.
        prop_assert_eq!(at_once.is_err(), failed);
        if !failed {
            prop_assert_eq!(out, out2);
        }
    }

    /// A `grpc-timeout` is a duration or a named error.
    #[test]
    fn grpc_timeout(v in prop_oneof![
        "[0-9]{0,10}[HMSmunx]?",
        ".{0,12}",
    ]) {
        match crate::deadline::parse(v.as_bytes()) {
            Ok(_) => prop_assert!((2..=9).contains(&v.len())),
            Err(e) => prop_assert!(!e.0.is_empty()),
        }
    }

    /// The streaming server's request heads: parsed or refused.
    #[test]
    fn streaming_http_head(b in prop_oneof![
        "(GET|POST|PRI) /[a-z/]{0,20} HTTP/1\\.1\r\n([A-Za-z-]{1,12}: [ -~]{0,20}\r\n){0,4}(\r\n)?",
        prop::collection::vec(any::<u8>(), 0..256).prop_map(|v| String::from_utf8_lossy(&v).into_owned()),
    ]) {
        let _ = block_on(crate::stream::http::read_head(&mut b.as_bytes()));
    }

    /// SPDY frames off any bytes, every header block of any bytes, and a
    /// header block the encoder made read back as it was.
    #[test]
    fn spdy_frames_and_header_blocks(
        b in prop::collection::vec(any::<u8>(), 0..256),
        heads in prop::collection::vec((1u32..0x8000_0000, 0u16..12, any::<u8>(), prop::collection::vec(any::<u8>(), 0..48)), 0..4),
        pairs in prop::collection::vec(("[a-z0-9-]{1,12}", "[ -~]{0,24}"), 0..6),
    ) {
        use crate::stream::spdy::{FrameReader, HeaderDecoder, HeaderEncoder, Headers};
        // Control frames with plausible heads, then anything.
        let mut input = Vec::new();
        for (word, kind, flags, payload) in &heads {
            let control = kind % 2 == 0;
            let w = if control { 0x8003_0000 | u32::from(*kind) } else { *word };
            input.extend(w.to_be_bytes());
            input.push(*flags);
            input.extend(&(payload.len() as u32).to_be_bytes()[1..]);
            input.extend(payload);
        }
        input.extend(&b);
        block_on(async {
            let mut r = FrameReader::new(&input[..], &[]);
            for _ in 0..16 {
                match r.next().await {
                    Ok(Some(_)) => {}
                    _ => break,
                }
            }
        });
        let _ = HeaderDecoder::default().decode(&b);
        let h = Headers(pairs);
        let block = HeaderEncoder::default().encode(&h);
        let back = HeaderDecoder::default().decode(&block);
        prop_assert!(back.is_ok(), "{:?}", back);
        prop_assert_eq!(back.unwrap().0, h.0);
    }

    /// WebSocket: any frame carries a channel's data or nothing, and any
    /// subprotocol list negotiates to one of ours or none.
    #[test]
    fn websocket_frames_and_subprotocols(
        t in ".{0,16}",
        b in prop::collection::vec(any::<u8>(), 0..32),
        base64 in any::<bool>(),
        protocols in "[ -~]{0,64}",
    ) {
        use crate::stream::websocket::{channel_data, negotiate, version, REMOTECOMMAND, PORTFORWARD};
        use tokio_tungstenite::tungstenite::Message;
        let _ = channel_data(&Message::Text(t.clone().into()), base64);
        let _ = channel_data(&Message::Binary(b.into()), base64);
        let head = crate::stream::http::Head {
            method: "GET".into(),
            path: "/".into(),
            headers: vec![("Sec-WebSocket-Protocol".into(), protocols)],
        };
        for supported in [REMOTECOMMAND, PORTFORWARD] {
            if let Some(p) = negotiate(&head, supported) {
                // "": a client that offers none.
                prop_assert!(supported.contains(&p) || (p.is_empty() && head.list("sec-websocket-protocol").is_empty()));
                let _ = version(p);
            }
        }
    }
}
